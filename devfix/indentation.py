"""Code indented with tabs and spaces mixed, which Python accepts and libcst does not read.

Python measures a tab to the next multiple of eight columns, so a block indented `"\\t    "`
under one indented with four spaces is deeper and valid; libcst's tokenizer refuses it ("no
matching outer block for dedent"). Such a file is fixed as its expanded copy, where the
indentation of every line that starts a statement is spaces of the same width, and the result
is written back with the file's own indentation: unchanged lines are the original lines, and
a line the fixes wrote takes the indentation an original statement line of the same width
had. Nothing inside a string or a bracket changes.
"""

from __future__ import annotations

import difflib
import io
import tokenize

#: Python's tab stop for indentation.
TAB_SIZE = 8


def statement_lines(text: str) -> set[int] | None:
    """The 0-based lines on which a statement or a comment line starts (outside brackets and
    strings), or None when the tokenizer refuses the text."""
    starts: set[int] = set()
    at_line_start = True
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                at_line_start = depth == 0
                continue
            if token.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if at_line_start:
                starts.add(token.start[0] - 1)
                at_line_start = False
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(depth - 1, 0)
    except (tokenize.TokenError, SyntaxError):
        return None
    return starts


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _width(indent: str) -> int:
    return len(indent.expandtabs(TAB_SIZE))


def first_mixed_line(text: str) -> int | None:
    """The 1-based number of the first statement line indented with a tab beside spaces or
    under a space-indented block; None when no statement line's indentation holds a tab."""
    starts = statement_lines(text)
    if starts is None:
        return None
    lines = text.splitlines(keepends=True)
    for number in sorted(starts):
        if number < len(lines) and "\t" in _leading(lines[number]):
            return number + 1
    return None


def expanded(text: str) -> str:
    """`text` with the tabs in the indentation of its statement lines made spaces."""
    starts = statement_lines(text) or set()
    lines = text.splitlines(keepends=True)
    for number in starts:
        if number < len(lines):
            indent = _leading(lines[number])
            if "\t" in indent:
                lines[number] = " " * _width(indent) + lines[number][len(indent) :]
    return "".join(lines)


def restored(original: str, expanded_text: str, rewritten: str) -> str:
    """`rewritten` (the fixes applied to `expanded_text`, the expansion of `original`) with
    `original`'s own lines where the fixes left a line as it was, and, on the lines they wrote,
    the indentation an original statement line of the same width had (the nearest earlier
    one), so that a block keeps one spelling of its indentation."""
    before = original.splitlines(keepends=True)
    spaced = expanded_text.splitlines(keepends=True)
    after = rewritten.splitlines(keepends=True)
    starts = statement_lines(original) or set()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, spaced, after, autojunk=False)
    for kind, start, end, new_start, new_end in matcher.get_opcodes():
        if kind == "equal":
            out.extend(before[start:end])
            continue
        for line in after[new_start:new_end]:
            indent = _leading(line)
            spelling = _spelling_before(before, starts, start, _width(indent))
            out.append(line if spelling is None else spelling + line[len(indent) :])
    return "".join(out)


def _spelling_before(lines: list[str], starts: set[int], limit: int, width: int) -> str | None:
    """The indentation of the nearest statement line before line `limit` (else after it) that
    is `width` columns wide and holds a tab; None when none does."""
    order = [*range(min(limit, len(lines)) - 1, -1, -1), *range(limit, len(lines))]
    for number in order:
        if number not in starts:
            continue
        indent = _leading(lines[number])
        if _width(indent) == width and lines[number].strip():
            return indent if "\t" in indent else None
    return None
