"""The pass base class: a finding's edits as text replacements of the file."""

from __future__ import annotations

import textwrap

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.context import FileContext
from devfix.edit_plan import apply_edits
from devfix.types import Applicability, Edit, TextEdit

SOURCE = textwrap.dedent(
    """\
    import torch

    x = torch.zeros(3)
    # the checkpoint
    torch.save(x, "x.pt")
    """
)


class _TestPass(DevicePass):
    MESSAGE = "a test finding"
    FIX_TITLE = "fix it"
    APPLICABILITY = Applicability.SAFE


class _Gate(_TestPass):
    """Gates `torch.save` under `rank == 0` and renames its file (nested edits)."""

    CODE, NAME = "DF999", "test-gate"

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        small = node.body[0]
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return
        path = small.value.args[1].value
        gate = cst.If(test=cst.parse_expression("rank == 0"), body=cst.IndentedBlock([node]))
        self.report(node, edits=[Edit(node, gate), Edit(path, cst.SimpleString('"y.pt"'))])


class _Rename(_TestPass):
    """Renames the file (one edit that stands alone)."""

    CODE, NAME = "DF998", "test-rename"

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.value == '"x.pt"':
            self.report(node, edits=[Edit(node, cst.SimpleString('"y.pt"'))])


def _patched(text: str, edits: tuple[TextEdit, ...]) -> str:
    """`text` with the replacements (1-based lines and columns) made, last first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        start = offsets[edit.line - 1] + edit.col - 1
        end = offsets[edit.end_line - 1] + edit.end_col - 1
        text = text[:start] + edit.text + text[end:]
    return text


def _finding_of(kind: type[DevicePass]) -> tuple[FileContext, tuple[TextEdit, ...], str]:
    context = FileContext(cst.parse_module(SOURCE), "train.py", SOURCE)
    found = kind(context)
    context.module.visit(found)
    (finding,) = found.findings
    return context, finding.text_edits, apply_edits(context.module, finding.edits).code


def test_nested_edits_become_text_replacements_that_do_not_overlap() -> None:
    _context, edits, fixed = _finding_of(_Gate)
    assert len(edits) == 1
    assert _patched(SOURCE, edits) == fixed
    assert fixed.endswith('if rank == 0:\n    # the checkpoint\n    torch.save(x, "y.pt")\n')


def test_an_edit_that_stands_alone_replaces_its_own_span() -> None:
    _context, edits, fixed = _finding_of(_Rename)
    (edit,) = edits
    assert (edit.line, edit.col, edit.end_line, edit.end_col) == (5, 15, 5, 21)
    assert _patched(SOURCE, edits) == fixed
