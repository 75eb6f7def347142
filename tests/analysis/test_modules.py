"""codemods.analysis.modules: module classes, their layers and tensors, model-code functions."""

from __future__ import annotations

import libcst as cst

from tests.analysis._parsed import parse

SOURCE = """
import torch
from torch import nn as tnn
from torch.utils.data import Dataset

class Block(tnn.Module):
    def __init__(self, d, device):
        super().__init__()
        self.proj = tnn.Linear(d, d)
        self.rnn = tnn.LSTM(d, d).to(device)
        self.device = device
        self.table = torch.arange(d).float()
        self.scale = tnn.Parameter(torch.ones(d))
        self.register_buffer("mask", torch.ones(d))

    def forward(self, x, n):
        return self.proj(x) * n

    def extra(self):
        self.rnn.cuda()

class Deeper(Block):
    def more(self):
        self.rnn.cuda(0)

class Data(Dataset):
    def __getitem__(self, i):
        return i

def helper(h, k):
    return h.shape[0] + k
"""


def test_module_classes_through_aliases_and_local_bases() -> None:
    parsed = parse(SOURCE)
    modules = parsed.facts.modules
    classes = {c.name.value: modules.class_info(c) for c in parsed.all(cst.ClassDef)}
    assert classes["Block"].is_module and classes["Deeper"].is_module
    assert classes["Data"].is_dataset and not classes["Data"].is_module
    assert classes["Block"].layers == {"proj": "torch.nn.Linear"}  # `.to(device)` hides the LSTM
    assert classes["Block"].device_attrs == {"device"}
    assert modules.local_module_class("Deeper") is parsed.all(cst.ClassDef)[1]
    assert modules.local_module_class("Data") is None


def test_layers_submodules_and_registered_attributes() -> None:
    parsed = parse(SOURCE)
    modules = parsed.facts.modules
    block = parsed.all(cst.ClassDef)[0]
    assert modules.known_layer(block, "rnn") == "torch.nn.LSTM"
    assert modules.layer_parameter_device(block, "rnn", "self") == "self.rnn.weight_ih_l0.device"
    assert modules.submodule_class(block, "proj") == "torch.nn.Linear"
    assert modules.submodule_class(block, "table") is None
    assert modules.registered_otherwise(block, "scale")
    assert modules.registered_otherwise(block, "mask")
    assert not modules.registered_otherwise(block, "table")
    move = parsed.one(cst.Call, "self.rnn.cuda()")
    found = modules.submodule_moved(move)
    assert found is not None and found[:2] == ("self", "rnn")
    # `Deeper` builds no `rnn` itself: the analysis does not guess through inheritance.
    assert modules.submodule_moved(parsed.one(cst.Call, "self.rnn.cuda(0)")) is None


def test_model_code_functions_and_their_tensor_arguments() -> None:
    parsed = parse(SOURCE)
    modules = parsed.facts.modules
    forward = modules.function_info(parsed.function("forward"))
    assert forward.is_model_code and forward.params == ["x", "n"]
    assert forward.tensor_params == ["x"]  # fed to the layer `self.proj`
    helper = modules.function_info(parsed.function("helper"))
    assert helper.tensor_params == ["h"] and helper.is_model_code
    getitem = modules.function_info(parsed.function("__getitem__"))
    assert not getitem.is_model_code
    assert modules.in_model_method(parsed.one(cst.Call, "self.rnn.cuda()"))


def test_tensor_judge_proves_tensors_and_trainable_ones() -> None:
    parsed = parse(
        """
        import torch
        def build(n, flag):
            a = torch.zeros(n)
            b = a * 2 + 1
            c = torch.ones(n, requires_grad=True)
            d = n if flag else a
            for e in range(n):
                pass
            return a, b, c, d, e
        """
    )
    judge = parsed.facts.modules.tensor_judge(parsed.function("build"))
    values = parsed.all(cst.Tuple)[-1].elements
    a, b, c, d, e = (element.value for element in values)
    assert judge.is_tensor(a) and judge.is_tensor(b) and judge.is_tensor(c)
    assert judge.requires_grad(c) and not judge.requires_grad(a)
    assert not judge.is_tensor(d) and not judge.is_tensor(e)
