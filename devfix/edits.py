"""Applying findings: each finding's edit group replaces nodes of the parsed module, whole.

A group that overlaps one already taken is skipped (the next round of the fix loop finds it
again on the rewritten code). Imports the applied fixes need are added afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from devfix.types import Edit, Finding, Replacement


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    ids = {id(node)}
    for child in node.children:
        ids |= _subtree_ids(child)
    return ids


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, Replacement]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) not in self.replacements

    # libcst types on_leave per node class through a TypeVar; a replacer returns any node.
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        return self.replacements.get(id(original_node), updated_node)


def apply_findings(
    module: cst.Module, findings: Iterable[Finding]
) -> tuple[cst.Module, list[Finding]]:
    """Apply each finding's edit group whole, skipping groups that overlap one already taken.

    Skipped groups are found again, on the rewritten code, by the next round.
    """
    claimed: set[int] = set()
    replacements: dict[int, Replacement] = {}
    applied: list[Finding] = []
    for finding in findings:
        touched: set[int] = set()
        for edit in finding.edits:
            touched |= _subtree_ids(edit.target)
        if touched & claimed:
            continue
        claimed |= touched
        replacements.update(_replacement_map(finding.edits))
        applied.append(finding)
    if not applied:
        return module, []
    rewritten = module.visit(_Replacer(replacements))
    imports = [spec for finding in applied for spec in finding.imports]
    if imports:
        # libcst.codemod pulls in libcst.matchers (over a second to import): only when needed.
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor, ImportItem

        context = CodemodContext()
        for spec in imports:
            AddImportsVisitor.add_needed_import(context, spec.module, spec.name, spec.alias)
        rewritten = AddImportsVisitor(
            context, [ImportItem(s.module, s.name, s.alias) for s in imports]
        ).transform_module(rewritten)
    return rewritten, applied


def _replacement_map(edits: Iterable[Edit]) -> dict[int, Replacement]:
    return {id(edit.target): edit.replacement for edit in edits}
