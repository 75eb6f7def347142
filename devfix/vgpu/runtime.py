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
    _installed = gpus
