"""codemods.device_fixed_at_construction.facts: the one device a script chooses, and the factory
a legacy constructor stands for."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.device_fixed_at_construction.facts import OneDeviceScript, legacy_factory
from tests.analysis._parsed import parse


def test_the_factory_a_legacy_constructor_asks_for() -> None:
    parsed = parse(
        """
        a = torch.cuda.FloatTensor([1.0, 2.0])
        b = torch.cuda.FloatTensor(x.size(0), n * 2)
        c = torch.cuda.LongTensor(len(xs)).zero_()
        d = torch.cuda.FloatTensor(data)
        """
    )

    def factory(code: str) -> tuple[str, str] | None:
        found = legacy_factory(parsed.context, parsed.one(cst.Call, code))
        return None if found is None else (found[0], code_of(found[1]))

    assert factory("torch.cuda.FloatTensor([1.0, 2.0])") == (
        "tensor",
        "torch.cuda.FloatTensor([1.0, 2.0])",
    )
    assert factory("torch.cuda.FloatTensor(x.size(0), n * 2)") == (
        "empty",
        "torch.cuda.FloatTensor(x.size(0), n * 2)",
    )
    assert factory("torch.cuda.LongTensor(len(xs))") == (
        "zeros",
        "torch.cuda.LongTensor(len(xs)).zero_()",
    )
    assert factory("torch.cuda.FloatTensor(data)") is None  # data or a size


ONE_DEVICE = """
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

class Encoder(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.device = device
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids):
        return self.emb(ids.to(self.device))

def predict(model, ids, device):
    return model(ids.to(device))

model = Encoder(device).to(device)
"""


def test_a_script_that_runs_on_the_one_device_it_chooses() -> None:
    # The helper's `device` parameter is its callers' choice; model code does not count.
    assert parse(ONE_DEVICE).facts.own(OneDeviceScript).runs_on_one_device()
    wrapped = ONE_DEVICE + "model = nn.DataParallel(model)\n"
    assert not parse(wrapped).facts.own(OneDeviceScript).runs_on_one_device()
    two = ONE_DEVICE + 'other = torch.device("cuda:1")\nmodel.to(other)\n'
    assert not parse(two).facts.own(OneDeviceScript).runs_on_one_device()
    library = ONE_DEVICE.split("def predict")[0]  # classes only: nothing runs
    assert not parse(library).facts.own(OneDeviceScript).runs_on_one_device()
