"""`# devfix: ignore` comments: which findings they hide, and writing them (`check --add-ignore`).

A comment hides a finding when it ends the finding's first or last line, or stands alone on the
line above; `# devfix: ignore` hides every rule there, `# devfix: ignore[DF101, DF303]` (codes or
names) only those.

`check --add-ignore` writes `# devfix: ignore[CODE]` at the end of each finding's first line (or
its last line, when the first cannot end in a comment, e.g. a backslash continuation); existing
devfix suppressions on that line are merged. Such a baseline lets a legacy code base adopt devfix
and fail CI only on new findings.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence

from devfix.types import Finding

_SUPPRESSION = re.compile(r"#\s*devfix:\s*ignore(?:\[(?P<rules>[^\]]*)\])?", re.IGNORECASE)
_EXISTING = re.compile(r"#\s*devfix:\s*ignore\[(?P<rules>[^\]]*)\]")


def is_suppressed(finding: Finding, lines: Sequence[str]) -> bool:
    """Whether a suppression comment in `lines` (the file's lines) hides `finding`."""
    above = finding.line - 1
    own_line_above = 0 < above <= len(lines) and lines[above - 1].lstrip().startswith("#")
    candidates = {finding.line, finding.end_line} | ({above} if own_line_above else set())
    for number in candidates:
        if not 0 < number <= len(lines):
            continue
        match = _SUPPRESSION.search(lines[number - 1])
        if match is None:
            continue
        rules = match.group("rules")
        if rules is None:
            return True
        wanted = {rule.strip().upper() for rule in rules.split(",")}
        if finding.code.upper() in wanted or finding.name.upper() in wanted:
            return True
    return False


def _commentable_lines(text: str) -> set[int]:
    """Lines whose end is outside any string: a comment can be appended there."""
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                lines.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        pass
    return lines


def add_ignores(text: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """`text` with suppression comments for `findings`, and how many findings got none."""
    commentable = _commentable_lines(text)
    wanted: dict[int, set[str]] = {}
    missed = 0
    for finding in findings:
        target = next((n for n in (finding.line, finding.end_line) if n in commentable), None)
        if target is None:
            missed += 1
            continue
        wanted.setdefault(target, set()).add(finding.code)
    lines = text.splitlines(keepends=True)
    for number, codes in wanted.items():
        if number > len(lines):
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        existing = _EXISTING.search(body)
        if existing is not None:
            codes |= {c.strip() for c in existing.group("rules").split(",") if c.strip()}
            body = body[: existing.start()].rstrip() + "  " + body[existing.end() :].lstrip()
            body = body.rstrip()
        lines[number - 1] = f"{body}  # devfix: ignore[{', '.join(sorted(codes))}]{ending}"
    result = "".join(lines)
    try:
        compile(result, "<baseline>", "exec", dont_inherit=True)
    except SyntaxError:
        return text, missed + sum(len(codes) for codes in wanted.values())
    return result, missed
