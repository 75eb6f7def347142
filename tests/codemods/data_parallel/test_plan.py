"""The change set: statement changes become per-statement edits that keep the statements."""

from __future__ import annotations

import textwrap

import libcst as cst

from devfix.codemods.data_parallel.plan import Plan, chunk_edits, parse_statements
from devfix.context import FileContext
from devfix.edit_plan import apply_edits

SOURCE = textwrap.dedent(
    '''\
    def main():
        """Docstring."""
        a = 1
        # about b
        b = 2
        print(a)
        print(b)
        return a
    '''
)


def _plan(source: str = SOURCE) -> tuple[Plan, cst.Module, list[cst.BaseStatement]]:
    module = cst.parse_module(source)
    plan = Plan(FileContext(module, "x.py", source))
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef) and isinstance(function.body, cst.IndentedBlock)
    return plan, module, list(function.body.body)


def _applied(plan: Plan, module: cst.Module) -> str:
    return apply_edits(module, plan.edits()).code


def test_consecutive_statements_with_one_gate_share_an_if() -> None:
    plan, module, body = _plan()
    plan.statement(body[3]).gate = "rank == 0"
    plan.statement(body[4]).gate = "rank == 0"
    assert "    if rank == 0:\n        print(a)\n        print(b)\n    return a\n" in _applied(
        plan, module
    )


def test_inserted_statements_take_the_comments_above() -> None:
    plan, module, body = _plan()
    plan.statement(body[2]).before += parse_statements("x = 0\n")
    plan.statement(body[2]).after += parse_statements("y = 0\n")
    assert "    a = 1\n    # about b\n    x = 0\n    b = 2\n    y = 0\n" in _applied(plan, module)


def test_a_removed_statement_leaves_its_comments_to_the_next() -> None:
    plan, module, body = _plan()
    plan.statement(body[2]).remove = True
    assert "    a = 1\n    # about b\n    print(a)\n" in _applied(plan, module)


def test_block_start_goes_after_the_docstring_and_end_before_the_return() -> None:
    plan, module, _body = _plan()
    block = cst.ensure_type(module.body[0], cst.FunctionDef).body
    assert isinstance(block, cst.IndentedBlock)
    plan.prepend(block, parse_statements("setup()\n"))
    plan.append(block, parse_statements("teardown()\n"))
    out = _applied(plan, module)
    assert '    """Docstring."""\n    setup()\n    a = 1\n' in out
    assert "    teardown()\n    return a\n" in out


def test_a_flat_script_moves_under_a_main_block_with_its_blank_lines_unindented() -> None:
    source = "import os\n\nx = 1\n\nfor i in range(2):\n    print(i)\n"
    module = cst.parse_module(source)
    plan = Plan(FileContext(module, "x.py", source))
    plan.main_from = module.body[1]
    plan.main_start += parse_statements("setup()\n")
    assert _applied(plan, module) == (
        "import os\n\n"
        'if __name__ == "__main__":\n'
        "    setup()\n\n"
        "    x = 1\n\n"
        "    for i in range(2):\n"
        "        print(i)\n"
    )


def test_a_note_goes_right_above_its_statement() -> None:
    plan, module, body = _plan()
    plan.statement(body[2]).note = "devfix DF401: a note"
    assert "    # about b\n    # devfix DF401: a note\n    b = 2\n" in _applied(plan, module)


def test_chunks_follow_the_original_order() -> None:
    module = cst.parse_module("a = 1\nb = 2\nc = 3\n")
    a, b, c = module.body
    new = cst.parse_statement("n = 0\n")
    # c moves in front of b, and a new statement comes first.
    edits = chunk_edits([a, b, c], [(new, []), (a, [a]), (c, [c]), (b, [b])])
    assert apply_edits(module, edits).code == "n = 0\na = 1\nc = 3\nb = 2\n"
    assert {type(e.replacement).__name__ for e in edits} <= {"FlattenSentinel", "RemovalSentinel"}


def test_an_unchanged_block_gives_no_edit() -> None:
    module = cst.parse_module("a = 1\nb = 2\n")
    a, b = module.body
    assert chunk_edits([a, b], [(a, [a]), (b, [b])]) == []
