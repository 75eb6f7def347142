"""devfix: codemods that fix PyTorch device-mismatch bugs.

The public API is small: :func:`fix_source` rewrites a string, :func:`fix_file` a file,
:func:`fix_paths` many files; :class:`Finding` and :class:`Applicability` describe what the
passes report. The engine (and libcst) is imported on first use, so `devfix.vgpu` starts fast.
"""

from __future__ import annotations

import os
from typing import Any

from devfix.version import __version__

# Installed, `devfix.codemods` and `devfix.cli` are the top-level folders `codemods/` and `cli/`
# of the source tree (pyproject.toml maps them). Imported straight from a source checkout
# (`python -m devfix` or pytest run there while the package is installed elsewhere), this
# package's folder has neither, so its parent, which holds them, is searched too.
_SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.path.isdir(os.path.join(os.path.dirname(__file__), "codemods")) and all(
    os.path.isfile(os.path.join(_SOURCE_TREE, *parts))
    for parts in (("codemods", "__init__.py"), ("cli", "__init__.py"), ("pyproject.toml",))
):
    __path__.append(_SOURCE_TREE)

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
