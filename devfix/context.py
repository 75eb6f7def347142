"""Per-file state shared by every pass: the parsed module and lazily resolved metadata.

Name resolution is the expensive part of a run (libcst's QualifiedNameProvider costs about ten
parses), so nothing is resolved until a pass asks about a node that already looks like a
candidate. The wrapper skips libcst's defensive deep copy so node identity is shared between
the passes, the metadata and the engine's edits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    Scope,
    ScopeProvider,
)

T = TypeVar("T")


class FileContext:
    """The parsed module of one file plus metadata computed on first use."""

    def __init__(self, module: cst.Module, path: str = "<string>") -> None:
        self.module = module
        self.path = path
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._resolved: dict[type[Any], Mapping[cst.CSTNode, Any]] = {}
        #: Analyses that several passes need (class tables, data flow), keyed by the analysis.
        self.shared: dict[str, object] = {}
        self._parents: dict[cst.CSTNode, cst.CSTNode] | None = None
        self._children: dict[cst.CSTNode, list[cst.CSTNode]] | None = None
        _CHILDREN_CACHE.owner, _CHILDREN_CACHE.table = self, None

    def _metadata(self, provider: type[Any]) -> Mapping[cst.CSTNode, Any]:
        table = self._resolved.get(provider)
        if table is None:
            table = self._wrapper.resolve(provider)
            self._resolved[provider] = table
        return table

    def qualified_names(self, node: cst.CSTNode) -> Collection[QualifiedName]:
        value = self._metadata(QualifiedNameProvider).get(node, ())
        if callable(value):
            # Newer libcst computes qualified names on demand (a LazyValue).
            value = value()
        return cast("Collection[QualifiedName]", value)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return cast(CodeRange, self._metadata(PositionProvider)[node])

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._tree()[0].get(node)

    def children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """`node.children`, from a table built once per file (libcst rebuilds it on every call)."""
        return self._tree()[1].get(node, [])

    def _tree(self) -> tuple[dict[cst.CSTNode, cst.CSTNode], dict[cst.CSTNode, list[cst.CSTNode]]]:
        # The same table as libcst's ParentNodeProvider, in one plain traversal instead of one
        # that also calls `.children` (itself a rebuild of the node) on every node.
        if self._parents is None:
            collector = _TreeCollector()
            self.module.visit(collector)
            self._parents, self._children = collector.parents, collector.children
            if _CHILDREN_CACHE.owner is self:
                _CHILDREN_CACHE.table = self._children
        assert self._children is not None
        return self._parents, self._children

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


class _TreeCollector(cst.CSTVisitor):
    """Children and parent of every node, as `CSTNode.children` and ParentNodeProvider give."""

    def __init__(self) -> None:
        super().__init__()
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.children: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        self._stack: list[list[cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self._stack[-1].append(node)
        self._stack.append([])
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kids = self._stack.pop()
        self.children[original_node] = kids
        for child in kids:
            self.parents[child] = original_node

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


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
        self.table: dict[cst.CSTNode, list[cst.CSTNode]] | None = None


_CHILDREN_CACHE = _ChildrenCache()
_LIBCST_CHILDREN = cst.CSTNode.children.fget  # type: ignore[attr-defined]


def _cached_children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    table = _CHILDREN_CACHE.table
    owner = _CHILDREN_CACHE.owner
    if table is None and owner is not None:
        _CHILDREN_CACHE.owner = None  # no re-entry while the table is being built
        try:
            table = owner._tree()[1]
        finally:
            _CHILDREN_CACHE.owner = owner
        _CHILDREN_CACHE.table = table
    if table is not None:
        kids = table.get(node)
        if kids is not None:
            return list(kids)  # a fresh list, as libcst returns
    return cast("Sequence[cst.CSTNode]", _LIBCST_CHILDREN(node))


setattr(cst.CSTNode, "children", property(_cached_children))  # noqa: B010
