"""A parsed module's tree as plain tables (the engine's pass loop runs over them).

libcst walks a tree by rebuilding every node (`_visit_and_replace_children` constructs and
validates a copy even for a read-only visitor), and `node.children` is computed the same way.
On real code that rebuild costs about as much as the parse, and a run used to pay it twice per
file (once for the parent/children table, once for the passes). Here a node's children are read
straight from its dataclass fields, in the order libcst visits them.

That order is learned from libcst itself, not written down: for each node class and each set
of fields that hold nodes (a `Call` with or without parentheses), the first node seen is asked
for its children through libcst, each child is traced back to the field that holds it, and the
field order is kept. A class whose children cannot be traced that way (a child in no field or
in two, a field visited in two separate runs) keeps using libcst for that shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

#: libcst's own `CSTNode.children` (devfix.context replaces the property with a table lookup).
LIBCST_CHILDREN: Callable[[cst.CSTNode], Sequence[cst.CSTNode]] = cst.CSTNode.children.fget  # type: ignore[attr-defined]

#: Per value type, whether it is a libcst node (CSTNode is an ABC: isinstance is slow).
_IS_NODE: dict[type, bool] = {}
#: Per node class, the names of its dataclass fields that may hold nodes.
_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}
#: Per (class, which fields hold nodes), the fields in libcst's visiting order; None: ask libcst.
_ORDERS: dict[tuple[type[cst.CSTNode], int], tuple[str, ...] | None] = {}


def children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node.children` as libcst gives it, without rebuilding the node."""
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = _node_fields(kind)
    if not names:
        return []
    shape = 0
    bit = 1
    for name in names:
        value = getattr(node, name)
        kind_of_value = type(value)
        is_node = _IS_NODE.get(kind_of_value)
        if is_node is None:
            is_node = _IS_NODE[kind_of_value] = issubclass(kind_of_value, cst.CSTNode)
        if is_node or (value and (kind_of_value is tuple or kind_of_value is list)):
            shape |= bit
        bit <<= 1
    key = (kind, shape)
    if key in _ORDERS:
        order = _ORDERS[key]
    else:
        order = _ORDERS[key] = _learn_order(node, names)
    if order is None:
        return list(LIBCST_CHILDREN(node))
    kids: list[cst.CSTNode] = []
    for name in order:
        value = getattr(node, name)
        if _IS_NODE[type(value)]:
            kids.append(value)
        else:
            kids.extend(value)
    return kids


def _node_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of `kind` that may hold nodes: all but those typed as a plain class that is
    not a node (`value: str`, `has_trailing_newline: bool`)."""
    return tuple(
        field.name
        for field in dataclasses.fields(kind)
        if not (isinstance(field.type, type) and not issubclass(field.type, cst.CSTNode))
    )


def _learn_order(node: cst.CSTNode, names: tuple[str, ...]) -> tuple[str, ...] | None:
    holder: dict[int, str] = {}
    counts: dict[str, int] = {}
    for name in names:
        value = getattr(node, name)
        items = [value] if isinstance(value, cst.CSTNode) else None
        if isinstance(value, (tuple, list)):
            items = [item for item in value if isinstance(item, cst.CSTNode)]
            if len(items) != len(value):
                continue  # not a sequence of nodes
        for item in items or ():
            if id(item) in holder:
                return None  # one node object in two places: the field order is ambiguous
            holder[id(item)] = name
            counts[name] = counts.get(name, 0) + 1
    order: list[str] = []
    seen: dict[str, int] = {}
    for kid in LIBCST_CHILDREN(node):
        field = holder.get(id(kid))
        if field is None:
            return None  # a child libcst builds on the fly
        if order and order[-1] == field:
            seen[field] += 1
            continue
        if field in seen:
            return None  # a field visited in two separate runs
        order.append(field)
        seen[field] = 1
    if seen != counts:
        return None  # libcst does not visit every node a field holds
    return tuple(order)


@dataclasses.dataclass
class TreeTables:
    """Parent, children and source order of every node of one module, keyed by `id(node)`
    (libcst nodes hash in Python code; an int key does not). The tables hold every node, so
    no id is reused while they live."""

    parents: dict[int, cst.CSTNode]
    children: dict[int, list[cst.CSTNode]]
    #: Pre-order index of each node and the last pre-order index inside its subtree.
    order: dict[int, tuple[int, int]]
    #: Every node, in source (pre-)order.
    nodes: list[cst.CSTNode]


def build_tables(root: cst.CSTNode) -> TreeTables:
    parents: dict[int, cst.CSTNode] = {}
    children: dict[int, list[cst.CSTNode]] = {}
    order: dict[int, tuple[int, int]] = {}
    nodes: list[cst.CSTNode] = []
    # (node, -1) enters a node; (node, its pre-order index) leaves it.
    stack: list[tuple[cst.CSTNode, int]] = [(root, -1)]
    while stack:
        node, first = stack.pop()
        if first >= 0:
            order[id(node)] = (first, len(nodes) - 1)
            continue
        stack.append((node, len(nodes)))
        nodes.append(node)
        kids = children_of(node)
        children[id(node)] = kids
        for kid in kids:
            parents[id(kid)] = node
        stack.extend((kid, -1) for kid in reversed(kids))
    return TreeTables(parents, children, order, nodes)
