"""Per-file state shared by every pass: the parsed module and lazily resolved metadata.

Name resolution is the expensive part of a run (libcst's QualifiedNameProvider costs about ten
parses), so nothing is resolved until a pass asks about a node that already looks like a
candidate. The wrapper skips libcst's defensive deep copy so node identity is shared between
the passes, the metadata and the engine's edits.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
    Scope,
    ScopeProvider,
)

from devfix.tree import LIBCST_CHILDREN, TreeTables, build_tables

T = TypeVar("T")

#: Characters above which a file's ambiguous names (imported and also bound otherwise) are not
#: sent to libcst's scope analysis.
SCOPE_ANALYSIS_LIMIT = 250_000


class FileContext:
    """The parsed module of one file plus metadata computed on first use."""

    def __init__(self, module: cst.Module, path: str = "<string>", text: str | None = None) -> None:
        self.module = module
        self.path = path
        #: The source text the module was parsed from (for cheap textual prefilters).
        self.text = text if text is not None else module.code
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._resolved: dict[type[Any], Mapping[cst.CSTNode, Any]] = {}
        #: Analyses that several passes need (class tables, data flow), keyed by the analysis.
        self.shared: dict[str, object] = {}
        self._names: _NameTable | None = None
        self._tables: TreeTables | None = None
        _CHILDREN_CACHE.owner, _CHILDREN_CACHE.table = self, None

    def release(self) -> None:
        """Drop the analyses: they refer back to the passes that refer to this context, a cycle
        only the garbage collector would free (the children table stays for the engine)."""
        self.shared.clear()
        self._resolved.clear()
        self._names = None

    def _metadata(self, provider: type[Any]) -> Mapping[cst.CSTNode, Any]:
        table = self._resolved.get(provider)
        if table is None:
            table = self._wrapper.resolve(provider)
            self._resolved[provider] = table
        return table

    def qualified_names(self, node: cst.CSTNode) -> Collection[QualifiedName]:
        """The dotted names `node` refers to: `t.zeros` is `torch.zeros` after `import torch as t`.

        Names rooted in an import (or a builtin) are resolved from the file's import table,
        which costs almost nothing; only a name that the file both imports and binds otherwise
        goes to libcst's full scope analysis (about ten parses' worth of work), and in a file
        over SCOPE_ANALYSIS_LIMIT characters such a name resolves to nothing.
        """
        if self._names is None:
            self._names = _NameTable(self._all_nodes())
        fast = self._names.resolve(node)
        if fast is not None:
            return fast
        if len(self.text) > SCOPE_ANALYSIS_LIMIT:
            # libcst's scope analysis of a file this size takes minutes (1.4 MB: ~30 s of CPU
            # on a fast core); such a name stays unresolved and the passes decline it.
            return ()
        value = self._metadata(QualifiedNameProvider).get(node, ())
        if callable(value):
            # Newer libcst computes qualified names on demand (a LazyValue).
            value = value()
        return cast("Collection[QualifiedName]", value)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return cast(CodeRange, self._metadata(PositionProvider)[node])

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._tree().parents.get(id(node))

    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """`node.children`, from a table built once per file (libcst rebuilds it on every call)."""
        return list(self._tree().children.get(id(node), ()))

    def children_table(self) -> dict[int, list[cst.CSTNode]]:
        """Every node's children by `id(node)`: the table behind :meth:`children`; read only."""
        return self._tree().children

    def _tree(self) -> TreeTables:
        # The same table as libcst's ParentNodeProvider, without rebuilding every node.
        if self._tables is None:
            self._tables = build_tables(self.module)
            if _CHILDREN_CACHE.owner is self:
                _CHILDREN_CACHE.table = self._tables.children
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


class _ChildrenCache:
    """The children table of the newest FileContext, behind `CSTNode.children`.

    libcst computes `node.children` by rebuilding the node through a visitor on every access,
    and the passes' tree walks access it for every node they pass: on real code that was ~40 %
    of a run. Nodes are immutable and compare by identity, so a table built once per file by a
    single traversal gives the same lists; nodes outside the table (built by fixes, or from
    another module) still go to libcst. Holding only the newest file's table bounds the memory.
    """

    def __init__(self) -> None:
        self.owner: FileContext | None = None
        self.table: dict[int, list[cst.CSTNode]] | None = None


_CHILDREN_CACHE = _ChildrenCache()


def children_view(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """`node.children` for a caller that does not modify the list (no copy is made)."""
    table = _CHILDREN_CACHE.table
    owner = _CHILDREN_CACHE.owner
    if table is None and owner is not None:
        _CHILDREN_CACHE.owner = None  # no re-entry while the table is being built
        try:
            table = owner.children_table()
        finally:
            _CHILDREN_CACHE.owner = owner
        _CHILDREN_CACHE.table = table
    if table is not None:
        # The table keeps every node of its module alive, so no other node can share an id.
        kids = table.get(id(node))
        if kids is not None:
            return kids
    return LIBCST_CHILDREN(node)


def subtree_nodes(root: cst.CSTNode) -> Sequence[cst.CSTNode] | None:
    """Every node under `root` (itself included) in source order, as one slice of the newest
    file's pre-order node list; None when `root` is not in that file's table."""
    owner = _CHILDREN_CACHE.owner
    tables = owner._tables if owner is not None else None
    if tables is None or _CHILDREN_CACHE.table is not tables.children:
        return None
    span = tables.order.get(id(root))
    if span is None:
        return None
    return tables.nodes[span[0] : span[1] + 1]


def _cached_children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return list(children_view(node))  # a fresh list, as libcst returns


setattr(cst.CSTNode, "children", property(_cached_children))  # noqa: B010


_BUILTINS = frozenset(dir(builtins))


def _dotted(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def _module_name(node: cst.Attribute | cst.Name) -> str:
    return cast(str, _dotted(node))


class _NameTable:
    """Every import binding of a file, and every name the file binds in any other way."""

    def __init__(self, nodes: Iterable[cst.CSTNode]) -> None:
        self.imports: dict[str, set[str]] = {}
        self.bound: set[str] = set()
        for node in nodes:
            handler = getattr(self, f"visit_{type(node).__name__}", None)
            if handler is not None:
                handler(node)

    # -- collecting ------------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imports.setdefault(alias.asname.name.value, set()).add(full)
            else:
                root = full.split(".", 1)[0]
                self.imports.setdefault(root, set()).add(root)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        relative = bool(node.relative)
        base = _module_name(node.module) if node.module is not None else ""
        for alias in node.names:
            name = _module_name(alias.name)
            bound = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                bound = alias.asname.name.value
            if relative:
                self.bound.add(bound)  # relative imports: left to libcst
            else:
                self.imports.setdefault(bound, set()).add(f"{base}.{name}")

    def _bind(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind(node.name.name)

    def visit_Param(self, node: cst.Param) -> None:
        self.bound.add(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.bound.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.bound.add(node.name.value)

    def visit_Global(self, node: cst.Global) -> None:
        self.bound.update(item.name.value for item in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.bound.update(item.name.value for item in node.names)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self.bound.add(node.name.value)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self.bound.add(node.name.value)

    # -- answering -------------------------------------------------------------------------

    def resolve(self, node: cst.CSTNode) -> Collection[QualifiedName] | None:
        """The qualified names of `node`, or None when only scope analysis can tell."""
        dotted = _dotted(node)
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
        return ()
