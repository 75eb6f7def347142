"""Names a file both imports and binds some other way, resolved scope by scope.

`import copy` at the top and `copy = model.copy()` in a function: whether `copy.deepcopy`
means the standard library depends on where it is read. libcst's scope analysis answers that
but costs about ten parses per file; this module answers it for those few names only, from
the file's tree tables, with the rules of libcst 1.x's scope analysis:

* the scope of a read is the innermost function, lambda, class body or comprehension around
  it (a decorator, default value, annotation or base class is read in the scope around the
  definition; a comprehension's first iterable in the scope around the comprehension);
* in the reading scope, the bindings before the read count (in a comprehension, all of
  them); when there are none, the enclosing scopes are asked, where every binding counts; a
  class body is seen only from itself; `global`/`nonlocal` send the name to the module /
  enclosing function;
* each binding gives one qualified name: an import its target, anything else the dotted
  name itself (a local; libcst would prefix its scope, which no pass needs).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection
from typing import cast

import libcst as cst
from libcst.metadata import QualifiedName, QualifiedNameSource

from devfix.tree import TreeTables, dotted_name, target_names

_BUILTINS = frozenset(dir(builtins))
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_SCOPES = frozenset((cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef, *_COMPREHENSIONS))
#: Nodes whose targets bind a name in the scope they stand in.
_ASSIGNING = (
    cst.AssignTarget,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.CompFor,
    cst.NamedExpr,
    cst.WithItem,
    cst.ExceptHandler,
)


class ShadowedNames:
    """Per-scope bindings of the names in `names`, and lookups of reads of them."""

    def __init__(self, tables: TreeTables, names: Collection[str]) -> None:
        self.tables = tables
        self.names = frozenset(names)
        #: (id of the scope node, name) -> [(pre-order index of the binding, its name)]
        self.bindings: dict[tuple[int, str], list[tuple[int, QualifiedName]]] = {}
        #: (id of a function, name) -> the scope `global`/`nonlocal` hands the name to.
        self.redirected: dict[tuple[int, str], cst.CSTNode] = {}
        self._collect()

    # -- collecting ------------------------------------------------------------------------

    def _collect(self) -> None:
        tables = self.tables
        everything = (0, len(tables.nodes) - 1)
        declarations = tables.of_type(*everything, (cst.Global, cst.Nonlocal))
        for declaration in cast("list[cst.Global | cst.Nonlocal]", declarations):
            function = self.scope_of(declaration)
            target = (
                tables.nodes[0]
                if isinstance(declaration, cst.Global)
                else self._enclosing_function(function)
            )
            for item in declaration.names:
                if item.name.value in self.names:
                    self.redirected[(id(function), item.name.value)] = target
        imports = tables.of_type(*everything, (cst.Import, cst.ImportFrom))
        for statement in cast("list[cst.Import | cst.ImportFrom]", imports):
            self._collect_import(statement)
        for node in tables.of_type(*everything, _ASSIGNING):
            scope = self.scope_of(node)
            if isinstance(node, cst.NamedExpr):
                # `:=` in a comprehension binds in the scope around it (PEP 572).
                while isinstance(scope, _COMPREHENSIONS):
                    scope = self.scope_of(scope)
            elif isinstance(node, cst.CompFor):
                scope = self._comprehension_of(node)
            assigned = _target_of(node)
            if assigned is not None:
                for name in target_names(assigned):
                    self._bind(scope, name, QualifiedNameSource.LOCAL, name.value)
        definitions = tables.of_type(*everything, (cst.FunctionDef, cst.ClassDef))
        for definition in cast("list[cst.FunctionDef | cst.ClassDef]", definitions):
            # The name is bound once the whole statement has run: its decorators, defaults
            # and annotations still read the earlier binding.
            self._bind(
                self.scope_of(definition),
                definition.name,
                QualifiedNameSource.LOCAL,
                definition.name.value,
                at=tables.order[id(definition)][1],
            )
        functions = tables.of_type(*everything, (cst.FunctionDef, cst.Lambda))
        for function in cast("list[cst.FunctionDef | cst.Lambda]", functions):
            params = function.params
            for param in (
                *params.posonly_params,
                *params.params,
                *params.kwonly_params,
                *(p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)),
            ):
                self._bind(function, param.name, QualifiedNameSource.LOCAL, param.name.value)
        patterns = tables.of_type(*everything, (cst.MatchAs, cst.MatchStar))
        for pattern in cast("list[cst.MatchAs | cst.MatchStar]", patterns):
            if pattern.name is not None:
                self._bind(
                    self.scope_of(pattern),
                    pattern.name,
                    QualifiedNameSource.LOCAL,
                    pattern.name.value,
                )
        for found in self.bindings.values():
            found.sort(key=lambda binding: binding[0])

    def _collect_import(self, statement: cst.Import | cst.ImportFrom) -> None:
        if isinstance(statement.names, cst.ImportStar):
            return
        base = ""
        if isinstance(statement, cst.ImportFrom):
            module = dotted_name(statement.module) if statement.module is not None else ""
            base = "." * len(statement.relative) + (module or "")
        scope = self.scope_of(statement)
        for alias in statement.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                bound_node: cst.CSTNode = alias.asname.name
                bound = alias.asname.name.value
                target = _joined(base, full)
            elif isinstance(statement, cst.ImportFrom):
                bound_node, bound = alias.name, full
                target = _joined(base, full)
            else:
                bound = target = full.split(".", 1)[0]
                bound_node = alias.name
            if bound in self.names:
                self._record(scope, bound, bound_node, QualifiedNameSource.IMPORT, target)

    def _bind(
        self,
        scope: cst.CSTNode,
        name: cst.Name,
        source: QualifiedNameSource,
        target: str,
        *,
        at: int | None = None,
    ) -> None:
        if name.value in self.names:
            self._record(scope, name.value, name, source, target, at=at)

    def _record(
        self,
        scope: cst.CSTNode,
        name: str,
        node: cst.CSTNode,
        source: QualifiedNameSource,
        target: str,
        *,
        at: int | None = None,
    ) -> None:
        scope = self.redirected.get((id(scope), name), scope)
        position = self.tables.order[id(node)][0] if at is None else at
        entry = (position, QualifiedName(target, source))
        self.bindings.setdefault((id(scope), name), []).append(entry)

    # -- where a node is read --------------------------------------------------------------

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The scope `node` is read (or bound) in."""
        parents = self.tables.parents
        path: list[cst.CSTNode] = [node]
        current = parents.get(id(node))
        while current is not None:
            kind = type(current)
            if kind in _SCOPES:
                child = path[-1]
                if kind is cst.Module:
                    return current
                if isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                    if child is current.body:
                        return current
                elif isinstance(current, _COMPREHENSIONS):
                    first_iterable = current.for_in.iter
                    if not (
                        len(path) >= 2 and child is current.for_in and path[-2] is first_iterable
                    ):
                        return current
            path.append(current)
            current = parents.get(id(current))
        return self.tables.nodes[0]

    def _comprehension_of(self, loop: cst.CompFor) -> cst.CSTNode:
        current = self.tables.parents.get(id(loop))
        while current is not None:
            if isinstance(current, _COMPREHENSIONS):
                return current
            current = self.tables.parents.get(id(current))
        return self.scope_of(loop)

    def _enclosing_function(self, scope: cst.CSTNode) -> cst.CSTNode:
        current = self.scope_of(scope)
        while not isinstance(current, (cst.FunctionDef, cst.Lambda, cst.Module)):
            current = self.scope_of(current)
        return current

    def _parent_scope(self, scope: cst.CSTNode) -> cst.CSTNode | None:
        if isinstance(scope, cst.Module):
            return None
        return self.scope_of(scope)

    # -- answering -------------------------------------------------------------------------

    def resolve(self, node: cst.CSTNode, dotted: str) -> set[QualifiedName]:
        """The qualified names of the read `node`, spelled `dotted` (its root in `names`)."""
        root, _, rest = dotted.partition(".")
        suffix = f".{rest}" if rest else ""
        read_at = self.tables.order[id(node)][0]
        scope: cst.CSTNode | None = self.scope_of(node)
        reading = True
        while scope is not None:
            redirected = self.redirected.get((id(scope), root))
            if redirected is not None:
                scope, reading = redirected, False
            found = self.bindings.get((id(scope), root))
            if found and (reading or not isinstance(scope, cst.ClassDef)):
                if reading and not isinstance(scope, _COMPREHENSIONS):
                    # A comprehension's targets are bound before its element is computed.
                    found = [binding for binding in found if binding[0] < read_at]
                if found:
                    return {_qualify(name, suffix, dotted) for _, name in found}
            reading = False
            scope = self._parent_scope(scope)
        if root in _BUILTINS:
            return {QualifiedName(f"builtins.{dotted}", QualifiedNameSource.BUILTIN)}
        return set()


def _joined(base: str, name: str) -> str:
    """`from a import b` -> `a.b`; `from . import b` -> `.b`; `import b` -> `b`."""
    if not base:
        return name
    return f"{base}{name}" if base.endswith(".") else f"{base}.{name}"


def _qualify(binding: QualifiedName, suffix: str, dotted: str) -> QualifiedName:
    if binding.source is QualifiedNameSource.IMPORT:
        return QualifiedName(f"{binding.name}{suffix}", QualifiedNameSource.IMPORT)
    return QualifiedName(dotted, binding.source)


def _target_of(node: cst.CSTNode) -> cst.CSTNode | None:
    if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)):
        return node.target
    if isinstance(node, cst.NamedExpr):
        return node.target
    if isinstance(node, (cst.WithItem, cst.ExceptHandler)):
        holder = node.asname if isinstance(node, cst.WithItem) else node.name
        return holder.name if holder is not None else None
    return None
