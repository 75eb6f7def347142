"""DF401's change set: what the planners decide, per statement, turned into engine edits.

Planners say what happens to a statement (statements before or after it, a replacement, its
removal, a rank-0 gate), what goes at the start or end of a block, which expressions change,
and whether a flat script's statements move under `if __name__ == "__main__":`. :meth:`Plan.edits`
turns that into one edit per changed statement (plus the expression edits). Every statement that
stays is reused as it is, so the edits inside it (DF401's own and other passes') still apply:
see :mod:`devfix.edit_plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

from devfix.codemods.analysis.names import is_docstring
from devfix.codemods.data_parallel import layout
from devfix.context import FileContext
from devfix.types import Edit, ImportSpec

Block = Union[cst.Module, cst.IndentedBlock]

#: A new or reused statement and the original statements it stands for (by identity).
Item = tuple[cst.BaseStatement, list[cst.BaseStatement]]


@dataclass
class StatementChange:
    before: list[cst.BaseStatement] = field(default_factory=list)
    after: list[cst.BaseStatement] = field(default_factory=list)
    replace: list[cst.BaseStatement] | None = None
    remove: bool = False
    #: Put the statement under `if <gate>:` (consecutive statements with one gate share it).
    gate: str | None = None
    #: A blank line between the statements inserted before it and the statement.
    space_before: bool = False
    #: A comment (without `# `) right above the statement.
    note: str | None = None


def parse_statements(code: str) -> list[cst.BaseStatement]:
    """Statements of `code`; comment lines above the first one stay attached to it."""
    module = cst.parse_module(code)
    body: list[cst.BaseStatement] = list(module.body)
    if body and module.header:
        body[0] = with_leading(body[0], module.header)
    return body


class Plan:
    """The conversion of one script, collected from the planners."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.module = context.module
        self.changes: dict[int, StatementChange] = {}
        self._statements: dict[int, cst.BaseStatement] = {}
        self.expressions: dict[int, Edit] = {}
        self.block_start: dict[int, list[cst.BaseStatement]] = {}
        self.block_end: dict[int, list[cst.BaseStatement]] = {}
        self._blocks: dict[int, cst.IndentedBlock] = {}
        #: Blocks whose new first statements are followed by a blank line.
        self.spaced: set[int] = set()
        #: A flat script: the module statement from which the rest moves under a main block.
        self.main_from: cst.BaseStatement | None = None
        self.main_start: list[cst.BaseStatement] = []
        self.main_end: list[cst.BaseStatement] = []
        #: Comment lines (without `# `) above the file's first statement.
        self.file_comment: list[str] = []
        #: Names the conversion needs imported (`dist`, `DistributedSampler`, ...).
        self.needed: list[str] = []
        #: ... and the imports of those the file lacks (the engine places them).
        self.imports: list[ImportSpec] = []

    # -- what planners call ----------------------------------------------------------------

    def statement(self, node: cst.BaseStatement) -> StatementChange:
        self._statements[id(node)] = node
        return self.changes.setdefault(id(node), StatementChange())

    def change_of(self, node: cst.BaseStatement) -> StatementChange | None:
        return self.changes.get(id(node))

    def replace(self, node: cst.CSTNode, replacement: cst.CSTNode) -> None:
        """An expression-level edit (the node keeps its place in its statement)."""
        self.expressions[id(node)] = Edit(node, replacement)

    def replacement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        edit = self.expressions.get(id(node))
        return (
            None
            if edit is None or not isinstance(edit.replacement, cst.CSTNode)
            else (edit.replacement)
        )

    def prepend(
        self, block: cst.IndentedBlock | None, statements: Sequence[cst.BaseStatement]
    ) -> None:
        """Statements at the start of `block` (None: the new main block), after a docstring."""
        self._at_edge(block, statements, self.main_start, self.block_start)

    def append(
        self, block: cst.IndentedBlock | None, statements: Sequence[cst.BaseStatement]
    ) -> None:
        """Statements at the end of `block` (None: the new main block), before a last `return`."""
        self._at_edge(block, statements, self.main_end, self.block_end)

    def _at_edge(
        self,
        block: cst.IndentedBlock | None,
        statements: Sequence[cst.BaseStatement],
        main: list[cst.BaseStatement],
        blocks: dict[int, list[cst.BaseStatement]],
    ) -> None:
        if block is None:
            main.extend(statements)
        else:
            self._blocks[id(block)] = block
            blocks.setdefault(id(block), []).extend(statements)

    def need(self, name: str) -> None:
        if name not in self.needed:
            self.needed.append(name)

    def new_code(self, inside: Callable[[cst.CSTNode], bool], *, main_block: bool) -> str:
        """The code the plan adds where `inside` holds (and in the new main block if
        `main_block`): statements before, after, instead of or at the edges of statements and
        blocks there, the gates put around statements there, and the expression replacements
        there."""
        new: list[cst.CSTNode] = []
        gates: list[str] = []
        for key, change in self.changes.items():
            if inside(self._statements[key]):
                new += [*change.before, *change.after, *(change.replace or [])]
                gates += [change.gate] if change.gate is not None else []
        for edges in (self.block_start, self.block_end):
            for key, statements in edges.items():
                if inside(self._blocks[key]):
                    new += statements
        if main_block:
            new += [*self.main_start, *self.main_end]
        for edit in self.expressions.values():
            if isinstance(edit.replacement, cst.CSTNode) and inside(edit.target):
                new.append(edit.replacement)
        return "\n".join([*gates, *(self.module.code_for_node(node) for node in new)])

    # -- the edits -------------------------------------------------------------------------

    def edits(self) -> list[Edit]:
        """One edit per changed statement of every touched block, and the expression edits."""
        self.limit = layout.line_limit(self.context.text)
        self.unit = self.module.default_indent
        blocks: dict[int, Block] = dict(self._blocks)
        for key, statement in self._statements.items():
            if key in self.changes:
                parent = self.context.parent(statement)
                if isinstance(parent, (cst.Module, cst.IndentedBlock)):
                    blocks[id(parent)] = parent
        if self.main_from is not None or self.file_comment:
            blocks[id(self.module)] = self.module
        edits: list[Edit] = []
        for block in blocks.values():
            edits += self._block_edits(block)
        edits += self._fitted_expressions()
        return edits

    def _indent(self, block: Block) -> str:
        """The indentation of `block`'s statements in the original file."""
        parts: list[str] = []
        node: cst.CSTNode | None = block
        while node is not None:
            if isinstance(node, cst.IndentedBlock):
                parts.append(node.indent if node.indent is not None else self.unit)
            node = self.context.parent(node)
        return "".join(reversed(parts))

    def _block_edits(self, block: Block) -> list[Edit]:
        originals = list(block.body)
        indent = self._indent(block)
        if isinstance(block, cst.Module) and self.main_from is not None:
            start = next(i for i, s in enumerate(originals) if s is self.main_from)
            head = self._items(originals[:start], indent)
            tail = self._items(originals[start:], indent + self.unit)
            tail = [(_reindented(node), carried) for node, carried in tail]
            moved = _leading(originals[start])
            lines = list(_leading(tail[0][0])[: len(moved)]) if tail else []
            if tail:
                first, carried = tail[0]
                tail[0] = (_with_exact_leading(first, _leading(first)[len(moved) :]), carried)
            tail = self._edges(-1, tail, indent + self.unit)
            guard = cst.If(
                test=cst.parse_expression('__name__ == "__main__"'),
                body=cst.IndentedBlock(body=[node for node, _ in tail] or [_pass()]),
                leading_lines=lines,
            )
            items: list[Item] = [*head, (guard, [c for _, carried in tail for c in carried])]
        else:
            items = self._edges(id(block), self._items(originals, indent), indent)
        if isinstance(block, cst.Module) and self.file_comment and items:
            width = (self.limit or 10_000) - 2
            lines = layout.comment_lines(self.file_comment, width)
            first, carried = items[0]
            items[0] = (with_leading(first, lines), carried)
        if not items:
            items = [(_pass(), [])]
        return chunk_edits(originals, items)

    def _items(self, originals: Sequence[cst.BaseStatement], indent: str) -> list[Item]:
        out: list[Item] = []
        group: list[Item] = []
        group_gate: str | None = None
        carried_lines: list[cst.EmptyLine] = []

        def flush() -> None:
            nonlocal group, group_gate
            if group and group_gate is not None:
                gate = gated(group_gate, [node for node, _ in group])
                out.append((gate, [c for _, carried in group for c in carried]))
            group, group_gate = [], None

        def emit(items: list[Item], gate: str | None) -> None:
            nonlocal carried_lines, group_gate
            if not items:
                return
            if carried_lines:
                node, carried = items[0]
                items = [(with_leading(node, carried_lines), carried), *items[1:]]
                carried_lines = []
            if gate is None:
                flush()
                out.extend(items)
            else:
                if group_gate != gate:
                    flush()
                    group_gate = gate
                group.extend(items)

        for statement in originals:
            change = self.changes.get(id(statement))
            if change is None:
                emit([(statement, [statement])], None)
                continue
            main: list[Item]
            if change.remove or change.replace == []:
                # What goes in its place (statements inserted around it) takes its comments.
                if not change.before and not change.after:
                    carried_lines.extend(_leading(statement))
                    continue
                inserted = [*change.before, *change.after]
                emit([(self._fit(inserted[0], indent), [])], None)
                carried_lines.extend(_leading(statement))
                emit([(self._fit(node, indent), []) for node in inserted[1:]], None)
                continue
            if change.replace is not None:
                inner = indent + self.unit if change.gate is not None else indent
                main = [(self._fit(node, inner), []) for node in change.replace]
                first = main[0][0]
                if first is not statement:
                    first = with_leading(first, _leading(statement))
                main[0] = (first, [statement])
            else:
                main = [(statement, [statement])]
            if change.before:
                node, carried = main[0]
                lines = _leading(node)
                main[0] = (_with_exact_leading(node, ()), carried)
                before: list[Item] = [(self._fit(node, indent), []) for node in change.before]
                before[0] = (with_leading(before[0][0], lines), [])
                emit(before, None)
                if change.space_before:
                    node, carried = main[0]
                    main[0] = (with_leading(node, [cst.EmptyLine(indent=False)]), carried)
            if change.note is not None:
                node, carried = main[0]
                note = layout.comment_lines([change.note], (self.limit or 10_000) - len(indent))
                main[0] = (_with_exact_leading(node, [*_leading(node), *note]), carried)
            emit(main, change.gate)
            emit([(self._fit(node, indent), []) for node in change.after], None)
        flush()
        return out

    def _edges(self, key: int, items: list[Item], indent: str) -> list[Item]:
        start = self.main_start if key == -1 else self.block_start.get(key, [])
        end = self.main_end if key == -1 else self.block_end.get(key, [])
        if start:
            # A docstring stays first.
            first = 0
            if items and is_docstring(items[0][0]):
                first = 1
            rest = items[first:]
            first_lines = _leading(rest[0][0]) if rest else ()
            if (
                rest
                and (key == -1 or key in self.spaced)
                and (not first_lines or first_lines[0].comment is not None)
            ):
                node, carried = rest[0]
                rest = [(with_leading(node, [cst.EmptyLine(indent=False)]), carried), *rest[1:]]
            new: list[Item] = [(self._fit(node, indent), []) for node in start]
            items = [*items[:first], *new, *rest]
        if end:
            new = [(self._fit(node, indent), []) for node in end]
            if items and _is_return(items[-1][0]):
                items = [*items[:-1], *new, items[-1]]
            else:
                items = [*items, *new]
        return items

    # -- line length -----------------------------------------------------------------------

    def _fit(self, node: cst.BaseStatement, indent: str) -> cst.BaseStatement:
        """A statement the conversion wrote, within the file's line length."""
        if self.limit is None:
            return node
        return layout.fit_statement(node, indent, self.unit, self.limit, self._is_original)

    def _is_original(self, node: cst.CSTNode) -> bool:
        try:
            self.context.order(node)
        except KeyError:
            return False
        return True

    def _fitted_expressions(self) -> list[Edit]:
        """The expression edits; a statement they make too long gets its call wrapped."""
        edits = dict(self.expressions)
        if self.limit is None:
            return list(edits.values())
        shown = {key: edit.replacement for key, edit in edits.items()}
        statements: dict[int, cst.SimpleStatementLine] = {}
        for edit in self.expressions.values():
            for ancestor in self.context.ancestors(edit.target):
                if isinstance(ancestor, cst.SimpleStatementLine):
                    statements[id(ancestor)] = ancestor
                    break
        for statement in statements.values():
            indent = self._final_indent(statement)
            preview = layout.substitute(statement.with_changes(leading_lines=[]), shown)
            small = statement.body[0] if len(statement.body) == 1 else None
            call = getattr(small, "value", None)
            if not isinstance(call, cst.Call) or not layout.too_long(preview, indent, self.limit):
                continue
            current = edits.get(id(call))
            visible = layout.substitute(call, shown)
            assert isinstance(visible, cst.Call)
            if current is None:
                wrapped = layout.wrap_call(call, indent, self.unit, self.limit, visible)
            elif isinstance(current.replacement, cst.Call):
                wrapped = layout.wrap_call(
                    current.replacement, indent, self.unit, self.limit, visible
                )
            else:
                continue
            edits[id(call)] = Edit(call, wrapped)
        return list(edits.values())

    def _final_indent(self, statement: cst.BaseStatement) -> str:
        """The indentation `statement` will have: its block's, plus a main block and a gate."""
        parent = self.context.parent(statement)
        indent = self._indent(parent) if isinstance(parent, (cst.Module, cst.IndentedBlock)) else ""
        if self.main_from is not None:
            top: cst.CSTNode = statement
            for ancestor in self.context.ancestors(statement):
                if ancestor is self.module:
                    break
                top = ancestor
            body: list[cst.CSTNode] = list(self.module.body)
            if any(s is top for s in body) and body.index(top) >= body.index(self.main_from):
                indent += self.unit
        change = self.changes.get(id(statement))
        if change is not None and change.gate is not None:
            indent += self.unit
        return indent


def chunk_edits(originals: Sequence[cst.BaseStatement], items: Sequence[Item]) -> list[Edit]:
    """Edits that turn the statements `originals` of a block into `items`: each item lands in
    the chunk of an original statement it stands for (in order), new items join the next
    chunk, and an original statement that anchors no chunk is removed (or moved: an item may
    reuse it)."""
    index = {id(statement): i for i, statement in enumerate(originals)}
    chunks: list[tuple[int, list[cst.BaseStatement]]] = []
    pending: list[cst.BaseStatement] = []
    last = -1
    for node, carried in items:
        candidates = sorted(index[id(c)] for c in carried if id(c) in index)
        candidates = [i for i in candidates if i > last]
        if not candidates:
            if carried and chunks:
                chunks[-1][1].extend([*pending, node])
                pending = []
            else:
                pending.append(node)
            continue
        last = candidates[0]
        chunks.append((last, [*pending, node]))
        pending = []
    if pending:
        if chunks:
            chunks[-1][1].extend(pending)
        else:
            chunks.append((0, pending))
    edits: list[Edit] = []
    anchors = set()
    for anchor, nodes in chunks:
        anchors.add(anchor)
        original = originals[anchor]
        if len(nodes) == 1 and nodes[0] is original:
            continue
        edits.append(Edit(original, nodes[0] if len(nodes) == 1 else cst.FlattenSentinel(nodes)))
    edits += [
        Edit(original, cst.RemovalSentinel.REMOVE)
        for i, original in enumerate(originals)
        if i not in anchors
    ]
    return edits


# -- statement helpers ---------------------------------------------------------------------


def _leading(statement: cst.CSTNode) -> Sequence[cst.EmptyLine]:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return statement.leading_lines
    return ()


def _with_exact_leading(
    statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]
) -> cst.BaseStatement:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if list(statement.leading_lines) == list(lines):
            return statement
        return statement.with_changes(leading_lines=list(lines))
    return statement


def with_leading(statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    """`statement` with `lines` above its own comments and blank lines."""
    if not lines:
        return statement
    return _with_exact_leading(statement, [*lines, *_leading(statement)])


def _reindented(statement: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines of a statement that moves into a block carry no indentation."""
    lines = _leading(statement)
    if not any(line.indent and line.comment is None for line in lines):
        return statement
    fixed = [line.with_changes(indent=False) if line.comment is None else line for line in lines]
    return _with_exact_leading(statement, fixed)


def gated(condition: str, body: Sequence[cst.BaseStatement]) -> cst.If:
    """`if condition:` around `body`; the first statement's comments go above the `if`."""
    first_lines = _leading(body[0])
    inner = [_with_exact_leading(body[0], ()), *body[1:]]
    return cst.If(
        test=cst.parse_expression(condition),
        body=cst.IndentedBlock(body=inner),
        leading_lines=first_lines,
    )


def _pass() -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([cst.Pass()])


def _is_return(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Return) for small in statement.body
    )
