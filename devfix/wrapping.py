"""Long lines that fixes make are wrapped to the file's line length, as a formatter would.

The line length is the file's configuration's: `line-length` of `[tool.ruff]` or `[tool.black]`
in the nearest pyproject.toml (or of the nearest ruff.toml), else 88. Only lines the fixes made
longer than that are touched: the call with the longest argument list on such a line gets its
arguments on a line of their own (or one per line), and the result must fit and parse.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import textwrap
import tokenize

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from devfix import config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

DEFAULT_LINE_LENGTH = 88


def line_length_for(path: str) -> int:
    """The line length configured for `path`'s folder (a real file's), else 88."""
    folder = os.path.dirname(os.path.abspath(path)) if os.path.exists(path) else os.getcwd()
    return _folder_line_length(folder)


@functools.lru_cache(maxsize=256)
def _folder_line_length(folder: str) -> int:
    found = config.nearest_file(folder, ("ruff.toml", ".ruff.toml", "pyproject.toml"))
    if found is None:
        return DEFAULT_LINE_LENGTH
    return _configured(found, os.path.basename(found) == "pyproject.toml")


def _configured(path: str, pyproject: bool) -> int:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return DEFAULT_LINE_LENGTH
    tables = [data.get("tool", {}).get("ruff", {}), data.get("tool", {}).get("black", {})]
    if not pyproject:
        tables = [data]
    for table in tables:
        value = table.get("line-length") if isinstance(table, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_LINE_LENGTH


def wrap_long_lines(before: str, after: str, limit: int) -> str:
    """`after` (a rewrite of `before`) with its new lines longer than `limit` wrapped."""
    old_lines = set(before.splitlines())
    lines = after.splitlines(keepends=True)
    long = _new_long_lines(lines, old_lines, limit)
    if not long:
        return after
    comments = _full_line_comments(after)
    for first, last in reversed(_new_comment_blocks(lines, comments & long, comments, old_lines)):
        block = lines[first - 1 : last]
        body, ending = block[0].rstrip("\r\n"), block[0][len(block[0].rstrip("\r\n")) :] or "\n"
        indent = body[: len(body) - len(body.lstrip())]
        width = limit - len(indent) - 2
        # A new comment block is one paragraph: re-flowed whole, not line by line, unless a
        # word longer than the line (a command to run) keeps it from fitting; then each long
        # line is wrapped on its own.
        text = " ".join(line.strip()[1:].strip() for line in block)
        pieces = textwrap.wrap(text, width, break_long_words=False)
        if any(len(piece) > width for piece in pieces):
            pieces = [
                piece
                for line in block
                for piece in textwrap.wrap(line.strip()[1:].strip(), width, break_long_words=False)
            ]
        lines[first - 1 : last] = [f"{indent}# {piece}{ending}" for piece in pieces]
    after = "".join(lines)
    lines = after.splitlines(keepends=True)
    long = _new_long_lines(lines, old_lines, limit)
    if not long:
        return after
    try:
        wrapper = MetadataWrapper(cst.parse_module(after), unsafe_skip_copy=True)
    except cst.ParserSyntaxError:
        return after
    positions = wrapper.resolve(PositionProvider)
    calls: dict[int, list[cst.Call]] = {}
    displays: dict[int, list[cst.Dict | cst.List]] = {}
    hugged: dict[int, cst.Call] = {}
    # A call inside an f-string's replacement field is never split: before Python 3.12 a
    # field cannot span lines (and a string's text is no place for a line break anyway).
    in_strings = [
        (span.start.line, span.start.column, span.end.line, span.end.column)
        for node, span in positions.items()
        if isinstance(node, cst.FormattedString)
    ]
    for node, span in positions.items():
        single = span.start.line == span.end.line and span.start.line in long
        if isinstance(node, cst.Call) and node.args and not single:
            # `f(\n    a, b, c\n)`: every argument on one line of a call that spans more.
            first, last = positions[node.args[0]].start.line, positions[node.args[-1]].end.line
            if first == last and first in long and span.start.line < first < span.end.line:
                hugged[first] = node
        if single and isinstance(node, cst.Call) and node.args:
            inside = any(
                (line, column) <= (span.start.line, span.start.column)
                and (span.end.line, span.end.column) <= (end_line, end_column)
                for line, column, end_line, end_column in in_strings
            )
            if not inside:
                calls.setdefault(span.start.line, []).append(node)
        elif single and isinstance(node, (cst.Dict, cst.List)) and node.elements:
            displays.setdefault(span.start.line, []).append(node)
    module = wrapper.module
    for number, call in hugged.items():
        line = lines[number - 1]
        body, ending = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        indent = body[: len(body) - len(body.lstrip())]
        arguments = _argument_texts(module, call)
        if "#" in body or arguments is None:
            continue
        parts = [indent + argument + "," for argument in arguments]
        if all(len(part) <= limit for part in parts):
            lines[number - 1] = "".join(part + (ending or "\n") for part in parts)
            calls.pop(number, None)  # split here: the calls inside stay whole
    before_calls = {number: lines[number - 1].rstrip("\r\n") for number in calls}
    for number in sorted(calls, reverse=True):
        line = lines[number - 1]
        body, ending = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        # As black splits: first the call that ends the line, then the longest argument lists.
        # A lone name split off mid-line (`.to(\n device\n)[t]`) reads worst: it comes last.
        candidates = sorted(
            calls[number],
            key=lambda call: (
                _one_atom(call) and not _ends_line(body, positions[call].end.column),
                not _ends_line(body, positions[call].end.column),
                -_args_length(module, call),
            ),
        )
        for call in candidates:
            wrapped = _wrapped(module, positions, call, body, limit)
            if wrapped is not None:
                lines[number - 1] = "".join(part + (ending or "\n") for part in wrapped)
                break
    for number in sorted(displays, reverse=True):
        line = lines[number - 1]
        body, ending = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        if len(body) <= limit or (number in calls and body != before_calls.get(number)):
            continue  # fits now, or a call on it was split already
        # The outermost literal first: `{"net": {...}, "step": step}` splits at its keys.
        for display in sorted(displays[number], key=lambda d: positions[d].start.column):
            wrapped = _wrapped_display(module, positions, display, body, limit)
            if wrapped is not None:
                lines[number - 1] = "".join(part + (ending or "\n") for part in wrapped)
                break
    result = "".join(lines)
    try:
        cst.parse_module(result)
    except cst.ParserSyntaxError:
        return after
    return result


def _new_long_lines(lines: list[str], old_lines: set[str], limit: int) -> set[int]:
    """Numbers of the lines longer than `limit` that are not lines of the original text."""
    return {
        number
        for number, line in enumerate(lines, 1)
        if len(line.rstrip("\r\n")) > limit and line.rstrip("\r\n") not in old_lines
    }


def _new_comment_blocks(
    lines: list[str], long: set[int], comments: set[int], old_lines: set[str]
) -> list[tuple[int, int]]:
    """(first, last) line numbers of the runs of new full-line comments, at one indentation,
    that hold a line in `long`; a comment the file already had is never joined."""

    def joins(number: int, indent: str) -> bool:
        if number not in comments or number > len(lines):
            return False
        if lines[number - 1].rstrip("\r\n") in old_lines:
            return False
        line = lines[number - 1].rstrip("\r\n")
        return line[: len(line) - len(line.lstrip())] == indent

    blocks: list[tuple[int, int]] = []
    for number in sorted(long):
        if blocks and blocks[-1][0] <= number <= blocks[-1][1]:
            continue
        line = lines[number - 1].rstrip("\r\n")
        indent = line[: len(line) - len(line.lstrip())]
        first = last = number
        while first > 1 and joins(first - 1, indent):
            first -= 1
        while joins(last + 1, indent):
            last += 1
        blocks.append((first, last))
    return blocks


def _full_line_comments(code: str) -> set[int]:
    """Lines that hold a comment and nothing else."""
    found: set[int] = set()
    previous_end = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT and token.start[0] != previous_end:
                found.add(token.start[0])
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                previous_end = token.end[0]
    except (tokenize.TokenError, SyntaxError):
        return set()
    return found


def _ends_line(line: str, column: int) -> bool:
    rest = line[column:].strip()
    return not rest or rest.startswith("#")


def _one_atom(call: cst.Call) -> bool:
    """`f(path)`, `f(self.x)`, `f(3)`: a single argument that is a name, an attribute or a
    literal."""
    return len(call.args) == 1 and isinstance(
        call.args[0].value, (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer, cst.Float)
    )


def _args_length(module: cst.Module, call: cst.Call) -> int:
    return sum(len(module.code_for_node(arg)) for arg in call.args)


def _wrapped(
    module: cst.Module,
    positions: object,
    call: cst.Call,
    line: str,
    limit: int,
) -> list[str] | None:
    """The line with `call`'s arguments on lines of their own, if every line then fits."""
    spans = positions  # PositionProvider's mapping
    func_end = spans[call.func].end.column  # type: ignore[index]
    call_end = spans[call].end.column  # type: ignore[index]
    opening = line.find("(", func_end)
    if opening < 0 or line[call_end - 1] != ")":
        return None
    indent = line[: len(line) - len(line.lstrip())]
    head = line[: opening + 1].rstrip()
    tail = indent + line[call_end - 1 :]
    arguments = _argument_texts(module, call)
    if arguments is None:
        return None
    inner = _inner_indent(indent)
    one_line = [head, inner + ", ".join(arguments), tail]
    if all(len(part) <= limit for part in one_line):
        return one_line
    return _one_per_line(head, arguments, tail, inner, limit)


def _argument_texts(module: cst.Module, call: cst.Call) -> list[str] | None:
    """Each argument's source without its comma; None when one spans lines."""
    arguments = [
        module.code_for_node(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
        for arg in call.args
    ]
    return None if any("\n" in argument for argument in arguments) else arguments


def _inner_indent(indent: str) -> str:
    return indent + ("\t" if "\t" in indent else "    ")  # a tab-indented file stays so


def _one_per_line(
    head: str, items: list[str], tail: str, inner: str, limit: int
) -> list[str] | None:
    """`head`, each item on a line of its own with a trailing comma, `tail`; None when a
    line would still be too long."""
    parts = [head, *(inner + item + "," for item in items), tail]
    return parts if all(len(part) <= limit for part in parts) else None


def _wrapped_display(
    module: cst.Module, positions: object, display: cst.Dict | cst.List, line: str, limit: int
) -> list[str] | None:
    """The line with the elements of a dict or list literal on lines of their own, if every
    line then fits."""
    spans = positions  # PositionProvider's mapping
    start = spans[display].start.column  # type: ignore[index]
    end = spans[display].end.column  # type: ignore[index]
    if line[start : start + 1] not in ("{", "[") or line[end - 1 : end] not in ("}", "]"):
        return None
    indent = line[: len(line) - len(line.lstrip())]
    elements = [
        module.code_for_node(element.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
        for element in display.elements
    ]
    if any("\n" in element for element in elements):
        return None
    return _one_per_line(
        line[: start + 1], elements, indent + line[end - 1 :], _inner_indent(indent), limit
    )
