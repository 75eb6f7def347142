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


def test_gpus_used_counts_a_bare_cuda_as_the_current_gpu() -> None:
    plain = parse('x = a.to("cuda:1")\ny = b.cuda()\n')
    assert plain.facts.own(ScriptDevice).gpus_used() == {0, 1}
    ranked = parse('import torch\ntorch.cuda.set_device(rank)\nx = a.to("cuda:1")\ny = b.cuda()\n')
    assert ranked.facts.own(ScriptDevice).gpus_used() == {1}


def test_defaults_every_call_overrides_and_selections_with_a_fallback() -> None:
    parsed = parse(
        """
        import torch
        def run(model, device=torch.device("cuda")):
            return model.to(device)
        def other(model, device="cuda:1"):
            return model.to(device)
        run(net, device)
        run(net, device=device)
        other(net)
        if args.gpu:
            device = torch.device("cuda:0")
        else:
            device = torch.device("cpu")
        fixed = torch.device("cuda:0")
        """
    )
    script = parsed.facts.own(ScriptDevice)
    assert script.overridden_default(parsed.one(cst.Call, 'torch.device("cuda")'))
    assert not script.overridden_default(parsed.one(cst.SimpleString, '"cuda:1"'))
    chosen, pinned = [
        node for node in parsed.all(cst.Assign) if code_of(node.value) == 'torch.device("cuda:0")'
    ]
    assert script.falls_back_in_else(chosen)
    assert not script.falls_back_in_else(pinned)


def test_the_model_attribute_moved_to_a_device_attribute() -> None:
    parsed = parse(
        """
        class Trainer:
            def __init__(self, model, gpu_id):
                self.gpu_id = gpu_id
                self.model = model.to(gpu_id)

            def step(self, x):
                return self.model(x.to(f"cuda:{self.gpu_id}"))
        """
    )
    move = parsed.one(cst.Call, 'x.to(f"cuda:{self.gpu_id}")')
    assert parsed.facts.own(ScriptDevice).model_attribute_moved_to(move, "self.gpu_id") == "model"
    assert parsed.facts.own(ScriptDevice).model_attribute_moved_to(move, "self.rank") is None


def test_a_script_runs_at_the_top_level_or_under_its_main_guard() -> None:
    training = parse(
        """
        import torch
        model = Net()
        def fit(batches):
            for x, y in batches:
                criterion(model(x), y).backward()
        if __name__ == "__main__":
            fit(load())
        """
    )
    assert training.facts.own(ScriptDevice).runs_as_script()
    library = parse(
        """
        import logging
        import torch
        logger = logging.getLogger(__name__)
        def predict(model, x):
            model.eval()
            return model(x.to("cuda:0"))
        """
    )
    assert not library.facts.own(ScriptDevice).runs_as_script()
