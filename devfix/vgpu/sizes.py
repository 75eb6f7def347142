"""The memory each virtual GPU reports (`devfix verify --gpu-memory`), read without torch."""

from __future__ import annotations

#: the memory each virtual GPU reports, e.g. ``512KiB`` or ``2GiB`` (default 80 GiB)
MEMORY_ENV = "DEVFIX_VGPU_MEMORY"
_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KIB": 1024}
_UNITS.update({"MIB": 1024**2, "GIB": 1024**3, "K": 1024, "M": 1024**2, "G": 1024**3})


def parse_memory(text: str) -> int:
    """``"512KiB"`` -> 524288; ValueError for what is not a positive size."""
    number = text.strip().rstrip("BbIiKkMmGg ")
    unit = text.strip()[len(number) :].strip().upper()
    if unit not in _UNITS or not number.replace(".", "", 1).isdigit() or float(number) <= 0:
        raise ValueError(f"not a memory size: {text!r} (e.g. 512KiB, 64MiB, 80GiB)")
    return int(float(number) * _UNITS[unit])
