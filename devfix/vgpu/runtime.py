"""Install the virtual GPUs into this interpreter (must run before ``import torch``)."""

from __future__ import annotations

import os

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

    from devfix.vgpu import _core, _cuda_api, _factories, _patches, _serial

    _core.DEVICES[:] = [torch.device("cuda", i) for i in range(gpus)]
    _cuda_api.install(gpus)
    _factories.install()
    _serial.install()
    _patches.install()
    _prime_dtensor_check()
    lib = _shim.load_shim()
    lib.devfix_vgpu_reset_peak(0)  # the priming op's block is no allocation of the script's
    lib.devfix_vgpu_reset_counts(0)
    _installed = gpus


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
