"""Turns results into the lines users read and the exit code; returns strings, prints nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from devfix.names import headline, one_line, shown
from devfix.settings import Settings
from devfix.sources import LINK_OUT_OF_TREE
from devfix.types import FileResult, FileStatus, Finding, Fixability

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_FAILED = 2
#: What a shell reports for a run stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


def finding_line(
    path: str,
    finding: Finding,
    settings: Settings,
    *,
    fixed: bool = False,
    written: bool = True,
    details: bool = False,
) -> str:
    """`path:line:col: CODE [*] message`; `[*]` marks a fix that `apply` writes with these settings.

    `fixed`: the run fixed it (`written` False: in a diff, nothing written). The message of a
    finding with a fix stops after the problem (:func:`headline`) unless `details`.
    """
    fixability = settings.fixability(finding)
    marker = " [*]" if fixability is Fixability.FIXABLE else ""
    suffix = ""
    if fixed:
        suffix = " (fixed)" if written else " (would fix)"
    elif fixability is Fixability.NO_FIX:
        suffix = " (no automatic fix)"
    elif fixability is Fixability.NEEDS_UNSAFE:
        suffix = " (unsafe fix: needs --unsafe-fixes)"
    path = shown(path)  # escaped as git does: a name cannot break the line or the terminal
    where = f"{path}:cell {finding.cell}" if finding.cell is not None else path  # notebooks
    # A finding without a fix keeps its reason; one with a fix shows it in the diff.
    whole = details or fixability is Fixability.NO_FIX
    message = one_line(finding.message if whole else headline(finding.message))
    return (
        f"{where}:{finding.line}:{finding.col}: {one_line(finding.code)}{marker} {message}{suffix}"
    )


def shortened(findings: Iterable[Finding], settings: Settings) -> bool:
    """Whether a finding line of these stops before the end of its message."""
    return any(
        settings.fixability(finding) is not Fixability.NO_FIX
        and headline(finding.message) != finding.message
        for finding in findings
    )


DETAILS_HINT = "devfix: --show-details prints the fix each finding suggests."


def failure_line(result: FileResult) -> str:
    path = shown(result.path)
    if result.internal_error:
        return (
            f"{path}: INTERNAL ERROR: {one_line(result.reason)}. Nothing was written; please "
            "report this as a devfix bug with the file attached."
        )
    return f"{path}: error: {one_line(result.reason)}"


@dataclass
class Tally:
    """Counts for the closing summary and the exit code, from the files' results alone."""

    settings: Settings
    files: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    fixed: int = 0
    #: Findings left, by what could be done about them.
    left: Counter[Fixability] = field(default_factory=Counter)
    #: Symbolic links to files outside the folders walked (not followed).
    links: int = 0
    failures: list[FileResult] = field(default_factory=list)

    def add(self, result: FileResult) -> None:
        if result.status is FileStatus.SKIPPED and result.reason == LINK_OUT_OF_TREE:
            self.links += 1  # not a file of the tree: not counted among its files
            return
        self.files += 1
        if result.status is FileStatus.FAILED:
            self.failed += 1
            self.failures.append(result)
        if result.status is FileStatus.CHANGED:
            self.changed += 1
        if result.status is FileStatus.SKIPPED:
            self.skipped += 1
        self.fixed += len(result.applied)
        self.left.update(self.settings.fixability(f) for f in result.remaining)

    @property
    def remaining(self) -> int:
        return sum(self.left.values())

    def _left(self) -> str:
        """`7 fixable, 3 fixable with --unsafe-fixes, 2 not fixable automatically`."""
        parts = []
        if self.left[Fixability.FIXABLE]:
            parts.append(f"{self.left[Fixability.FIXABLE]} fixable")
        if self.left[Fixability.NEEDS_UNSAFE]:
            parts.append(f"{self.left[Fixability.NEEDS_UNSAFE]} fixable with --unsafe-fixes")
        if self.left[Fixability.NO_FIX]:
            parts.append(f"{self.left[Fixability.NO_FIX]} not fixable automatically")
        return ", ".join(parts)

    def _closing(self) -> list[str]:
        parts = []
        if self.skipped:
            parts.append(f"{plural(self.skipped, 'generated file')} skipped")
        if self.links:
            links = plural(self.links, "symbolic link")
            parts.append(f"{links} to files outside the folder skipped")
        if self.failed:
            parts.append(f"{plural(self.failed, 'file')} failed")
        return parts

    def check_summary(self) -> str:
        """`devfix: 12 findings in 5 files: 7 fixable, 3 ... --unsafe-fixes, 2 not ...`."""
        found = f"{plural(self.remaining, 'finding')} in {plural(self.files, 'file')}"
        if self.remaining:
            found += f": {self._left()}"
        return "devfix: " + "; ".join([found, *self._closing()]) + "."

    def apply_summary(self, *, dry_run: bool) -> str:
        """`devfix: 2 files changed, 7 fixes applied; 5 findings left: 3 fixable with ...`."""
        verb = "would change" if dry_run else "changed"
        done = (
            f"{plural(self.changed, 'file')} {verb}, "
            f"{plural(self.fixed, 'fix')} {'to apply' if dry_run else 'applied'}"
        )
        parts = [done]
        if self.remaining:
            parts.append(f"{plural(self.remaining, 'finding')} left: {self._left()}")
        return "devfix: " + "; ".join(parts + self._closing()) + "."

    def check_exit_code(self) -> int:
        if self.failed:
            return EXIT_FAILED
        return EXIT_FINDINGS if self.remaining else EXIT_CLEAN

    def apply_exit_code(self, *, dry_run: bool) -> int:
        if self.failed:
            return EXIT_FAILED
        if dry_run:
            return EXIT_FINDINGS if self.changed or self.remaining else EXIT_CLEAN
        return EXIT_FINDINGS if self.remaining else EXIT_CLEAN


def json_report(results: Iterable[FileResult]) -> str:
    """The JSON contract of `devfix check --format json`: one object per finding."""
    rows = [finding.to_json(result.path) for result in results for finding in result.findings]
    return json.dumps(rows, indent=2)


def plural(count: int, noun: str) -> str:
    """`1 file`, `2 files`, `1 fix`, `3 fixes`."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}{'es' if noun.endswith(('x', 's', 'sh', 'ch')) else 's'}"
