"""The base of the device rules: a :class:`devfix.rule.Rule` that asks the shared analysis layer
(`codemods/analysis/`) what it knows about the file."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis import FileFacts
from devfix.context import FileContext
from devfix.rule import Rule


class DevicePass(Rule):
    """A rule that reads the file through :class:`FileFacts` (names, scopes, moves, devices),
    built once per file and shared by every pass of the file.

    The class docstring is the pass's user documentation, with the headings
    What it does / Why is this bad? / Example / Use instead / Fix safety.
    """

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.facts = FileFacts.of(context)

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The single fully resolved dotted name of `node`, or None if absent or ambiguous."""
        return self.facts.names.qualified_name(node)
