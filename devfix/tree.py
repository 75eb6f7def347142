"""A parsed module's tree as plain tables, and the pass loop that runs over them.

This module alone knows how to get a node's children (:func:`children_of`) and owns the
per-file tables built from it (:func:`build_tables`); libcst itself is never patched.

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

import bisect
import dataclasses
import functools
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, cast

import libcst as cst

#: libcst's own `CSTNode.children` (rebuilds the node on every call; used to learn field orders).
LIBCST_CHILDREN: Callable[[cst.CSTNode], Sequence[cst.CSTNode]] = cst.CSTNode.children.fget  # type: ignore[attr-defined]

_N = TypeVar("_N", bound=cst.CSTNode)

#: Per value type, whether it is a libcst node (CSTNode is an ABC: isinstance is slow).
_IS_NODE: dict[type, bool] = {}

#: Node classes that hold only layout: spaces, line breaks, blank lines and comments. Fields
#: typed with them hold nothing else, and they hold nothing but each other.
LAYOUT_CLASSES: tuple[type[cst.CSTNode], ...] = (
    cst.SimpleWhitespace,
    cst.ParenthesizedWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.Comment,
)
_LAYOUT_BASES: tuple[type, ...] = (cst.BaseParenthesizableWhitespace, *LAYOUT_CLASSES)
_IS_LAYOUT: frozenset[type] = frozenset(LAYOUT_CLASSES)


def dotted_name(node: cst.CSTNode) -> str | None:
    """`self.pos_embedding.weight` for a pure Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def target_names(target: cst.CSTNode) -> Iterator[cst.Name]:
    """Names an assignment target binds: `a`, `a, (b, *c)`; `self.x` and `a[i]` bind none."""
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def _children_reader(
    fields_of: Callable[[type[cst.CSTNode]], tuple[str, ...]],
    keep: Callable[[cst.CSTNode], bool],
) -> Callable[[cst.CSTNode], list[cst.CSTNode]]:
    """A function giving the children of a node that are in the fields `fields_of` names for
    its class (and that `keep` accepts where libcst itself must be asked), in libcst's order."""
    #: Per node class, the names of its dataclass fields read.
    fields: dict[type[cst.CSTNode], tuple[str, ...]] = {}
    #: Per (class, which fields hold nodes), the fields in libcst's visiting order; None: ask
    #: libcst.
    orders: dict[tuple[type[cst.CSTNode], int], tuple[str, ...] | None] = {}

    def read(node: cst.CSTNode) -> list[cst.CSTNode]:
        kind = type(node)
        names = fields.get(kind)
        if names is None:
            names = fields[kind] = fields_of(kind)
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
        if key in orders:
            order = orders[key]
        else:
            order = orders[key] = _learn_order(node, names, keep)
        if order is None:
            return [kid for kid in LIBCST_CHILDREN(node) if keep(kid)]
        kids: list[cst.CSTNode] = []
        for name in order:
            value = getattr(node, name)
            if _IS_NODE[type(value)]:
                kids.append(value)
            else:
                kids.extend(value)
        return kids

    return read


def _node_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of `kind` that may hold nodes: all but those typed as a plain class that is
    not a node (`value: str`, `has_trailing_newline: bool`)."""
    return tuple(
        field.name
        for field in dataclasses.fields(kind)
        if not (isinstance(field.type, type) and not issubclass(field.type, cst.CSTNode))
    )


def _code_fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of `kind` that may hold nodes other than layout (`whitespace_after`,
    `leading_lines` and the like are left out); none for a layout class itself."""
    if kind in _IS_LAYOUT:
        return ()
    types = {field.name: field.type for field in dataclasses.fields(kind)}
    return tuple(name for name in _node_fields(kind) if not _holds_layout(types[name]))


def _holds_layout(annotation: object) -> bool:
    """Whether a field typed `annotation` holds layout nodes only (or a sentinel, or None):
    `SimpleWhitespace`, `Sequence[EmptyLine]`, `Union[BaseParenthesizableWhitespace,
    MaybeSentinel]`."""
    if isinstance(annotation, type):
        return issubclass(annotation, _LAYOUT_BASES)
    members = typing.get_args(annotation)
    nodes = [
        member for member in members if member is not type(None) and member is not cst.MaybeSentinel
    ]
    return bool(nodes) and all(_holds_layout(member) for member in nodes)


#: `node.children` as libcst gives it, without rebuilding the node.
children_of = _children_reader(_node_fields, lambda kid: True)

#: `node.children` without layout (whitespace, line breaks, blank lines, comments): what the
#: file's tables hold. Layout is more than half of a module's nodes, and nothing asks about it.
code_children_of = _children_reader(_code_fields, lambda kid: type(kid) not in _IS_LAYOUT)


def _learn_order(
    node: cst.CSTNode, names: tuple[str, ...], keep: Callable[[cst.CSTNode], bool]
) -> tuple[str, ...] | None:
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
            if not keep(kid):
                continue  # in a field not read
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
    """Parent, children and source order of every node of one module but its layout
    (:data:`LAYOUT_CLASSES`: whitespace, line breaks, blank lines, comments), keyed by
    `id(node)` (libcst nodes hash in Python code; an int key does not). The module holds every
    node while its tables live, so no id is reused."""

    parents: dict[int, cst.CSTNode]
    children: dict[int, list[cst.CSTNode]]
    #: Pre-order index of each node and the last pre-order index inside its subtree.
    order: dict[int, tuple[int, int]]
    #: Every node, in source (pre-)order.
    nodes: list[cst.CSTNode]
    #: Per node class, the pre-order indices of its nodes (ascending).
    by_class: dict[type[cst.CSTNode], list[int]]

    def of_type(self, first: int, last: int, kind: type[_N] | tuple[type[_N], ...]) -> list[_N]:
        """The nodes of type `kind` whose pre-order index is in [first, last], in source order.

        Read from the per-class index: no walk over the other nodes and no isinstance check
        (libcst's classes are ABCs, whose isinstance costs a Python call each).
        """
        runs: list[list[int]] = []
        for node_class in concrete_classes(kind):
            indices = self.by_class.get(node_class)
            if not indices:
                continue
            low = bisect.bisect_left(indices, first)
            high = bisect.bisect_right(indices, last, low)
            if low < high:
                runs.append(indices if low == 0 and high == len(indices) else indices[low:high])
        nodes = self.nodes
        if len(runs) == 1:
            return [cast(_N, nodes[index]) for index in runs[0]]
        return [cast(_N, nodes[index]) for index in sorted(i for run in runs for i in run)]


@functools.cache
def concrete_classes(
    kind: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...],
) -> tuple[type[cst.CSTNode], ...]:
    """Every class a node of type `kind` can have: the classes themselves and all their
    subclasses (`BaseExpression` -> `Name`, `Call`, ...)."""
    found: list[type[cst.CSTNode]] = []
    pending = list(kind) if isinstance(kind, tuple) else [kind]
    while pending:
        current = pending.pop()
        if current not in found:
            found.append(current)
            pending.extend(current.__subclasses__())
    return tuple(found)


def _preorder(
    root: cst.CSTNode, read: Callable[[cst.CSTNode], list[cst.CSTNode]]
) -> tuple[list[cst.CSTNode], dict[int, list[cst.CSTNode]]]:
    """(every node under `root` in pre-order, id -> its children), children as `read` gives."""
    children: dict[int, list[cst.CSTNode]] = {}
    nodes: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        kids = read(node)
        children[id(node)] = kids
        if kids:
            stack.extend(kids[::-1])
    return nodes, children


def build_tables(root: cst.CSTNode) -> TreeTables:
    nodes, children = _preorder(root, code_children_of)
    parents: dict[int, cst.CSTNode] = {}
    # Backwards, a node's last child is done before it: its subtree ends where that child's
    # does. (One pass, no second visit of every node on the stack.)
    order: dict[int, tuple[int, int]] = {}
    by_class: dict[type[cst.CSTNode], list[int]] = {}
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        kids = children[id(node)]
        if kids:
            for kid in kids:
                parents[id(kid)] = node
            order[id(node)] = (index, order[id(kids[-1])][1])
        else:
            order[id(node)] = (index, index)
        indices = by_class.get(type(node))
        if indices is None:
            by_class[type(node)] = [index]
        else:
            indices.append(index)
    for indices in by_class.values():
        indices.reverse()
    return TreeTables(parents, children, order, nodes, by_class)


def spans_with_layout(root: cst.CSTNode) -> dict[int, tuple[int, int]]:
    """id -> (pre-order index, last pre-order index inside its subtree) of every node under
    `root`, layout included: what fix planning needs where an edit targets layout itself.
    (Otherwise the tables' spans do: a replacement that reuses the file's whitespace can be
    planned as if it were new, since nothing is ever edited inside layout.)"""
    nodes, children = _preorder(root, children_of)
    spans: dict[int, tuple[int, int]] = {}
    for index in range(len(nodes) - 1, -1, -1):
        kids = children[id(nodes[index])]
        spans[id(nodes[index])] = (index, spans[id(kids[-1])][1]) if kids else (index, index)
    return spans


def visit_all(root: cst.CSTNode, visitors: Sequence[cst.CSTVisitor], tables: TreeTables) -> None:
    """Run every visitor over `root` in one traversal, as `root.visit(visitor)` would each.

    One traversal serves all passes (each full libcst traversal costs more than the parse);
    visitors with per-attribute hooks need libcst's own traversal, which calls those.
    """
    if not visitors:
        return
    dispatcher = Dispatcher(visitors)
    if dispatcher.attribute_visitors:
        root.visit(dispatcher)
    elif (
        tables.nodes
        and tables.nodes[0] is root
        and not any(dispatcher.custom)
        and not dispatcher.hooks_layout()
    ):
        dispatcher.run_indexed(tables)
    else:
        # The tables leave layout out; these visitors see every node, as under libcst.
        dispatcher.run(root)


class Dispatcher(cst.CSTVisitor):
    """Runs several visitors in one traversal, each seeing exactly what it would see alone.

    A visitor whose visit method returns False skips that node's children (the others do not)
    and still gets the node's leave call, as in libcst's own traversal.
    """

    def __init__(self, visitors: Sequence[cst.CSTVisitor]) -> None:
        super().__init__()
        self.visitors = list(visitors)
        #: Per visitor, the node whose children it declined (None: it is visiting).
        self.skipping: list[cst.CSTNode | None] = [None] * len(self.visitors)
        #: How many entries of `skipping` are not None.
        self.skipped = 0
        self.visits: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]] = {}
        self.leaves: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]] = {}
        base_visit, base_leave = cst.CSTVisitor.on_visit, cst.CSTVisitor.on_leave
        #: Visitors that override on_visit / on_leave get them called for every node.
        self.custom = [
            type(v).on_visit is not base_visit or type(v).on_leave is not base_leave
            for v in self.visitors
        ]
        self.attribute_visitors = [
            index
            for index, visitor in enumerate(self.visitors)
            if _has_attribute_hooks(type(visitor))
        ]

    def _table(
        self,
        table: dict[type[cst.CSTNode], list[tuple[int, Callable[[cst.CSTNode], object]]]],
        prefix: str,
        kind: type[cst.CSTNode],
    ) -> list[tuple[int, Callable[[cst.CSTNode], object]]]:
        entries: list[tuple[int, Callable[[cst.CSTNode], object]]] = []
        for index, visitor in enumerate(self.visitors):
            if self.custom[index]:
                if prefix == "visit_":
                    # libcst skips the children when on_visit returns anything falsy.
                    entries.append((index, _as_bool(visitor.on_visit)))
                else:
                    entries.append((index, visitor.on_leave))
                continue
            name = prefix + kind.__name__
            # libcst's CSTVisitor declares an empty hook for every node type: calling those
            # would only cost time (twice per node).
            if getattr(type(visitor), name, None) is getattr(cst.CSTVisitor, name, None):
                continue
            entries.append((index, getattr(visitor, name)))
        table[kind] = entries
        return entries

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._enter(node, self._hooks(type(node))[0])
        return self.skipped < len(self.skipping)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        entries = self._hooks(type(original_node))[1]
        skipping = self.skipping
        if self.skipped:
            for index, mark in enumerate(skipping):
                if mark is original_node:
                    skipping[index] = None
                    self.skipped -= 1
        for index, method in entries:
            if skipping[index] is None:
                method(original_node)

    def run(self, root: cst.CSTNode) -> None:
        """`root.visit(self)` without libcst's rebuild of every node, for visitors without
        attribute hooks (every node is seen, layout included).

        Most nodes (names, whitespace, operators) have no hook in any pass: they cost a lookup
        and a push of their children, not two method calls.
        """
        total = len(self.skipping)
        stack: list[object] = [root]
        while stack:
            item = stack.pop()
            if item is _LEAVE:
                self.on_leave(cast(cst.CSTNode, stack.pop()))
                continue
            node = cast(cst.CSTNode, item)
            entries, leave_entries = self._hooks(type(node))
            if self._enter(node, entries) or leave_entries:
                stack.append(node)
                stack.append(_LEAVE)
            if self.skipped < total:
                stack.extend(reversed(children_of(node)))

    def hooks_layout(self) -> bool:
        """Whether some visitor has a hook for a layout class (which the tables leave out)."""
        return any(any(self._hooks(kind)) for kind in LAYOUT_CLASSES)

    def _hooks(self, kind: type[cst.CSTNode]) -> tuple[_Hooks, _Hooks]:
        """The visit and leave hooks of every visitor for nodes of class `kind`."""
        entries = self.visits.get(kind)
        if entries is None:
            entries = self._table(self.visits, "visit_", kind)
        leave_entries = self.leaves.get(kind)
        if leave_entries is None:
            leave_entries = self._table(self.leaves, "leave_", kind)
        return entries, leave_entries

    def _enter(self, node: cst.CSTNode, entries: _Hooks) -> bool:
        """Call the visit hooks of the visitors not skipping; whether one declined the
        children (its mark is set: the node's leave must then run)."""
        skipping = self.skipping
        declined = False
        for index, method in entries:
            if skipping[index] is None and method(node) is False:
                skipping[index] = node
                self.skipped += 1
                declined = True
        return declined

    def run_indexed(self, tables: TreeTables) -> None:
        """`root.visit(self)` over the file's per-class index, for visitors with typed hooks
        only: just the nodes of the classes some visitor hooks are looked at, in source order,
        and a node's leave hooks run once the hooked nodes of its subtree are done."""
        hooked: list[list[int]] = []
        for node_class, indices in tables.by_class.items():
            entries, leave_entries = self._hooks(node_class)
            if entries or leave_entries:
                hooked.append(indices)
        nodes, order = tables.nodes, tables.order
        # Nodes whose leave is due once the traversal passes the end of their subtree.
        open_nodes: list[tuple[int, cst.CSTNode]] = []
        for index in sorted(index for indices in hooked for index in indices):
            while open_nodes and open_nodes[-1][0] < index:
                self.on_leave(open_nodes.pop()[1])
            node = nodes[index]
            kind = type(node)
            if self._enter(node, self.visits[kind]) or self.leaves[kind]:
                open_nodes.append((order[id(node)][1], node))
        while open_nodes:
            self.on_leave(open_nodes.pop()[1])

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        for index in self.attribute_visitors:
            if self.skipping[index] is None:
                self.visitors[index].on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        for index in self.attribute_visitors:
            if self.skipping[index] is None:
                self.visitors[index].on_leave_attribute(original_node, attribute)


#: Per visitor index, its hook for one node class.
_Hooks = list[tuple[int, Callable[[cst.CSTNode], object]]]

#: Marks, on the traversal stack, that the node below it is being left.
_LEAVE = object()


def _as_bool(hook: Callable[[cst.CSTNode], object]) -> Callable[[cst.CSTNode], bool]:
    return lambda node: bool(hook(node))


@functools.cache
def _has_attribute_hooks(kind: type[cst.CSTVisitor]) -> bool:
    """Whether a visitor uses libcst's per-attribute hooks (`visit_Call_func` and the like)."""
    if (
        kind.on_visit_attribute is not cst.CSTVisitor.on_visit_attribute
        or kind.on_leave_attribute is not cst.CSTVisitor.on_leave_attribute
    ):
        return True
    # libcst's CSTVisitor itself declares an empty hook for every node attribute: skip those.
    return any(
        name.startswith(("visit_", "leave_"))
        and "_" in name.split("_", 1)[1]
        and getattr(kind, name) is not getattr(cst.CSTVisitor, name, None)
        for name in dir(kind)
    )
