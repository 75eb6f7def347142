"""Errors raised by the virtual-GPU runtime itself."""

from __future__ import annotations

UNSUPPORTED_PREFIX = "devfix verify: not supported under virtual GPUs: "


class VGPUUnsupported(RuntimeError):
    """A feature the virtual GPUs cannot emulate faithfully; never a silent wrong answer."""

    def __init__(self, what: str) -> None:
        super().__init__(UNSUPPORTED_PREFIX + what)
