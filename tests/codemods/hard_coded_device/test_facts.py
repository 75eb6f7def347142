"""codemods.hard_coded_device.facts: hard-coded CUDA devices in a script, its device variable,
and where the script's own choice lies."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.hard_coded_device.facts import ScriptDevice, cuda_fstring, literal_cuda_device
from tests.analysis._parsed import parse

SCRIPT = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def forward(self, x):
        return x.to("cuda:0")

def train(model, loader, opt):
    for x, y in loader:
        loss = model(x.cuda(0)).sum()
        loss.backward()
        opt.step()

cpu = torch.device("cpu")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dev = "cuda:0"
model = Net().to(dev)
"""


def test_script_code_of_a_training_program() -> None:
    parsed = parse(SCRIPT)
    script = parsed.facts.own(ScriptDevice)
    assert script.in_script_code(parsed.one(cst.Call, "x.cuda(0)"))
    assert not script.in_script_code(parsed.one(cst.Call, 'x.to("cuda:0")'))  # model code
    inference = parse('import torch\nmodel.to("cuda:0")\n')
    move = inference.one(cst.Call, 'model.to("cuda:0")')
    assert not inference.facts.own(ScriptDevice).in_script_code(move)  # trains on nothing


def test_the_device_variable_in_scope() -> None:
    parsed = parse(SCRIPT)
    script = parsed.facts.own(ScriptDevice)
    last = parsed.one(cst.Call, "Net().to(dev)")
    assert script.variable(last) == "device"  # `cpu` names the CPU, not the script's device
    dev_string, own = parsed.all(cst.SimpleString, '"cuda:0"')  # in forward; `dev = ...`
    assert script.assignment_of(own) is not None and script.assignment_of(dev_string) is None
    assert script.variable(own) == "device"  # not `dev`, the name it is assigned to


def test_a_hard_coded_device_chosen_by_hand() -> None:
    several = parse('import torch\na.to("cuda:0")\nb.to("cuda:1")\nloss.backward()\n')
    reason = several.facts.own(ScriptDevice).chosen_by_hand(None)
    assert reason is not None and "cuda:0, cuda:1" in reason
    compared = parse('device = "cuda"\nif device == "cuda":\n    pass\n')
    assign = compared.one(cst.Assign, 'device = "cuda"')
    reason = compared.facts.own(ScriptDevice).chosen_by_hand(assign)
    assert reason is not None and "compared as a string" in reason
    assert parse("x = 1\n").facts.own(ScriptDevice).chosen_by_hand(None) is None


def test_literal_cuda_devices_and_cuda_fstrings() -> None:
    def call(code: str) -> cst.Call:
        return cst.ensure_type(cst.parse_expression(code), cst.Call)

    assert literal_cuda_device(call('torch.device("cuda:0")'))
    assert literal_cuda_device(call('torch.device("cuda", 1)'))
    assert literal_cuda_device(call('torch.device(type="cuda")'))
    assert not literal_cuda_device(call('torch.device("cuda", rank)'))
    assert not literal_cuda_device(call('torch.device("cpu")'))
    found = cuda_fstring(cst.parse_expression('f"cuda:{self.gpu_id}"'))
    assert found is not None and code_of(found) == "self.gpu_id"
    assert cuda_fstring(cst.parse_expression('f"cuda:{gpu!r}"')) is None
    assert cuda_fstring(cst.parse_expression('f"cpu:{gpu}"')) is None
