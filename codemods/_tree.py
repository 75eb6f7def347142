"""Walking a libcst tree without a visitor (cheap: `children` comes from the file's table)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `root` (itself included), in source order."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))
