"""Turns results into the lines users read and the exit code; returns strings, prints nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from devfix.names import shown
from devfix.sources import LINK_OUT_OF_TREE
from devfix.types import Applicability, FileResult, FileStatus, Finding, Options

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_FAILED = 2


def finding_line(path: str, finding: Finding, options: Options, *, applied: bool = False) -> str:
    """`path:line:col: CODE [*] message`; `[*]` marks a fix that `apply` writes."""
    writes = finding.has_fix and (
        finding.applicability is Applicability.SAFE or options.unsafe_fixes
    )
    marker = " [*]" if writes else ""
    suffix = ""
    if finding.applicability is Applicability.DISPLAY_ONLY:
        suffix = " (not fixed automatically)"
    elif finding.applicability is Applicability.UNSAFE and not options.unsafe_fixes:
        suffix = " (unsafe fix: needs --unsafe-fixes)"
    if applied:
        suffix = " (fixed)"
    path = shown(path)  # escaped as git does: a name cannot break the line or the terminal
    where = f"{path}:cell {finding.cell}" if finding.cell is not None else path  # notebooks
    return f"{where}:{finding.line}:{finding.col}: {finding.code}{marker} {finding.message}{suffix}"


def failure_line(result: FileResult) -> str:
    path = shown(result.path)
    if result.internal_error:
        return (
            f"{path}: INTERNAL ERROR: {result.reason}. Nothing was written; please report "
            "this as a devfix bug with the file attached."
        )
    return f"{path}: error: {result.reason}"


@dataclass
class Tally:
    """Counts for the closing summary and the exit code."""

    files: int = 0
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    #: Symbolic links to files outside the folders walked (not followed).
    links: int = 0
    findings: int = 0
    applied: int = 0
    remaining: int = 0
    hidden_unsafe: int = 0
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
        self.findings += len(result.findings)
        self.applied += len(result.applied)
        self.hidden_unsafe += result.hidden_unsafe
        self.remaining += len(result.remaining)

    def check_summary(self) -> str:
        parts = [f"{self.findings} finding{_s(self.findings)} in {self.files} file{_s(self.files)}"]
        if self.hidden_unsafe:
            parts.append(
                f"{self.hidden_unsafe} unsafe fix{_es(self.hidden_unsafe)} need --unsafe-fixes"
            )
        if self.skipped:
            parts.append(f"{self.skipped} generated file{_s(self.skipped)} skipped")
        parts.extend(self._links())
        if self.failed:
            parts.append(f"{self.failed} file{_s(self.failed)} failed")
        return "devfix: " + ", ".join(parts) + "."

    def _links(self) -> list[str]:
        if not self.links:
            return []
        return [f"{self.links} symbolic link{_s(self.links)} to files outside the folder skipped"]

    def apply_summary(self, *, dry_run: bool) -> str:
        verb = "would change" if dry_run else "changed"
        parts = [
            f"{self.changed} file{_s(self.changed)} {verb}",
            f"{self.applied} fix{_es(self.applied)} {'to apply' if dry_run else 'applied'}",
        ]
        if self.hidden_unsafe:
            parts.append(
                f"{self.hidden_unsafe} unsafe fix{_es(self.hidden_unsafe)} hidden (--unsafe-fixes)"
            )
        left = self.remaining
        if left:
            parts.append(f"{left} finding{_s(left)} left to fix by hand")
        if self.skipped:
            parts.append(f"{self.skipped} generated file{_s(self.skipped)} skipped")
        parts.extend(self._links())
        if self.failed:
            parts.append(f"{self.failed} file{_s(self.failed)} failed")
        return "devfix: " + ", ".join(parts) + "."

    def check_exit_code(self) -> int:
        if self.failed:
            return EXIT_FAILED
        return EXIT_FINDINGS if self.findings else EXIT_CLEAN

    def apply_exit_code(self, *, dry_run: bool) -> int:
        if self.failed:
            return EXIT_FAILED
        if dry_run:
            return EXIT_FINDINGS if self.changed else EXIT_CLEAN
        return EXIT_FINDINGS if self.remaining else EXIT_CLEAN


def json_report(results: Iterable[FileResult]) -> str:
    """The JSON contract of `devfix check --format json`: one object per finding."""
    rows = [finding.to_json(result.path) for result in results for finding in result.findings]
    return json.dumps(rows, indent=2)


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _es(count: int) -> str:
    return "" if count == 1 else "es"
