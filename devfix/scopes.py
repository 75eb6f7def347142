"""The rules of Python scoping, once for every layer: which nodes open a scope, which scope a
node is read (or bound) in, which names a node binds, and where `global`/`nonlocal` send a
name. The engine resolves the names a file both imports and rebinds with them
(:mod:`devfix.shadowed_names`, :class:`devfix.context.FileContext`); the analysis layer builds
its scope walker and binding tables on them (`codemods/analysis/scopes.py`).

The rules, as Python (and libcst 1.x's scope analysis) apply them:

* the module, a function, a lambda, a class body and a comprehension each open a scope;
* a definition's header (decorators, default values, annotations, base classes) is read in
  the scope around the definition, its body in its own; a comprehension's first iterable is
  read in the scope around the comprehension, the rest of it in its own;
* a parameter binds in its function; a `def` or `class` name in the scope around the
  definition; a comprehension target in the comprehension; `:=` in a comprehension in the
  first scope around it that is not a comprehension (PEP 572); anything else in the scope it
  is read in;
* a class body is seen only from itself: a function in it reads past it to the function (or
  module) around the class;
* `global` sends a name to the module, `nonlocal` to the innermost function around the one
  that declares it.

Two views of those rules (:class:`ScopeRules`' `comprehensions` and `headers`), for two kinds of
question:

* exact (both on): which binding a read sees. `copy` in `[copy.x for copy in items]` is not
  the module `copy`, and `@torch.no_grad()` on a method named `torch` still reads the module:
  qualified names need every rule above.
* coarse (both off): which function's code a node is. A comprehension is part of the function
  it stands in (its targets are that function's names), and a definition is one piece, header
  included: the `device=torch.device("cuda")` default and the `@torch.no_grad()` decorator of
  `train` belong to `train`, and a walk over a scope skips a nested `def` whole. The analysis
  passes ask these questions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple, Union, cast

import libcst as cst

from devfix.tree import TreeTables, dotted_name, target_names

#: Nodes that open a scope for their body: the body is theirs, the header around it is not.
DEFINITION_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
#: The definitions whose scope holds local variables (a class body's names are attributes).
FUNCTION_NODES = (cst.FunctionDef, cst.Lambda)
#: Nodes that open a scope in the exact view only.
COMPREHENSION_NODES = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

# As sets of classes: `type(node) in` one is far cheaper than isinstance on libcst's ABCs, and
# these classes have no subclasses.
_DEFINITION_CLASSES: frozenset[type[cst.CSTNode]] = frozenset(DEFINITION_NODES)
_FUNCTION_CLASSES: frozenset[type[cst.CSTNode]] = frozenset(FUNCTION_NODES)
_COMPREHENSION_CLASSES: frozenset[type[cst.CSTNode]] = frozenset(COMPREHENSION_NODES)
_ALL_SCOPE_CLASSES = _DEFINITION_CLASSES | _COMPREHENSION_CLASSES

#: Nodes that bind by assignment the names their target or `as` spells, in the scope they
#: stand in (:meth:`ScopeRules.binding_scope`). Every `as` name counts, an import's included:
#: what a question about names alone ("is `x` rebound here?") needs.
ASSIGNING_NODES = (
    cst.AssignTarget,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.CompFor,
    cst.NamedExpr,
    cst.AsName,
)
#: The same for resolving a read, where an import's `as` name is bound by the import (with
#: what it imports: :func:`import_bindings`): `as` names are read from the `with` item or
#: `except` handler that holds them.
_RESOLVED_ASSIGNING = (
    cst.AssignTarget,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.CompFor,
    cst.NamedExpr,
    cst.WithItem,
    cst.ExceptHandler,
)
#: Every node that binds a name other than by import, when a read is resolved: assignments,
#: definitions, parameters and `match` captures.
BINDING_NODES = (
    *_RESOLVED_ASSIGNING,
    cst.FunctionDef,
    cst.ClassDef,
    cst.Param,
    cst.MatchAs,
    cst.MatchStar,
)
#: `global` and `nonlocal`: they bind nothing, they say where a function's name lives.
DECLARATION_NODES = (cst.Global, cst.Nonlocal)

_TARGET_CLASSES: frozenset[type[cst.CSTNode]] = frozenset(
    (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)
)
_OWN_NAME_CLASSES: frozenset[type[cst.CSTNode]] = frozenset(
    (cst.FunctionDef, cst.ClassDef, cst.Param)
)
_Comprehension = Union[cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp]
_Definition = Union[cst.FunctionDef, cst.Lambda, cst.ClassDef]
#: The nodes that bind what their `target` names.
_BindsTarget = Union[
    cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr
]


def bound_by(node: cst.CSTNode, *, comprehensions: bool = True) -> Iterator[cst.Name]:
    """The names `node` itself binds: an assignment target, an annotated or augmented
    assignment, a `for` (and, unless told otherwise, comprehension) target, `:=`; an `as` name
    (of `with`, `except` or an import) or the `with` item or `except` handler that holds one;
    a `def` or `class` name, a parameter, a `match` capture; an import alias without `as`
    binds its first name (`import os.path`: `os`; with `as`, its `AsName` binds)."""
    kind = type(node)
    if kind in _TARGET_CLASSES or (comprehensions and kind is cst.CompFor):
        yield from target_names(cast("_BindsTarget", node).target)
    elif kind is cst.AsName:
        yield from target_names(cast(cst.AsName, node).name)
    elif kind in _OWN_NAME_CLASSES:
        yield cast("cst.FunctionDef | cst.ClassDef | cst.Param", node).name
    elif kind is cst.WithItem:
        as_name = cast(cst.WithItem, node).asname
        if as_name is not None:
            yield from target_names(as_name.name)
    elif kind is cst.ExceptHandler:
        as_name = cast(cst.ExceptHandler, node).name
        if as_name is not None:
            yield from target_names(as_name.name)
    elif kind is cst.MatchAs or kind is cst.MatchStar:
        capture = cast("cst.MatchAs | cst.MatchStar", node).name
        if capture is not None:
            yield capture
    elif kind is cst.ImportAlias:
        alias = cast(cst.ImportAlias, node)
        if alias.asname is None:
            first: cst.BaseExpression = alias.name
            while isinstance(first, cst.Attribute):
                first = first.value
            if isinstance(first, cst.Name):
                yield first


def declared_names(declaration: cst.Global | cst.Nonlocal) -> list[str]:
    """The names a `global` or `nonlocal` statement lists."""
    return [item.name.value for item in declaration.names]


def all_params(params: cst.Parameters) -> list[cst.Param]:
    """Every parameter of a signature, `*args` and `**kwargs` included: each binds its name in
    the function."""
    extra = [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return [*params.posonly_params, *params.params, *params.kwonly_params, *extra]


class ImportBinding(NamedTuple):
    """One name an import statement binds."""

    #: The name bound: `np` for `import numpy as np`, `os` for `import os.path`.
    name: str
    #: The node that spells it (the `as` name, else the imported name).
    node: cst.CSTNode
    #: What it refers to: `numpy`, `os`; `torch.nn.Linear` for `from torch.nn import Linear`,
    #: `.utils.load` for `from .utils import load`.
    target: str


def import_bindings(statement: cst.Import | cst.ImportFrom) -> list[ImportBinding]:
    """The names an import binds (none for `from m import *`)."""
    if isinstance(statement.names, cst.ImportStar):
        return []
    base = ""
    if isinstance(statement, cst.ImportFrom):
        module = dotted_name(statement.module) if statement.module is not None else ""
        base = "." * len(statement.relative) + (module or "")
    found: list[ImportBinding] = []
    for alias in statement.names:
        full = dotted_name(alias.name)
        if full is None:
            continue
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            as_name = alias.asname.name
            found.append(ImportBinding(as_name.value, as_name, _joined(base, full)))
        elif isinstance(statement, cst.ImportFrom):
            found.append(ImportBinding(full, alias.name, _joined(base, full)))
        else:
            first = full.split(".", 1)[0]
            found.append(ImportBinding(first, alias.name, first))
    return found


def _joined(base: str, name: str) -> str:
    """`from a import b` -> `a.b`; `from . import b` -> `.b`; `import b` -> `b`."""
    if not base:
        return name
    return f"{base}{name}" if base.endswith(".") else f"{base}.{name}"


class ScopeRules:
    """Which scope each node of one file is in, in one view of the rules (see the module).

    `comprehensions`: a comprehension opens a scope (else it is part of the scope around it).
    `headers`: a definition's header is read in the scope around it (else the whole
    definition but its own node and its decorators belong to its scope).
    """

    def __init__(self, tables: TreeTables, *, comprehensions: bool, headers: bool) -> None:
        self.parents = tables.parents
        self.module = tables.nodes[0]
        self.comprehensions = comprehensions
        self.headers = headers
        #: The classes of the nodes that open a scope (the module holds them all).
        self.opening = _ALL_SCOPE_CLASSES if comprehensions else _DEFINITION_CLASSES

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The scope `node` is read in: the innermost function, lambda, class body (or, in the
        exact view, comprehension) around it, else the module. A definition node itself is in
        the scope around it; so, in the exact view, is its header."""
        parents, opening, headers = self.parents, self.opening, self.headers
        child: cst.CSTNode = node
        grandchild: cst.CSTNode | None = None
        current = parents.get(id(node))
        while current is not None:
            kind = type(current)
            if kind in opening:
                if kind in _COMPREHENSION_CLASSES:
                    # The first iterable is evaluated before the comprehension's scope exists.
                    loop = cast("_Comprehension", current).for_in
                    if not (child is loop and grandchild is loop.iter):
                        return current
                elif child is cast("_Definition", current).body or (
                    # A decorator runs before the name it decorates exists: outside, in
                    # either view.
                    not headers and type(child) is not cst.Decorator
                ):
                    return current
            grandchild, child = child, current
            current = parents.get(id(current))
        return self.module

    def outer_scope(self, scope: cst.CSTNode) -> cst.CSTNode | None:
        """The scope around `scope`; None around the module."""
        return None if scope is self.module else self.scope_of(scope)

    def function_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function or lambda whose scope holds `node`'s, else the module: class
        bodies (and comprehensions) are passed through, as a class body is not a scope the
        functions in it see."""
        scope = self.scope_of(node)
        while type(scope) not in _FUNCTION_CLASSES and scope is not self.module:
            scope = self.scope_of(scope)
        return scope

    def binding_scope(self, binder: cst.CSTNode) -> cst.CSTNode:
        """The scope the names :func:`bound_by` `binder` finds are bound in."""
        kind = type(binder)
        if kind is cst.Param:
            # Parameters -> the function or lambda that has them.
            parameters = self.parents[id(binder)]
            return self.parents[id(parameters)]
        scope = self.scope_of(binder)
        if kind is cst.NamedExpr:
            # `:=` in a comprehension binds in the scope around it (PEP 572).
            while type(scope) in _COMPREHENSION_CLASSES:
                scope = self.scope_of(scope)
        return scope

    def declared_scope(self, declaration: cst.Global | cst.Nonlocal) -> cst.CSTNode:
        """The scope a `global` (the module) or `nonlocal` (the innermost function around the
        declaring one) sends its names to."""
        if isinstance(declaration, cst.Global):
            return self.module
        return self.function_of(self.scope_of(declaration))
