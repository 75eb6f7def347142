"""Edit application: replacements that reuse original nodes compose with the edits inside them."""

from __future__ import annotations

import textwrap

import libcst as cst

from devfix.edit_plan import EditSet, apply_edits
from devfix.tree import build_tables, spans_with_layout
from devfix.types import Edit

SOURCE = textwrap.dedent(
    """\
    import torch

    x = torch.zeros(3)  # a comment
    for step in range(2):
        y = x + 1
        print(y)
    torch.save(x, "x.pt")
    """
)


def _module() -> cst.Module:
    return cst.parse_module(SOURCE)


def _statements(module: cst.Module) -> list[cst.BaseStatement]:
    return list(module.body)


def _string(module: cst.Module, value: str) -> cst.SimpleString:
    found: list[cst.SimpleString] = []

    class Finder(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if node.value == value:
                found.append(node)

    module.visit(Finder())
    assert len(found) == 1
    return found[0]


def _loop_body(module: cst.Module) -> list[cst.BaseStatement]:
    loop = _statements(module)[2]
    assert isinstance(loop, cst.For)
    return list(loop.body.body)


def _gated(condition: str, body: list[cst.BaseStatement]) -> cst.If:
    return cst.If(test=cst.parse_expression(condition), body=cst.IndentedBlock(body=body))


def test_a_statement_wrapped_in_a_condition_keeps_an_edit_made_inside_it() -> None:
    module = _module()
    save = _statements(module)[3]
    path = _string(module, '"x.pt"')
    rewritten = apply_edits(
        module,
        [Edit(save, _gated("rank == 0", [save])), Edit(path, cst.SimpleString('"y.pt"'))],
    )
    assert rewritten.code.endswith('if rank == 0:\n    torch.save(x, "y.pt")\n')


def test_insertions_around_a_statement_compose_with_another_finding_in_the_same_round() -> None:
    module = _module()
    save = _statements(module)[3]
    barrier = cst.parse_statement("dist.barrier()\n")
    edit_set = EditSet(module)
    # One finding inserts after the statement, another rewrites an argument inside it.
    assert edit_set.add([Edit(save, cst.FlattenSentinel([save, barrier]))])
    assert edit_set.add([Edit(_string(module, '"x.pt"'), cst.SimpleString('"y.pt"'))])
    assert edit_set.apply().code.endswith('torch.save(x, "y.pt")\ndist.barrier()\n')


def test_a_wholesale_replacement_conflicts_with_an_edit_inside_it() -> None:
    module = _module()
    save = _statements(module)[3]
    edit_set = EditSet(module)
    assert edit_set.add([Edit(save, cst.parse_statement("pass\n"))])
    assert not edit_set.add([Edit(_string(module, '"x.pt"'), cst.SimpleString('"y.pt"'))])
    assert edit_set.apply().code.endswith("pass\n")


def test_two_groups_editing_the_same_node_conflict() -> None:
    module = _module()
    save = _statements(module)[3]
    edit_set = EditSet(module)
    assert edit_set.add([Edit(save, cst.FlattenSentinel([save, cst.parse_statement("a()\n")]))])
    assert not edit_set.add([Edit(save, cst.FlattenSentinel([cst.parse_statement("b()\n"), save]))])


def test_reusing_a_node_that_another_group_edits_itself_conflicts() -> None:
    module = _module()
    loop, save = _statements(module)[2:4]
    edit_set = EditSet(module)
    assert edit_set.add([Edit(save, cst.RemovalSentinel.REMOVE)])
    # Moving the removed statement in front of the loop would resurrect it: wait a round.
    assert not edit_set.add([Edit(loop, cst.FlattenSentinel([save, loop]))])
    assert "torch.save" not in edit_set.apply().code


def test_a_moved_statement_carries_the_edits_inside_it_even_when_moved_ahead() -> None:
    module = _module()
    loop, save = _statements(module)[2:4]
    path = _string(module, '"x.pt"')
    rewritten = apply_edits(
        module,
        [
            # The save moves in front of the loop, which comes first in the traversal.
            Edit(save, cst.RemovalSentinel.REMOVE),
            Edit(loop, cst.FlattenSentinel([save, loop])),
            Edit(path, cst.SimpleString('"y.pt"')),
        ],
    )
    assert rewritten.code.index('torch.save(x, "y.pt")') < rewritten.code.index("for step")
    assert rewritten.code.count("torch.save") == 1


def test_a_reused_node_keeps_its_own_edit_of_the_same_group() -> None:
    module = _module()
    save = _statements(module)[3]
    path = _string(module, '"x.pt"')
    # A new statement built around the original argument, which has an edit of its own.
    call = cst.Call(func=cst.Name("save_on_rank_zero"), args=[cst.Arg(path)])
    rewritten = apply_edits(
        module,
        [
            Edit(save, cst.SimpleStatementLine([cst.Expr(call)])),
            Edit(path, cst.SimpleString('"y.pt"')),
        ],
    )
    assert rewritten.code.endswith('save_on_rank_zero("y.pt")\n')


def test_consecutive_statements_gated_as_one_block() -> None:
    module = _module()
    first, second = _loop_body(module)
    rewritten = apply_edits(
        module,
        [
            Edit(first, _gated("rank == 0", [first, second])),
            Edit(second, cst.RemovalSentinel.REMOVE),
        ],
    )
    assert "    if rank == 0:\n        y = x + 1\n        print(y)\n" in rewritten.code


def test_the_tail_of_a_module_moves_under_a_main_guard_with_its_edits() -> None:
    module = _module()
    statements = _statements(module)
    tail = statements[1:]
    path = _string(module, '"x.pt"')
    guard = _gated('__name__ == "__main__"', [tail[0].with_changes(leading_lines=[]), *tail[1:]])
    edits = [Edit(tail[0], guard.with_changes(leading_lines=tail[0].leading_lines))]
    edits += [Edit(statement, cst.RemovalSentinel.REMOVE) for statement in tail[1:]]
    edits.append(Edit(path, cst.SimpleString('"y.pt"')))
    rewritten = apply_edits(module, edits)
    assert rewritten.code == textwrap.dedent(
        """\
        import torch

        if __name__ == "__main__":
            x = torch.zeros(3)  # a comment
            for step in range(2):
                y = x + 1
                print(y)
            torch.save(x, "y.pt")
        """
    )


def test_a_group_that_reuses_a_statement_leaves_the_statement_open_to_other_groups() -> None:
    module = _module()
    first, second = _loop_body(module)
    edit_set = EditSet(module)
    assert edit_set.add(
        [
            Edit(first, _gated("rank == 0", [first, second])),
            Edit(second, cst.RemovalSentinel.REMOVE),
        ]
    )
    call = second
    assert isinstance(call, cst.SimpleStatementLine)
    expression = call.body[0]
    assert isinstance(expression, cst.Expr)
    assert edit_set.add([Edit(expression.value, cst.parse_expression("print(y, flush=True)"))])
    assert "        print(y, flush=True)\n" in edit_set.apply().code


def test_a_group_without_reuse_is_applied_as_before() -> None:
    module = _module()
    path = _string(module, '"x.pt"')
    assert apply_edits(module, [Edit(path, cst.SimpleString('"z.pt"'))]).code == SOURCE.replace(
        "x.pt", "z.pt"
    )


def test_with_the_files_order_only_subtrees_holding_an_edit_are_rebuilt() -> None:
    module = _module()
    order = spans_with_layout(module)
    loop = _statements(module)[2]
    save = _statements(module)[3]
    path = _string(module, '"x.pt"')
    first = _statements(module)[1]
    moved = [
        Edit(first, cst.RemovalSentinel.REMOVE),
        Edit(save, cst.FlattenSentinel([first, _gated("rank == 0", [save])])),
        Edit(path, cst.SimpleString('"y.pt"')),
    ]
    pruned = apply_edits(module, moved, order)
    assert pruned.code == apply_edits(module, moved).code
    assert 'if rank == 0:\n    torch.save(x, "y.pt")\n' in pruned.code
    assert pruned.body[1] is loop  # a statement without an edit is the same node


def test_reused_whitespace_is_planned_as_new_with_the_same_result() -> None:
    """The tables' spans leave layout out: a replacement that reuses the file's whitespace is
    planned as if it were new, with the same result as when every node is known."""
    source = "def f(a, b):\n    x = call(a,  # why\n             b)\n    return x\n"
    module = cst.parse_module(source)
    tables = build_tables(module)
    call = next(n for n in tables.nodes if isinstance(n, cst.Call))
    statement = next(n for n in tables.nodes if isinstance(n, cst.SimpleStatementLine))
    renamed = cst.Call(
        func=cst.Name("other"),
        args=[cst.Arg(cst.Name("a"))],
        whitespace_before_args=call.whitespace_before_args,  # the file's own node
    )
    edits = [
        Edit(call, renamed),
        Edit(statement, cst.FlattenSentinel([cst.parse_statement("a = a.cpu()\n"), statement])),
    ]
    with_layout = spans_with_layout(module)
    assert id(call.whitespace_before_args) in with_layout
    assert id(call.whitespace_before_args) not in tables.order
    assert apply_edits(module, edits, tables.order).code == apply_edits(module, edits).code
    assert "other(a)" in apply_edits(module, edits).code
