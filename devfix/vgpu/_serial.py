"""torch.save / torch.load of tensors on virtual GPUs.

Saved storages carry the real ``cuda:k`` location tag, so checkpoints are genuine CUDA
checkpoints (stock CPU torch reads them with ``map_location='cpu'``). Loading restores a
``cuda:k`` storage as a CPU storage marked with its virtual device; the tensor rebuilt on it
becomes a VTensor.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import torch
import torch._utils
import torch.serialization

from devfix.vgpu import provenance

_load_marks: dict[int, int] = {}
_lock = threading.Lock()


def reduce_vtensor(t: Any) -> Any:
    if getattr(t, "_is_param", False):
        return (torch._utils._rebuild_parameter, (t.detach(), t.requires_grad, OrderedDict()))
    elem = t._elem
    st = elem.untyped_storage()
    st._devfix_vgpu = int(t._dev.index)  # read back by _tagger when torch.save meets it
    ts = torch.storage.TypedStorage(  # type: ignore[no-untyped-call]
        wrap_storage=st, dtype=t.dtype, _internal=True
    )
    return (
        torch._utils._rebuild_tensor_v2,
        (ts, elem.storage_offset(), tuple(t.size()), t.stride(), t.requires_grad, OrderedDict()),
    )


def _tagger(storage: Any) -> Any:
    st = getattr(storage, "_untyped_storage", storage)
    idx = getattr(st, "_devfix_vgpu", None)
    if idx is not None and st.device.type == "cpu":
        return f"cuda:{idx}"
    return None


def _deserializer(storage: Any, location: str) -> Any:
    if not location.startswith("cuda"):
        return None
    from devfix.vgpu._core import set_alloc_device

    # torch's own check and texts for a device this run does not have (torch/serialization.py)
    idx = int(torch.serialization.validate_cuda_device(location))  # type: ignore[no-untyped-call]
    st = getattr(storage, "_untyped_storage", storage)
    prev = set_alloc_device(idx)
    try:
        # the copy to the GPU, counted in the device's memory statistics (a storage's own
        # clone() bypasses the allocator the runtime counts with; a tensor's does not)
        st = torch.empty(0, dtype=torch.uint8).set_(st).clone().untyped_storage()
    finally:
        set_alloc_device(prev)
    with _lock:
        _load_marks[st._cdata] = idx
    return st


_orig_rebuild = torch._utils._rebuild_tensor


def _rebuild_tensor(storage: Any, storage_offset: Any, size: Any, stride: Any) -> Any:
    t = _orig_rebuild(storage, storage_offset, size, stride)  # type: ignore[no-untyped-call]
    idx = _load_marks.get(storage._untyped_storage._cdata)
    if idx is not None:
        from devfix.vgpu._core import DEVICES, VTensor

        t = VTensor(t, DEVICES[idx])
    if provenance.loading():  # not a tensor a DataLoader worker sent through shared memory
        provenance.mark(t, provenance.LOADED, "torch.load")
    return t


def install() -> None:
    torch.serialization.register_package(0, _tagger, _deserializer)
    torch._utils._rebuild_tensor = _rebuild_tensor
    orig_load = torch.load

    def load(*args: Any, **kwargs: Any) -> Any:
        try:
            with provenance.LoadScope():
                return orig_load(*args, **kwargs)
        finally:
            with _lock:
                _load_marks.clear()

    load.__doc__ = orig_load.__doc__
    torch.load = load
