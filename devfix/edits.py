"""Applying findings: each finding's edit group replaces nodes of the parsed module, whole.

A group that overlaps one already taken is skipped (the next round of the fix loop finds it
again on the rewritten code). Imports the applied fixes need are added afterwards.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from typing import Union

import libcst as cst

from devfix.edit_plan import EditSet
from devfix.types import Finding, ImportSpec

#: A statement of a module's or a block's body.
Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


def apply_findings(
    module: cst.Module, findings: Iterable[Finding]
) -> tuple[cst.Module, list[Finding]]:
    """Apply each finding's edit group whole, skipping groups that conflict with one already
    taken (:mod:`devfix.edit_plan` says when groups conflict and how reused nodes compose).

    Skipped groups are found again, on the rewritten code, by the next round.
    """
    edit_set = EditSet(module)
    applied = [finding for finding in findings if edit_set.add(finding.edits)]
    if not applied:
        return module, []
    rewritten = edit_set.apply()
    imports = [spec for finding in applied for spec in finding.imports]
    if imports:
        rewritten = add_imports(rewritten, imports)
    return rewritten, applied


# -- imports a fix needs, placed as isort/ruff would place them -------------------------------


def add_imports(module: cst.Module, specs: Iterable[ImportSpec]) -> cst.Module:
    """`module` with the imports of `specs` it lacks, each in its section's block of the
    leading imports (standard library, then third party; sorted as isort sorts, `import x`
    before `from x import y`), or merged into an existing `from` import of the same module."""
    body = list(module.body)
    start = _after_docstring_and_future(body)
    end = start
    while end < len(body) and _is_import_line(body[end]):
        end += 1
    for spec in _unique(specs):
        if _imported(body, spec):
            continue
        merged = _merge_into_from_import(body, start, end, spec)
        if merged is not None:
            body[merged[0]] = merged[1]
            continue
        line = _import_line(spec)
        position, new_group = _position(body, start, end, spec)
        if position == end == start or new_group:
            # A block or group of its own: a blank line separates it from what follows, and
            # at the block's start it takes over the lines above the block.
            if position < len(body):
                following = body[position]
                if position == start:
                    line = line.with_changes(leading_lines=following.leading_lines)
                    following = following.with_changes(leading_lines=())
                body[position] = _with_blank_line(following)
            if position > start:
                line = line.with_changes(leading_lines=(cst.EmptyLine(),))
        elif position == start and position < len(body):
            # It becomes the group's first line: it takes over the group's leading lines.
            first = body[position]
            line = line.with_changes(leading_lines=first.leading_lines)
            body[position] = first.with_changes(leading_lines=())
        body.insert(position, line)
        end += 1
    if end < len(body) and end > start:
        after = body[end]
        wanted = 2 if isinstance(after, (cst.FunctionDef, cst.ClassDef)) else 1
        if not any(not line.comment for line in after.leading_lines[:wanted]):
            blank = (cst.EmptyLine(),) * wanted
            body[end] = after.with_changes(leading_lines=(*blank, *after.leading_lines))
    return module.with_changes(body=body)


def _unique(specs: Iterable[ImportSpec]) -> list[ImportSpec]:
    seen: list[ImportSpec] = []
    for spec in specs:
        if spec not in seen:
            seen.append(spec)
    return seen


def _after_docstring_and_future(body: list[Statement]) -> int:
    index = 0
    if body and isinstance(body[0], cst.SimpleStatementLine):
        first = body[0].body[0] if body[0].body else None
        if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString):
            index = 1
    while index < len(body) and _section(body[index]) == 0:
        index += 1
    return index


def _is_import_line(statement: Statement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and bool(statement.body)
        and all(isinstance(part, (cst.Import, cst.ImportFrom)) for part in statement.body)
    )


def _dotted(node: cst.BaseExpression | None) -> str:
    return "" if node is None else cst.Module(body=[]).code_for_node(node)


def _module_of(statement: Statement) -> str | None:
    if not _is_import_line(statement):
        return None
    assert isinstance(statement, cst.SimpleStatementLine)
    part = statement.body[0]
    if isinstance(part, cst.Import):
        return _dotted(part.names[0].name)
    assert isinstance(part, cst.ImportFrom)
    return "." * len(part.relative) + _dotted(part.module)


def _section_of_name(module: str) -> int:
    """0 `__future__`, 1 the standard library, 2 the rest (third party), 3 relative."""
    top = module.split(".")[0]
    if module.startswith("."):
        return 3
    if top == "__future__":
        return 0
    return 1 if top in _STDLIB else 2


def _section(statement: Statement) -> int | None:
    module = _module_of(statement)
    return None if module is None else _section_of_name(module)


def _sort_key(statement: Statement) -> tuple[int, str]:
    assert isinstance(statement, cst.SimpleStatementLine)
    part = statement.body[0]
    module = _module_of(statement) or ""
    return (0 if isinstance(part, cst.Import) else 1, module.lower())


def _spec_key(spec: ImportSpec) -> tuple[int, str]:
    return (0 if spec.name is None else 1, spec.module.lower())


def _position(body: list[Statement], start: int, end: int, spec: ImportSpec) -> tuple[int, bool]:
    """Where the import goes in the leading block `body[start:end]`, and whether it starts a
    group of its own (no import of its section there yet)."""
    section = _section_of_name(spec.module)
    groups: list[tuple[int, int]] = []
    for index in range(start, end):
        if index == start or body[index].leading_lines:
            groups.append((index, index + 1))
        else:
            groups[-1] = (groups[-1][0], index + 1)
    for first, last in groups:
        sections = {_section(body[index]) for index in range(first, last)}
        if sections == {section}:
            for index in range(first, last):
                if _sort_key(body[index]) > _spec_key(spec):
                    return index, False
            return last, False
    for first, _ in groups:
        if min(_section(body[index]) or 0 for index in range(first, _)) > section:
            return first, True
    return end, bool(groups)


def _imported(body: list[Statement], spec: ImportSpec) -> bool:
    for statement in body:
        if not _is_import_line(statement):
            continue
        assert isinstance(statement, cst.SimpleStatementLine)
        for part in statement.body:
            if isinstance(part, cst.Import) and spec.name is None:
                for alias in part.names:
                    bound = alias.asname.name if alias.asname else None
                    if _dotted(alias.name) == spec.module and _dotted(bound) == (spec.alias or ""):
                        return True
            if isinstance(part, cst.ImportFrom) and spec.name is not None:
                if _dotted(part.module) != spec.module or isinstance(part.names, cst.ImportStar):
                    continue
                for alias in part.names:
                    bound = alias.asname.name if alias.asname else None
                    if _dotted(alias.name) == spec.name and _dotted(bound) == (spec.alias or ""):
                        return True
    return False


def _merge_into_from_import(
    body: list[Statement], start: int, end: int, spec: ImportSpec
) -> tuple[int, Statement] | None:
    if spec.name is None:
        return None
    for index in range(start, end):
        statement = body[index]
        assert isinstance(statement, cst.SimpleStatementLine)
        part = statement.body[0]
        if (
            len(statement.body) != 1
            or not isinstance(part, cst.ImportFrom)
            or part.relative
            or _dotted(part.module) != spec.module
            or isinstance(part.names, cst.ImportStar)
            or part.lpar is not None
        ):
            continue
        names = list(part.names)
        alias = cst.ImportAlias(
            name=cst.Name(spec.name),
            asname=cst.AsName(name=cst.Name(spec.alias)) if spec.alias else None,
        )
        keys = [_member_key(_dotted(name.name)) for name in names]
        where = next((i for i, key in enumerate(keys) if key > _member_key(spec.name)), len(names))
        names.insert(where, alias)
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        names = [name.with_changes(comma=comma) for name in names[:-1]] + [
            names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        ]
        return index, statement.with_changes(body=[part.with_changes(names=names)])
    return None


def _member_key(name: str) -> tuple[int, str]:
    """isort's `order-by-type`: CONSTANTS, then Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _import_line(spec: ImportSpec) -> cst.SimpleStatementLine:
    if spec.name is None:
        text = f"import {spec.module}" + (f" as {spec.alias}" if spec.alias else "")
    else:
        text = f"from {spec.module} import {spec.name}" + (
            f" as {spec.alias}" if spec.alias else ""
        )
    statement = cst.parse_statement(text + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def _with_blank_line(statement: Statement) -> Statement:
    if statement.leading_lines:
        return statement
    return statement.with_changes(leading_lines=(cst.EmptyLine(),))


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(
    ("os", "sys", "math", "json", "re", "argparse", "logging", "time", "random", "pathlib")
)


# -- imports the fixes left unused ------------------------------------------------------------


def drop_imports_made_unused(before: cst.Module, after: cst.Module) -> cst.Module:
    """`after` without the top-level imports whose names `before` used and `after` no longer
    does (a fix replaced the last `np.mean`, a conversion the last use of an alias)."""
    used_before, used_after = _used_names(before), _used_names(after)
    body: list[Statement] = []
    changed = False
    for statement in after.body:
        if not _is_import_line(statement):
            body.append(statement)
            continue
        assert isinstance(statement, cst.SimpleStatementLine)
        parts: list[cst.BaseSmallStatement] = []
        for part in statement.body:
            assert isinstance(part, (cst.Import, cst.ImportFrom))
            if isinstance(part.names, cst.ImportStar):
                parts.append(part)
                continue
            kept = [
                alias
                for alias in part.names
                if not (used_before[_bound(alias)] and not used_after[_bound(alias)])
            ]
            if len(kept) == len(part.names):
                parts.append(part)
                continue
            changed = True
            if kept:
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                parts.append(part.with_changes(names=kept))
        commented = statement.trailing_whitespace.comment is not None or any(
            line.comment is not None for line in statement.leading_lines
        )
        if parts:
            body.append(statement.with_changes(body=parts))
        elif commented:
            body.append(statement)  # the user's comment stays, and so does the import
    return after.with_changes(body=body) if changed else after


def _bound(alias: cst.ImportAlias) -> str:
    if alias.asname is not None:
        return _dotted(alias.asname.name)  # type: ignore[arg-type,unused-ignore]
    return _dotted(alias.name).split(".")[0]


class _NameCounter(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.counts[node.value] = self.counts.get(node.value, 0) + 1


def _used_names(module: cst.Module) -> Counter[str]:
    counter = _NameCounter()
    module.visit(counter)
    return Counter(counter.counts)
