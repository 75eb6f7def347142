"""DF401's statement-level rewriter: a plan of edits keyed by node identity, applied in one pass.

The analysis in `data_parallel.py` decides *what* changes; this module only knows how to splice
statements into blocks (before / after / instead of a statement, at the start or end of a body),
how to put consecutive statements under one `if <condition>:` and how to move the tail of a
module under `if __name__ == "__main__":`. Comments attached to a statement move with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

#: The key of the synthetic `if __name__ == "__main__":` block in `block_prepend`/`block_append`.
MAIN_BLOCK = 0


@dataclass
class StatementPlan:
    before: list[cst.BaseStatement] = field(default_factory=list)
    after: list[cst.BaseStatement] = field(default_factory=list)
    replace: list[cst.BaseStatement] | None = None
    remove: bool = False
    #: Put the statement under `if <gate>:` (consecutive statements with one gate share it).
    gate: str | None = None


@dataclass
class RewritePlan:
    statements: dict[int, StatementPlan] = field(default_factory=dict)
    expressions: dict[int, cst.BaseExpression] = field(default_factory=dict)
    block_prepend: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    block_append: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    #: Index in the module body from which statements move under a new `__main__` guard.
    main_from: int | None = None
    #: Blocks whose prepended statements are followed by a blank line.
    spaced: set[int] = field(default_factory=set)
    header_comment: str | None = None
    #: `DataParallel(model, ...)` calls replaced by their (rewritten) model argument.
    unwrap_calls: set[int] = field(default_factory=set)

    def statement(self, node: cst.CSTNode) -> StatementPlan:
        return self.statements.setdefault(id(node), StatementPlan())


def parse_statements(code: str) -> list[cst.BaseStatement]:
    """Statements of `code`; comment lines above the first one stay attached to it."""
    module = cst.parse_module(code)
    body: list[cst.BaseStatement] = list(module.body)
    if body and module.header:
        body[0] = _with_leading(body[0], module.header)
    return body


def _with_leading(
    statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]
) -> cst.BaseStatement:
    if not lines:
        return statement
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return statement.with_changes(leading_lines=[*lines, *statement.leading_lines])
    return statement


def _leading(statement: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return statement.leading_lines
    return ()


def _without_leading(statement: cst.BaseStatement) -> cst.BaseStatement:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return statement.with_changes(leading_lines=[])
    return statement


def _reindented(statement: cst.BaseStatement) -> cst.BaseStatement:
    """Blank lines of a statement that moves into a block carry no indentation."""
    lines = _leading(statement)
    if not lines:
        return statement
    fixed = [line.with_changes(indent=False) if line.comment is None else line for line in lines]
    return _with_leading(_without_leading(statement), fixed)


def gated(condition: str, body: list[cst.BaseStatement]) -> cst.If:
    """`if condition:` around `body`; the first statement's comments go above the `if`."""
    first_lines = _leading(body[0])
    inner = [_without_leading(body[0]), *body[1:]]
    return cst.If(
        test=cst.parse_expression(condition),
        body=cst.IndentedBlock(body=inner),
        leading_lines=first_lines,
    )


def _is_return(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Return) for small in statement.body
    )


def _expression(plan: RewritePlan, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
    if id(original) in plan.unwrap_calls and isinstance(updated, cst.Call):
        for arg in updated.args:
            if arg.keyword is None or arg.keyword.value == "module":
                return arg.value
    return plan.expressions.get(id(original), updated)


class _Expressions(cst.CSTTransformer):
    def __init__(self, plan: RewritePlan) -> None:
        super().__init__()
        self.plan = plan

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode:
        return _expression(self.plan, original_node, updated_node)


class Rewriter(cst.CSTTransformer):
    def __init__(self, plan: RewritePlan) -> None:
        super().__init__()
        self.plan = plan

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode:
        replacement = _expression(self.plan, original_node, updated_node)
        if replacement is not updated_node:
            return replacement
        if isinstance(original_node, cst.IndentedBlock) and isinstance(
            updated_node, cst.IndentedBlock
        ):
            body = self._body(original_node.body, updated_node.body)
            body = self._edges(id(original_node), body)
            return updated_node.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])
        if isinstance(original_node, cst.Module) and isinstance(updated_node, cst.Module):
            return self._module(original_node, updated_node)
        return updated_node

    def _edges(self, key: int, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        prepend = self.plan.block_prepend.get(key, [])
        append = self.plan.block_append.get(key, [])
        if prepend:
            # A docstring stays first.
            start = 0
            if body and isinstance(body[0], cst.SimpleStatementLine):
                first = body[0].body[0] if body[0].body else None
                if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString):
                    start = 1
            rest = body[start:]
            first_lines = _leading(rest[0]) if rest else ()
            if (
                rest
                and key in self.plan.spaced
                and (not first_lines or first_lines[0].comment is not None)
            ):
                rest = [_with_leading(rest[0], [cst.EmptyLine(indent=False)]), *rest[1:]]
            body = [*body[:start], *prepend, *rest]
        if append:
            if body and _is_return(body[-1]):
                body = [*body[:-1], *append, body[-1]]
            else:
                body = [*body, *append]
        return body

    def _body(
        self, originals: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        group: list[cst.BaseStatement] = []
        group_gate: str | None = None
        carried: list[cst.EmptyLine] = []

        def flush() -> None:
            nonlocal group, group_gate
            if group and group_gate is not None:
                out.append(gated(group_gate, group))
            group, group_gate = [], None

        def emit(statements: list[cst.BaseStatement], gate: str | None) -> None:
            nonlocal carried, group_gate
            if not statements:
                return
            if carried:
                statements = [_with_leading(statements[0], carried), *statements[1:]]
                carried = []
            if gate is None:
                flush()
                out.extend(statements)
            else:
                if group_gate != gate:
                    flush()
                    group_gate = gate
                group.extend(statements)

        for original, new in zip(originals, updated):
            plan = self.plan.statements.get(id(original))
            if plan is None:
                emit([new], None)
                continue
            if plan.remove:
                carried.extend(_leading(new))
                continue
            body = self._planned(plan.replace) if plan.replace is not None else [new]
            if plan.replace is not None and body:
                body[0] = _with_leading(body[0], _leading(new))
            if plan.before:
                lines = _leading(body[0])
                body[0] = _without_leading(body[0])
                before = self._planned(plan.before)
                emit([_with_leading(before[0], lines), *before[1:]], None)
            emit(body, plan.gate)
            emit(self._planned(plan.after), None)
        flush()
        if carried and out:
            pass  # comments of a removed last statement are dropped with it
        return out

    def _planned(self, statements: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """Statements spliced in whole still get the planned expression rewrites."""
        out: list[cst.BaseStatement] = []
        for statement in statements:
            result = statement.visit(_Expressions(self.plan))
            assert isinstance(result, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            out.append(result)
        return out

    def _module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        start = self.plan.main_from
        if start is None:
            body = self._body(original.body, updated.body)
        else:
            head = self._body(original.body[:start], updated.body[:start])
            tail = [_reindented(s) for s in self._body(original.body[start:], updated.body[start:])]
            # The blank lines and comments above the first moved statement go above the guard.
            count = len(_leading(updated.body[start])) if start < len(updated.body) else 0
            lines = list(_leading(tail[0])[:count]) if tail else []
            if tail:
                tail[0] = _with_leading(_without_leading(tail[0]), _leading(tail[0])[count:])
            tail = self._edges(MAIN_BLOCK, tail)
            guard = cst.If(
                test=cst.parse_expression('__name__ == "__main__"'),
                body=cst.IndentedBlock(body=tail or [cst.SimpleStatementLine([cst.Pass()])]),
                leading_lines=lines,
            )
            body = [*head, guard]
        module = updated.with_changes(body=body)
        if self.plan.header_comment is not None:
            comment = cst.EmptyLine(comment=cst.Comment(self.plan.header_comment))
            module = module.with_changes(header=[*module.header, comment])
        return module
