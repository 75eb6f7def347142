"""devfix: codemods that fix PyTorch device-mismatch bugs.

The public API is small: :func:`fix_source` rewrites a string, :func:`fix_file` a file,
:func:`fix_paths` many files; :class:`Finding` and :class:`Applicability` describe what the
passes report.
"""

from devfix.engine import check_source, fix_file, fix_paths, fix_source
from devfix.types import Applicability, FileResult, FileStatus, Finding, Options
from devfix.version import __version__

__all__ = [
    "Applicability",
    "FileResult",
    "FileStatus",
    "Finding",
    "Options",
    "__version__",
    "check_source",
    "fix_file",
    "fix_paths",
    "fix_source",
]
