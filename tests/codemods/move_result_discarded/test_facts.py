"""codemods.move_result_discarded.facts: what a name holds (a tensor, a module, an in-place
`.to` object)."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.move_result_discarded.facts import HeldValues
from tests.analysis._parsed import parse

SCRIPT = """
import torch
from torch import nn
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = nn.Linear(4, 2)
net = nn.DataParallel(model)
images = torch.from_numpy(array).float()
encoded = tokenizer(texts, return_tensors="pt")
first = read_images(a)
second = read_images(b)
surface = read_images(c)
valid = surface.expand_as(first)
unknown = make_thing()
third = load_other()
scaled = third * 2
sequence = build()
sequence[1:]
owner = build_owner()
owner.parameters()

class Table(nn.Module):
    def forward(self, x):
        pe = self.pe[:, : x.size(1)]
        return x + pe

def step(batch):
    batch.cuda()
    return batch.unsqueeze(0)
"""


def test_tensors_by_binding_are_proven() -> None:
    parsed = parse(SCRIPT)
    images = parsed.facts.own(HeldValues).held("images", parsed.module.body[-1])
    assert images.kind == "tensor" and images.proven


def test_tensors_by_use_are_not_proven() -> None:
    parsed = parse(SCRIPT)
    at = parsed.module.body[-1]
    values = parsed.facts.own(HeldValues)
    first = values.held("first", at)
    assert first.kind == "tensor" and not first.proven
    assert "expand_as" in first.evidence
    # Same loader as a tensor used as one.
    assert values.held("second", at).kind == "tensor"
    # The result of a tensor-only method.
    assert values.held("valid", at).kind == "tensor"
    # Arithmetic on a name is a tensor use.
    assert "arithmetic" in values.held("third", at).evidence


def test_modules_and_in_place_objects_are_not_tensors() -> None:
    parsed = parse(SCRIPT)
    at = parsed.module.body[-1]
    values = parsed.facts.own(HeldValues)
    assert values.held("model", at).kind == "other"
    assert values.held("net", at).kind == "other"
    assert values.held("encoded", at).kind == "other"
    assert values.held("owner", at).kind == "other"
    assert values.held("unknown", at).kind is None
    # A one-dimensional slice is what nn.Sequential supports too: no evidence.
    assert values.held("sequence", at).kind is None


def test_function_parameters_and_module_state() -> None:
    parsed = parse(SCRIPT)
    values = parsed.facts.own(HeldValues)
    move = parsed.one(cst.Call, "batch.cuda()")
    assert values.held("batch", move).kind == "tensor"
    forward = parsed.function("forward")
    use = next(
        n
        for n in parsed.all(cst.Name)
        if n.value == "pe" and forward in parsed.context.ancestors(n)
    )
    assert values.from_module_state("pe", use)
    assert not values.from_module_state("batch", move)
