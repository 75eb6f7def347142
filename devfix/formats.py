"""Machine-readable renderings of results: GitHub annotations, SARIF 2.1.0, migration reports."""

from __future__ import annotations

import json
import os
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from devfix.names import one_line, shown
from devfix.registry import all_passes
from devfix.settings import Settings
from devfix.types import Applicability, FileResult, FileStatus, Finding, Fixability
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
            line, col, end_line, end_col = _file_region(finding)
            message = finding.message
            if finding.cell is not None:  # the notebook's JSON lines, the cell in the message
                message = f"cell {finding.cell}, line {finding.line}: {message}"
            lines.append(
                f"::warning file={path},line={line},col={col},"
                f"endLine={end_line},endColumn={end_col},title={title}::"
                f"{_escape_github(message)}"
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


def _file_region(finding: Finding) -> tuple[int, int, int, int]:
    """Where the finding is in the file's own text (a notebook's JSON for a cell's finding)."""
    if finding.file_span is not None:
        return finding.file_span
    return finding.line, finding.col, finding.end_line, finding.end_col


def sarif_log(results: Iterable[FileResult]) -> str:
    """A SARIF 2.1.0 log with one run, every rule, every finding and its fix as replacements."""
    rules = [
        {
            "id": cls.CODE,
            "name": cls.NAME,
            "shortDescription": {"text": cls.summary()},
            "fullDescription": {"text": cls.documentation()},
            "defaultConfiguration": {"level": "warning"},
            "properties": {
                "applicability": cls.APPLICABILITY.value,
                "applicabilities": [level.value for level in cls.fix_applicabilities()],
            },
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
            place: dict[str, object] = {
                "physicalLocation": {**location, "region": _region(*_file_region(finding))}
            }
            properties: dict[str, object] = {"applicability": finding.applicability.value}
            if finding.cell is not None:  # a notebook: the region is in its JSON text
                place["logicalLocations"] = [{"name": f"cell {finding.cell}", "kind": "module"}]
                properties.update(
                    cell=finding.cell,
                    cellRegion=_region(
                        finding.line, finding.col, finding.end_line, finding.end_col
                    ),
                )
            entry: dict[str, object] = {
                "ruleId": finding.code,
                "ruleIndex": index.get(finding.code, 0),
                "level": "warning",
                "message": {"text": finding.message},
                "locations": [place],
                "properties": properties,
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
    fixed: int = 0
    #: Findings left, by what could be done about them.
    fixable: int = 0
    needs_unsafe: int = 0
    no_fix: int = 0


def rule_counts(results: Sequence[FileResult], settings: Settings) -> dict[str, RuleCounts]:
    """Per rule: the files it touched, the findings fixed, and the ones left by fixability."""
    counts: dict[str, RuleCounts] = defaultdict(RuleCounts)
    for result in results:
        for finding in result.applied:
            counts[finding.code].fixed += 1
            counts[finding.code].files.add(result.path)
        for finding in result.remaining:
            entry = counts[finding.code]
            entry.files.add(result.path)
            fixability = settings.fixability(finding)
            if fixability is Fixability.FIXABLE:
                entry.fixable += 1
            elif fixability is Fixability.NEEDS_UNSAFE:
                entry.needs_unsafe += 1
            else:
                entry.no_fix += 1
    return dict(sorted(counts.items()))


def summary_table(results: Sequence[FileResult], settings: Settings, *, fixes: bool) -> str:
    """The closing per-rule table of a run (empty when nothing was found).

    `fixes`: the run applied fixes (`apply`), so the table has a `fixed` column.
    """
    counts = rule_counts(results, settings)
    if not counts:
        return ""
    names = {cls.CODE: cls.NAME for cls in all_passes()}
    columns = [("files", 5)] + ([("fixed", 5)] if fixes else [])
    columns += [("fixable", 7), ("needs --unsafe-fixes", 20), ("no fix", 6)]
    header = f"{'rule':<44} " + " ".join(f"{title:>{width}}" for title, width in columns)
    lines = [header, "-" * len(header)]
    for code, entry in counts.items():
        values = [len(entry.files)] + ([entry.fixed] if fixes else [])
        values += [entry.fixable, entry.needs_unsafe, entry.no_fix]
        label = f"{code} {names.get(code, '')}"
        cells = " ".join(f"{value:>{width}}" for value, (_, width) in zip(values, columns))
        lines.append(f"{label:<44} {cells}")
    return "\n".join(lines)


def migration_report(
    results: Sequence[FileResult], settings: Settings, *, markdown: bool, applies: bool = True
) -> str:
    """The `--report` file: per rule and per file counts, what is left, failures. A report of
    a run that writes nothing (`applies` false: `check`) has no "fixes applied" counts."""
    counts = rule_counts(results, settings)
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
                        **({"fixes_applied": entry.fixed} if applies else {}),
                        "fixable_left": entry.fixable,
                        "unsafe_fixes_left": entry.needs_unsafe,
                        "no_fix_left": entry.no_fix,
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
        "| Rule | Files |"
        + (" Fixes applied |" if applies else "")
        + " Fixable left | Needs --unsafe-fixes | No fix |",
        "|---|---:|" + ("---:|" if applies else "") + "---:|---:|---:|",
    ]
    for code, entry in counts.items():
        applied = f" {entry.fixed} |" if applies else ""
        out.append(
            f"| {code} `{names.get(code, '')}` | {len(entry.files)} |{applied} "
            f"{entry.fixable} | {entry.needs_unsafe} | {entry.no_fix} |"
        )
    out += ["", "## Per file", ""]
    for r in results:
        if not (r.applied or r.remaining):
            continue
        applied = ", ".join(
            f"{code} ×{n}" for code, n in sorted(Counter(f.code for f in r.applied).items())
        )
        out.append(f"- `{shown(r.path)}`: {applied or 'no fixes applied'}")
        for f in r.remaining:
            out.append(
                f"  - left: {_where(f)} {one_line(f.code)} ({f.applicability.value}): "
                f"{one_line(f.message)}"
            )
    if failed:
        out += ["", "## Files that failed", ""]
        out += [f"- `{shown(r.path)}`: {one_line(r.reason)}" for r in failed]
    return "\n".join(out) + "\n"


def _where(finding: Finding) -> str:
    """`line 9`, or `cell 2, line 9` in a notebook."""
    if finding.cell is not None:
        return f"cell {finding.cell}, line {finding.line}"
    return f"line {finding.line}"


def _finding_row(finding: Finding) -> dict[str, object]:
    return {
        "line": finding.line,
        "col": finding.col,
        "code": finding.code,
        "applicability": finding.applicability.value,
        "message": finding.message,
    } | ({"cell": finding.cell} if finding.cell is not None else {})
