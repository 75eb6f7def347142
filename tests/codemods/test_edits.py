"""codemods._edits: the node builders the passes share keep the user's layout."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._edits import as_call_of, replace_argument
from devfix.codemods.analysis.names import code_of


def _call(code: str) -> cst.Call:
    return cst.ensure_type(cst.parse_expression(code), cst.Call)


def test_as_call_of_keeps_the_arguments_and_appends_keywords() -> None:
    call = _call("torch.cuda.FloatTensor(n,  c)")
    rebuilt = as_call_of(
        call, "t.zeros", dtype=cst.parse_expression("t.float"), device=cst.Name("d")
    )
    assert code_of(rebuilt) == "t.zeros(n,  c, dtype=t.float, device=d)"


def test_replace_argument_keeps_keyword_and_layout() -> None:
    call = _call("x.to(device=dev,  non_blocking=True)")
    rebuilt = replace_argument(call, call.args[0], cst.parse_expression("y.device"))
    assert code_of(rebuilt) == "x.to(device=y.device,  non_blocking=True)"
