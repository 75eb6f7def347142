"""Factories with ``device='cuda…'`` and CPU→CUDA copies.

They reach the CUDA dispatch key with no VTensor argument, so a Python fallback on that key
runs them on the CPU and wraps the result. Composite factories that would call a resizing
``out=`` op on the empty wrapper (``arange``, ``eye``, …) get explicit CUDA kernels.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

_libs: list[Any] = []
_CPU = torch.device("cpu")


def run_on_cpu(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from devfix.vgpu._core import (
        VTensor,
        call_with_generator,
        generator_error,
        set_alloc_device,
        vdevice,
        wrap,
    )

    dev = kwargs.get("device")
    if dev is None:
        for a in args:
            if isinstance(a, torch.device):
                dev = a
        for a in args:
            if isinstance(a, torch.Tensor) and a.device.type == "cuda":
                dev = a.device
    generator = kwargs.get("generator")
    if (
        generator is not None
        and generator.device.type == "cuda"
        and (dev is None or torch.device(dev).type == "cpu")
    ):
        # only the generator's dispatch key brought a CPU op here: the CPU kernel's check
        raise generator_error("cpu", generator)
    d = torch.device(dev) if dev is not None else torch.device("cuda")
    target = vdevice(d.index)
    kw = dict(kwargs)
    if "device" in kw:
        kw["device"] = _CPU
    if kw.get("pin_memory"):
        kw["pin_memory"] = False
    cargs = tuple(a._elem if isinstance(a, VTensor) else a for a in args)
    if _draws_random(op):
        out = call_with_generator(op, cargs, kw, target)
    else:
        prev = set_alloc_device(target.index)
        try:
            out = op(*cargs, **kw)
        finally:
            set_alloc_device(prev)
    return wrap(out, target)


_RANDOM: dict[Any, bool] = {}


def _draws_random(op: Any) -> bool:
    found = _RANDOM.get(op)
    if found is None:
        tags = getattr(op, "tags", ())
        found = _RANDOM[op] = torch.Tag.nondeterministic_seeded in tags or any(
            a.name == "generator" for a in op._schema.arguments
        )
    return found


def _fallback(op: Any, *args: Any, **kwargs: Any) -> Any:
    return run_on_cpu(op, args, kwargs)


def install() -> None:
    lib = torch.library.Library("_", "IMPL")  # type: ignore[no-untyped-call]
    lib.fallback(_fallback, "CUDA")  # type: ignore[no-untyped-call]
    _libs.append(lib)
    alib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]
    names = [
        "arange",
        "eye",
        "linspace",
        "logspace",
        "randperm",
        "range",
        "tril_indices",
        "triu_indices",
        "bartlett_window",
        "blackman_window",
        "hamming_window",
        "hann_window",
        "kaiser_window",
        "scalar_tensor",
        "full",
        "zeros",
        "ones",
        "rand",
        "randn",
        "randint",
        "normal",
        "empty_permuted",
        "from_file",
    ]
    for name in names:
        pk = getattr(torch.ops.aten, name, None)
        if pk is None:
            continue
        for ov in pk.overloads():
            f = getattr(pk, ov)
            if any(a.is_out for a in f._schema.arguments):
                continue
            if not any(a.name == "device" for a in f._schema.arguments):
                continue

            def kernel(*args: Any, _f: Any = f, **kwargs: Any) -> Any:
                return run_on_cpu(_f, args, kwargs)

            ov_name = f._schema.name[6:]
            if f._schema.overload_name:
                ov_name += "." + f._schema.overload_name
            with contextlib.suppress(RuntimeError):
                alib.impl(ov_name, kernel, "CUDA")  # type: ignore[no-untyped-call]
    _libs.append(alib)
    torch._C._set_only_lift_cpu_tensors(True)
