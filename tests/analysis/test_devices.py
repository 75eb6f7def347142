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
from devfix.codemods.analysis.names import code_of
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


def test_data_for_torch_tensor_that_has_dimensions() -> None:
    parsed = parse(
        """
        import numpy as np
        import torch
        import torch.nn as nn

        class Pinball(nn.Module):
            def __init__(self, quantiles, scale):
                super().__init__()
                self.quantiles = quantiles
                self.scale = scale

            def forward(self, y, t):
                q = torch.tensor(self.quantiles)
                s = torch.tensor(self.scale)
                u = torch.tensor(self.scale).unsqueeze(0)
                counts = np.bincount(t)
                w = torch.tensor(1.0 / counts)
                return q * (y - t) * len(self.quantiles) * s * u * w
        """
    )
    devices = parsed.facts.devices
    info = parsed.facts.modules.function_info(parsed.function("forward"))
    calls = [c for c in parsed.all(cst.Call) if code_of(c.func) == "torch.tensor"]
    verdicts = [devices.makes_data_tensor(call, info) for call in calls]
    # `len(self.quantiles)` shows a sequence; `self.scale` may be a number, unless the result
    # is given dimensions; NumPy arithmetic makes an array.
    assert verdicts == [True, False, True, True]


def test_return_values_meet_what_the_callers_feed_them_to() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8)

            def init_hidden(self, batch):
                return torch.zeros(1, batch, 8), torch.zeros(1, batch, 8)

            def forward(self, x):
                hidden = self.init_hidden(x.shape[1])
                return self.lstm(x, hidden)
        """
    )
    info = parsed.facts.modules.function_info(parsed.function("init_hidden"))
    needed = parsed.facts.devices.needed_by(
        parsed.all(cst.Call, "torch.zeros(1, batch, 8)")[0], info
    )
    assert isinstance(needed, ParamsOf) and needed.proof
    assert needed.expression() == "self.lstm.weight_ih_l0.device"
    assert needed.evidence == "`forward` hands it on: it is fed to `self.lstm`"


def test_judgements_never_name_an_argument_the_value_does_not_meet() -> None:
    parsed = parse(
        """
        import torch
        import pytorch_lightning as pl

        def relative_positions(length, max_distance, lengths):
            d = torch.arange(length)
            span = lengths.numel()
            return torch.clamp(d, min=-max_distance, max=max_distance)

        def hidden(feats, out):
            return {k: torch.zeros(x.shape[0], out) for k, x in feats.items()}

        class Lit(pl.LightningModule):
            def training_step(self, batch, idx):
                return torch.zeros(3)
        """
    )
    devices, modules = parsed.facts.devices, parsed.facts.modules
    first = modules.function_info(parsed.function("relative_positions"))
    assert first.tensor_params == ["lengths"]  # `max=max_distance` is a number
    unknown = devices.needed_by(parsed.one(cst.Call, "torch.arange(length)"), first)
    assert isinstance(unknown, Unknown)  # never `lengths.device`: `d` does not meet it
    info = modules.function_info(parsed.function("hidden"))
    shaped = devices.needed_by(parsed.one(cst.Call, "torch.zeros(x.shape[0], out)"), info)
    assert isinstance(shaped, SameAs) and not shaped.proof and shaped.expression() == "x.device"
    lit = modules.function_info(parsed.function("training_step"))
    own = devices.needed_by(parsed.one(cst.Call, "torch.zeros(3)"), lit)
    assert isinstance(own, Named) and not own.proof and own.expression() == "self.device"


def test_a_method_that_spreads_its_work_over_the_module_devices() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, d, n, device_ids):
                super().__init__()
                self.device_ids = device_ids
                self.weight = nn.Parameter(torch.randn(n, d))

            def forward(self, x, label):
                parts = torch.chunk(self.weight, len(self.device_ids))
                out = (x.cuda(self.device_ids[0]) @ parts[0].cuda(self.device_ids[0]).t())
                for i in range(1, len(self.device_ids)):
                    part = x.cuda(self.device_ids[i]) @ parts[i].cuda(self.device_ids[i]).t()
                    out = torch.cat((out, part.cuda(self.device_ids[0])), 1)
                mask = torch.zeros(out.size()).cuda(self.device_ids[0])
                mask.scatter_(1, label.view(-1, 1), 1)
                return out * mask + label.float().unsqueeze(1)
        """
    )
    devices = parsed.facts.devices
    info = parsed.facts.modules.function_info(parsed.function("forward"))
    assert devices.spread_devices(info) == "self.device_ids"
    met = [(code_of(value), placed) for value, placed in devices.inputs_meeting_placed(info)]
    assert met == [("label.view(-1, 1)", "mask")]


def test_moved_when_made_sees_a_move_right_after_the_factory() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn

        def to_var(x):
            x = x.cuda()
            return x

        class Net(nn.Module):
            def forward(self, x):
                a = torch.zeros(1).unsqueeze(0).to(x.device)
                b = to_var(torch.zeros(2))
                c = torch.zeros(3).unsqueeze(0)
                d = torch.zeros(4).type_as(x)
                return x
        """
    )
    function = parsed.facts.modules.function_info(parsed.function("forward"))

    def moved(code: str) -> bool:
        return parsed.facts.devices.moved_when_made(parsed.one(cst.Call, code), function)

    assert moved("torch.zeros(1)")
    assert moved("torch.zeros(2)")  # the file's own move helper
    assert not moved("torch.zeros(3)")
    assert moved("torch.zeros(4)")  # `type_as(x)` is `to(x.options())`: x's device


def test_moves_in_model_code_that_are_fixed_or_kept() -> None:
    parsed = parse(
        MODEL
        + """
class Split(nn.Module):
    def __init__(self, device_ids):
        super().__init__()
        self.device_ids = device_ids

    def forward(self, x):
        a = x[0].cuda(self.device_ids[0])
        b = x[1].cuda(self.device_ids[1])
        return a, b

def offload(x):
    loss.backward()
    return x.view(-1).to("cuda:1")
"""
    )
    devices = parsed.facts.devices

    def move(code: str) -> cst.Call:
        return parsed.one(cst.Call, code)

    to_self_device = move("torch.zeros(n).to(self.device)")
    found = devices.fixed_move(to_self_device, to_self_device.args[0].value, offload=True)
    assert found is not None and found[0].name == "steps" and isinstance(found[1], Named)
    spread = move("x[0].cuda(self.device_ids[0])")
    split = parsed.facts.modules.enclosing_function(spread)
    assert split is not None and devices.spread_move(spread, split)
    assert devices.model_code_moving(spread) is None  # among the devices it spreads over
    offloaded = move('x.view(-1).to("cuda:1")')
    assert devices.model_code_moving(offloaded, offload_to=offloaded.args[0].value) is None
    assert devices.model_code_moving(offloaded) is not None  # a move, were it not an offload
    assert devices.fixed_move(offloaded, offloaded.args[0].value, offload=True) is None


def test_a_list_filled_only_with_placed_tensors() -> None:
    parsed = parse(
        """
        import torch
        model = Net().cuda()
        losses = []
        mixed = []
        extended = []
        for x in data:
            losses.append(model(x).sum())
            mixed.append(model(x).sum())
            mixed.append(torch.zeros(1))
            extended.append(model(x))
            extended.extend(more)
        losses, mixed, extended
        """
    )
    devices = parsed.facts.devices
    at = parsed.all(cst.Tuple)[-1]
    filled = devices.list_of_placed("losses", at)
    assert isinstance(filled, ParamsOf) and filled.module == "model"
    assert devices.list_of_placed("mixed", at) is None  # one CPU tensor among them
    assert devices.list_of_placed("extended", at) is None  # extended with unknown values
