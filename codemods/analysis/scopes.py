"""Bindings and scopes for the analysis layer: the scope walker, the names a node binds or
reads, and per-scope binding tables (which names a function, class or the module binds, how,
and where).

The rules themselves (which nodes open a scope, which names a node binds) are the engine's
(:mod:`devfix.scopes`); this module asks them in the coarse view, the question a pass asks
being which function's code a node is: a comprehension is part of the function it stands in,
and a definition is one piece with its header (the walker yields a nested `def` or class but
does not enter it; the decorators and defaults of `train` are `train`'s).

Source order is the pre-order index of the file's node list (no position metadata needed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from devfix.codemods.analysis.names import dotted_name, is_constant, is_main_guard
from devfix.context import FileContext
from devfix.scopes import ASSIGNING_NODES as ASSIGNING_NODES
from devfix.scopes import DEFINITION_NODES, ScopeRules, declared_names, import_bindings
from devfix.scopes import all_params as all_params
from devfix.scopes import bound_by as bound_by
from devfix.tree import target_names as target_names  # the analysis layer's name for it

#: Nodes that open a scope in the coarse view: the scope walker does not descend into them.
SCOPE_NODES = DEFINITION_NODES
#: The same as a set of classes: `type(node) in` it is far cheaper than isinstance on libcst's
#: ABCs, and these classes have no subclasses.
_SCOPE_CLASSES = frozenset(SCOPE_NODES)
#: Nodes below statement level that :meth:`Scopes.binds` asks about (besides definitions).
_STATEMENT_BINDERS = (
    cst.AssignTarget,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.AsName,
    cst.NamedExpr,
    cst.Import,
    cst.ImportFrom,
)
#: What :meth:`Scopes.table` records: bindings and statement-level moves.
_FILLED = (
    cst.Assign,
    cst.Expr,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.WithItem,
    cst.Import,
    cst.ImportFrom,
    cst.FunctionDef,
    cst.ClassDef,
)
#: The nodes :meth:`Scopes.names_bound` asks :func:`bound_by` about: assignments, definitions
#: and imports (parameters and `match` captures are not among them).
_BINDING_NODES = (cst.FunctionDef, cst.ClassDef, cst.ImportAlias, *ASSIGNING_NODES)
#: Moves that rebind nothing but change where a tensor or module lives (recorded per scope).
_MOVES = ("to", "cuda")

Body = Sequence[cst.BaseStatement]
_N = TypeVar("_N", bound=cst.CSTNode)


@dataclass
class Binding:
    """One binding of a name in a scope."""

    #: "assign" (`name = value`), "unpack" (`a, name = value`), "param", "update" (`name +=
    #: value`), or "other" (a loop target, `with ... as`, an import, a def).
    kind: str
    value: cst.BaseExpression | None
    #: Pre-order index of the binding statement (source order).
    position: int
    #: For a parameter: its index in the signature.
    index: int = 0


@dataclass
class ScopeTable:
    """What one scope binds. For a class: the `self.<attr>` its methods assign."""

    node: cst.CSTNode
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    #: `name.to(device)` / `name.cuda()` as statements: dotted name -> (position, call).
    statement_moves: dict[str, list[tuple[int, cst.Call]]] = field(default_factory=dict)
    #: Positions of bindings and moves that sit inside an `if`: position -> that `if`.
    conditional: dict[int, cst.If] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """A statement as an element of the body that directly contains it."""

    owner: cst.CSTNode
    body: Body
    index: int

    @property
    def statement(self) -> cst.BaseStatement:
        return self.body[self.index]


class Scopes:
    """The scope structure of one file."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._rules: ScopeRules | None = None
        self._tables: dict[int, ScopeTable] = {}
        self._functions: dict[str, cst.FunctionDef] | None = None
        self._classes: dict[str, cst.ClassDef] | None = None

    # -- walking ---------------------------------------------------------------------------

    def nodes(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """`root` and the nodes under it that belong to its scope: nested functions, classes
        and lambdas are yielded but not entered (`root` itself always is)."""
        tables = self.context.tables
        span = tables.order.get(id(root))
        if span is None:
            yield from self._nodes_without_table(root)
            return
        nodes, order = tables.nodes, tables.order
        index, last = span
        yield nodes[index]
        index += 1
        while index <= last:
            node = nodes[index]
            yield node
            if type(node) in _SCOPE_CLASSES:
                index = order[id(node)][1] + 1
            else:
                index += 1

    def _nodes_without_table(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        stack = [root]
        while stack:
            node = stack.pop()
            yield node
            if node is not root and isinstance(node, SCOPE_NODES):
                continue
            stack.extend(reversed(self.context.children(node)))

    def statements(self, scope: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The nodes of a function's body or of the module's statements (not the scope node)."""
        if isinstance(scope, cst.Module):
            for statement in scope.body:
                if isinstance(statement, SCOPE_NODES):
                    yield statement
                else:
                    yield from self.nodes(statement)
        elif isinstance(scope, cst.FunctionDef):
            yield from self.nodes(scope.body)
        else:
            yield from self.nodes(scope)

    def find(
        self,
        root: cst.CSTNode,
        kind: type[_N] | tuple[type[_N], ...],
        *,
        own_scope: bool = False,
    ) -> Iterator[_N]:
        """The nodes of type `kind` under `root` (itself included), in source order; with
        `own_scope`, those of `root`'s scope only (see :meth:`nodes`)."""
        found = self.context.of_type(root, kind)
        if own_scope and found:
            found = self._in_own_scope(root, found)
        return iter(found)

    def statements_of_type(
        self, scope: cst.CSTNode, kind: type[_N] | tuple[type[_N], ...]
    ) -> list[_N]:
        """The nodes of type `kind` among :meth:`statements` of `scope`, in source order."""
        if isinstance(scope, cst.Module):
            return [node for node in self.find(scope, kind, own_scope=True) if node is not scope]
        if isinstance(scope, cst.FunctionDef):
            return list(self.find(scope.body, kind, own_scope=True))
        return list(self.find(scope, kind, own_scope=True))

    def _in_own_scope(self, root: cst.CSTNode, found: list[_N]) -> list[_N]:
        """`found` (nodes under `root`, in source order) less those inside a function, class or
        lambda nested in `root` (the nested scope's own node stays)."""
        order = self.context.tables.order
        span = order.get(id(root))
        if span is None:
            inside = {id(node) for node in self.nodes(root)}
            return [node for node in found if id(node) in inside]
        # The outermost nested scopes, as disjoint (first, last) spans in source order.
        spans: list[tuple[int, int]] = []
        for scope in self.context.tables.of_type(span[0] + 1, span[1], SCOPE_NODES):
            first, last = order[id(scope)]
            if not spans or first > spans[-1][1]:
                spans.append((first, last))
        if not spans:
            return found
        kept: list[_N] = []
        current = 0
        for node in found:
            index = order[id(node)][0]
            while current < len(spans) and spans[current][1] < index:
                current += 1
            if current < len(spans) and spans[current][0] < index:
                continue
            kept.append(node)
        return kept

    def within(self, node: cst.CSTNode, root: cst.CSTNode) -> bool:
        """`node` is `root` or under it."""
        order = self.context.tables.order
        span, place = order.get(id(root)), order.get(id(node))
        if span is None or place is None:
            return any(candidate is node for candidate in self.context.subtree(root))
        return span[0] <= place[0] <= span[1]

    def starts_before(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """`first` starts before `second` in source order (pre-order indices: no positions)."""
        return self.context.order(first)[0] < self.context.order(second)[0]

    def names_in(self, scope: cst.CSTNode, name: str) -> Iterator[cst.Name]:
        """The `Name` nodes spelled `name` in `scope` (its signature included)."""
        for node in self.find(scope, cst.Name, own_scope=True):
            if node.value == name:
                yield node

    def names_after(self, scope: cst.CSTNode, name: str, after: cst.CSTNode) -> Iterator[cst.Name]:
        """The `Name` nodes spelled `name` among `scope`'s statements (see :meth:`statements`)
        that start after `after` starts, in source order."""
        order = self.context.order
        for node in self.statements_of_type(scope, cst.Name):
            if node.value == name and order(after)[0] < order(node)[0]:
                yield node

    # -- where a node is ---------------------------------------------------------------------

    def other_branches(
        self, node: cst.CSTNode
    ) -> Iterator[tuple[cst.If | cst.IfExp, bool, cst.CSTNode]]:
        """For each `if` (statement or expression) of `node`'s function with `node` in one
        branch: the `if`, whether `node` is in its `else`, and the other branch."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            if isinstance(ancestor, (cst.If, cst.IfExp)) and ancestor.orelse is not None:
                if current is ancestor.body:
                    yield ancestor, False, ancestor.orelse
                elif current is ancestor.orelse:
                    yield ancestor, True, ancestor.body
            current = ancestor

    def in_loop(self, node: cst.CSTNode) -> bool:
        """`node` runs on every iteration of a `for`/`while` loop of its own function (a loop
        around the `def` or class it is in does not count)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
        return False

    def _scope_rules(self) -> ScopeRules:
        if self._rules is None:
            self._rules = ScopeRules(self.context.tables, comprehensions=False, headers=False)
        return self._rules

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost `def` around `node` (its header included), class bodies passed; None
        at module level or inside a lambda."""
        function = (self._rules or self._scope_rules()).function_of(node)
        # `type() is`: libcst's classes are ABCs (a slow isinstance) and this one has no subclasses.
        return function if type(function) is cst.FunctionDef else None

    def enclosing_scope(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function or lambda around `node` (its header included), class bodies
        passed, else the module."""
        return (self._rules or self._scope_rules()).function_of(node)

    def class_of(self, function: cst.FunctionDef | None) -> cst.ClassDef | None:
        """The class whose body defines `function` directly."""
        if function is None:
            return None
        parent = self.context.parent(function)
        grandparent = self.context.parent(parent) if parent is not None else None
        return grandparent if isinstance(grandparent, cst.ClassDef) else None

    def module_functions(self) -> dict[str, cst.FunctionDef]:
        if self._functions is None:
            self._functions = {
                s.name.value: s for s in self.context.module.body if isinstance(s, cst.FunctionDef)
            }
        return self._functions

    def module_classes(self) -> dict[str, cst.ClassDef]:
        if self._classes is None:
            self._classes = {
                s.name.value: s for s in self.context.module.body if isinstance(s, cst.ClassDef)
            }
        return self._classes

    def line_of(self, node: cst.CSTNode) -> int:
        return self.context.position(node).start.line

    def statement_start(self, node: cst.CSTNode) -> int:
        """Source-order index of the statement that holds `node`."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(
            current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):
            current = self.context.parent(current)
        return self.context.order(current if current is not None else node)[0]

    def on_every_path(
        self,
        node: cst.CSTNode,
        same: Callable[[cst.BaseStatement], bool],
        *,
        toward: cst.CSTNode | None = None,
    ) -> bool:
        """Whether no path through the `if`s around `node` (up to its function) skips both
        `node` and a statement `same` accepts: every other branch of each `if`/`elif`/`else`
        chain (which needs an `else`) holds such a statement, or an `if` that does on every
        path, or a `raise`/`return` (that path does not go on). The entry point's guard holds
        whenever the script runs. `toward`: only the paths that reach that node count (an
        `if` around both holds for both)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return True
            if toward is not None and self.within(toward, ancestor):
                return True
            if not isinstance(ancestor, cst.If) or is_main_guard(ancestor):
                continue
            if isinstance(self.context.parent(ancestor), cst.If):
                continue  # an `elif` is judged with the head of its chain
            for block in _branches(ancestor):
                if block is None:
                    return False
                if not self.within(node, block) and not _covers(block, same):
                    return False
        return True

    def placements(self, node: cst.CSTNode) -> list[Placement]:
        """Every (body, index) that holds `node` or one of its ancestors, innermost first."""
        found: list[Placement] = []
        current: cst.CSTNode | None = node
        while current is not None:
            parent = self.context.parent(current)
            if parent is None:
                break
            body = parent.body if isinstance(parent, (cst.Module, cst.IndentedBlock)) else None
            if body is not None:
                for index, statement in enumerate(body):
                    if statement is current:
                        found.append(Placement(parent, body, index))
                        break
            current = parent
        return found

    def common_placement(
        self, first: cst.CSTNode, second: cst.CSTNode
    ) -> tuple[Placement, Placement] | None:
        """The innermost body holding both nodes, as (placement of `first`, of `second`)."""
        second_places = {id(p.owner): p for p in self.placements(second)}
        for place in self.placements(first):
            other = second_places.get(id(place.owner))
            if other is not None:
                return place, other
        return None

    # -- names a subtree binds and reads ------------------------------------------------------

    def names_read(self, root: cst.CSTNode) -> set[str]:
        """Names loaded anywhere under `root` (attribute names and keywords excluded)."""
        skip: set[int] = set()
        nodes = self.context.of_type(
            root,
            (
                cst.Name,
                cst.Attribute,
                cst.Arg,
                cst.AssignTarget,
                cst.FunctionDef,
                cst.ClassDef,
                cst.AsName,
            ),
        )
        for node in nodes:
            if isinstance(node, cst.Attribute):
                skip.add(id(node.attr))
            elif isinstance(node, cst.Arg) and node.keyword is not None:
                skip.add(id(node.keyword))
            elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                skip.add(id(node.target))
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                skip.add(id(node.name))
            elif isinstance(node, cst.AsName):
                for name in self.context.subtree(node.name):
                    skip.add(id(name))
        return {node.value for node in nodes if isinstance(node, cst.Name) and id(node) not in skip}

    def names_bound(self, root: cst.CSTNode) -> set[str]:
        """Names (re)bound anywhere under `root`: assignments, loops, `with ... as`, defs,
        imports."""
        bound: set[str] = set()
        for node in self.context.of_type(root, _BINDING_NODES):
            bound.update(name.value for name in bound_by(node))
        return bound

    def names_bound_anywhere(self) -> frozenset[str]:
        """Every name the file binds in any scope: what :meth:`names_bound` finds, and the
        parameters and `global` names; a name a fix introduces must be none of them."""
        cached = self.context.shared.get("scopes.names_bound_anywhere")
        if isinstance(cached, frozenset):
            return cached
        bound = self.names_bound(self.context.module)
        for node in self.context.of_type(self.context.module, (cst.Param, cst.Global)):
            if isinstance(node, cst.Global):
                bound.update(declared_names(node))
            else:
                bound.update(name.value for name in bound_by(node))
        found = frozenset(bound)
        self.context.shared["scopes.names_bound_anywhere"] = found
        return found

    def mentions(self, root: cst.CSTNode, name: str) -> bool:
        """A `Name` spelled `name` anywhere under `root`: read, bound, an attribute's or a
        keyword's name, in nested scopes too (a mention, not a reference)."""
        return any(n.value == name for n in self.context.of_type(root, cst.Name))

    def binds(self, node: cst.CSTNode, name: str) -> bool:
        """Whether the statement-level `node` binds `name`."""
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return node.name.value == name
        if isinstance(node, _STATEMENT_BINDERS):
            return name in self.names_bound(node)
        return False

    def _binders(self, scope: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes among :meth:`statements` of `scope` that :meth:`binds` can say yes to."""
        return self.statements_of_type(scope, (cst.FunctionDef, cst.ClassDef, *_STATEMENT_BINDERS))

    # -- what is visible where -------------------------------------------------------------------

    def bound_on_every_path(self, name: str, node: cst.CSTNode) -> bool:
        """`name` is bound on every path from the start of `node`'s function to `node`: a
        parameter; a statement before `node` in a block that holds it; an earlier `if`, `try`
        or `with` each of whose branches that goes on binds it (a branch that returns, raises,
        `continue`s or `break`s binds nothing for what follows); the target of the loop or
        `with` that holds `node`. A binding in an earlier loop's body, in one branch only, or
        after `node` may not have run. Outside a function, or for a name the function never
        binds (a global), it is :meth:`visible_name`."""
        function = self.enclosing_function(node)
        if function is None:
            return self.visible_name(name, node)
        if name in {p.name.value for p in all_params(function.params)}:
            return True
        if not any(self.binds(n, name) for n in self._binders(function)):
            return self.visible_name(name, node)
        child: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if ancestor is function:
                return False
            if isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementLine)):
                for statement in ancestor.body:
                    if statement is child:
                        break
                    if self._binds_on_every_path(statement, name):
                        return True
            elif isinstance(ancestor, cst.For) and child is ancestor.body:
                if name in {n.value for n in target_names(ancestor.target)}:
                    return True
            elif isinstance(ancestor, cst.With) and child is ancestor.body:
                if any(
                    item.asname is not None
                    and name in {n.value for n in target_names(item.asname.name)}
                    for item in ancestor.items
                ):
                    return True
            elif (
                isinstance(ancestor, cst.ExceptHandler)
                and child is ancestor.body
                and ancestor.name is not None
                and name in {n.value for n in target_names(ancestor.name.name)}
            ):
                return True
            child = ancestor
        return False

    def bound_beside(self, name: str, other: str, node: cst.CSTNode) -> bool:
        """Every binding of `other` in `node`'s function follows one of `name` in the same
        block (`local_rank = ...`, then `rank = ...`, under one `if`): wherever `other` holds
        a value at `node`, so does `name`."""
        function = self.enclosing_function(node)
        if function is None:
            return False
        binders = self._binders(function)
        names = [n for n in binders if self.binds(n, name)]
        placed = [n for n in binders if self.binds(n, other)]
        return bool(placed) and all(
            any(
                self._block_of(n) is self._block_of(binding)
                and self.statement_start(n) < self.statement_start(binding)
                for n in names
            )
            for binding in placed
        )

    def _block_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The block (`IndentedBlock`, module) whose statement holds `node`."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                return ancestor
        return None

    def _binds_on_every_path(self, statement: cst.CSTNode, name: str) -> bool:
        """Whether every path through `statement` that goes on past it binds `name`."""
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return statement.name.value == name
        if isinstance(statement, cst.If):
            return self._block_binds(statement.body, name) and (
                statement.orelse is not None and self._branch_binds(statement.orelse, name)
            )
        if isinstance(statement, cst.With):
            return self._block_binds(statement.body, name) or any(
                item.asname is not None
                and name in {n.value for n in target_names(item.asname.name)}
                for item in statement.items
            )
        if isinstance(statement, cst.Try):
            if statement.finalbody is not None and self._block_binds(
                statement.finalbody.body, name
            ):
                return True
            return self._block_binds(statement.body, name) and all(
                self._block_binds(handler.body, name) for handler in statement.handlers
            )
        if isinstance(statement, (cst.For, cst.While, cst.Match)):
            return False  # the body may not run
        if isinstance(statement, (cst.SimpleStatementLine, cst.BaseSmallStatement)):
            return name in self.names_bound(statement)
        return False

    def _branch_binds(self, branch: cst.If | cst.Else, name: str) -> bool:
        if isinstance(branch, cst.If):
            return self._binds_on_every_path(branch, name)
        return self._block_binds(branch.body, name)

    def _block_binds(self, block: cst.BaseSuite, name: str) -> bool:
        statements = block.body
        for statement in statements:
            if self._binds_on_every_path(statement, name):
                return True
            if _ends_the_path(statement):
                return True  # nothing after this block is reached through it
        return False

    def visible_name(self, name: str, node: cst.CSTNode) -> bool:
        """`name` is bound where `node` can read it: a parameter or a binding of the enclosing
        function on every path to `node` (:meth:`bound_on_every_path`), of an enclosing
        function on every path to the nested `def`, or a module-level binding (earlier, when
        `node` is at module level)."""
        scope = self.enclosing_scope(node)
        start = self.statement_start(node)
        if isinstance(scope, cst.FunctionDef):
            if name in {p.name.value for p in all_params(scope.params)}:
                return True
            if any(self.binds(n, name) for n in self._binders(scope)):
                return self.bound_on_every_path(name, node)
            outer = self.enclosing_function(scope)
            if outer is not None and (
                name in {p.name.value for p in all_params(outer.params)}
                or any(self.binds(n, name) for n in self._binders(outer))
            ):
                # A closure reads the enclosing function's binding when it runs, after its
                # `def`: the name must be bound on every path to that `def`.
                return self.visible_name(name, scope)
        for statement in self._binders(self.context.module):
            if self.binds(statement, name) and (
                not isinstance(scope, cst.Module) or self.statement_start(statement) < start
            ):
                return True
        return False

    def latest_binding(self, name: str, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of the last `name = value` before `node` in its function (else module
        level); None when there is none or when `name` is bound some other way."""
        scope = self.enclosing_scope(node)
        # Statement order, not lines: a binding in the statement that holds `node` is not
        # before it (`x = f(x)`), and no position metadata is needed.
        start = self.statement_start(node)
        scopes = [scope] if isinstance(scope, cst.Module) else [scope, self.context.module]
        for current in scopes:
            if isinstance(current, cst.FunctionDef) and name in {
                p.name.value for p in all_params(current.params)
            }:
                return None
            value: cst.BaseExpression | None = None
            seen = False
            for statement in self._binders(current):
                if not self.binds(statement, name) or isinstance(
                    statement, (cst.FunctionDef, cst.ClassDef)
                ):
                    continue
                if current is scope and self.statement_start(statement) >= start:
                    continue
                seen = True
                parent = self.context.parent(statement)
                if (
                    isinstance(statement, cst.AssignTarget)
                    and isinstance(statement.target, cst.Name)
                    and isinstance(parent, cst.Assign)
                ):
                    value = parent.value
                else:
                    value = None
            if seen:
                return value
        return None

    def rebinds_afresh(self, use: cst.Name) -> bool:
        """`use` is a target that binds its name to a value that does not read it (`t =
        torch.randint(...)`, `for t in steps:`, `with f() as t:`): later uses of the name hold
        another object. `x = x.float()` and `x += 1` keep the object's line."""
        node: cst.CSTNode = use
        parent = self.context.parent(node)
        while isinstance(parent, (cst.Element, cst.Tuple, cst.List, cst.StarredElement)):
            node, parent = parent, self.context.parent(parent)
        if isinstance(parent, cst.AssignTarget):
            statement = self.context.parent(parent)
            value = statement.value if isinstance(statement, cst.Assign) else None
        elif isinstance(parent, (cst.AnnAssign, cst.NamedExpr)) and parent.target is node:
            value = parent.value
        elif isinstance(parent, cst.For) and parent.target is node:
            value = parent.iter
        else:
            return isinstance(parent, cst.AsName) and parent.name is node
        return value is None or not self.mentions(value, use.value)

    def simple_assignments(self, scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
        """Values of `name = value` (a single plain target) among the statements of `scope`."""
        return [
            node.value
            for node in self.statements(scope)
            if isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and node.targets[0].target.value == name
        ]

    def assigned_name(self, node: cst.CSTNode) -> str | None:
        """`name = <node>`: the single plain name `node` is assigned to."""
        parent = self.context.parent(node)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return parent.targets[0].target.value
        return None

    def module_bindings(self) -> dict[str, list[cst.CSTNode]]:
        """Names bound at module level (also under module-level `if`/`try`/`with`), with the
        small statements that bind them: the globals a function body can see."""
        cached = self.context.shared.get("scopes.module_bindings")
        if isinstance(cached, dict):
            return cached
        table: dict[str, list[cst.CSTNode]] = {}
        pending: list[cst.CSTNode] = list(self.context.module.body)
        blocks = (cst.IndentedBlock, cst.Else, cst.ExceptHandler, cst.If, cst.Finally)
        while pending:
            statement = pending.pop()
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    for name in _small_statement_binds(small):
                        table.setdefault(name, []).append(small)
            elif isinstance(
                statement, (cst.If, cst.Try, cst.With, cst.Else, cst.ExceptHandler, cst.Finally)
            ):
                pending.extend(
                    child for child in self.context.children(statement) if isinstance(child, blocks)
                )
            elif isinstance(statement, cst.IndentedBlock):
                pending.extend(statement.body)
        self.context.shared["scopes.module_bindings"] = table
        return table

    # -- per-scope binding tables ------------------------------------------------------------

    def table(self, scope: cst.CSTNode) -> ScopeTable:
        """The bindings of a function or the module; of a class, its `self.<attr>` ones."""
        table = self._tables.get(id(scope))
        if table is None:
            table = ScopeTable(scope)
            if isinstance(scope, cst.ClassDef):
                for statement in scope.body.body:
                    if isinstance(statement, cst.FunctionDef):
                        self._fill(table, statement.body, self_only=True)
            elif isinstance(scope, cst.FunctionDef):
                params = scope.params
                for index, param in enumerate(
                    (*params.posonly_params, *params.params, *params.kwonly_params)
                ):
                    table.bindings.setdefault(param.name.value, []).append(
                        Binding("param", None, self.context.order(param)[0], index)
                    )
                self._fill(table, scope.body, self_only=False)
            else:
                self._fill(table, scope, self_only=False)
            self._tables[id(scope)] = table
        return table

    def keywords_built_here(self, call: cst.Call) -> cst.Arg | None:
        """The one `**name` of `call` where `name` is only ever a dict its function builds
        (`kw = {k: v for k, v in kwargs.items() if ...}`), not keywords handed in."""
        stars = [arg for arg in call.args if arg.star == "**"]
        if len(stars) != 1 or not isinstance(stars[0].value, cst.Name):
            return None
        scope = self.enclosing_function(call) or self.context.module
        values = self.simple_assignments(scope, stars[0].value.value)
        built = values and all(isinstance(v, (cst.Dict, cst.DictComp)) for v in values)
        return stars[0] if built else None

    def read_paths(self, node: cst.CSTNode) -> set[str]:
        """The names and dotted paths `node` reads, whole (`args.cpu`, not `args`)."""
        paths: set[str] = set()
        for inner in self.context.subtree(node):
            parent = self.context.parent(inner)
            if isinstance(parent, cst.Attribute) and inner in (parent.value, parent.attr):
                continue
            path = dotted_name(inner) if isinstance(inner, (cst.Name, cst.Attribute)) else None
            if path is not None:
                paths.add(path)
        return paths

    def conditions(self, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """The tests that `node` runs under in its own function: of each `if` (not the entry
        point's guard) and conditional expression around it, innermost first."""
        tests: list[cst.BaseExpression] = []
        current = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                break
            test = ancestor.test if isinstance(ancestor, (cst.If, cst.IfExp)) else None
            if test is not None and current is not test and not is_main_guard(ancestor):
                tests.append(test)
            current = ancestor
        return tests

    def _condition(self, node: cst.CSTNode) -> cst.If | None:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.If) and not is_main_guard(ancestor):
                return ancestor  # the entry point's guard holds whenever the script runs
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return None
        return None

    def _fill(self, table: ScopeTable, root: cst.CSTNode, *, self_only: bool) -> None:
        nodes = self.find(root, _FILLED, own_scope=True)
        for node in nodes:
            position = self.context.order(node)[0]
            if isinstance(node, (cst.Assign, cst.Expr)):
                condition = self._condition(node)
                if condition is not None:
                    table.conditional[position] = condition
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind_target(table, target.target, node.value, position, self_only)
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                update = isinstance(node, cst.AugAssign)
                value = None if isinstance(node, cst.AugAssign) else node.value
                self._bind_target(table, node.target, value, position, self_only, update=update)
            elif isinstance(node, cst.For):
                self._bind_target(table, node.target, None, position, self_only)
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                self._bind_target(table, node.asname.name, None, position, self_only)
            elif isinstance(node, (cst.Import, cst.ImportFrom)) and not self_only:
                for imported in import_bindings(node):
                    table.bindings.setdefault(imported.name, []).append(
                        Binding("other", None, position)
                    )
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)) and not self_only:
                table.bindings.setdefault(node.name.value, []).append(
                    Binding("other", None, position)
                )
            elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
                call = node.value
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
                    name = dotted_name(call.func.value)
                    if name and (not self_only or name.startswith("self.")):
                        table.statement_moves.setdefault(name, []).append((position, call))

    def _bind_target(
        self,
        table: ScopeTable,
        target: cst.BaseExpression,
        value: cst.BaseExpression | None,
        position: int,
        self_only: bool,
        *,
        unpacked: bool = False,
        update: bool = False,
    ) -> None:
        """Bind `target`; names unpacked from a tuple get kind "unpack" and the whole value."""
        name = dotted_name(target)
        if name is not None:
            if self_only and not name.startswith("self."):
                return
            if not self_only and "." in name:
                return
            kind = "assign" if value is not None else "update" if update else "other"
            if unpacked and value is not None:
                kind = "unpack"
            table.bindings.setdefault(name, []).append(Binding(kind, value, position))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(table, element.value, value, position, self_only, unpacked=True)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(table, target.value, value, position, self_only, unpacked=True)

    def lookup(
        self, name: str, function: cst.FunctionDef | None
    ) -> tuple[ScopeTable, cst.FunctionDef | None]:
        """The table that binds `name` as seen from `function`, and that table's function."""
        if name.startswith("self."):
            owner = self.class_of(function)
            if owner is not None:
                return self.table(owner), None
        root = name.split(".")[0]
        if function is not None and root in self.table(function).bindings:
            return self.table(function), function
        return self.table(self.context.module), None

    def assigned_values(self, name: str, at: cst.CSTNode) -> list[cst.BaseExpression]:
        """Values plainly assigned to `name` (`name = value`) in the scope that binds it at
        `at`; [] when it is also bound another way (a parameter, a loop target, unpacking)."""
        table, _ = self.lookup(name, self.enclosing_function(at))
        bindings = table.bindings.get(name, [])
        if any(b.kind != "assign" or b.value is None for b in bindings):
            return []
        return [b.value for b in bindings if b.value is not None]

    def value_at(
        self, name: str, at: cst.CSTNode, *, through_updates: bool = False
    ) -> cst.BaseExpression | None:
        """The value `name` holds at `at` when the last binding before it is `name = value`
        in a block that holds `at` (it ran, and nothing rebound the name since: a parameter
        reassigned under `if lengths is None:` counts); None otherwise. Loops aside.
        `through_updates`: `name += x` after it keeps that value (a tensor updated in place
        keeps its device)."""
        table, _ = self.lookup(name, self.enclosing_function(at))
        # Statement order: `lengths = lengths.cuda()` reads the value bound before it.
        position = self.statement_start(at)
        earlier = [
            b
            for b in table.bindings.get(name, [])
            if b.position < position and not (through_updates and b.kind == "update")
        ]
        if not earlier:
            return None
        last = max(earlier, key=lambda b: b.position)
        if last.kind != "assign" or last.value is None:
            return None
        block = self._block_of(last.value)
        if block is None or not any(a is block for a in self.context.ancestors(at)):
            return None
        return last.value

    def assigned_before(self, name: str, at: cst.CSTNode) -> list[cst.BaseExpression]:
        """What :meth:`assigned_values` finds, less the assignments that come after `at`
        (in source order): the values `name` can hold when `at` runs, loops aside."""
        position = self.context.order(at)[0]
        return [
            value
            for value in self.assigned_values(name, at)
            if self.context.order(value)[0] < position
        ]

    def computing_calls(self, name: str, at: cst.CSTNode) -> list[cst.Call]:
        """The calls whose results `name` can hold at `at` (`w = manager.weights()`, either
        branch of `w = ... if ... else ...`; a constant such as `None` aside); [] when it is
        also assigned something else (a list literal, another name) or bound another way."""
        values = list(self.assigned_before(name, at))
        calls: list[cst.Call] = []
        while values:
            value = values.pop(0)
            if isinstance(value, cst.IfExp):  # `w = m.weights() if balanced else None`
                values += [value.body, value.orelse]
            elif isinstance(value, cst.Call):
                calls.append(value)
            elif not is_constant(value):
                return []
        return calls

    def binding_before(
        self, name: str, at: cst.CSTNode, *, statement: bool = False
    ) -> tuple[str, cst.BaseExpression | None] | None:
        """(kind, value) of the last binding of `name` before `at` (with `statement`: before
        the statement that holds `at`, so `n, i = n.sort()` reads the `n` bound earlier) in its
        scope (any binding if the scope is an enclosing one)."""
        function = self.enclosing_function(at)
        table, table_function = self.lookup(name, function)
        bindings = table.bindings.get(name, [])
        if table_function is function and not name.startswith("self."):
            position = self.statement_start(at) if statement else self.context.order(at)[0]
            bindings = [b for b in bindings if b.position < position] or bindings
        if not bindings:
            return None
        last = bindings[-1]
        return last.kind, last.value

    def bound_in(self, name: str, function: cst.FunctionDef | None) -> bool:
        return function is not None and name in self.table(function).bindings


def param_names(function: cst.FunctionDef) -> list[str]:
    """Positional and keyword parameters, in order (no `*args`/`**kwargs`)."""
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _small_statement_binds(statement: cst.BaseSmallStatement) -> list[str]:
    if isinstance(statement, cst.Assign):
        return [t.target.value for t in statement.targets if isinstance(t.target, cst.Name)]
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)) and isinstance(
        statement.target, cst.Name
    ):
        return [statement.target.value]
    if isinstance(statement, (cst.Import, cst.ImportFrom)):
        # Names spelled by one `Name` only: `import os.path` (which binds `os`) is left out.
        return [
            imported.name
            for imported in import_bindings(statement)
            if isinstance(imported.node, cst.Name)
        ]
    return []


def _branches(head: cst.If) -> list[cst.BaseSuite | None]:
    """The blocks of an `if`/`elif`/`else` chain; None last when it has no `else`."""
    blocks: list[cst.BaseSuite | None] = []
    current: cst.If | cst.Else | None = head
    while isinstance(current, cst.If):
        blocks.append(current.body)
        current = current.orelse
    blocks.append(current.body if current is not None else None)
    return blocks


def _covers(block: cst.BaseSuite, same: Callable[[cst.BaseStatement], bool]) -> bool:
    """`block` runs a statement `same` accepts on every path, or leaves (`raise`, `return`)."""
    if not isinstance(block, cst.IndentedBlock):
        return False
    for statement in block.body:
        if same(statement):
            return True
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Raise, cst.Return)) for small in statement.body
        ):
            return True
        if isinstance(statement, cst.If) and all(
            branch is not None and _covers(branch, same) for branch in _branches(statement)
        ):
            return True
    return False


def _ends_the_path(statement: cst.CSTNode) -> bool:
    """`return`, `raise`, `continue` or `break` as (the last small statement of) a line."""
    if isinstance(statement, cst.SimpleStatementLine):
        return bool(statement.body) and isinstance(
            statement.body[-1], (cst.Return, cst.Raise, cst.Continue, cst.Break)
        )
    return isinstance(statement, (cst.Return, cst.Raise, cst.Continue, cst.Break))
