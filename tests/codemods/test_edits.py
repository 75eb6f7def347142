"""codemods._edits: the node builders the passes share keep the user's layout."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._edits import (
    and_also,
    and_keyword,
    append_keyword,
    as_call_of,
    comma_separated,
    keyword_arg,
    method_chain,
    positional_as_keywords,
    rebuilt_call,
    register_buffer_for,
    replace_argument,
    select_device_edits,
    statement_before,
    without_device,
    wrapped_in_call,
)
from devfix.codemods.analysis.names import code_of
from devfix.types import ImportSpec


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


def test_rebuilt_call_with_keywords_for_positional_arguments() -> None:
    call = _call("amp.autocast(True, torch.float16,)")
    rest = positional_as_keywords(call.args, ("enabled", "dtype"))
    rebuilt = rebuilt_call(
        call, cst.Name("autocast"), [keyword_arg("device_type", cst.Name("t"))], rest
    )
    assert code_of(rebuilt) == "autocast(device_type=t, enabled=True, dtype=torch.float16,)"


def test_and_keyword_joins_a_given_value_or_appends_it() -> None:
    given = _call("S(init_scale=2.0, enabled=a or b)")
    joined = and_keyword(given.args, "enabled", 'd == "cuda"')
    assert code_of(given.with_changes(args=comma_separated(joined, given))) == (
        'S(init_scale=2.0, enabled=(a or b) and d == "cuda")'
    )
    plain = _call("S(enabled=use_amp)")
    assert code_of(plain.with_changes(args=and_keyword(plain.args, "enabled", "c"))) == (
        "S(enabled=use_amp and c)"
    )
    missing = _call("S(2.0)")
    added = comma_separated(and_keyword(missing.args, "enabled", "c"), missing)
    assert code_of(missing.with_changes(args=added)) == "S(2.0, enabled=c)"
    assert code_of(and_also(cst.parse_expression("(a or b)"), "c")) == "(a or b) and c"


def test_register_buffer_for_a_statement_or_a_setattr_call() -> None:
    store = cst.ensure_type(cst.parse_statement("self.w = torch.ones(2);\n").body[0], cst.Assign)
    new = register_buffer_for(store, "self", cst.SimpleString('"w"'), store.value)
    assert code_of(new) == 'self.register_buffer("w", torch.ones(2), persistent=False);'
    call = _call("setattr(me, name, t)")
    new = register_buffer_for(call, "me", call.args[1].value, call.args[2].value)
    assert code_of(new) == "me.register_buffer(name, t, persistent=False)"


def test_select_device_edits_add_the_helper_once_after_the_imports() -> None:
    module = cst.parse_module("import torch as t\nx = 1\n")
    edits, imports = select_device_edits(
        module, module.body[0], name="pick", torch="t", imported=False, define="device"
    )
    assert imports == [ImportSpec("os")]
    (edit,) = edits
    assert edit.target is module.body[0]
    text = module.deep_replace(edit.target, edit.replacement).code  # type: ignore[arg-type]
    assert "def pick() -> t.device:" in text and text.index("device = pick()") < text.index("x = 1")
    defined = cst.parse_module("def pick():\n    pass\n")
    edits, imports = select_device_edits(
        defined, None, name="pick", torch=None, imported=False, define="d"
    )
    assert imports == [] and len(edits) == 1  # only `d = pick()`, after the helper
    assert select_device_edits(defined, None, name="pick", torch=None, imported=False) == ([], [])
    fresh = cst.parse_module("x = 1\n")
    _, imports = select_device_edits(fresh, None, name="pick", torch=None, imported=False)
    assert imports == [ImportSpec("os"), ImportSpec("torch")]


def test_method_chain_parenthesises_the_receiver_where_needed() -> None:
    assert code_of(method_chain(cst.parse_expression("loss"), "detach", "cpu")) == (
        "loss.detach().cpu()"
    )
    assert code_of(method_chain(cst.parse_expression("a / n"), "cpu")) == "(a / n).cpu()"
    assert code_of(method_chain(cst.parse_expression("(a / n)"), "cpu")) == "(a / n).cpu()"
    assert code_of(method_chain(cst.parse_expression("-x"))) == "-x"


def test_without_device_keeps_what_else_the_move_does() -> None:
    assert code_of(without_device(_call("x.to(device)"))) == "x"
    assert code_of(without_device(_call("x.cuda()"))) == "x"
    assert code_of(without_device(_call("x.to(device, non_blocking=True)"))) == "x"
    assert code_of(without_device(_call("x.to(device, torch.float)"))) == "x.to(torch.float)"
    assert code_of(without_device(_call("x.to(dtype=t, device=d)"))) == "x.to(dtype=t)"


def test_statement_before_takes_the_lines_above_its_anchor() -> None:
    module = cst.parse_module("x = 1\n\n# update\nm.update(x)\n")
    anchor = cst.ensure_type(module.body[1], cst.SimpleStatementLine)
    edit = statement_before(anchor, "m.to(d)")
    assert isinstance(edit.replacement, cst.FlattenSentinel)
    body = module.with_changes(body=[module.body[0], *edit.replacement.nodes])
    assert body.code == "x = 1\n\n# update\nm.to(d)\nm.update(x)\n"
    split = statement_before(anchor, "m.to(d)", split=1)
    assert isinstance(split.replacement, cst.FlattenSentinel)
    body = module.with_changes(body=[module.body[0], *split.replacement.nodes])
    assert body.code == "x = 1\n\nm.to(d)\n# update\nm.update(x)\n"


def test_wrapped_in_call_keeps_the_first_line_short() -> None:
    def wrapped(code: str) -> str:
        return code_of(wrapped_in_call("nn.ModuleList", cst.parse_expression(code)))

    assert wrapped("[]") == "nn.ModuleList()"
    assert wrapped("[a, b]") == "nn.ModuleList([a, b])"
    assert wrapped("a, b") == "nn.ModuleList((a, b))"
    assert wrapped("[\n    a,\n]") == "nn.ModuleList([\n    a,\n])"
    assert wrapped("[a(i)\n for i in x]") == "nn.ModuleList(\n    [a(i)\n for i in x]\n)"


def test_append_keyword_keeps_the_line_break_before_the_closing_parenthesis() -> None:
    call = _call("torch.load(\n    path, weights_only=True\n)")
    grown = append_keyword(call, "map_location", cst.Name("device"))
    assert code_of(grown) == "torch.load(\n    path, weights_only=True, map_location=device\n)"
