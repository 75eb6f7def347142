"""The checks of the robustness sweep, shared by `tests/robustness` and `bench/sweep.py`.

One file is checked in process, through the engine API, the way `devfix check` and
`devfix apply --unsafe-fixes` would treat it:

* `check_source` and `fix_source` never raise anything but :class:`InputError` (a file devfix
  refuses, with a reason); an :class:`InternalError` or any other exception is a *crash*;
* a rewritten file parses with :mod:`ast` and compiles (when the original did);
* a second `fix_source` on the output changes nothing;
* a file left unchanged comes back byte-identical once re-encoded.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sysconfig
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from devfix import sources
from devfix.engine import check_source, fix_source
from devfix.errors import InputError
from devfix.types import Options

UNSAFE = Options(unsafe_fixes=True, jobs=1)

#: Failure kinds; `refused` (an InputError with a reason) is not a failure.
FAILURE_KINDS = (
    "crash-check",
    "crash-apply",
    "broken-output",
    "not-idempotent",
    "not-byte-identical",
)


@dataclass
class FileOutcome:
    path: str
    changed: bool = False
    refused: str | None = None
    failure: str | None = None
    detail: str = ""
    applied: tuple[str, ...] = ()
    output: bytes | None = None


def _compiles(text: str, path: str) -> str | None:
    """None if `text` parses and compiles, else the error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(ast.parse(text, path), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"{type(error).__name__}: {error}"
    return None


def check_file(path: str, data: bytes | None = None, *, run_check: bool = True) -> FileOutcome:
    """Run every sweep check on one file's bytes (read from `path` if not given).

    `run_check=False` skips the separate `check_source` call (the first round of `fix_source`
    runs the same passes on the same tree), for a sample whose `devfix check` runs as a CLI.
    """
    outcome = FileOutcome(path)
    if data is None:
        with open(path, "rb") as handle:
            data = handle.read()
    try:
        document = sources.decode(data, path)
    except InputError as error:
        outcome.refused = str(error)
        return outcome
    text = document.text
    try:
        if run_check:
            check_source(text, path, UNSAFE)
    except InputError as error:
        outcome.refused = str(error)
    except Exception as error:
        outcome.failure, outcome.detail = "crash-check", f"{type(error).__name__}: {error}"
        return outcome
    try:
        result = fix_source(text, UNSAFE, path=path)
    except InputError as error:
        outcome.refused = str(error)
        return outcome
    except Exception as error:
        outcome.failure, outcome.detail = "crash-apply", f"{type(error).__name__}: {error}"
        return outcome
    outcome.applied = tuple(f.code for f in result.applied)
    if not result.changed:
        if document.with_text(result.output).encode() != data:
            outcome.failure, outcome.detail = (
                "not-byte-identical",
                "unchanged text re-encodes differently",
            )
        return outcome
    outcome.changed = True
    try:
        outcome.output = document.with_text(result.output).encode()
    except UnicodeEncodeError as error:
        outcome.failure, outcome.detail = "broken-output", f"cannot be encoded: {error}"
        return outcome
    if _compiles(text, path) is None:
        problem = _compiles(result.output, path)
        if problem is not None:
            outcome.failure, outcome.detail = "broken-output", problem
            return outcome
    try:
        again = fix_source(result.output, UNSAFE, path=path)
    except Exception as error:
        outcome.failure, outcome.detail = (
            "not-idempotent",
            f"second run: {type(error).__name__}: {error}",
        )
        return outcome
    if again.changed:
        outcome.failure = "not-idempotent"
        outcome.detail = "second run applied " + ", ".join(f.code for f in again.applied)
    return outcome


def stdlib_root() -> str:
    return sysconfig.get_paths()["stdlib"]


def torch_root() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise RuntimeError("torch is not installed")
    return os.path.dirname(spec.origin)


_SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def python_files(root: str) -> list[str]:
    """Every `*.py` under `root` (not following links, not into site-packages), sorted."""
    found: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
        found.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    found.sort()
    return found


def sample(files: Iterable[str], size: int, root: str, salt: str = "devfix") -> list[str]:
    """A fixed sample: the `size` files whose salted path hash is smallest (stable across runs)."""

    def key(path: str) -> str:
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        return hashlib.sha256(f"{salt}:{relative}".encode()).hexdigest()

    return sorted(sorted(files, key=key)[:size])


@dataclass
class Tally:
    tree: str
    files: int = 0
    changed: int = 0
    refused: int = 0
    seconds: float = 0.0
    fixes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    changed_files: list[str] = field(default_factory=list)

    def add(self, outcome: FileOutcome, root: str) -> None:
        relative = os.path.relpath(outcome.path, root)
        self.files += 1
        self.fixes.update(outcome.applied)
        if outcome.refused is not None and outcome.failure is None:
            self.refused += 1
            self.examples.setdefault("refused", []).append(f"{relative}: {outcome.refused}")
        if outcome.changed:
            self.changed += 1
            self.changed_files.append(relative)
        if outcome.failure is not None:
            self.failures[outcome.failure] += 1
            self.examples.setdefault(outcome.failure, []).append(f"{relative}: {outcome.detail}")
