"""Value types shared by the engine, the passes and the command line."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Union

import libcst as cst

from devfix.limits import DEFAULT_MAX_MEMORY_MIB, DEFAULT_TIMEOUT_SECONDS

Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNode]]


class Applicability(str, enum.Enum):
    """How confident a pass is that its fix keeps the program's meaning (ruff's three levels)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


class Fixability(str, enum.Enum):
    """What a run can do about a finding: fix it, fix it with `--unsafe-fixes`, or nothing."""

    FIXABLE = "fixable"
    NEEDS_UNSAFE = "needs-unsafe-fixes"
    NO_FIX = "no-fix"


@dataclass(frozen=True)
class Edit:
    """Replace one node of the parsed module (by identity) with a new node, or remove it."""

    target: cst.CSTNode
    replacement: Replacement


@dataclass(frozen=True)
class TextEdit:
    """Replace the source between two 1-based (line, column) positions with `text`."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class ImportSpec:
    """An import a fix needs: `import module [as alias]` or `from module import name [as alias]`."""

    module: str
    name: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class Finding:
    """One problem a pass found, with the group of edits that fixes it (possibly none).

    Lines are 1-based, columns 1-based, as editors show them.
    """

    code: str
    name: str
    message: str
    line: int
    col: int
    end_line: int
    end_col: int
    fix_title: str
    applicability: Applicability
    edits: tuple[Edit, ...] = field(default=(), compare=False, repr=False)
    imports: tuple[ImportSpec, ...] = field(default=(), compare=False, repr=False)
    #: In a notebook: the code cell (1-based, code cells only); `line` is then the cell's line.
    cell: int | None = None
    #: The fix as text replacements of the file, filled in only where a fix must be described
    #: without the syntax tree (SARIF, computed by the engine on request). In a notebook they
    #: replace parts of the notebook's JSON text.
    text_edits: tuple[TextEdit, ...] = field(default=(), compare=False, repr=False)
    #: In a notebook: (line, col, end_line, end_col) of the finding in the notebook's JSON text.
    file_span: tuple[int, int, int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def has_fix(self) -> bool:
        # A finding without edits is display-only from the moment it is reported (Rule.report),
        # so the level alone says it, also once the edits are dropped between processes.
        return self.applicability is not Applicability.DISPLAY_ONLY

    def without_nodes(self) -> Finding:
        """A copy that no longer holds syntax-tree nodes: cheap to send between processes."""
        return replace(self, edits=(), imports=())

    def to_json(self, path: str) -> dict[str, object]:
        """The documented JSON contract of `devfix check --format json`."""
        return {
            "path": path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "fix_title": self.fix_title,
            "applicability": self.applicability.value,
        } | ({"cell": self.cell} if self.cell is not None else {})


@dataclass(frozen=True)
class RunOptions:
    """How a run goes over the files: which files, how many processes, each file's limits, the
    cache. The user asks for them in `Options`; the run's `Settings` keep them as asked."""

    #: Worker processes (0: one per core).
    jobs: int = 0
    #: Gitignore-style patterns that replace the default excludes (None: keep the defaults).
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    #: Folder that `exclude` patterns are relative to (the configuration's folder).
    root: str = "."
    #: Where devfix keeps its state (result cache, run record, review answers); None: no cache.
    cache_dir: str | None = None
    #: CPU seconds one file may take (0: no limit), and its memory budget in MiB (0: none).
    timeout_per_file: float = DEFAULT_TIMEOUT_SECONDS
    max_memory_mib: int = DEFAULT_MAX_MEMORY_MIB


@dataclass(frozen=True)
class Options(RunOptions):
    """What the user asked for; built once by the command line and passed down unchanged."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    #: Pass code -> keyword options for that pass's constructor (from `[tool.devfix.<pass>]`).
    pass_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The torch release the project declares (the lowest it allows); None: the installed one.
    torch_version: str | None = None


class FileStatus(str, enum.Enum):
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class SourceResult:
    """What :func:`devfix.fix_loop.fix_source` made of one text.

    `findings` are the findings on `source` (what `check` reports). `applied` and `remaining`
    split every finding of the run into fixed and left; both are located in `source`.
    """

    source: str
    output: str
    findings: tuple[Finding, ...]
    applied: tuple[Finding, ...]
    #: How many `remaining` findings have a fix that needs `--unsafe-fixes`.
    hidden_unsafe: int
    #: Findings still present in `output` (display-only ones, unsafe ones not enabled, ...).
    remaining: tuple[Finding, ...] = ()

    @property
    def changed(self) -> bool:
        return self.output != self.source


@dataclass(frozen=True)
class FileResult:
    """The outcome for one file: never an exception, always one of four statuses.

    Every finding of the run is in `findings`, located in the file as it was before the run
    (a notebook's findings carry their cell): the fixed ones are also in `applied`, the others
    in `remaining`. For `check`, nothing is applied and `findings` equals `remaining`.
    """

    path: str
    status: FileStatus
    findings: tuple[Finding, ...] = ()
    applied: tuple[Finding, ...] = ()
    remaining: tuple[Finding, ...] = ()
    reason: str = ""
    diff: str = ""
    internal_error: bool = False
    #: Hash of the bytes this result was computed from (the cache's key); "" if none.
    fingerprint: str = ""

    def outcomes(self) -> list[tuple[Finding, bool]]:
        """Every finding, in file order, with whether it was fixed."""
        fixed = [(finding, True) for finding in self.applied]
        left = [(finding, False) for finding in self.remaining]
        return sorted(fixed + left, key=lambda item: file_order(item[0]))

    def without_nodes(self) -> FileResult:
        """Drop syntax-tree nodes from the findings: results cross process boundaries."""
        return replace(
            self,
            findings=tuple(f.without_nodes() for f in self.findings),
            applied=tuple(f.without_nodes() for f in self.applied),
            remaining=tuple(f.without_nodes() for f in self.remaining),
        )


def file_order(finding: Finding) -> tuple[int, int, int, str]:
    return (finding.cell or 0, finding.line, finding.col, finding.code)
