"""The pass base class: what a finding holds of its fix."""

from __future__ import annotations

import textwrap

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.context import FileContext
from devfix.edit_plan import apply_edits
from devfix.types import Applicability, Edit, Finding

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


def _finding_of(kind: type[DevicePass]) -> tuple[Finding, str]:
    context = FileContext(cst.parse_module(SOURCE), "train.py", SOURCE)
    found = kind(context)
    context.module.visit(found)
    (finding,) = found.findings
    return finding, apply_edits(context.module, finding.edits).code


def test_a_finding_holds_its_fix_as_edits_and_no_text_until_asked() -> None:
    finding, fixed = _finding_of(_Gate)
    assert fixed.endswith('if rank == 0:\n    # the checkpoint\n    torch.save(x, "y.pt")\n')
    # The text form is the engine's, for SARIF only: nothing is rendered at report time.
    assert finding.text_edits == ()
    assert finding.has_fix and finding.without_nodes().has_fix


def test_a_finding_without_edits_is_display_only_also_between_processes() -> None:
    class _Note(_TestPass):
        CODE, NAME = "DF997", "test-note"

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            self.report(node)

    finding, fixed = _finding_of(_Note)
    assert fixed == SOURCE
    assert finding.applicability is Applicability.DISPLAY_ONLY
    assert not finding.has_fix and not finding.without_nodes().has_fix
