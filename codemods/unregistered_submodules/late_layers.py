"""Layers a model builds in a method the script calls after moving it (`model =
Net(...).to(device)`, then `model.build_layers()`): they are created on the CPU and stay there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import method, methods, self_attribute, self_name
from devfix.codemods.analysis.names import code_of, name_assignment
from devfix.types import Edit

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

_MOVES = ("to", "cuda")


@dataclass(frozen=True)
class LateBuild:
    """`model.<builder>()` after `model = Cls(...).<move>(...)`: what was found, and the fix
    (build first, then move: `model = Cls(...)`, `model.<builder>()`, `model = model.<move>`)."""

    model: str
    builder: str
    move: str
    move_line: int
    edits: tuple[Edit, ...]


class LateLayers(Analysis):
    """Builder calls that add layers to a model already moved to its device."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._builders: frozenset[str] | None = None

    def built_after_move(self, statement: cst.SimpleStatementLine) -> LateBuild | None:
        called = _method_called(statement)
        if called is None or called[1] not in self._builder_names():
            return None
        block = self.context.parent(statement)
        if not isinstance(block, (cst.Module, cst.IndentedBlock)):
            return None
        model, builder = called
        body = list(block.body)
        index = body.index(statement)
        for earlier in reversed(body[:index]):
            assign = _assignment_to(earlier, model)
            if assign is None:
                if model in self.scopes.names_bound(earlier):
                    return None  # rebound some other way in between
                continue
            moved = assign.value
            if not (
                isinstance(moved, cst.Call)
                and isinstance(moved.func, cst.Attribute)
                and moved.func.attr.value in _MOVES
                and isinstance(moved.func.value, cst.Call)
            ):
                return None
            built = moved.func.value
            classdef = self.facts.modules.local_module_class(self.names.qualified_name(built.func))
            function = method(classdef, builder) if classdef is not None else None
            if function is None or not self._adds_layers(function):
                return None
            move = code_of(moved)[len(code_of(built)) :]
            again = cst.parse_statement(f"{model} = {model}{move}\n")
            return LateBuild(
                model,
                builder,
                move,
                self.scopes.line_of(earlier),
                (
                    Edit(moved, built),
                    Edit(statement, cst.FlattenSentinel([statement, again])),
                ),
            )
        return None

    def _builder_names(self) -> frozenset[str]:
        """Methods of the file's module classes, other than `__init__`, that add layers: the
        only calls worth looking back from (most statements are `loss.backward()` and the
        like)."""
        if self._builders is None:
            self._builders = frozenset(
                function.name.value
                for classdef in self.scopes.module_classes().values()
                if self.facts.modules.class_info(classdef).is_module
                for function in methods(classdef)
                if function.name.value != "__init__" and self._adds_layers(function)
            )
        return self._builders

    def _adds_layers(self, function: cst.FunctionDef) -> bool:
        """The method assigns `self.<attr> = <module construction>` somewhere in its body."""
        self_var = self_name(function)
        if self_var is None:
            return False
        return any(
            isinstance(node, cst.Assign)
            and any(self_attribute(t.target, self_var) is not None for t in node.targets)
            and self.facts.modules.constructed_module(node.value) is not None
            for node in self.context.subtree(function.body)
        )


def _method_called(statement: cst.SimpleStatementLine) -> tuple[str, str] | None:
    """(`model`, `build_layers`) for `model.build_layers()` alone on its line."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Expr):
        return None
    call = statement.body[0].value
    if (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.attr.value not in _MOVES
    ):
        return call.func.value.value, call.func.attr.value
    return None


def _assignment_to(statement: cst.BaseStatement, name: str) -> cst.Assign | None:
    assign = name_assignment(statement)
    target = assign.targets[0].target if assign is not None else None
    return assign if isinstance(target, cst.Name) and target.value == name else None
