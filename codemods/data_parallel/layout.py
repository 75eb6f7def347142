"""Lines the conversion writes stay within the file's line length, where the file has one.

A file "has" a line length when all its code lines respect one of the usual limits (79, 88,
100, 120): the smallest such limit is the file's. Comment-only lines and lines holding a URL
do not count (formatters leave those long). Long calls the conversion writes are wrapped the
way black and ruff format them; comments it writes are re-flowed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence

import libcst as cst

from devfix.codemods._edits import line_break
from devfix.types import Replacement

USUAL_LIMITS = (79, 88, 100, 120)
#: Stands for a space that must not break a line (inside `code` in a comment).
_GLUE = "\x00"

_CODE = cst.Module([]).code_for_node


def line_limit(text: str) -> int | None:
    """The file's line length (see the module doc), or None when it has none."""
    longest = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or "://" in line:
            continue
        longest = max(longest, len(line.rstrip()))
    return next((limit for limit in USUAL_LIMITS if longest <= limit), None)


def comment_lines(paragraphs: Sequence[str], width: int) -> list[cst.EmptyLine]:
    """`# ` comment lines holding `paragraphs`, each re-flowed to `width` characters."""
    lines: list[cst.EmptyLine] = []
    for paragraph in paragraphs:
        # Code in backticks is not broken across lines.
        parts = paragraph.split("`")
        glued = "`".join(p.replace(" ", _GLUE) if i % 2 else p for i, p in enumerate(parts))
        wrapped = textwrap.wrap(
            glued, max(width - 2, 20), break_on_hyphens=False, break_long_words=False
        )
        for text in wrapped or [""]:
            comment = f"# {text.replace(_GLUE, ' ')}".rstrip()
            lines.append(cst.EmptyLine(comment=cst.Comment(comment)))
    return lines


def too_long(statement: cst.CSTNode, indent: str, limit: int) -> bool:
    return any(len(indent) + len(line) > limit for line in _CODE(statement).splitlines())


def fit_statement(
    statement: cst.BaseStatement,
    indent: str,
    unit: str,
    limit: int,
    is_original: Callable[[cst.CSTNode], bool],
) -> cst.BaseStatement:
    """A statement the conversion wrote, within `limit` at indentation `indent` where it can
    be: calls wrapped, comments re-flowed, a trailing comment moved above its line. Nodes of
    the original file (`is_original`) are left as they are."""
    if is_original(statement) or not too_long(statement, indent, limit):
        return statement
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        statement = statement.with_changes(
            leading_lines=_fit_comments(statement.leading_lines, indent, limit)
        )
    if isinstance(statement, cst.BaseCompoundStatement):
        return _fit_compound(statement, indent, unit, limit, is_original)
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return statement
    trailing = statement.trailing_whitespace
    if trailing.comment is not None and too_long(statement, indent, limit):
        moved = cst.EmptyLine(comment=trailing.comment)
        statement = statement.with_changes(
            leading_lines=[*statement.leading_lines, moved],
            trailing_whitespace=cst.TrailingWhitespace(),
        )
    if not too_long(statement.with_changes(leading_lines=[]), indent, limit):
        return statement
    small = statement.body[0]
    value = getattr(small, "value", None)
    if isinstance(value, cst.Call) and not is_original(value):
        wrapped = wrap_call(value, indent, unit, limit)
        return statement.with_changes(body=[small.with_changes(value=wrapped)])
    return statement


def _fit_compound(
    statement: cst.BaseCompoundStatement,
    indent: str,
    unit: str,
    limit: int,
    is_original: Callable[[cst.CSTNode], bool],
) -> cst.BaseCompoundStatement:
    def fit_block(block: cst.BaseSuite) -> cst.BaseSuite:
        if not isinstance(block, cst.IndentedBlock) or is_original(block):
            return block
        inner = indent + (block.indent if block.indent is not None else unit)
        body = [fit_statement(s, inner, unit, limit, is_original) for s in block.body]
        return block.with_changes(body=body)

    header_comment = None
    if isinstance(statement.body, cst.IndentedBlock):
        header_comment = statement.body.header.comment
    changes: dict[str, object] = {"body": fit_block(statement.body)}
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, (cst.Else, cst.If)) and not is_original(orelse):
        if isinstance(orelse, cst.Else):
            changes["orelse"] = orelse.with_changes(body=fit_block(orelse.body))
        else:
            changes["orelse"] = _fit_compound(orelse, indent, unit, limit, is_original)
    result = statement.with_changes(**changes)
    if header_comment is not None and isinstance(result.body, cst.IndentedBlock):
        first_line = _CODE(result.with_changes(leading_lines=[])).splitlines()[0]
        if len(indent) + len(first_line) > limit:
            # `if x:  # a long comment`: the comment goes above the `if`.
            result = result.with_changes(
                leading_lines=[*result.leading_lines, cst.EmptyLine(comment=header_comment)],
                body=result.body.with_changes(header=cst.TrailingWhitespace()),
            )
    return result


def _fit_comments(lines: Sequence[cst.EmptyLine], indent: str, limit: int) -> list[cst.EmptyLine]:
    """Comment blocks with a line over the limit, re-flowed (each block is one paragraph)."""
    if all(
        line.comment is None or len(indent) + len(line.comment.value) <= limit for line in lines
    ):
        return list(lines)
    out: list[cst.EmptyLine] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            out.extend(comment_lines([" ".join(block)], limit - len(indent)))
            block.clear()

    for line in lines:
        if line.comment is None:
            flush()
            out.append(line)
        else:
            block.append(line.comment.value.lstrip("#").strip())
    flush()
    return out


def wrap_call(
    call: cst.Call, indent: str, unit: str, limit: int, shown: cst.Call | None = None
) -> cst.Call:
    """`f(a, b)` as `f(\\n    a, b\\n)`, or one argument per line with a trailing comma when
    the arguments do not fit on one line (black's layout). `shown` is the call as it will read
    (with edits inside applied), when that differs from `call`. A call whose arguments already
    span several lines is left as it is (its comments stay where they are)."""
    if not call.args or len(call.args) != len((shown or call).args):
        return call
    for arg in call.args:
        if isinstance(arg.comma, cst.Comma) and isinstance(
            arg.comma.whitespace_after, cst.ParenthesizedWhitespace
        ):
            return call
    if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        return call
    flat = ", ".join(
        _CODE(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for arg in (shown or call).args
    )
    last = len(call.args) - 1
    if len(indent) + len(unit) + len(flat) <= limit:
        args = [
            arg.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                if i < last
                else cst.MaybeSentinel.DEFAULT,
                whitespace_after_arg=line_break("") if i == last else arg.whitespace_after_arg,
            )
            for i, arg in enumerate(call.args)
        ]
    else:
        args = [
            arg.with_changes(
                comma=cst.Comma(whitespace_after=line_break(unit if i < last else "")),
                whitespace_after_arg=cst.SimpleWhitespace(""),
            )
            for i, arg in enumerate(call.args)
        ]
    return call.with_changes(whitespace_before_args=line_break(unit), args=args)


def substitute(node: cst.CSTNode, replacements: Mapping[int, Replacement]) -> cst.CSTNode:
    """`node` with the nodes under it replaced by identity (a preview of expression edits)."""

    class _Swap(cst.CSTTransformer):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            return id(visited) not in replacements

        def on_leave(  # type: ignore[override]
            self, original_node: cst.CSTNode, updated_node: cst.CSTNode
        ) -> Replacement:
            return replacements.get(id(original_node), updated_node)

    result = node.visit(_Swap())
    assert isinstance(result, cst.CSTNode)
    return result
