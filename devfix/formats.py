"""Machine-readable renderings of results: GitHub annotations, SARIF 2.1.0, migration reports."""

from __future__ import annotations

import json
import os
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from devfix.registry import all_passes
from devfix.types import Applicability, FileResult, FileStatus, Finding
from devfix.version import __version__

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _escape_github(text: str, *, property_value: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def github_annotations(results: Iterable[FileResult]) -> str:
    """GitHub Actions workflow commands: one `::warning` per finding, `::error` per failed file."""
    lines: list[str] = []
    for result in results:
        path = _escape_github(result.path, property_value=True)
        if result.status is FileStatus.FAILED:
            lines.append(f"::error file={path},title=devfix::{_escape_github(result.reason)}")
            continue
        for finding in result.findings:
            title = _escape_github(f"{finding.code} {finding.name}", property_value=True)
            lines.append(
                f"::warning file={path},line={finding.line},col={finding.col},"
                f"endLine={finding.end_line},endColumn={finding.end_col},title={title}::"
                f"{_escape_github(finding.message)}"
            )
    return "\n".join(lines)


def _region(line: int, col: int, end_line: int, end_col: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}


def _uri(path: str) -> str:
    """A path as a SARIF `uri`: an RFC 3986 reference, so spaces, `%`, `#`, `?` and non-ASCII
    letters are percent-encoded (UTF-8); an absolute path becomes a `file://` URI."""
    posix = path.replace(os.sep, "/")
    encoded = urllib.parse.quote(os.fsencode(posix), safe="/")
    return f"file://{encoded}" if posix.startswith("/") else encoded


def sarif_log(results: Iterable[FileResult]) -> str:
    """A SARIF 2.1.0 log with one run, every rule, every finding and its fix as replacements."""
    rules = [
        {
            "id": cls.CODE,
            "name": cls.NAME,
            "shortDescription": {"text": cls.summary()},
            "fullDescription": {"text": cls.documentation()},
            "defaultConfiguration": {"level": "warning"},
            "properties": {"applicability": cls.APPLICABILITY.value},
        }
        for cls in all_passes()
    ]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    sarif_results: list[dict[str, object]] = []
    notifications: list[dict[str, object]] = []
    for result in results:
        location = {"artifactLocation": {"uri": _uri(result.path)}}
        if result.status is FileStatus.FAILED:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": result.reason},
                    "locations": [{"physicalLocation": location}],
                }
            )
            continue
        for finding in result.findings:
            entry: dict[str, object] = {
                "ruleId": finding.code,
                "ruleIndex": index.get(finding.code, 0),
                "level": "warning",
                "message": {"text": finding.message},
                "locations": [
                    {
                        "physicalLocation": {
                            **location,
                            "region": _region(
                                finding.line, finding.col, finding.end_line, finding.end_col
                            ),
                        }
                    }
                ],
                "properties": {"applicability": finding.applicability.value},
            }
            if finding.text_edits and finding.applicability is not Applicability.DISPLAY_ONLY:
                entry["fixes"] = [
                    {
                        "description": {"text": finding.fix_title},
                        "artifactChanges": [
                            {
                                **location,
                                "replacements": [
                                    {
                                        "deletedRegion": _region(
                                            e.line, e.col, e.end_line, e.end_col
                                        ),
                                        "insertedContent": {"text": e.text},
                                    }
                                    for e in finding.text_edits
                                ],
                            }
                        ],
                    }
                ]
            sarif_results.append(entry)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "devfix",
                        "version": __version__,
                        "informationUri": "https://github.com/devfix/devfix",
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": sarif_results,
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
            }
        ],
    }
    return json.dumps(log, indent=2)


@dataclass
class RuleCounts:
    files: set[str] = field(default_factory=set)
    applied: int = 0
    unsafe_left: int = 0
    display_only: int = 0
    other_left: int = 0


def rule_counts(results: Sequence[FileResult]) -> dict[str, RuleCounts]:
    """Per rule: files it touched, fixes applied, unsafe fixes left, display-only findings."""
    counts: dict[str, RuleCounts] = defaultdict(RuleCounts)
    for result in results:
        for finding in result.applied:
            counts[finding.code].applied += 1
            counts[finding.code].files.add(result.path)
        for finding in result.remaining:
            entry = counts[finding.code]
            entry.files.add(result.path)
            if finding.applicability is Applicability.DISPLAY_ONLY:
                entry.display_only += 1
            elif finding.applicability is Applicability.UNSAFE:
                entry.unsafe_left += 1
            else:
                entry.other_left += 1
    return dict(sorted(counts.items()))


def summary_table(results: Sequence[FileResult]) -> str:
    """The closing per-rule table of a run (empty when nothing was found)."""
    counts = rule_counts(results)
    if not counts:
        return ""
    names = {cls.CODE: cls.NAME for cls in all_passes()}
    header = f"{'rule':<44} {'files':>5} {'fixed':>6} {'unsafe left':>11} {'display-only':>12}"
    lines = [header, "-" * len(header)]
    for code, entry in counts.items():
        label = f"{code} {names.get(code, '')}"
        lines.append(
            f"{label:<44} {len(entry.files):>5} {entry.applied:>6} {entry.unsafe_left:>11} "
            f"{entry.display_only:>12}"
        )
    return "\n".join(lines)


def migration_report(results: Sequence[FileResult], *, markdown: bool) -> str:
    """The `--report` file: per rule and per file counts, unsafe fixes left, failures."""
    counts = rule_counts(results)
    failed = [r for r in results if r.status is FileStatus.FAILED]
    changed = [r for r in results if r.status is FileStatus.CHANGED]
    if not markdown:
        return json.dumps(
            {
                "devfix_version": __version__,
                "files": len(results),
                "files_changed": len(changed),
                "files_failed": len(failed),
                "rules": {
                    code: {
                        "files": sorted(entry.files),
                        "fixes_applied": entry.applied,
                        "unsafe_fixes_left": entry.unsafe_left,
                        "display_only": entry.display_only,
                    }
                    for code, entry in counts.items()
                },
                "per_file": {
                    r.path: {
                        "status": r.status.value,
                        "applied": dict(Counter(f.code for f in r.applied)),
                        "remaining": [_finding_row(f) for f in r.remaining],
                    }
                    for r in results
                    if r.applied or r.remaining
                },
                "failures": [{"path": r.path, "reason": r.reason} for r in failed],
            },
            indent=2,
        )
    names = {cls.CODE: cls.NAME for cls in all_passes()}
    out = [
        "# devfix migration report",
        "",
        f"{len(results)} files checked, {len(changed)} changed, {len(failed)} failed "
        f"(devfix {__version__}).",
        "",
        "## Per rule",
        "",
        "| Rule | Files | Fixes applied | Unsafe fixes left | Display-only |",
        "|---|---:|---:|---:|---:|",
    ]
    for code, entry in counts.items():
        out.append(
            f"| {code} `{names.get(code, '')}` | {len(entry.files)} | {entry.applied} | "
            f"{entry.unsafe_left} | {entry.display_only} |"
        )
    out += ["", "## Per file", ""]
    for r in results:
        if not (r.applied or r.remaining):
            continue
        applied = ", ".join(
            f"{code} ×{n}" for code, n in sorted(Counter(f.code for f in r.applied).items())
        )
        out.append(f"- `{r.path}`: {applied or 'no fixes applied'}")
        for f in r.remaining:
            out.append(f"  - left: line {f.line} {f.code} ({f.applicability.value}): {f.message}")
    if failed:
        out += ["", "## Files that failed", ""]
        out += [f"- `{r.path}`: {r.reason}" for r in failed]
    return "\n".join(out) + "\n"


def _finding_row(finding: Finding) -> dict[str, object]:
    return {
        "line": finding.line,
        "col": finding.col,
        "code": finding.code,
        "applicability": finding.applicability.value,
        "message": finding.message,
    }
