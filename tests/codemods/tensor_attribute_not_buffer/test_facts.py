"""codemods.tensor_attribute_not_buffer.facts: where a module stores tensors, its caches, and what stops
`register_buffer`."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.tensor_attribute_not_buffer.facts import Buffers, holds_new_tensors
from tests.analysis._parsed import parse

MODULE = """
import torch
import torch.nn as nn

class Net(nn.Module):
    scale = 1.0

    def __init__(self):
        self.early = torch.zeros(1)
        super().__init__()
        self.table = torch.arange(4)
        self.cache = None
        self.scale = torch.ones(1)
        self.weights = [torch.ones(2), torch.zeros(2)]
        self.again = [self.table, self.early]
        self.w = torch.randn(3, requires_grad=True)
        self.label = torch.zeros(2)
        setattr(self, "mask", torch.ones(3))
        self._build()

    def _build(self):
        self.made = torch.zeros(5)

    def forward(self, x):
        if self.cache is None:
            self.cache = torch.zeros(x.shape[0])
        self.label = "none"
        return self.cache + self.table

    def train(self, mode=True):
        self.snapshot = torch.zeros(1)
        self.unused = torch.zeros(1)
        return super().train(mode)

    def peek(self):
        return self.snapshot
"""


def _assign(parsed, code: str) -> cst.Assign:  # type: ignore[no-untyped-def]
    return next(a for a in parsed.all(cst.Assign) if code_of(a) == code)


def test_where_a_module_stores_attributes() -> None:
    parsed = parse(MODULE)
    buffers = parsed.facts.own(Buffers)

    def stored(code: str) -> tuple[str, str, bool] | None:
        node = _assign(parsed, code)
        found = buffers.stored_at(node, node.targets[0].target)
        return None if found is None else (found[0], found[1][0].name.value, found[2])

    assert stored("self.table = torch.arange(4)") == ("table", "__init__", True)
    assert stored("self.made = torch.zeros(5)") == ("made", "_build", True)  # only init calls it
    assert stored("self.snapshot = torch.zeros(1)") == ("snapshot", "train", False)  # a cache
    assert stored("self.unused = torch.zeros(1)") is None  # nothing reads it back
    assert stored("self.cache = torch.zeros(x.shape[0])") is None  # forward is not construction
    setattr_call = parsed.one(cst.Call, 'setattr(self, "mask", torch.ones(3))')
    found = buffers.setattr_store(setattr_call)
    assert found is not None and code_of(found[0]) == '"mask"'


def test_what_is_stored_and_what_stops_register_buffer() -> None:
    parsed = parse(MODULE)
    buffers = parsed.facts.own(Buffers)
    init = parsed.function("__init__")
    classdef = parsed.all(cst.ClassDef)[0]
    owner = (init, classdef)

    def kind(code: str) -> str | None:
        node = _assign(parsed, code)
        return buffers.stored_kind(node.value, "x", owner)

    assert kind("self.table = torch.arange(4)") == "tensor"
    assert kind("self.weights = [torch.ones(2), torch.zeros(2)]") == "tensors"
    assert kind("self.again = [self.table, self.early]") is None  # attributes it already holds
    assert kind("self.w = torch.randn(3, requires_grad=True)") == "trainable"

    def blocker(code: str, attr: str) -> str | None:
        return buffers.blocker(_assign(parsed, code), attr, owner)

    assert blocker("self.table = torch.arange(4)", "table") is None
    assert "before `super().__init__()`" in (blocker("self.early = torch.zeros(1)", "early") or "")
    assert "class body" in (blocker("self.scale = torch.ones(1)", "scale") or "")
    assert "not provably a tensor in `forward`" in (
        blocker("self.label = torch.zeros(2)", "label") or ""
    )


def test_a_none_slot_that_caches_a_tensor() -> None:
    parsed = parse(MODULE)
    buffers = parsed.facts.own(Buffers)
    owner = (parsed.function("__init__"), parsed.all(cst.ClassDef)[0])
    slot = _assign(parsed, "self.cache = None")
    assert buffers.caches_tensor(slot, "cache", owner)
    assert buffers.is_cache("cache", owner[1], owner[0])
    assert not buffers.is_cache("unused", owner[1], parsed.function("train"))


def test_containers_of_new_tensors() -> None:
    parsed = parse(MODULE)
    judge = parsed.facts.modules.tensor_judge(parsed.function("__init__"))
    assert holds_new_tensors(judge, cst.parse_expression("{k: torch.zeros(1) for k in ks}"))
    assert not holds_new_tensors(judge, cst.parse_expression("[]"))
    assert not holds_new_tensors(judge, cst.parse_expression("torch.zeros(1)"))
