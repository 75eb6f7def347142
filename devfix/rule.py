"""The base of every rule: its code, name and documentation, the prefilter that decides whether
a file is parsed for it, and :meth:`Rule.report`. A rule matches, decides and reports; the
engine applies what it reports and never asks a rule to write."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import ClassVar

import libcst as cst

from devfix.context import FileContext
from devfix.types import Applicability, Edit, Finding, ImportSpec


class Rule(cst.CSTVisitor):
    """Subclasses set the class attributes below and call :meth:`report` from visit methods.

    The class docstring is the pass's user documentation, with the headings
    What it does / Why is this bad? / Example / Use instead / Fix safety.
    """

    CODE: ClassVar[str]
    NAME: ClassVar[str]
    MESSAGE: ClassVar[str]
    FIX_TITLE: ClassVar[str]
    APPLICABILITY: ClassVar[Applicability]
    #: Every level the pass's fixes can have, when it is more than `APPLICABILITY` alone (the
    #: docstring's "Fix safety" section says when each applies). Not listed: display-only, which
    #: any pass reports when it cannot determine a fix.
    APPLICABILITIES: ClassVar[tuple[Applicability, ...]] = ()
    #: The engine parses a file only if one of these words occurs in its text.
    TRIGGER_WORDS: ClassVar[tuple[str, ...]] = ("torch",)
    #: ... and only if every one of these occurs too (a pass that matches only `torch.*`
    #: qualified names can require "torch": no import can bind such a name without it).
    REQUIRED_WORDS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def wakes_on(cls, text: str) -> bool:
        """Whether the engine must parse `text` for this pass: a cheap test on the raw text
        that may say yes to code the pass then finds clean, but never no to code it would flag.
        """
        return any(word in text for word in cls.TRIGGER_WORDS) and all(
            word in text for word in cls.REQUIRED_WORDS
        )

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.findings: list[Finding] = []

    # -- what rules call ------------------------------------------------------------------

    def report(
        self,
        node: cst.CSTNode,
        *,
        edits: Iterable[Edit] = (),
        message: str | None = None,
        fix_title: str | None = None,
        applicability: Applicability | None = None,
        imports: Iterable[ImportSpec] = (),
    ) -> None:
        """Record a finding at `node`; `edits` together are its fix (none: report only)."""
        span = self.context.position(node)
        edit_group = tuple(edits)
        level = applicability or self.APPLICABILITY
        if not edit_group:
            level = Applicability.DISPLAY_ONLY
        self.findings.append(
            Finding(
                code=self.CODE,
                name=self.NAME,
                message=message or self.MESSAGE,
                line=span.start.line,
                col=span.start.column + 1,
                end_line=span.end.line,
                end_col=span.end.column + 1,
                fix_title=fix_title or self.FIX_TITLE,
                applicability=level,
                edits=edit_group,
                imports=tuple(imports),
            )
        )

    # -- documentation ---------------------------------------------------------------------

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def fix_applicabilities(cls) -> tuple[Applicability, ...]:
        """The levels this pass's fixes can have, safest first."""
        levels = set(cls.APPLICABILITIES or (cls.APPLICABILITY,))
        return tuple(level for level in Applicability if level in levels)

    @classmethod
    def summary(cls) -> str:
        """The docstring's title line, for rule lists and the README table."""
        lines = cls.documentation().splitlines()
        return lines[0].strip() if lines else ""
