"""Names a file both imports and binds some other way, resolved scope by scope.

`import copy` at the top and `copy = model.copy()` in a function: whether `copy.deepcopy`
means the standard library depends on where it is read. libcst's scope analysis answers that
but costs about ten parses per file; this module answers it for those few names only, from
the file's tree tables, with the scope rules of :mod:`devfix.scopes` in their exact view (which
scope a read is in, which nodes bind, where `global`/`nonlocal` send a name) and libcst 1.x's
lookup:

* in the reading scope, the bindings before the read count (in a comprehension, all of
  them); when there are none, the enclosing scopes are asked, where every binding counts but
  a class body's (a class body is seen only from itself);
* each binding gives one qualified name: an import its target, anything else the dotted
  name itself (a local; libcst would prefix its scope, which no pass needs).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection
from typing import cast

import libcst as cst
from libcst.metadata import QualifiedName, QualifiedNameSource

from devfix.scopes import (
    BINDING_NODES,
    COMPREHENSION_NODES,
    DECLARATION_NODES,
    ScopeRules,
    bound_by,
    declared_names,
    import_bindings,
)
from devfix.tree import TreeTables

_BUILTINS = frozenset(dir(builtins))


class ShadowedNames:
    """Per-scope bindings of the names in `names`, and lookups of reads of them."""

    def __init__(self, tables: TreeTables, names: Collection[str]) -> None:
        self.tables = tables
        self.names = frozenset(names)
        #: Python's rules, exactly: a read in a comprehension or a default value must find the
        #: binding that Python's own lookup finds.
        self.rules = ScopeRules(tables, comprehensions=True, headers=True)
        #: (id of the scope node, name) -> [(pre-order index of the binding, its name)]
        self.bindings: dict[tuple[int, str], list[tuple[int, QualifiedName]]] = {}
        #: (id of a function, name) -> the scope `global`/`nonlocal` hands the name to.
        self.redirected: dict[tuple[int, str], cst.CSTNode] = {}
        self._collect()

    # -- collecting ------------------------------------------------------------------------

    def _collect(self) -> None:
        tables, rules = self.tables, self.rules
        everything = (0, len(tables.nodes) - 1)
        declarations = tables.of_type(*everything, DECLARATION_NODES)
        for declaration in cast("list[cst.Global | cst.Nonlocal]", declarations):
            function = rules.scope_of(declaration)
            target = rules.declared_scope(declaration)
            for declared in declared_names(declaration):
                if declared in self.names:
                    self.redirected[(id(function), declared)] = target
        imports = tables.of_type(*everything, (cst.Import, cst.ImportFrom))
        for statement in cast("list[cst.Import | cst.ImportFrom]", imports):
            scope = rules.scope_of(statement)
            for imported in import_bindings(statement):
                if imported.name in self.names:
                    source = QualifiedNameSource.IMPORT
                    self._record(scope, imported.name, imported.node, source, imported.target)
        for binder in tables.of_type(*everything, BINDING_NODES):
            bound = [name for name in bound_by(binder) if name.value in self.names]
            if not bound:
                continue
            at = None
            if type(binder) is cst.FunctionDef or type(binder) is cst.ClassDef:
                # The name is bound once the whole statement has run: its decorators, defaults
                # and annotations still read the earlier binding.
                at = tables.order[id(binder)][1]
            scope = rules.binding_scope(binder)
            for name in bound:
                self._record(scope, name.value, name, QualifiedNameSource.LOCAL, name.value, at=at)
        for found in self.bindings.values():
            found.sort(key=lambda binding: binding[0])

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

    # -- answering -------------------------------------------------------------------------

    def resolve(self, node: cst.CSTNode, dotted: str) -> set[QualifiedName]:
        """The qualified names of the read `node`, spelled `dotted` (its root in `names`)."""
        root, _, rest = dotted.partition(".")
        suffix = f".{rest}" if rest else ""
        read_at = self.tables.order[id(node)][0]
        scope: cst.CSTNode | None = self.rules.scope_of(node)
        reading = True
        while scope is not None:
            redirected = self.redirected.get((id(scope), root))
            if redirected is not None:
                scope, reading = redirected, False
            found = self.bindings.get((id(scope), root))
            if found and (reading or not isinstance(scope, cst.ClassDef)):
                if reading and not isinstance(scope, COMPREHENSION_NODES):
                    # A comprehension's targets are bound before its element is computed.
                    found = [binding for binding in found if binding[0] < read_at]
                if found:
                    return {_qualify(name, suffix, dotted) for _, name in found}
            reading = False
            scope = self.rules.outer_scope(scope)
        if root in _BUILTINS:
            return {QualifiedName(f"builtins.{dotted}", QualifiedNameSource.BUILTIN)}
        return set()


def _qualify(binding: QualifiedName, suffix: str, dotted: str) -> QualifiedName:
    if binding.source is QualifiedNameSource.IMPORT:
        return QualifiedName(f"{binding.name}{suffix}", QualifiedNameSource.IMPORT)
    return QualifiedName(dotted, binding.source)
