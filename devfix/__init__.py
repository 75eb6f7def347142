"""devfix: codemods that fix PyTorch device-mismatch bugs.

The public API is small: :func:`fix_source` rewrites a string, :func:`fix_file` a file,
:func:`fix_paths` many files; :class:`Finding` and :class:`Applicability` describe what the
passes report. The engine (and libcst) is imported on first use, so `devfix.vgpu` starts fast.
"""

from __future__ import annotations

from typing import Any

from devfix.version import __version__

_ENGINE = ("check_source", "fix_file", "fix_paths", "fix_source")
_TYPES = ("Applicability", "FileResult", "FileStatus", "Finding", "Options")

__all__ = [*_TYPES, *_ENGINE, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _ENGINE:
        from devfix import engine

        return getattr(engine, name)
    if name in _TYPES:
        from devfix import types

        return getattr(types, name)
    raise AttributeError(f"module 'devfix' has no attribute {name!r}")
