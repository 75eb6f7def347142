"""Install the virtual GPUs into this interpreter (must run before ``import torch``)."""

from __future__ import annotations

import os
from typing import Any, Callable

from devfix.vgpu import _shim

_installed = 0


def install(gpus: int = 2) -> None:
    """Make ``cuda:0 … cuda:{gpus-1}`` exist in this process, backed by CPU memory."""
    global _installed
    if _installed:
        if _installed != gpus:
            raise RuntimeError(f"devfix.vgpu is already installed with {_installed} GPUs")
        return
    if gpus < 1:
        raise ValueError("--gpus must be at least 1")
    os.environ["DEVFIX_VGPU_COUNT"] = str(gpus)
    _shim.load_shim()
    import torch

    from devfix.vgpu import _core, _cuda_api, _factories, _patches, _serial, provenance

    _core.DEVICES[:] = [torch.device("cuda", i) for i in range(gpus)]
    _cuda_api.install(gpus)
    _factories.install()
    _serial.install()
    _patches.install()
    _backward_on_the_calling_thread()
    _skip_dispatch_rule_lookup()
    _prime_dtensor_check()
    lib = _shim.load_shim()
    lib.devfix_vgpu_reset_peak(0)  # the priming op's block is no allocation of the script's
    lib.devfix_vgpu_reset_counts(0)
    provenance.install()  # after the priming op: the script's tensors are the first observed
    if os.environ.get("DEVFIX_VGPU_FAST", "1") != "0":
        _fast_path()
    _installed = gpus


def _fast_path() -> None:
    """Run the common op on virtual tensors in C++, without ``__torch_dispatch__``.

    Most ops of a training step have all their tensors on one virtual GPU and no rule of
    their own: the Python path only unwraps, computes and wraps again, and entering it costs
    more than the op on small tensors (bench/README.md, "Virtual GPU overhead"). Each such op
    gets the shim's kernel at the Python dispatch key the first time the runtime sees it; the
    kernel hands anything else (a CPU operand, two devices, another subclass, a dispatch mode)
    back to ``__torch_dispatch__``. ``DEVFIX_VGPU_FAST=0`` keeps every op on the Python path.
    """
    import torch

    from devfix.vgpu import _core

    fast = _shim.fast_path_functions()
    if fast["fast_layout"]() != torch._C.TensorBase.__basicsize__:
        return  # a torch whose tensor object the shim does not know: stay on the Python path
    fast["fast_install"](_core.VTensor, _core._mk, _core.DEVICES)
    _core.fast_add = fast["fast_add"]
    for func, info in list(_core._INFO.items()):  # ops the runtime ran before: the priming op
        _core.offer_to_fast_path(func, info)


def _backward_on_the_calling_thread() -> None:
    """Run backward passes on the thread that calls them, as for CPU tensors.

    For CUDA tensors autograd hands a backward to a thread of its own per device. On virtual
    GPUs that thread only passes work back and forth, and the backward's kernels then run on
    another core than the forward's, with cold caches: about a quarter of a tiny Transformer
    step's CPU time (bench/README.md, "Virtual GPU overhead"). Hooks still see the
    device of their graph as the current one (the engine sets it per node); only the thread
    differs. The switch is the engine's own and per thread: this one, which runs the script.
    """
    import torch

    torch.autograd.set_multithreading_enabled(False)


def _skip_dispatch_rule_lookup() -> None:
    """Answer torch's per-op "is a torch_dispatch rule registered for this class?" for VTensor
    without the lookup (a qualified-name string and two dict lookups on every op).

    torch's C++ asks ``torch._library.simple_registry.find_torch_dispatch_rule`` on every op
    that reaches a ``__torch_dispatch__``, and keeps the function it found at the first such op:
    this runs before any. No rule is ever registered for the runtime's own class.
    """
    import torch._library.simple_registry as registry

    from devfix.vgpu._core import VTensor

    find = registry.find_torch_dispatch_rule

    def find_torch_dispatch_rule(op: Any, torch_dispatch_class: type) -> Callable[..., Any] | None:
        if torch_dispatch_class is VTensor:
            return None
        return find(op, torch_dispatch_class)

    registry.find_torch_dispatch_rule = find_torch_dispatch_rule


def _prime_dtensor_check() -> None:
    """Answer torch's one-time "is this a DTensor?" lookup without importing DTensor.

    The first op on any tensor subclass makes torch's C++ import ``torch.distributed.tensor``
    (and with it sympy, about a second) just to learn the DTensor class, which it caches.
    A stand-in module is offered for that one lookup and removed at once, so a script that
    imports DTensor itself still gets the real one (its ops then take torch's generic
    ``__torch_dispatch__`` path, which DTensor implements).
    """
    import sys
    import types

    import torch

    from devfix.vgpu._core import DEVICES, VTensor

    name = "torch.distributed.tensor"
    if name in sys.modules:
        return
    stand_in = types.ModuleType(name)

    class DTensor:  # never instantiated: nothing is an instance of it
        pass

    stand_in.DTensor = DTensor  # type: ignore[attr-defined]
    sys.modules[name] = stand_in
    try:
        torch.add(VTensor(torch.zeros(1), DEVICES[0]), 1)
    finally:
        del sys.modules[name]
