"""Jupyter notebooks (`.ipynb`): their code cells are fixed as one Python module.

How a notebook is handled:

* Only code cells are read. Each becomes a region of one module, after a marker comment
  (``# ~~devfix-cell~~ N``), so that passes see the whole script (a model defined in cell 2 and
  trained in cell 5 is one program, and an import a fix needs lands at the top, in the first code
  cell) and every edit can be mapped back to its cell.
* IPython syntax that is not Python is kept exactly: a cell whose first line is a cell magic
  (``%%time``, ``%%bash``) is left out; a line magic (``%matplotlib inline``), a shell line
  (``!pip install x``, ``files = !ls``) or a help line (``obj?``) that starts a logical line is
  replaced by a placeholder statement for the passes and restored afterwards. A line that starts
  with ``%`` or ``!`` inside a bracket, a string or after a backslash (``"%d" \\`` /
  ``%(n)``) is Python continuation and stays code: logical lines are found with the tokenizer.
* Locations are ``path:cell N:line:col``: N counts code cells from 1 (markdown and raw cells are
  not counted, as in ruff), and the line is the line inside that cell. JSON output adds a
  ``cell`` key.
* Writing splices the new ``source`` values into the original JSON text; everything else
  (outputs, metadata, indentation, key order, escapes, the trailing newline) stays byte-identical,
  as does the list-of-lines or single-string form of each ``source``.

The trade-off of one module over per-cell analysis: cross-cell facts are right (which name is
`torch`, where the model lives), but one cell that does not parse makes the notebook fail with
that cell named, as a `.py` file with a syntax error does.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import os
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst

from devfix import limits
from devfix.errors import InputError, InternalError
from devfix.types import Finding, TextEdit

NOTEBOOK_SUFFIX = ".ipynb"

#: `files = !ls`, `t = %timeit -o f()`: IPython assigns a magic's or a command's output.
_ASSIGNED_MAGIC = re.compile(r"^[ \t]*[A-Za-z_][\w.]*[ \t]*=[ \t]*[%!]")
#: `obj?`, `obj??`, `?obj`: IPython's help syntax.
_HELP_LINE = re.compile(r"^[ \t]*(\?{1,2}[\w.]+|[\w.]+\?{1,2})[ \t]*$")
#: Every line :func:`_is_magic_start` accepts matches this somewhere in its cell (a line may
#: start after any of the breaks `str.splitlines` splits at): a cell without a match has no
#: magics, and its lines need no tokenizing.
_MAYBE_MAGIC = re.compile(
    r"(?:^|(?<=[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]))"
    r"[ \t]*(?:[%!?]|[A-Za-z_][\w.]*[ \t]*=[ \t]*[%!]|[\w.]+\?)",
    re.M,
)
#: A line without brackets, quotes or backslashes is a whole logical line by itself.
_MAY_CONTINUE = re.compile(r"[()\[\]{}'\"\\]")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


@dataclass(frozen=True)
class _Markers:
    """The comments that stand for cell boundaries and magics in one notebook's module:
    `# ~~devfix-cell~~ N` and `pass  # ~~devfix-magic~~ N`, or, when a cell already holds that
    text, `# ~~devfix-cell-K~~ N` (and so on) with the first K that no cell holds."""

    cell: str
    cell_line: re.Pattern[str]
    magic: str
    magic_line: re.Pattern[str]

    @classmethod
    def avoiding(cls, code: str) -> _Markers:
        tag, number = "", 0
        while f"~~devfix-cell{tag}~~" in code or f"~~devfix-magic{tag}~~" in code:
            number += 1
            tag = f"-{number}"
        return cls(
            f"# ~~devfix-cell{tag}~~ {{}}",
            re.compile(rf"^# ~~devfix-cell{tag}~~ (\d+)$"),
            f"pass  # ~~devfix-magic{tag}~~ {{}}",
            re.compile(rf"^[ \t]*pass  # ~~devfix-magic{tag}~~ (\d+)$"),
        )


@dataclass(frozen=True)
class _Cell:
    number: int  #: 1-based among code cells
    source: str  #: the cell's text, joined
    start: int  #: where the `source` value starts in the notebook's JSON text
    end: int
    opaque: bool  #: left out of the module (cell magic, empty, not Python)


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    assert match is not None
    return match.end()


def _members(text: str, index: int) -> list[tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at `index` (already valid)."""
    index = _skip(text, index + 1)
    members: list[tuple[str, int, int]] = []
    if text[index] == "}":
        return members
    while True:
        key, index = _DECODER.raw_decode(text, index)
        index = _skip(text, _skip(text, index) + 1)
        _, end = _DECODER.raw_decode(text, index)
        members.append((key, index, end))
        index = _skip(text, end)
        if text[index] != ",":
            return members
        index = _skip(text, index + 1)


def _elements(text: str, index: int) -> list[tuple[int, int]]:
    """(start, end) of each element of the JSON array starting at `index` (already valid)."""
    index = _skip(text, index + 1)
    elements: list[tuple[int, int]] = []
    if text[index] == "]":
        return elements
    while True:
        _, end = _DECODER.raw_decode(text, index)
        elements.append((index, end))
        index = _skip(text, end)
        if text[index] != ",":
            return elements
        index = _skip(text, index + 1)


def _joined(source: object, where: str) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    raise InputError(f"is not a valid notebook: {where} has a `source` that is not text")


def _refuse_lone_surrogates(source: str, number: int) -> None:
    """JSON's `\\ud800` escapes decode to characters no UTF-8 text, so no Python file, holds."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as error:
        line = source.count("\n", 0, error.start) + 1
        raise InputError(
            f"is not a valid notebook: code cell {number}, line {line} holds a lone surrogate "
            f"({source[error.start]!r}), which Python code cannot contain"
        ) from None


def _is_python(notebook: dict[str, Any]) -> bool:
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for section, key in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(section)
        if isinstance(value, dict) and isinstance(value.get(key), str):
            return bool(value[key].lower() == "python")
    return True


def _logical_line_complete(lines: Sequence[str]) -> bool:
    """False while `lines` end inside a bracket, a string or after a backslash."""
    if len(lines) == 1 and _MAY_CONTINUE.search(lines[0]) is None:
        return True
    text = "".join(lines)
    try:
        for _token in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
    except tokenize.TokenError:
        return False
    except SyntaxError:
        return True
    return True


def _is_magic_start(line: str) -> bool:
    stripped = line.lstrip(" \t")
    return (
        stripped.startswith(("%", "!"))
        or _ASSIGNED_MAGIC.match(line) is not None
        or _HELP_LINE.match(line.rstrip("\r\n")) is not None
    )


def _is_cell_magic(source: str) -> bool:
    for line in source.splitlines():
        if line.strip():
            return line.lstrip().startswith("%%")
    return False


class Notebook:
    """One parsed notebook: its code cells as one module, and the way back to JSON."""

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.text = text
        limits.check_json_nesting(text)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"is not valid notebook JSON (line {error.lineno}, column {error.colno}): "
                f"{error.msg}"
            ) from None
        except RecursionError:
            raise InputError("is nested too deeply to read as JSON") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise InputError("is not an nbformat 4 notebook (no `cells` list)")
        self.data: dict[str, Any] = data
        self.ensure_ascii = text.isascii() and "\\u" in text
        self.cells: list[_Cell] = []
        self._magics: list[str] = []
        python = _is_python(data)
        spans = self._source_spans()
        number = 0
        for position, cell in enumerate(data["cells"]):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            number += 1
            if "source" not in cell or position not in spans:
                raise InputError(f"is not a valid notebook: code cell {number} has no `source`")
            source = _joined(cell["source"], f"code cell {number}")
            start, end = spans[position]
            opaque = not python or not source.strip() or _is_cell_magic(source)
            if not opaque:
                _refuse_lone_surrogates(source, number)
            self.cells.append(_Cell(number, source, start, end, opaque))
        self._markers = _Markers.avoiding("".join(cell.source for cell in self.cells))
        self.code = self._build_code()
        self._line_map = self._map_lines(self.code)

    # -- reading --------------------------------------------------------------------------------

    def _source_spans(self) -> dict[int, tuple[int, int]]:
        text = self.text
        start = _skip(text, 0)
        spans: dict[int, tuple[int, int]] = {}
        for key, value_start, _ in _members(text, start):
            if key != "cells":
                continue
            for position, (cell_start, _end) in enumerate(_elements(text, value_start)):
                if text[cell_start] != "{":
                    continue
                for cell_key, source_start, source_end in _members(text, cell_start):
                    if cell_key == "source":
                        spans[position] = (source_start, source_end)
        return spans

    def _build_code(self) -> str:
        parts: list[str] = []
        for cell in self.cells:
            if cell.opaque:
                continue
            parts.append(self._markers.cell.format(cell.number) + "\n")
            parts.append(self._mask_magics(cell.source))
            if not cell.source.endswith(("\n", "\r")):
                parts.append("\n")
        return "".join(parts)

    def _mask_magics(self, source: str) -> str:
        if _MAYBE_MAGIC.search(source) is None:
            return source
        out: list[str] = []
        pending: list[str] = []
        in_magic = False
        indent = ""
        for line in source.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            ending = line[len(body) :]
            if in_magic or (not pending and _is_magic_start(line)):
                if not in_magic:  # a continued magic line keeps the first line's indentation
                    indent = body[: len(body) - len(body.lstrip(" \t"))]
                out.append(indent + self._markers.magic.format(len(self._magics)) + ending)
                self._magics.append(body)
                # IPython joins a magic or shell line that ends with a backslash to the next.
                in_magic = body.endswith("\\")
                continue
            out.append(line)
            pending.append(line if ending else line + "\n")
            if _logical_line_complete(pending):
                pending = []
        return "".join(out)

    def _map_lines(self, code: str) -> list[tuple[int, int]]:
        """(cell number, line in cell) of every line of `code`; markers map to line 0."""
        mapping: list[tuple[int, int]] = []
        cell, line_in_cell = 0, 0
        for line in code.splitlines():
            marker = self._markers.cell_line.match(line)
            if marker is not None:
                cell, line_in_cell = int(marker.group(1)), 0
            else:
                line_in_cell += 1
            mapping.append((cell, line_in_cell))
        return mapping

    def locate(self, line: int) -> tuple[int, int]:
        """The (cell number, line in the cell) of a line of :attr:`code`."""
        if 0 < line <= len(self._line_map):
            return self._line_map[line - 1]
        return (0, line)

    def code_line(self, cell: int, line: int) -> int | None:
        """The line of :attr:`code` that is line `line` of cell `cell` (the inverse of
        :meth:`locate`); None when the cell has no such line."""
        try:
            return self._line_map.index((cell, line)) + 1
        except ValueError:
            return None

    def remap(self, finding: Finding, code: str | None = None) -> Finding:
        """`finding` (located in :attr:`code`, or in `code`) located in its cell instead.

        Located in :attr:`code`, the finding also gets its span in the notebook file's JSON text
        (`file_span`), and its text edits become replacements of that JSON text, which a SARIF
        consumer can apply to the file as it is. A text edit that leaves its cell is dropped.
        """
        mapping = self._line_map if code is None else self._map_lines(code)
        cell, line = mapping[finding.line - 1] if 0 < finding.line <= len(mapping) else (0, 0)
        if not cell:
            return finding
        end_cell, end_line = (
            mapping[finding.end_line - 1] if 0 < finding.end_line <= len(mapping) else (0, 0)
        )
        end_line, end_col = (end_line, finding.end_col) if end_cell == cell else (line, finding.col)
        if code is not None:
            return dataclasses.replace(
                finding, line=line, end_line=end_line, end_col=end_col, cell=cell, text_edits=()
            )
        source = next(c for c in self.cells if c.number == cell)
        start = self._json_location(source, self._cell_offset(source, line, finding.col))
        end = self._json_location(source, self._cell_offset(source, end_line, end_col))
        text_edits: list[TextEdit] = []
        for edit in finding.text_edits:
            first = mapping[edit.line - 1] if 0 < edit.line <= len(mapping) else (0, 0)
            last = mapping[edit.end_line - 1] if 0 < edit.end_line <= len(mapping) else (0, 0)
            if last[0] != cell and last[1] == 0 and edit.end_col == 1:
                last = (cell, len(source.source.splitlines()) + 1)  # up to the cell's end
            if first[0] != cell or last[0] != cell:
                text_edits = []
                break
            text_edits.append(
                self._file_edit(
                    source,
                    self._cell_offset(source, first[1], edit.col),
                    self._cell_offset(source, last[1], edit.end_col),
                    edit.text,
                )
            )
        return dataclasses.replace(
            finding,
            line=line,
            end_line=end_line,
            end_col=end_col,
            cell=cell,
            file_span=(*start, *end),
            text_edits=tuple(text_edits),
        )

    # -- the notebook file's JSON text ---------------------------------------------------------

    @staticmethod
    def _cell_offset(cell: _Cell, line: int, col: int) -> int:
        """The offset in the cell's source of a 1-based (line, column)."""
        lines = cell.source.splitlines(keepends=True)
        start = sum(len(text) for text in lines[: line - 1])
        return min(start + col - 1, len(cell.source))

    def _strings(self, cell: _Cell) -> list[tuple[int, int]]:
        """(start, end) of each JSON string the cell's `source` is made of, quotes included."""
        if self.text[cell.start] == '"':
            return [(cell.start, cell.end)]
        return _elements(self.text, cell.start)

    def _raw_offset(self, cell: _Cell, offset: int) -> int:
        """The offset in the notebook's JSON text of character `offset` of the cell's source.

        A position between two strings of a list (after a line's newline) is the start of the
        next string's content, so that a replacement spanning lines crosses whole separators.
        """
        strings = self._strings(cell)
        if not strings:
            return cell.start + 1
        remaining = offset
        for index, (start, end) in enumerate(strings):
            positions = _decoded_positions(self.text, start, end)
            length = len(positions) - 1
            if remaining < length or (remaining == length and index == len(strings) - 1):
                return positions[remaining]
            remaining -= length
        return strings[-1][1] - 1

    def _json_location(self, cell: _Cell, offset: int) -> tuple[int, int]:
        raw = self._raw_offset(cell, offset)
        line_start = self.text.rfind("\n", 0, raw) + 1
        return self.text.count("\n", 0, raw) + 1, raw - line_start + 1

    def _file_edit(self, cell: _Cell, start: int, end: int, text: str) -> TextEdit:
        """Replacing characters `start:end` of the cell's source with `text`, as an edit of the
        notebook's JSON text."""
        escaped = json.dumps(text, ensure_ascii=self.ensure_ascii)[1:-1]
        strings = self._strings(cell)
        if self.text[cell.start] != '"' and len(strings) > 1:
            separator = self.text[strings[0][1] : strings[1][0]]
            escaped = escaped.replace("\\n", '\\n"' + separator + '"')
        elif self.text[cell.start] != '"':
            escaped = escaped.replace("\\n", '\\n", "')
        first = self._json_location(cell, start)
        last = self._json_location(cell, end)
        return TextEdit(first[0], first[1], last[0], last[1], escaped)

    # -- writing --------------------------------------------------------------------------------

    def split(self, code: str) -> dict[int, str]:
        """The new source of every code cell that `code` (a rewritten :attr:`code`) changes."""
        if code == self.code:
            return {}
        expected = [cell.number for cell in self.cells if not cell.opaque]
        found: list[int] = []
        chunks: list[list[str]] = [[]]
        for line in code.splitlines(keepends=True):
            marker = self._markers.cell_line.match(line.rstrip("\r\n"))
            if marker is not None:
                found.append(int(marker.group(1)))
                chunks.append([])
                continue
            placeholder = self._markers.magic_line.match(line.rstrip("\r\n"))
            if placeholder is not None:
                index = int(placeholder.group(1))
                if index >= len(self._magics):
                    raise InternalError("a fix damaged a notebook magic placeholder")
                line = self._magics[index] + line[len(line.rstrip("\r\n")) :]
            chunks[-1].append(line)
        if found != expected:
            raise InternalError("a fix moved or removed a notebook cell boundary")
        # Text before the first marker (an import added at the very top) joins the first cell.
        chunks[1][:0] = chunks[0]
        changed: dict[int, str] = {}
        by_number = {cell.number: cell for cell in self.cells}
        for number, lines in zip(found, chunks[1:]):
            cell = by_number[number]
            new = "".join(lines)
            if not cell.source.endswith(("\n", "\r")) and new.endswith("\n"):
                new = new[:-1]
            if new != cell.source:
                changed[number] = new
        return changed

    def rebuild(self, code: str) -> str:
        """The notebook's JSON text with the cells that `code` changes replaced, nothing else."""
        changed = self.split(code)
        if not changed:
            return self.text
        text = self.text
        pieces: list[str] = []
        cursor = 0
        for cell in self.cells:
            if cell.number not in changed:
                continue
            pieces.append(text[cursor : cell.start])
            pieces.append(self._render_source(cell, changed[cell.number]))
            cursor = cell.end
        pieces.append(text[cursor:])
        result = "".join(pieces)
        self._check_rebuilt(result, changed)
        return result

    def _render_source(self, cell: _Cell, new: str) -> str:
        raw = self.text[cell.start : cell.end]
        if raw.startswith('"'):
            return json.dumps(new, ensure_ascii=self.ensure_ascii)
        elements = _elements(self.text, cell.start)
        known: dict[str, str] = {}
        for start, end in elements:
            known.setdefault(json.loads(self.text[start:end]), self.text[start:end])
        if elements:
            first_start, _ = elements[0]
            last_end = elements[-1][1]
            lead = self.text[cell.start + 1 : first_start]
            trail = self.text[last_end : cell.end - 1]
            if len(elements) > 1:
                separator = self.text[elements[0][1] : elements[1][0]]
            else:
                separator = "," + lead
        else:
            line_start = self.text.rfind("\n", 0, cell.start) + 1
            key_indent = re.match(r"[ \t]*", self.text[line_start : cell.start])
            indent = key_indent.group(0) if key_indent else ""
            lead, trail, separator = "\n" + indent + " ", "\n" + indent, ",\n" + indent + " "
        tokens = [
            known.get(line) or json.dumps(line, ensure_ascii=self.ensure_ascii)
            for line in new.splitlines(keepends=True)
        ]
        if not tokens:
            return "[]"
        return "[" + lead + separator.join(tokens) + trail + "]"

    def _check_rebuilt(self, result: str, changed: dict[int, str]) -> None:
        try:
            data = json.loads(result)
        except json.JSONDecodeError as error:
            raise InternalError(f"rewriting the notebook produced invalid JSON ({error})") from None
        expected = json.loads(self.text)
        number = 0
        for position, cell in enumerate(expected["cells"]):
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                number += 1
                if number in changed:
                    cell["source"] = data["cells"][position]["source"]
                    if _joined(cell["source"], "") != changed[number]:
                        raise InternalError("rewriting the notebook lost a cell's new source")
        if data != expected:
            raise InternalError("rewriting the notebook changed more than cell sources")

    def cell_diffs(self, code: str, path: str | None = None, context: int = 3) -> str:
        """Unified diffs, one per changed cell, of `code` against the notebook."""
        name = path or self.path
        by_number = {cell.number: cell for cell in self.cells}
        out: list[str] = []
        for number, new in sorted(self.split(code).items()):
            label = f"{name}:cell {number}"
            old_label = label if os.path.isabs(name) else f"a/{label}"
            new_label = label if os.path.isabs(name) else f"b/{label}"
            out.extend(_diff_lines(by_number[number].source, new, old_label, new_label, context))
        return "".join(out)


def _diff_lines(before: str, after: str, old: str, new: str, context: int) -> list[str]:
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=old,
            tofile=new,
            n=context,
        )
    )
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def _decoded_positions(text: str, start: int, end: int) -> list[int]:
    """For the JSON string `text[start:end]` (quotes included), the raw offset of each decoded
    character, and of its end."""
    positions: list[int] = []
    index = start + 1
    while index < end - 1:
        positions.append(index)
        if text[index] != "\\":
            index += 1
        elif text[index + 1] != "u":
            index += 2
        else:
            unit = int(text[index + 2 : index + 6], 16)
            index += 6
            if 0xD800 <= unit < 0xDC00 and text.startswith("\\u", index):
                index += 6  # a surrogate pair is one character
    positions.append(end - 1)
    return positions


def check_parses(notebook: Notebook) -> None:
    """Raise InputError naming the first code cell that is not Python (after masking magics)."""
    limits.check_parsable(notebook.code)
    try:
        cst.parse_module(notebook.code)
        return
    except cst.ParserSyntaxError as error:
        cell, line = notebook.locate(error.raw_line)
        raise InputError(
            f"cell {cell} does not parse (line {line}, column {error.raw_column}): "
            f"{error.message.splitlines()[0]}"
        ) from None
