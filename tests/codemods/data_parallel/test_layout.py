"""Line length: the file's limit is inferred, long calls are wrapped as black wraps them."""

from __future__ import annotations

import libcst as cst
import pytest

from devfix.codemods.data_parallel import layout


@pytest.mark.parametrize(
    ("longest", "limit"), [(60, 79), (79, 79), (80, 88), (95, 100), (119, 120), (121, None)]
)
def test_the_smallest_usual_limit_every_code_line_respects(longest: int, limit: int | None) -> None:
    text = "x = 1\n" + "y = '" + "a" * (longest - 6) + "'\n"
    assert layout.line_limit(text) == limit


def test_comments_and_urls_do_not_count() -> None:
    text = "x = 1\n# " + "c" * 200 + "\nurl = 'https://example.org/" + "p" * 200 + "'\n"
    assert layout.line_limit(text) == 79


def _wrapped(code: str, indent: str, limit: int) -> str:
    call = cst.parse_expression(code)
    assert isinstance(call, cst.Call)
    statement = cst.SimpleStatementLine([cst.Expr(layout.wrap_call(call, indent, "    ", limit))])
    return cst.Module([]).code_for_node(statement)


def test_arguments_on_one_line_of_their_own_when_they_fit() -> None:
    assert _wrapped("f(alpha, beta=2, gamma=[3])", "", 28) == (
        "f(\n    alpha, beta=2, gamma=[3]\n)\n"
    )


def test_one_argument_per_line_when_they_do_not() -> None:
    assert _wrapped("f(alpha, beta=2, gamma=[3])", "", 12) == (
        "f(\n    alpha,\n    beta=2,\n    gamma=[3],\n)\n"
    )


def test_a_call_already_on_several_lines_is_left_alone() -> None:
    call = cst.parse_expression("f(a,\n  b)")
    assert isinstance(call, cst.Call)
    assert layout.wrap_call(call, "", "    ", 5) is call


def test_comment_lines_do_not_break_inside_backticks() -> None:
    lines = layout.comment_lines(["launch with `torchrun --nproc_per_node=2 x.py` please"], 30)
    texts = [line.comment.value for line in lines if line.comment is not None]
    assert texts == ["# launch with", "# `torchrun --nproc_per_node=2 x.py`", "# please"]


def test_a_long_line_with_a_trailing_comment_gets_the_comment_above() -> None:
    statement = cst.parse_statement("x = compute(alpha, beta)  # a fairly long explanation\n")
    fitted = layout.fit_statement(statement, "", "    ", 40, lambda node: False)
    assert cst.Module([]).code_for_node(fitted) == (
        "# a fairly long explanation\nx = compute(alpha, beta)\n"
    )


def test_original_nodes_are_never_rewrapped() -> None:
    statement = cst.parse_statement("x = compute(alpha, beta, gamma, delta)\n")
    assert layout.fit_statement(statement, "", "    ", 20, lambda node: True) is statement
