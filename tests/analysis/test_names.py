"""codemods.analysis.names: qualified names and how the file spells torch objects."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import (
    argument,
    argument_of,
    code_of,
    is_constant,
    is_docstring,
    is_method_call,
    keyword_argument,
    parsed_expression,
    receiver_root,
    root_name,
    statement_call,
    string_value,
)
from devfix.types import ImportSpec
from tests.analysis._parsed import parse


def test_qualified_names_follow_aliases_and_from_imports() -> None:
    parsed = parse(
        """
        import torch as t
        from torch import zeros as z
        a = t.ones(3)
        b = z(3)
        """
    )
    names = parsed.facts.names
    assert names.qualified_name(parsed.one(cst.Attribute, "t.ones")) == "torch.ones"
    call = parsed.one(cst.Call, "z(3)")
    assert names.qualified_name(call.func) == "torch.zeros"
    assert names.imported_aliases("torch") == frozenset({"z"})
    assert names.imported_aliases("numpy") == frozenset()


def test_dtypes_include_float8_and_exclude_devices() -> None:
    parsed = parse(
        """
        import torch
        x.to(torch.float8_e4m3fn)
        x.to(torch.bfloat16)
        x.to(torch.device("cuda"))
        """
    )
    names = parsed.facts.names
    assert names.is_dtype(parsed.one(cst.Attribute, "torch.float8_e4m3fn"))
    assert names.is_dtype(parsed.one(cst.Attribute, "torch.bfloat16"))
    assert not names.is_dtype(parsed.one(cst.Call, 'torch.device("cuda")'))


def test_torch_spelling_uses_the_files_alias_or_asks_for_an_import() -> None:
    assert parse("import torch as th\n").facts.names.torch_spelling() == ("th", [])
    assert parse("import torch\n").facts.names.torch_spelling() == ("torch", [])
    assert parse("import torch.nn\n").facts.names.torch_alias() is None
    assert parse("import numpy\n").facts.names.torch_spelling() == (
        "torch",
        [ImportSpec("torch")],
    )


def test_nn_reference_prefers_the_names_the_file_imported() -> None:
    cases = {
        "import torch.nn as nn\n": ("nn.ModuleList", ()),
        "from torch import nn\n": ("nn.ModuleList", ()),
        "from torch.nn import ModuleList as ML\n": ("ML", ()),
        "import torch as t\n": ("t.nn.ModuleList", ()),
        "import torch\n": ("torch.nn.ModuleList", ()),
        "import os\n": ("ModuleList", (ImportSpec("torch.nn", "ModuleList"),)),
    }
    for source, expected in cases.items():
        assert parse(source).facts.names.nn_reference("ModuleList") == expected, source


def test_expression_roots_and_arguments() -> None:
    parsed = parse("y = model.module.parameters()\nz = x.transpose(1, 2)[0]\nf(a, b=c)\n")
    assert root_name(parsed.one(cst.Call, "model.module.parameters()")) == "model"
    assert receiver_root(parsed.one(cst.Subscript, "x.transpose(1, 2)[0]")) == "x"
    call = parsed.one(cst.Call, "f(a, b=c)")
    assert receiver_root(call) is None and root_name(call) == "f"
    arg = keyword_argument(call, "b")
    assert arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "c"
    assert keyword_argument(call, "a") is None
    assert is_constant(cst.parse_expression("None")) and is_constant(cst.Integer("1"))
    assert not is_constant(cst.parse_expression("x"))


def test_argument_by_keyword_or_position() -> None:
    call = cst.parse_expression("DataLoader(ds, 4, shuffle=True)")
    other = cst.parse_expression("DataLoader(batch_size=4, dataset=ds)")
    assert isinstance(call, cst.Call) and isinstance(other, cst.Call)
    for found in (argument(call, "dataset"), argument(other, "dataset")):
        assert isinstance(found, cst.Name) and found.value == "ds"
    second = argument(call, "batch_size", 1)
    assert isinstance(second, cst.Integer) and second.value == "4"
    assert argument(call, "sampler", 2) is None


def test_torch_through_a_star_import_and_names_bound_anywhere() -> None:
    parsed = parse(
        """
        from utils import *
        def train(model, epochs):
            device = torch.device("cuda:0")
        """
    )
    names = parsed.facts.names
    attribute = parsed.one(cst.Attribute, "torch.device")
    assert names.qualified_name(attribute) is None
    assert names.qualified_name_through_star(attribute) == "torch.device"
    assert names.has_star_import()
    assert names.bound_anywhere("device") and names.bound_anywhere("epochs")
    assert not names.bound_anywhere("optimizer")
    plain = parse("import torch as t\nx = torch.device('cpu')\n")
    found = plain.facts.names.qualified_name_through_star(plain.one(cst.Attribute, "torch.device"))
    assert found is None  # no star import: an unbound `torch`


def test_the_import_table_maps_top_level_absolute_imports() -> None:
    parsed = parse(
        """
        import os.path
        import torch as t
        import torch.distributed as dist
        from torch.nn import DataParallel as DP, Linear
        from . import sibling
        from .pkg import helper
        from numpy import *
        import torch as t2
        from math import pi as t2

        def f():
            import json
        """
    )
    assert parsed.facts.names.import_table() == {
        "os": "os",
        "t": "torch",
        "dist": "torch.distributed",
        "DP": "torch.nn.DataParallel",
        "Linear": "torch.nn.Linear",
        "t2": "math.pi",  # the later import of the name wins
    }


def test_import_records_say_which_imports_are_relative() -> None:
    parsed = parse("from .models import Net\nfrom models import Head\n")
    records = {record.name: record.relative for record in parsed.facts.names.imports()}
    assert records == {"Net": True, "Head": False}


def test_statement_readers() -> None:
    parsed = parse(
        """
        '''Module docs.'''
        print("a")
        x = print("b")
        print("c"); print("d")
        if x:
            pass
        """
    )
    lines = list(parsed.module.body)
    assert is_docstring(lines[0]) and not is_docstring(lines[1])
    call = statement_call(lines[1])
    assert call is not None and code_of(call) == 'print("a")'
    assert statement_call(lines[2]) is None  # an assignment, not a call statement
    assert statement_call(lines[3]) is None  # two statements on the line
    assert statement_call(lines[4]) is None and not is_docstring(lines[4])


def test_through_variable_is_the_wrapping_variable_call_or_the_value() -> None:
    parsed = parse(
        """
        from torch.autograd import Variable
        a = Variable(torch.randn(2))
        b = Variable(torch.randn(3), requires_grad=True)
        c = wrap(torch.randn(4))
        """
    )
    names = parsed.facts.names

    def through(code: str) -> str:
        return code_of(names.through_variable(parsed.one(cst.Call, code)))

    assert through("torch.randn(2)") == "Variable(torch.randn(2))"
    assert through("torch.randn(3)") == "torch.randn(3)"  # not the call's only argument
    assert through("torch.randn(4)") == "torch.randn(4)"  # not Variable


def test_argument_of_is_the_keyword_else_the_plain_positional_argument() -> None:
    call = cst.ensure_type(cst.parse_expression("x.to(*rest, d, non_blocking=True)"), cst.Call)
    found = argument_of(call, "device")
    assert found is not None and code_of(found.value) == "d"
    assert argument_of(call, "non_blocking") is call.args[2]
    assert argument_of(call, "dtype", 1) is None


def test_string_value_reads_plain_string_literals_only() -> None:
    assert string_value(cst.parse_expression("'mask'")) == "mask"
    assert string_value(cst.parse_expression("b'mask'")) is None
    assert string_value(cst.parse_expression("name")) is None


def test_is_method_call_names_the_called_method() -> None:
    assert is_method_call(cst.parse_expression("logits.argmax(1).detach()"), "detach")
    assert not is_method_call(cst.parse_expression("logits.detach().cpu()"), "detach")
    assert not is_method_call(cst.parse_expression("detach(x)"), "detach")
    assert not is_method_call(cst.parse_expression("x.detach"), "detach")


def test_parsed_expression_is_the_code_or_a_placeholder() -> None:
    assert code_of(parsed_expression('torch.device("cuda", 0)')) == 'torch.device("cuda", 0)'
    assert code_of(parsed_expression("cuda:0")) == "_"  # not an expression
