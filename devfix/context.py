"""Per-file state shared by every pass: the parsed module and lazily resolved metadata.

Nothing is resolved until a pass asks about a node that already looks like a candidate: names
come from the file's import table (and, for the few names a file both imports and rebinds,
from a per-scope lookup), never from libcst's QualifiedNameProvider, which costs about ten
parses a file. The wrapper skips libcst's defensive deep copy so node identity is shared between
the passes, the metadata and the engine's edits.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    QualifiedName,
    QualifiedNameSource,
    Scope,
    ScopeProvider,
)

from devfix.positions import NodeRanges, node_ranges
from devfix.scopes import (
    BINDING_NODES,
    DECLARATION_NODES,
    bound_by,
    declared_names,
    import_bindings,
)
from devfix.shadowed_names import ShadowedNames
from devfix.tree import TreeTables, build_tables, code_children_of, dotted_name

T = TypeVar("T")
_N = TypeVar("_N", bound=cst.CSTNode)


class FileContext:
    """The parsed module of one file plus metadata computed on first use."""

    def __init__(self, module: cst.Module, path: str = "<string>", text: str | None = None) -> None:
        self.module = module
        self.path = path
        #: The source text the module was parsed from (for cheap textual prefilters).
        self.text = text if text is not None else module.code
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._resolved: dict[type[Any], Mapping[cst.CSTNode, Any]] = {}
        #: Analyses that several passes need (codemods.analysis), keyed by the analysis. They
        #: hold this context only through a weak proxy, so a file's tree is freed by reference
        #: counting as soon as the engine drops the context.
        self.shared: dict[str, object] = {}
        self._names: _NameTable | None = None
        self._shadowed: ShadowedNames | None = None
        self._ranges: NodeRanges | None = None
        self._tables: TreeTables | None = None

    def _metadata(self, provider: type[Any]) -> Mapping[cst.CSTNode, Any]:
        table = self._resolved.get(provider)
        if table is None:
            table = self._wrapper.resolve(provider)
            self._resolved[provider] = table
        return table

    def qualified_names(self, node: cst.CSTNode) -> Collection[QualifiedName]:
        """The dotted names `node` refers to: `t.zeros` is `torch.zeros` after `import torch as t`.

        Names rooted in an import (or a builtin) are resolved from the file's import table,
        which costs almost nothing; a name that the file both imports and binds otherwise is
        resolved scope by scope (:mod:`devfix.shadowed_names`, as libcst's scope analysis
        would, without its cost of about ten parses).
        """
        if self._names is None:
            self._names = _NameTable(self._tree())
        fast = self._names.resolve(node)
        if fast is not None:
            return fast
        if self._shadowed is None:
            self._shadowed = ShadowedNames(self._tree(), self._names.ambiguous())
        dotted = dotted_name(node)
        return self._shadowed.resolve(node, dotted) if dotted is not None else ()

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self._node_ranges()[node]

    def _node_ranges(self) -> NodeRanges:
        if self._ranges is None:
            statement_of = functools.partial(
                _module_statement_of, self.module, self._tree().parents
            )
            self._ranges = node_ranges(self.module, self.text, statement_of)
        return self._ranges

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._tree().parents.get(id(node))

    def children(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """`node.children` without layout (read only), from the file's table; nodes outside
        the file (built by a fix) are read through :func:`devfix.tree.code_children_of`."""
        kids = self._tree().children.get(id(node))
        return kids if kids is not None else code_children_of(node)

    def subtree(self, root: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """Every node under `root` (itself included) but layout, in source order: a slice of
        the file's pre-order node list."""
        tables = self._tree()
        span = tables.order.get(id(root))
        if span is not None:
            return tables.nodes[span[0] : span[1] + 1]
        found: list[cst.CSTNode] = []
        stack = [root]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(reversed(self.children(node)))
        return found

    def of_type(self, root: cst.CSTNode, kind: type[_N] | tuple[type[_N], ...]) -> list[_N]:
        """The nodes of type `kind` under `root` (itself included), in source order.

        Answered from the file's per-class index, so asking for the calls of a whole module
        costs as much as there are calls, not nodes.
        """
        tables = self._tree()
        span = tables.order.get(id(root))
        if span is not None:
            return tables.of_type(span[0], span[1], kind)
        return [node for node in self.subtree(root) if isinstance(node, kind)]

    @property
    def tables(self) -> TreeTables:
        """Parents, children and source order of every node but layout (built on first use)."""
        return self._tree()

    def _tree(self) -> TreeTables:
        # The same table as libcst's ParentNodeProvider, without rebuilding every node.
        if self._tables is None:
            self._tables = build_tables(self.module)
        return self._tables

    def _all_nodes(self) -> list[cst.CSTNode]:
        """Every node of the module in source order (no libcst traversal)."""
        return self._tree().nodes

    def order(self, node: cst.CSTNode) -> tuple[int, int]:
        """(first, last) pre-order index of `node`'s subtree: source order without positions.

        Position metadata costs a whole-file pass; comparing these indices does not.
        """
        return self._tree().order[id(node)]

    def scope(self, node: cst.CSTNode) -> Scope | None:
        return cast("Scope | None", self._metadata(ScopeProvider).get(node))

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The chain of parents from the node's parent up to the module."""
        chain: list[cst.CSTNode] = []
        current = self.parent(node)
        while current is not None:
            chain.append(current)
            current = self.parent(current)
        return chain


_BUILTINS = frozenset(dir(builtins))
_IMPORT_CLASSES = frozenset((cst.Import, cst.ImportFrom))
_BINDING_CLASSES = frozenset(BINDING_NODES)
_DECLARATION_CLASSES = frozenset(DECLARATION_NODES)


class _NameTable:
    """Every import binding of a file, and every name the file binds in any other way."""

    def __init__(self, tables: TreeTables) -> None:
        self.imports: dict[str, set[str]] = {}
        self.bound: set[str] = set()
        #: The modules of `from m import *` (a leading "." for a relative one).
        self.star_modules: set[str] = set()
        # Only the binding nodes, from the file's per-class index (the order does not matter).
        nodes = tables.nodes
        bind = self.bound.add
        for node_class, indices in tables.by_class.items():
            if node_class in _IMPORT_CLASSES:
                for index in indices:
                    self._add_import(cast("cst.Import | cst.ImportFrom", nodes[index]))
            elif node_class in _BINDING_CLASSES:
                for index in indices:
                    for name in bound_by(nodes[index]):
                        bind(name.value)
            elif node_class in _DECLARATION_CLASSES:
                # `global x` is there because the function assigns `x`: the name is rebound.
                for index in indices:
                    declaration = cast("cst.Global | cst.Nonlocal", nodes[index])
                    self.bound.update(declared_names(declaration))

    def _add_import(self, statement: cst.Import | cst.ImportFrom) -> None:
        relative = isinstance(statement, cst.ImportFrom) and bool(statement.relative)
        if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
            module = dotted_name(statement.module) if statement.module is not None else ""
            self.star_modules.add("." * len(statement.relative) + (module or ""))
        for binding in import_bindings(statement):
            if relative:
                self.bound.add(binding.name)  # relative imports: resolved scope by scope
            else:
                self.imports.setdefault(binding.name, set()).add(binding.target)

    # -- answering -------------------------------------------------------------------------

    def ambiguous(self) -> set[str]:
        """Imported names whose meaning depends on the scope: bound otherwise too, or imported
        from two places."""
        return {
            name
            for name, targets in self.imports.items()
            if len(targets) != 1 or name in self.bound
        }

    def resolve(self, node: cst.CSTNode) -> Collection[QualifiedName] | None:
        """The qualified names of `node`, or None when only scope analysis can tell."""
        dotted = dotted_name(node)
        if dotted is None:
            return () if isinstance(node, cst.BaseExpression) else None
        root, _, rest = dotted.partition(".")
        suffix = f".{rest}" if rest else ""
        targets = self.imports.get(root)
        if targets is not None:
            if len(targets) != 1 or root in self.bound:
                return None
            (target,) = targets
            return {QualifiedName(f"{target}{suffix}", QualifiedNameSource.IMPORT)}
        if root in self.bound:
            # A local name: libcst would prefix its scope (`f.<locals>.x`); no pass needs that.
            return {QualifiedName(dotted, QualifiedNameSource.LOCAL)}
        if root in _BUILTINS:
            return {QualifiedName(f"builtins.{dotted}", QualifiedNameSource.BUILTIN)}
        if len(self.star_modules) == 1:
            # `from torch import *` and nothing else star-imported: a name the file never binds
            # comes from torch (`Tensor(n)`); with two star imports it could come from either.
            (module,) = self.star_modules
            if module == "torch" or module.startswith("torch."):
                return {QualifiedName(f"{module}.{dotted}", QualifiedNameSource.IMPORT)}
        return ()


def _module_statement_of(
    module: cst.Module, parents: Mapping[int, cst.CSTNode], node: cst.CSTNode
) -> cst.CSTNode | None:
    """The module-level statement that holds `node` (itself, for one); None for the module,
    its header and footer, and nodes outside the tables. (Holds no context: the ranges that
    keep it must not form a cycle with the context that keeps them.)"""
    current = node
    parent = parents.get(id(current))
    while parent is not None and parent is not module:
        current = parent
        parent = parents.get(id(current))
    return current if parent is module else None
