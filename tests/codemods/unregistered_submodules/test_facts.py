"""codemods.unregistered_submodules.facts: plain containers of submodules, their keys, and layers built
in `forward` that `__init__` could build once."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.unregistered_submodules.facts import Hoist, Submodules
from tests.analysis._parsed import parse

SOURCE = """
import torch
from torch import nn

class Gates(nn.Module):
    def __init__(self, sizes, width):
        super().__init__()
        self.width = width
        self.w = {kind: nn.Parameter(torch.ones(n)) for kind, n in sizes.items()}
        self.by_index = {i: nn.Linear(2, 2) for i in range(3)}
        self.named = {"a": nn.Linear(2, 2), f"{width}": nn.Linear(2, 2), "a.b": nn.Linear(2, 2)}
        self.proj = nn.Linear(width, width)
        self.bn = None

    def forward(self, x):
        x = nn.BatchNorm1d(self.width)(self.proj(x))
        x = nn.LayerNorm([self.width], eps=1e-6)(x)
        return nn.GroupNorm(2, x.shape[1])(x)
"""


def test_key_kinds() -> None:
    parsed = parse(SOURCE)
    submodules = parsed.facts.own(Submodules)
    kinds = {code_of(comp.key): submodules.key_kind(comp.key) for comp in parsed.all(cst.DictComp)}
    assert kinds == {"kind": "computed", "i": "invalid"}
    named = parsed.all(cst.Dict)[0]
    keys = [submodules.key_kind(e.key) for e in named.elements if isinstance(e, cst.DictElement)]
    assert keys == ["literal", "computed", "invalid"]


def test_hoist_plans_and_reasons() -> None:
    parsed = parse(SOURCE)
    submodules = parsed.facts.own(Submodules)
    forward = parsed.function("forward")
    norm = parsed.one(cst.Call, "nn.BatchNorm1d(self.width)")
    plan = submodules.hoist(norm, forward)
    assert isinstance(plan, Hoist)
    # `self.bn` is taken (assigned in `__init__`), so the stem is numbered; the layer goes
    # after the last layer `__init__` builds.
    assert plan.name == "bn1"
    assert code_of(plan.anchor).strip() == "self.proj = nn.Linear(width, width)"
    assert code_of(plan.statement).strip() == "self.bn1 = nn.BatchNorm1d(self.width)"
    assert code_of(plan.reference) == "self.bn1"
    layer_norm = parsed.one(cst.Call, "nn.LayerNorm([self.width], eps=1e-6)")
    second = submodules.hoist(layer_norm, forward)
    assert isinstance(second, Hoist) and second.name == "ln"
    group = parsed.one(cst.Call, "nn.GroupNorm(2, x.shape[1])")
    assert submodules.hoist(group, forward) == (
        "its arguments read `x.shape[1]`, known only in `forward`"
    )


def test_plain_containers_and_what_they_hold() -> None:
    parsed = parse(SOURCE)
    submodules = parsed.facts.own(Submodules)
    found = {
        code_of(a.targets[0].target): submodules.plain_container(a) for a in parsed.all(cst.Assign)
    }
    gates = found["self.w"]
    assert gates is not None and gates.container_class == "ParameterDict"
    assert gates.keys == "computed" and gates.blocker is None and gates.unknown == 0
    by_index = found["self.by_index"]
    assert by_index is not None and by_index.container_class == "ModuleDict"
    assert by_index.blocker is not None and by_index.blocker.startswith("a key is not a string")
    assert found["self.proj"] is None and found["self.bn"] is None  # not containers
    assert found["x"] is None  # not an attribute


def test_stateful_layers_built_in_forward() -> None:
    parsed = parse(SOURCE)
    submodules = parsed.facts.own(Submodules)
    built = {
        code_of(call.func): submodules.built_in_forward(call)
        for call in parsed.all(cst.Call)
        if code_of(call.func).startswith("nn.")
    }
    assert built["nn.BatchNorm1d"] == "torch.nn.BatchNorm1d"
    assert built["nn.GroupNorm"] == "torch.nn.GroupNorm"
    assert built["nn.Linear"] is None  # built in `__init__`
