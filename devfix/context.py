"""Per-file state shared by every pass: the parsed module and lazily resolved metadata.

Name resolution is the expensive part of a run (libcst's QualifiedNameProvider costs about ten
parses), so nothing is resolved until a pass asks about a node that already looks like a
candidate. The wrapper skips libcst's defensive deep copy so node identity is shared between
the passes, the metadata and the engine's edits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar, cast

import libcst as cst
from libcst.metadata import (
    CodeRange,
    MetadataWrapper,
    ParentNodeProvider,
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
        return cast("cst.CSTNode | None", self._metadata(ParentNodeProvider).get(node))

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
