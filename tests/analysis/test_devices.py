"""codemods.analysis.devices: the device lattice and where its values come from."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.devices import (
    AS_INDEX,
    CPU,
    Current,
    Literal,
    Named,
    ParamsOf,
    SameAs,
    Unknown,
)
from tests.analysis._parsed import parse

MODEL = """
import torch
import torch.nn as nn

device = torch.device("cuda:0")

class Encoder(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.pos = nn.Embedding(n, 8)
        self.rnn = nn.GRU(8, 8)
        self.device = device

    def forward(self, src):
        pos = torch.arange(src.shape[1])
        h = self.pos(pos)
        scale = src * torch.ones(src.shape[-1])
        picked = src[torch.arange(3)]
        return h + scale

    def shift(self, x):
        return x + torch.zeros(3)

    def steps(self, n):
        return torch.zeros(n).to(self.device) + torch.ones(n).to(device)
"""


def _needed(code: str, function: str) -> object:
    parsed = parse(MODEL)
    info = parsed.facts.modules.function_info(parsed.function(function))
    return parsed.facts.devices.needed_by(parsed.one(cst.Call, code), info)


def test_a_value_fed_to_a_layer_lives_on_its_parameters() -> None:
    needed = _needed("torch.arange(src.shape[1])", "forward")
    assert isinstance(needed, ParamsOf) and needed.proof
    assert needed.expression() == "self.pos.weight.device"
    assert needed.evidence == "it is fed to `self.pos`"


def test_both_shapes_of_arithmetic_with_an_input_get_its_device() -> None:
    """`x * torch.ones(x.shape[-1])` and `return x + torch.zeros(3)`: the same answer, proven in
    the first (`x.shape` shows `x` is a tensor) and a judgement in the second."""
    proven = _needed("torch.ones(src.shape[-1])", "forward")
    judged = _needed("torch.zeros(3)", "shift")
    assert isinstance(proven, SameAs) and isinstance(judged, SameAs)
    assert proven.expression() == "src.device" and proven.proof
    assert judged.expression() == "x.device" and not judged.proof


def test_an_index_owes_no_device_and_nothing_in_scope_is_unknown() -> None:
    assert _needed("torch.arange(3)", "forward") is AS_INDEX
    parsed = parse("import torch\ndef f(n):\n    return torch.zeros(n)\n")
    info = parsed.facts.modules.function_info(parsed.function("f"))
    unknown = parsed.facts.devices.needed_by(parsed.one(cst.Call, "torch.zeros(n)"), info)
    assert isinstance(unknown, Unknown) and unknown.expression() is None


def test_devices_fixed_outside_the_call() -> None:
    parsed = parse(MODEL)
    devices = parsed.facts.devices
    info = parsed.facts.modules.function_info(parsed.function("steps"))
    attribute = parsed.all(cst.Attribute, "self.device")[-1]  # in `steps`
    fixed = devices.fixed_outside(attribute, info)
    assert isinstance(fixed, Named) and fixed.evidence == "`self.device`, stored in `__init__`"
    global_name = parsed.all(cst.Call, "torch.ones(n).to(device)")[0].args[0].value
    assert isinstance(devices.fixed_outside(global_name, info), Named)
    literal = devices.fixed_outside(cst.parse_expression('"cuda:1"'), info)
    assert isinstance(literal, Literal) and literal.expression() == "'cuda:1'"
    assert devices.fixed_outside(cst.parse_expression('"cpu"'), info) is None


def test_where_script_values_are_placed() -> None:
    parsed = parse(
        """
        import torch
        device = torch.device("cuda")
        model = Net().to(device)
        a = torch.zeros(3).cuda()
        b = torch.zeros(3, device=device)
        c = model(a)
        d = torch.zeros(3)
        e = c.argmax(1) + d
        a, b, c, d, e
        """
    )
    devices = parsed.facts.devices
    values = parsed.all(cst.Tuple)[-1].elements
    at = values[0].value
    placed = [devices.placed(element.value, at) for element in values]
    assert isinstance(placed[0], Current)
    assert isinstance(placed[1], Named) and placed[1].expression() == "device"
    assert isinstance(placed[2], ParamsOf) and placed[2].module == "model"
    assert placed[3] is None
    assert isinstance(placed[4], ParamsOf)  # computed from the model's output
    assert CPU().expression() == '"cpu"'


def test_values_proven_to_be_on_the_cpu() -> None:
    parsed = parse(
        """
        import torch
        import numpy as np
        w = torch.tensor([1.0, 2.0])
        v = torch.from_numpy(np.ones(3)).float() / 2
        g = torch.ones(3, device="cuda")
        m = w.to(torch.float16)
        n = w.to("cuda")
        u = unknown()
        w, v, g, m, n, u
        """
    )
    devices = parsed.facts.devices
    values = [element.value for element in parsed.all(cst.Tuple)[-1].elements]
    verdicts = [devices.on_cpu(value, value) for value in values]
    assert verdicts == [True, True, False, True, False, False]
