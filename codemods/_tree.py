"""Walking a libcst tree without a context (kept for DF401 until it asks codemods.analysis)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from devfix.tree import children_of


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `root` (itself included), in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children_of(node)))
