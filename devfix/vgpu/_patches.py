"""Monkeypatches of torch's Python layer that the virtual GPUs need."""

from __future__ import annotations

import threading
import types
import weakref
from typing import Any, Sequence

import torch
import torch.nn.modules.module as module_mod
import torch.nn.parallel.comm as comm
import torch.optim.optimizer as opt
import torch.utils

from devfix.vgpu._core import VTensor, vdevice
from devfix.vgpu.errors import VGPUUnsupported

_tls = threading.local()


def _is_v(t: Any) -> bool:
    return isinstance(t, VTensor)


# --- Tensor.data = x across plain/virtual ----------------------------------------------------

_data_descr = torch._C.TensorBase.data


def _get_data(self: Any) -> Any:
    return _data_descr.__get__(self)  # type: ignore[attr-defined]


def _set_data(self: Any, new: Any) -> None:
    if not _is_v(self) and not _is_v(new):
        _data_descr.__set__(self, new)  # type: ignore[attr-defined]
        return
    _swap_impl(self, new.detach())


def _swap_impl(self: Any, new: Any) -> None:
    """Give ``self`` the data of ``new`` (another kind of tensor), keeping its identity."""
    was_param = isinstance(self, torch.nn.Parameter)
    req = self.requires_grad
    grad = self.grad
    extra = {k: v for k, v in self.__dict__.items() if k not in ("_elem", "_dev", "_is_param")}
    if grad is not None:
        self.grad = None
    torch._C._swap_tensor_impl(self, new)
    if _is_v(new):
        self.__class__ = VTensor
        self.__dict__.clear()
        self._elem = new._elem
        self._dev = new._dev
        if was_param:
            self._is_param = True
    else:
        self.__dict__.clear()
        self.__class__ = torch.nn.Parameter if was_param else torch.Tensor
    self.__dict__.update(extra)
    if req:
        self.requires_grad_(True)
    if grad is not None:
        # real `.data =` leaves .grad alone; it must follow the device here to stay valid
        with torch.no_grad():
            moved = grad.to(self.device)
            if moved is not grad:
                _swap_impl(grad, moved.detach())
        self.grad = grad


_orig_compat = torch._has_compatible_shallow_copy_type


def _has_compatible_shallow_copy_type(input: torch.Tensor, from_: torch.Tensor) -> bool:
    # same parameter names as torch's: dynamo compares signatures with its polyfill
    if _is_v(input) != _is_v(from_):
        return True
    return bool(_orig_compat(input, from_))


# --- swap_tensors: allow weakrefs (nn.LSTM keeps them) when a VTensor is involved ------------


class _WeakrefShim(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        return getattr(weakref, name)

    @staticmethod
    def getweakrefs(obj: Any) -> list[Any]:
        if getattr(_tls, "allow_weakrefs", False):
            return []
        return weakref.getweakrefs(obj)


_orig_swap = torch.utils.swap_tensors


def swap_tensors(t1: Any, t2: Any) -> None:
    if not (_is_v(t1) or _is_v(t2)):
        _orig_swap(t1, t2)  # type: ignore[no-untyped-call]
        return
    _tls.allow_weakrefs = True
    try:
        _orig_swap(t1, t2)  # type: ignore[no-untyped-call]
    finally:
        _tls.allow_weakrefs = False


# --- torch.nn.parallel.comm ---------------------------------------------------------------


def _dev_index(d: Any) -> torch.device:
    if isinstance(d, torch.device):
        return vdevice(d.index) if d.type == "cuda" else d
    if isinstance(d, str):
        return _dev_index(torch.device(d))
    return vdevice(int(d))


def _to(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    return t if t.device == dev else t.to(dev)


def broadcast(
    tensor: torch.Tensor,
    devices: Sequence[Any] | None = None,
    *,
    out: Sequence[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, ...]:
    if out is not None:
        for o in out:
            o.copy_(tensor)
        return tuple(out)
    assert devices is not None
    return tuple(_to(tensor, _dev_index(d)) for d in devices)


def broadcast_coalesced(
    tensors: Sequence[torch.Tensor], devices: Sequence[Any], buffer_size: int = 10485760
) -> list[list[torch.Tensor]]:
    devs = [_dev_index(d) for d in devices]
    return [[_to(t, d) for t in tensors] for d in devs]


def reduce_add(inputs: Sequence[torch.Tensor], destination: Any = None) -> torch.Tensor:
    dest = vdevice(None) if destination is None else _dev_index(destination)
    root = next((i for i, t in enumerate(inputs) if t.device == dest), 0)
    result = _to(inputs[root], dest).clone()
    for i, t in enumerate(inputs):
        if i != root:
            result.add_(_to(t, dest))
    return result


def reduce_add_coalesced(
    inputs: Sequence[Sequence[torch.Tensor]], destination: Any = None, buffer_size: int = 10485760
) -> list[torch.Tensor]:
    return [reduce_add([inp[i] for inp in inputs], destination) for i in range(len(inputs[0]))]


def scatter(
    tensor: torch.Tensor,
    devices: Sequence[Any] | None = None,
    chunk_sizes: Sequence[int] | None = None,
    dim: int = 0,
    streams: Any = None,
    *,
    out: Sequence[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, ...]:
    if out is not None:
        chunks = tensor.split([o.size(dim) for o in out], dim)  # type: ignore[no-untyped-call]
        for o, c in zip(out, chunks):
            o.copy_(c)
        return tuple(out)
    assert devices is not None
    devs = [_dev_index(d) for d in devices]
    if chunk_sizes is not None:
        chunks = tensor.split(list(chunk_sizes), dim)  # type: ignore[no-untyped-call]
    else:
        chunks = tensor.chunk(len(devs), dim)
    return tuple(_to(c.contiguous(), d) for c, d in zip(chunks, devs))


def gather(
    tensors: Sequence[torch.Tensor],
    dim: int = 0,
    destination: Any = None,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    if out is not None:
        torch.cat([_to(t, out.device) for t in tensors], dim, out=out)
        return out
    if destination == -1 or destination == "cpu":
        dest = torch.device("cpu")
    else:
        dest = vdevice(None) if destination is None else _dev_index(destination)
    return torch.cat([_to(t, dest) for t in tensors], dim)


# --- unsupported corners ---------------------------------------------------------------------


def _raise(what: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise VGPUUnsupported(what)

    return f


def _install_unsupported() -> None:
    torch.compile = _raise("torch.compile (inductor for cuda)")
    import multiprocessing.spawn as mp_spawn

    orig_prep = mp_spawn.get_preparation_data

    def get_preparation_data(name: str) -> Any:
        raise VGPUUnsupported(
            "spawn-started worker processes (they do not inherit the virtual GPUs; "
            "use the default fork start method)"
        )

    get_preparation_data.__wrapped__ = orig_prep  # type: ignore[attr-defined]
    mp_spawn.get_preparation_data = get_preparation_data
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return
    if dist.is_available():
        from devfix.vgpu import _dist

        _dist.install()  # nccl: one rank of a launch, where the environment names a rank


# --- scaled_dot_product_attention: pick the backend the CPU build picks -------------------------
#
# On a CUDA tensor the composite SDPA would take the math path (the CPU build has no CUDA
# choice stub), while a CPU run takes the CPU flash kernel: results would differ in the last
# bits. Choosing as the CPU does keeps values bitwise identical to a CPU run (and is faster).

_orig_sdpa = torch.nn.functional.scaled_dot_product_attention
_FLASH = 1


def _autocast_cast(t: Any, dtype: torch.dtype) -> Any:
    if (
        isinstance(t, torch.Tensor)
        and t.is_cuda
        and t.is_floating_point()
        and t.dtype not in (torch.float64, dtype)
    ):
        return t.to(dtype)
    return t


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    if torch.is_autocast_enabled("cuda"):
        # autocast's lower-precision policy for this op (casts every floating CUDA argument),
        # then the op itself runs with autocast off, as behind autocast's CUDA kernel
        dtype = torch.get_autocast_dtype("cuda")
        query, key, value, attn_mask = (
            _autocast_cast(t, dtype) for t in (query, key, value, attn_mask)
        )
        with torch.autocast("cuda", enabled=False):
            return scaled_dot_product_attention(
                query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
            )
    if (
        type(query) is not VTensor
        or type(key) is not VTensor
        or type(value) is not VTensor
        or key._dev is not query._dev
        or value._dev is not query._dev
        or (
            attn_mask is not None
            and (type(attn_mask) is not VTensor or attn_mask._dev is not query._dev)
        )
    ):
        return _orig_sdpa(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    choice = torch.ops.aten._fused_sdp_choice(
        query._elem,
        key._elem,
        value._elem,
        None if attn_mask is None else attn_mask._elem,
        dropout_p,
        is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )
    mask: Any = attn_mask
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=query.dtype, device=mask.device).masked_fill_(
            mask.logical_not(), float("-inf")
        )
    if choice == _FLASH:
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale
        )[0]
    return torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
    )[0]


def _cudnn_is_acceptable(tensor: torch.Tensor) -> bool:
    # no cuDNN behind the virtual GPUs; say so quietly (the stock check warns on every call)
    return False


def install() -> None:
    import torch.backends.cudnn as cudnn

    cudnn.is_acceptable = _cudnn_is_acceptable
    torch.nn.functional.scaled_dot_product_attention = scaled_dot_product_attention
    torch.Tensor.data = property(_get_data, _set_data)  # type: ignore[assignment]
    torch._has_compatible_shallow_copy_type = _has_compatible_shallow_copy_type
    torch.utils.weakref = _WeakrefShim("weakref")  # type: ignore[attr-defined]
    torch.utils.swap_tensors = swap_tensors
    if hasattr(module_mod, "swap_tensors"):
        module_mod.swap_tensors = swap_tensors  # pragma: no cover
    comm.broadcast = broadcast
    comm.broadcast_coalesced = broadcast_coalesced
    comm.reduce_add = reduce_add
    comm.reduce_add_coalesced = reduce_add_coalesced
    comm.scatter = scatter
    comm.gather = gather
    opt._foreach_supported_types.append(VTensor)
    _install_unsupported()
