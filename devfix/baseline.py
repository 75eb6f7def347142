"""`devfix check --add-ignore`: write `# devfix: ignore[CODE]` for every current finding.

The comment goes at the end of the finding's first line (or its last line, when the first cannot
end in a comment, e.g. a backslash continuation); existing devfix suppressions on that line are
merged. A baseline lets a legacy code base adopt devfix and fail CI only on new findings.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable

from devfix.types import Finding

_EXISTING = re.compile(r"#\s*devfix:\s*ignore\[(?P<rules>[^\]]*)\]")


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
