"""A parsed snippet and its facts, for the analysis tests."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst

from devfix.codemods.analysis import FileFacts
from devfix.codemods.analysis.names import code_of
from devfix.context import FileContext

N = TypeVar("N", bound=cst.CSTNode)


@dataclass
class Parsed:
    context: FileContext
    facts: FileFacts

    @property
    def module(self) -> cst.Module:
        return self.context.module

    def all(self, kind: type[N], code: str | None = None) -> list[N]:
        """Every node of `kind` (whose source text is `code`, if given), in source order."""
        return [
            node
            for node in self.context.subtree(self.module)
            if isinstance(node, kind) and (code is None or code_of(node) == code)
        ]

    def one(self, kind: type[N], code: str) -> N:
        found = self.all(kind, code)
        assert len(found) == 1, (code, len(found))
        return found[0]

    def function(self, name: str) -> cst.FunctionDef:
        return next(f for f in self.all(cst.FunctionDef) if f.name.value == name)


def parse(source: str) -> Parsed:
    text = textwrap.dedent(source)
    context = FileContext(cst.parse_module(text), "<test>", text)
    return Parsed(context, FileFacts.of(context))
