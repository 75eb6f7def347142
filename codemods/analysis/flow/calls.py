"""Call sites: where the file calls its own functions and methods, and the argument each call
passes for a parameter. Every other part of the script flow follows values through them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.moves import DeviceMove

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


class CallSites(Analysis):
    """The calls of the file's own functions, the argument bound to a parameter, and the nodes
    of a scope: what the script flow's parts build on."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._call_sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] | None = None

    def device_move(self, call: cst.Call, function: cst.FunctionDef | None) -> DeviceMove | None:
        """A move to a device known to be one (a literal, `.cuda()`, a device variable)."""
        move = self.facts.moves.move_of(call, function)
        return move if move is not None and move.kind is not None else None

    def _scope_nodes(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The nodes under `root` (not `root` itself) that belong to its scope."""
        nodes = self.scopes.nodes(root)
        next(nodes)
        return nodes

    def call_sites(
        self, function: cst.FunctionDef
    ) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
        """Calls `f(...)` of a module-level function, with the function each call is in."""
        if self._call_sites is None:
            sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] = {}
            functions = self.scopes.module_functions()
            for node in self.context.subtree(self.context.module):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Name)
                    and node.func.value in functions
                ):
                    sites.setdefault(node.func.value, []).append(
                        (node, self.scopes.enclosing_function(node))
                    )
            self._call_sites = sites
        if self.scopes.module_functions().get(function.name.value) is not function:
            return self._method_call_sites(function)
        return self._call_sites.get(function.name.value, [])

    def _method_call_sites(
        self, method: cst.FunctionDef
    ) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
        """Calls `self.m(...)` of a private method `m` (`_train`) from its own class: only the
        class calls it, so these are all its callers. [] for other functions."""
        owner = self.scopes.class_of(method)
        params = method.params.params
        if (
            owner is None
            or not method.name.value.startswith("_")
            or method.name.value.startswith("__")
            or not params
            or params[0].name.value != "self"
            or method.decorators
        ):
            return []
        sites: list[tuple[cst.Call, cst.FunctionDef | None]] = []
        for node in self.context.subtree(owner):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == method.name.value
                and is_name(node.func.value, "self")
            ):
                sites.append((node, self.scopes.enclosing_function(node)))
        return sites

    def callers_leaving_default(self, at: cst.CSTNode, name: str) -> list[cst.Call]:
        """The calls, in this file, of the function around `at` that leave its parameter
        `name` (whose default is `None`) unset: a module-level function's, or a method's
        called on `self`/`cls` in its class. [] when some call may set it through `*args` or
        `**kwargs`."""
        function = self.scopes.enclosing_function(at)
        if function is None:
            return []
        param = next(
            (
                p
                for p in (*function.params.params, *function.params.kwonly_params)
                if p.name.value == name
            ),
            None,
        )
        if param is None or not (param.default is not None and is_name(param.default, "None")):
            return []
        owner = self.scopes.class_of(function)
        if owner is None:
            calls = [call for call, _ in self.call_sites(function)]
        else:
            calls = [
                node
                for node in self.context.of_type(owner, cst.Call)
                if isinstance(node.func, cst.Attribute)
                and node.func.attr.value == function.name.value
                and (is_name(node.func.value, "self") or is_name(node.func.value, "cls"))
            ]
        if any(arg.star for call in calls for arg in call.args):
            return []
        return [call for call in calls if self.argument_for(call, function, name) is None]

    def argument_for(
        self, call: cst.Call, function: cst.FunctionDef, param: str
    ) -> cst.BaseExpression | None:
        """What `call` (a call of `function`) passes for `param`; None when it passes nothing
        for it or a star argument may."""
        if any(arg.star for arg in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return arg.value
        names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if (
            names
            and names[0] in ("self", "cls")
            and isinstance(call.func, cst.Attribute)
            and (is_name(call.func.value, "self") or is_name(call.func.value, "cls"))
        ):
            names = names[1:]  # `self.m(a)`, `cls.m(a)`: `a` fills the parameter after it
        if param not in names:
            return None
        index = names.index(param)
        positional = [arg for arg in call.args if arg.keyword is None]
        if index < len(positional):
            return positional[index].value
        return None


#: The methods that move a tensor or a module to a device.
MOVES = ("to", "cuda")


def is_move_call(value: cst.BaseExpression) -> bool:
    """`x.to(...)`, `x.cuda()`, also under `.eval()`/`.train()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in MOVES:
            return True
        value = value.func.value
    return False


def is_name(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def method_of(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None
