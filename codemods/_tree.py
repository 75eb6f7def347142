"""Walking a libcst tree without a visitor (cheap: children come from the file's table)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from devfix.context import children_view, subtree_nodes


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under `root` (itself included), in source order."""
    nodes = subtree_nodes(root)
    if nodes is not None:
        return iter(nodes)
    return _walk_children(root)


def _walk_children(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children_view(node)))


def names_in_scope(scope: cst.CSTNode, name: str) -> Iterator[cst.Name]:
    """The `Name` nodes spelled `name` under `scope`, outside nested functions, classes and
    lambdas (which have their own scopes)."""
    stack = [scope]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and node.value == name:
            yield node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not scope:
            continue
        stack.extend(reversed(children_view(node)))
