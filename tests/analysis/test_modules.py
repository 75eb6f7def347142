"""codemods.analysis.modules: module classes, their layers and tensors, model-code functions."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
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


def test_a_namespace_with_tensor_method_names_is_not_a_tensor() -> None:
    """`args.chunk`, `args.split` and `args.device` are fields of an argument namespace; only a
    tensor method called (`x.chunk(2)`) or a tensor property read (`y.shape`) is evidence."""
    parsed = parse(
        """
        import torch

        def evaluate(args, x, y, loader):
            batch = next(iter(loader)).to(args.device)
            out = render(batch, args.chunk, split=args.split)
            first, second = x.chunk(2)
            return out, first, y.shape[0]
        """
    )
    info = parsed.facts.modules.function_info(parsed.function("evaluate"))
    assert info.tensor_params == ["x", "y"]


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


CONSTRUCTION = """
import torch
import torch.nn as nn
from .base import BaseModel

class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self._build(n)
        self.apply(self._init_weights)

    def _build(self, n):
        self._grid(n)
        self.table = torch.arange(n).float()

    def _grid(self, n):
        self.grid = torch.zeros(n, n)

    def _init_weights(self, m):
        pass

    def reset(self):
        self._grid(3)

    def forward(self, x):
        return self.fc(x) + self.table

class Tagger(BaseModel):
    def __init__(self, d):
        super().__init__()
        self.lstm = nn.LSTM(d, d)

    def forward(self, x):
        return self.lstm(x)

class Config(BaseModel):
    def __init__(self):
        super().__init__()
        self.size = 3
"""


def test_construction_time_methods_are_those_only_init_reaches() -> None:
    parsed = parse(CONSTRUCTION)
    modules = parsed.facts.modules
    net = parsed.all(cst.ClassDef)[0]
    # `_grid` is also called from `reset`, which runs any time: not construction-time.
    assert modules.construction_methods(net) == {"__init__", "_build", "_init_weights"}
    build = modules.function_info(parsed.function("_build"))
    assert modules.is_construction(build)
    assert not modules.is_construction(modules.function_info(parsed.function("reset")))


def test_a_class_with_a_base_from_elsewhere_is_a_module_when_used_as_one() -> None:
    parsed = parse(CONSTRUCTION)
    modules = parsed.facts.modules
    tagger, config = parsed.all(cst.ClassDef)[1:]
    assert modules.class_info(tagger).is_module  # forward, super().__init__(), nn layers
    assert modules.class_info(tagger).layers == {"lstm": "torch.nn.LSTM"}
    assert not modules.class_info(config).is_module  # no forward, no layers


def test_tensor_attributes_and_methods_that_return_tensors() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn

        class Enc(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.ones(n))
                self.mean = torch.tensor([0.5, 0.5]).view(2, 1)
                self.register_buffer("idx", torch.arange(n))
                self.name = "enc"
                self.table = self.sincos(n)

            @staticmethod
            def sincos(n, temperature=10000.0):
                omega = torch.arange(n) / n
                omega = 1.0 / (temperature**omega)
                return torch.cat([omega.sin(), omega.cos()])[None]

            def label(self):
                return self.name
        """
    )
    modules = parsed.facts.modules
    enc = parsed.all(cst.ClassDef)[0]
    assert modules.tensor_attributes(enc) == {"w", "mean", "idx", "table"}
    assert modules.returns_tensor(parsed.function("sincos"))  # `omega` rebinds itself
    assert not modules.returns_tensor(parsed.function("label"))


def test_what_a_container_element_holds() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn
        from torch.nn.utils import weight_norm
        from .util import init

        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                def init_(m):
                    return init(m, nn.init.orthogonal_)
                show = lambda m: str(m)
                a = init_(nn.Linear(d, 1))
                b = weight_norm(nn.Linear(d, 1))
                c = nn.Parameter(torch.zeros(d))
                e = show(nn.Linear(d, 1))
                f = torch.zeros(d)
        """
    )
    modules = parsed.facts.modules
    values = {
        assign.targets[0].target.value: assign.value  # type: ignore[attr-defined]
        for assign in parsed.all(cst.Assign)
        if isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value in "abcef"
    }
    kinds = {name: modules.held_kind(value) for name, value in values.items()}
    assert kinds == {"a": "module", "b": "module", "c": "parameter", "e": None, "f": None}


def test_module_expressions_and_model_code_after_construction() -> None:
    parsed = parse(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(2, 2).cuda()
                self.mask = torch.zeros(2).cuda()

            def forward(self, x):
                return self.head(x).cuda()
        """
    )
    modules = parsed.facts.modules
    receivers = [
        call.func.value for call in parsed.all(cst.Call) if code_of(call.func).endswith(".cuda")
    ]
    assert [modules.is_module_expression(r) for r in receivers] == [True, False, False]
    assert modules.is_module_expression(cst.parse_expression("self.head"))
    assert modules.is_module_expression(cst.parse_expression("self"))
    assert modules.model_code_after_construction(parsed.one(cst.Call, "torch.zeros(2)")) is None
    forward = modules.model_code_after_construction(parsed.one(cst.Call, "self.head(x)"))
    assert forward is not None and forward.name == "forward"


def test_step_hooks_are_per_batch_methods_of_a_class() -> None:
    parsed = parse(
        """
        import lightning as L

        class Lit(L.LightningModule):
            def __init__(self):
                self.a = make()

            def training_step(self, batch, i):
                self.b = make()

        def training_step(batch):
            c = make()
        """
    )
    modules = parsed.facts.modules
    made = {code_of(a.targets[0].target): a.value for a in parsed.all(cst.Assign)}
    assert modules.step_hook(made["self.a"]) is None  # built once, in `__init__`
    step = modules.step_hook(made["self.b"])
    assert step is not None and step[0] == "training_step" and step[1].has_device_property
    assert modules.step_hook(made["c"]) is None  # a function, not a method
