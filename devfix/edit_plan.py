"""How findings' edits are applied: node replacements that may reuse the nodes they replace.

An :class:`~devfix.types.Edit` replaces one node of the parsed module, found by identity. Its
replacement may contain nodes *of the original tree*: a statement wrapped in `if rank == 0:`,
statements inserted before or after a statement (`FlattenSentinel([new, statement])`), a
statement moved elsewhere (removed at its place, reused at the new one), a block of statements
moved under `if __name__ == "__main__":`. Every reused node is taken *with the edits made
inside it* (by the same finding or by another one applied in the same round) and with its own
edit, except where that makes no sense: a target reused in its own replacement is taken
without it (a statement with another one inserted after it), and so is a node that its edit
removes (removed at its place and reused at another, it is moved). So a finding can report one
edit per statement and still compose with the expression-level edits inside those statements,
and with other passes' fixes.

Two findings conflict (the second waits for the next round) when one edits a node that the
other replaces wholesale, or when one edits or reuses a node that the other edits itself.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence

import libcst as cst

from devfix.tree import children_of
from devfix.types import Edit, Replacement


def _walk(root: cst.CSTNode, stop: Collection[int] = ()) -> Iterator[cst.CSTNode]:
    """Every node under `root` (itself included); a node whose id is in `stop` is yielded but
    not entered."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if id(node) not in stop:
            stack.extend(children_of(node))


def _replacement_nodes(replacement: Replacement) -> Sequence[cst.CSTNode]:
    if isinstance(replacement, cst.RemovalSentinel):
        return ()
    if isinstance(replacement, cst.FlattenSentinel):
        return list(replacement.nodes)
    return (replacement,)


def _reused(edits: Iterable[Edit], original: Container[int]) -> tuple[set[int], set[int]]:
    """(ids of `original` nodes the replacements reuse, ids of the targets that reuse some)."""
    reused: set[int] = set()
    reusing: set[int] = set()
    for edit in edits:
        for top in _replacement_nodes(edit.replacement):
            stack = [top]
            while stack:
                node = stack.pop()
                if id(node) in original:
                    reused.add(id(node))
                    reusing.add(id(edit.target))
                else:
                    stack.extend(children_of(node))
    return reused, reusing


class EditSet:
    """Edit groups (one per finding) accepted one at a time, then applied in one traversal.

    With the module's `order` (as `devfix.tree.spans_with_layout` gives), the traversal skips
    every subtree that holds no target and no reused node: what they hold stays as it is, and
    a large file with a few edits is not rebuilt node by node."""

    def __init__(
        self, module: cst.Module, order: Mapping[int, tuple[int, int]] | None = None
    ) -> None:
        self.module = module
        self.order = order
        self._original: Container[int] | None = order
        self._claimed: set[int] = set()
        self._replacements: dict[int, Replacement] = {}
        #: Original nodes that some accepted replacement reuses.
        self._reused: set[int] = set()
        #: Targets whose replacement reuses original nodes (their subtrees must be visited).
        self._reusing: set[int] = set()

    def _original_ids(self) -> Container[int]:
        if self._original is None:
            self._original = {id(node) for node in _walk(self.module)}
        return self._original

    def reused_by(self, edits: Iterable[Edit]) -> tuple[set[int], set[int]]:
        """(ids of original nodes the replacements reuse, ids of the targets that reuse some)."""
        return _reused(edits, self._original_ids())

    def claims(self, edits: Sequence[Edit], reused: set[int]) -> set[int]:
        """The nodes a group needs for itself: each target and what it replaces wholesale
        (everything under it that the group does not reuse), and every node it reuses."""
        claimed = set(reused)
        for edit in edits:
            claimed.add(id(edit.target))
            for node in _walk(edit.target, reused):
                if id(node) not in reused:
                    claimed.add(id(node))
        return claimed

    def add(self, edits: Sequence[Edit]) -> bool:
        """Accept a group unless it conflicts with one accepted before (see the module doc)."""
        reused, reusing = self.reused_by(edits)
        claimed = self.claims(edits, reused)
        if claimed & self._claimed:
            return False
        self._claimed |= claimed
        self._reused |= reused
        self._reusing |= reusing
        for edit in edits:
            self._replacements[id(edit.target)] = edit.replacement
        return True

    def apply(self) -> cst.Module:
        """The module with every accepted group applied."""
        if not self._replacements:
            return self.module
        applier = _Applier(self._replacements, self._reused, self._reusing)
        if self.order is not None:
            applier.prune(self.order, [*self._replacements, *self._reused])
        rewritten = self.module.visit(applier)
        assert isinstance(rewritten, cst.Module)
        return rewritten


class _Applier(cst.CSTTransformer):
    def __init__(
        self, replacements: dict[int, Replacement], reused: set[int], reusing: set[int]
    ) -> None:
        super().__init__()
        self.replacements = replacements
        self.reused = reused
        self.reusing = reusing
        #: Reused node -> the node with the edits inside it applied (its own edit not).
        self.inner: dict[int, cst.CSTNode] = {}
        #: Nodes being rebuilt on their own (for a reuse ahead of their place): no own edit.
        self.standalone: list[int] = []
        self._order: Mapping[int, tuple[int, int]] | None = None
        #: Pre-order indexes of the targets and reused nodes, sorted (with `_order`).
        self._marks: list[int] = []

    def prune(self, order: Mapping[int, tuple[int, int]], nodes: Iterable[int]) -> None:
        """Visit only the subtrees that hold one of `nodes` (ids of original nodes)."""
        self._order = order
        self._marks = sorted(order[key][0] for key in nodes if key in order)

    def _holds_a_mark(self, key: int) -> bool:
        assert self._order is not None
        span = self._order.get(key)
        if span is None:
            return True  # not a node of the file: a replacement's own node
        first = bisect.bisect_left(self._marks, span[0])
        return first < len(self._marks) and self._marks[first] <= span[1]

    def on_visit(self, node: cst.CSTNode) -> bool:
        key = id(node)
        if self.standalone and self.standalone[-1] == key:
            return True
        if self._order is not None and not self._holds_a_mark(key):
            return False
        return key not in self.replacements or key in self.reusing

    # libcst types on_leave per node class through a TypeVar; an applier returns any node.
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Replacement:
        key = id(original_node)
        if updated_node is not original_node and _same_fields(original_node, updated_node):
            # libcst rebuilds every node it enters; one with nothing changed inside stays the
            # file's own node, so unchanged statements are recognised as such.
            updated_node = original_node
        if key in self.reused:
            self.inner[key] = updated_node
        if self.standalone and self.standalone[-1] == key:
            return updated_node
        replacement = self.replacements.get(key)
        if replacement is None:
            return updated_node
        if key not in self.reusing:
            return replacement
        return self._with_reused(replacement, key)

    def inner_of(self, node: cst.CSTNode) -> cst.CSTNode:
        found = self.inner.get(id(node))
        if found is None:
            # Reused ahead of its own place in the traversal: rebuild it now.
            self.standalone.append(id(node))
            try:
                node.visit(self)
            finally:
                self.standalone.pop()
            found = self.inner[id(node)]
        return found

    def reused_form(self, node: cst.CSTNode, target: int) -> Replacement:
        """What a reused node becomes inside the replacement of `target` (see the module doc)."""
        replacement = self.replacements.get(id(node))
        if (
            replacement is None
            or id(node) == target
            or isinstance(replacement, cst.RemovalSentinel)
        ):
            return self.inner_of(node)
        if id(node) in self.reusing:
            return self._with_reused(replacement, id(node))
        return replacement

    def _with_reused(self, replacement: Replacement, target: int) -> Replacement:
        substitute = _Substitute(self, target)
        if isinstance(replacement, cst.RemovalSentinel):
            return replacement
        if isinstance(replacement, cst.FlattenSentinel):
            return cst.FlattenSentinel([_visit(node, substitute) for node in replacement.nodes])
        return _visit(replacement, substitute)


def _visit(node: cst.CSTNode, visitor: cst.CSTTransformer) -> cst.CSTNode:
    result = node.visit(visitor)
    assert isinstance(result, cst.CSTNode)
    return result


class _Substitute(cst.CSTTransformer):
    """Rebuilds a replacement with each reused original node swapped for what it becomes."""

    def __init__(self, applier: _Applier, target: int) -> None:
        super().__init__()
        self.applier = applier
        self.target = target

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.applier.reused

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Replacement:
        if id(original_node) in self.applier.reused:
            return self.applier.reused_form(original_node, self.target)
        return updated_node


def apply_edits(
    module: cst.Module,
    edits: Sequence[Edit],
    order: Mapping[int, tuple[int, int]] | None = None,
) -> cst.Module:
    """`module` with one group of edits applied (no other group competes); `order` as for
    :class:`EditSet`."""
    edit_set = EditSet(module, order)
    edit_set.add(edits)
    return edit_set.apply()


def _same_fields(old: cst.CSTNode, new: cst.CSTNode) -> bool:
    """Whether `new` is `old` rebuilt with every field the same."""
    return type(new) is type(old) and all(
        _same_value(getattr(old, name), getattr(new, name)) for name in _field_names(type(old))
    )


@functools.cache
def _field_names(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    # Asked for every node a traversal rebuilds: dataclasses.fields filters anew at each call.
    return tuple(field.name for field in dataclasses.fields(kind))


def _same_value(old: object, new: object) -> bool:
    """Whether a field keeps its value: the same node, the same nodes in order, an equal
    string or flag."""
    if old is new:
        return True
    if isinstance(old, (tuple, list)) and isinstance(new, (tuple, list)):
        return _same(old, new)
    if isinstance(old, cst.CSTNode) or isinstance(new, cst.CSTNode):
        return False
    return old == new


def _same(first: Sequence[cst.CSTNode], second: Sequence[cst.CSTNode]) -> bool:
    return len(first) == len(second) and all(a is b for a, b in zip(first, second))
