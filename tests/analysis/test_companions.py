"""codemods.analysis.companions: metrics, model copies, generators, the default device, AMP."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.devices import ParamsOf
from devfix.codemods.analysis.names import code_of
from tests.analysis._parsed import parse


def test_metric_classes_uses_and_escapes() -> None:
    parsed = parse(
        """
        import torchmetrics as tm
        from torchmetrics.functional import accuracy

        acc = tm.classification.BinaryAccuracy()
        coll = tm.MetricCollection([tm.Recall(task="binary")])
        kept = tm.Precision(task="binary")
        register(kept)
        acc.update(p, t)
        acc(p, t)
        accuracy(p, t, task="binary")
        """
    )
    companions = parsed.facts.companions
    calls = {code_of(c.func): c for c in parsed.all(cst.Call)}
    assert companions.metric_class(calls["tm.classification.BinaryAccuracy"]) == (
        "torchmetrics.classification.BinaryAccuracy"
    )
    assert companions.metric_class(calls["accuracy"]) is None
    assert companions.metric_inside_metric(calls["tm.Recall"])
    assert not companions.metric_inside_metric(calls["tm.MetricCollection"])
    uses = companions.metric_uses("acc", calls["tm.classification.BinaryAccuracy"])
    assert [code_of(u) for u in uses] == ["acc.update(p, t)", "acc(p, t)"]
    assert companions.metric_escapes("kept", calls["tm.Precision"])
    assert not companions.metric_escapes("acc", calls["tm.classification.BinaryAccuracy"])


def test_default_device_plain_and_conditional() -> None:
    parsed = parse(
        """
        import torch

        torch.set_default_device("cuda")

        def make():
            return DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.companions.default_device(loader)
    assert found is not None and found.expression == "torch.get_default_device()"
    assert not found.conditional

    parsed = parse(
        """
        import torch

        if args.cuda:
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        else:
            torch.set_default_tensor_type("torch.FloatTensor")

        def make():
            return DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.companions.default_device(loader)
    assert found is not None and found.conditional
    # get_default_device() answers "cpu" after a CUDA default tensor type: an empty tensor does not
    assert found.expression == "torch.empty(0).device"

    parsed = parse(
        """
        import torch

        if __name__ == "__main__":
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
            loader = DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.companions.default_device(loader)
    assert found is not None and found.expression == "torch.empty(0).device"
    assert not found.conditional

    parsed = parse("import torch\nloader = DataLoader(ds, shuffle=True)\n")
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    assert parsed.facts.companions.default_device(loader) is None


def test_generators_their_kind_and_uses() -> None:
    parsed = parse(
        """
        import torch

        g = torch.Generator().manual_seed(3)
        cuda_g = torch.Generator(device="cuda")
        x = torch.randn(2, generator=g)
        y = torch.rand(2, generator=cuda_g)
        z = torch.randperm(4, generator=g)
        """
    )
    companions = parsed.facts.companions
    use = parsed.one(cst.Call, "torch.randn(2, generator=g)")
    generator = companions.generator_call(cst.Name("g"), use)
    assert generator is not None and code_of(generator) == "torch.Generator()"
    assert companions.generator_kind(generator) == "cpu"
    uses = companions.generator_uses(generator)
    assert uses is not None and [code_of(u.func) for u in uses] == ["torch.randn", "torch.randperm"]
    cuda = companions.generator_call(cst.Name("cuda_g"), use)
    assert cuda is not None and companions.generator_kind(cuda) == "accelerator"


def test_ema_updates_and_where_the_copies_live() -> None:
    parsed = parse(
        """
        import copy
        import torch
        from torch import nn

        device = torch.device("cuda")
        model = nn.Linear(2, 2)
        ema = copy.deepcopy(model)
        model.to(device)
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.9).add_(p, alpha=0.1)
        for (name, e2), (_, p2) in zip(ema.named_parameters(), model.named_parameters()):
            e2.copy_(p2)
        """
    )
    companions = parsed.facts.companions
    updates = companions.ema_updates(parsed.module)
    assert [(u.copy, u.model, u.target) for u in updates] == [("ema", "model", "e")]
    update = updates[0]
    assert update.source is not None and update.source.value == "p"
    copy = companions.module_placement("ema", update.node)
    model = companions.module_placement("model", update.node)
    assert copy is not None and copy.on_cpu and "still on the CPU" in copy.evidence
    assert model is not None and model.move is not None and model.move.code == "device"
    creation = companions.copy_creation("ema", update.node)
    assert creation is not None and code_of(creation) == "copy.deepcopy(model)"


def test_own_device_copy_of_an_ema_class() -> None:
    parsed = parse(
        """
        from copy import deepcopy

        class Ema:
            def __init__(self, model, device=None):
                self.shadow = deepcopy(model).eval()
                if device is not None:
                    self.shadow.to(device=device)
        """
    )
    classdef = parsed.all(cst.ClassDef)[0]
    move = parsed.facts.companions.own_device_copy("shadow", classdef)
    assert move is not None and code_of(move) == "self.shadow.to(device=device)"
    assert parsed.facts.companions.own_device_copy("other", classdef) is None


def test_amp_device_types() -> None:
    parsed = parse(
        """
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        scaler = torch.cuda.amp.GradScaler()
        """
    )
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = parsed.facts.companions.amp_device(scaler)
    assert amp is not None and amp.expression == "torch.device(device).type"

    parsed = parse(
        """
        import torch

        dev = torch.device(args.device)
        model.to(dev)
        kind = "cuda" if dev.type == "cuda" else "cpu"
        scaler = torch.cuda.amp.GradScaler()
        """
    )
    companions = parsed.facts.companions
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = companions.amp_device(scaler)
    assert amp is not None and amp.expression == "kind"
    hand_made = parsed.all(cst.IfExp)[0]
    assert companions.hand_made_device_type(hand_made) == "dev"
    assert companions.device_type_of("dev", scaler) == "dev.type"

    parsed = parse("import torch\nmodel.cuda()\nscaler = torch.cuda.amp.GradScaler()\n")
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    amp = parsed.facts.companions.amp_device(scaler)
    assert amp is not None and amp.cuda_only and amp.expression is None


def test_ema_restores_in_a_load_hook_and_after_the_move() -> None:
    parsed = parse(
        """
        import torch
        from diffusers.training_utils import EMAModel as Averaged

        def train(runner, net):
            shadow = Averaged(net.parameters())

            def on_load(models, folder):
                restored = Averaged.from_pretrained(folder, Net)
                shadow.load_state_dict(restored.state_dict())

            def on_load_moved(models, folder):
                shadow.load_state_dict(torch.load(folder))
                shadow.to(runner.device)

            runner.register_load_state_pre_hook(on_load)
            shadow.to(runner.device)
            shadow.load_state_dict(saved)
            shadow.load_state_dict(saved)
            shadow.to(runner.device)
        """
    )
    restores = parsed.facts.companions.ema_restores()
    lines = [(parsed.facts.scopes.line_of(r.load), r.visible) for r in restores]
    assert lines == [(10, True)]  # the hook; not the moved hook, not the loads the move follows
    assert code_of(restores[0].move) == "shadow.to(runner.device)"


def test_ema_restores_ignore_modules_that_copy_on_load() -> None:
    parsed = parse(
        """
        import copy
        ema = copy.deepcopy(model)
        ema.to(device)

        def hook(state):
            ema.load_state_dict(state)
        """
    )
    assert parsed.facts.companions.ema_restores() == []


def test_held_metrics_of_plain_objects() -> None:
    parsed = parse(
        """
        import torchmetrics as tm
        from torch import nn

        class Tracker:
            def __init__(self, device):
                self.device = device
                self.scores: tm.MetricCollection = tm.MetricCollection([])

            def track(self, metric):
                self.scores.add_metrics(metric)

        class Scores(object):
            def __init__(self, metrics):
                self.items = list(metrics)

            def update(self, preds, target):
                for m in self.items:
                    if isinstance(m, tm.Metric):
                        m.update(preds, target)
                    else:
                        m.update(target, preds)

        class Registered(nn.Module):
            def __init__(self, metrics):
                super().__init__()
                self.items = nn.ModuleList(metrics)

            def forward(self, preds, target):
                for m in self.items:
                    if isinstance(m, tm.Metric):
                        m.update(preds, target)
        """
    )
    held = parsed.facts.companions.held_metrics()
    assert [(h.kind, h.holder, code_of(h.value), h.device) for h in held] == [
        ("add", "self.scores", "metric", "self.device"),
        ("update", "self.items", "m", "preds.device"),
    ]


def test_held_metrics_moved_by_their_class_are_left_alone() -> None:
    parsed = parse(
        """
        import torchmetrics

        class Scores:
            def __init__(self, metrics):
                self.device = "cuda"
                self.items = metrics
                self.bag = torchmetrics.MetricCollection([])

            def add(self, metric):
                self.bag.add_metrics(metric)
                self.bag.to(self.device)

            def update(self, preds, target):
                for m in self.items:
                    if isinstance(m, torchmetrics.Metric):
                        m.to(preds.device)
                        m.update(preds, target)
        """
    )
    assert parsed.facts.companions.held_metrics() == []


def test_start_event_moves_find_branches_that_can_come_before_fitting() -> None:
    parsed = parse(
        """
        class Averager:
            def handle(self, event, state):
                if event in (Stage.FIT_START, Stage.RESUME):
                    # after a restore the copy may be on the CPU
                    self.shadow.to_device_of(state.model)
                if event == Stage.EVAL_START:
                    self._swap_in(state)
                if event == Stage.PREDICT_START:
                    self.shadow.to_device_of(state.model)
                    self._swap_in(state)
                if event == Stage.TEST_START:
                    state.log("testing")

            def _swap_in(self, state):
                self.shadow.swap(state.model)
        """
    )
    found = parsed.facts.companions.start_event_moves()
    assert [(f.holder, f.event, code_of(f.move.body[0])) for f in found] == [
        ("self.shadow", "EVAL_START", "self.shadow.to_device_of(state.model)")
    ]


def test_cuda_amp_calls_read_from_their_arguments() -> None:
    parsed = parse(
        """
        import torch
        a = torch.autocast("cuda")
        b = torch.autocast("cpu")
        c = torch.autocast(*spec)
        d = torch.cuda.amp.autocast(False, torch.float16)
        e = torch.cuda.amp.autocast(True, None, True, 4)
        f = torch.amp.GradScaler(enabled=use_amp)
        g = torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, True)
        h = torch.cpu.amp.autocast()
        """
    )
    companions = parsed.facts.companions

    def read(code: str) -> tuple[bool, bool, str | None, str | None, bool] | None:
        call = companions.cuda_amp_call(parsed.one(cst.Call, code))
        if call is None:
            return None
        device = code_of(call.device.value) if call.device else None
        enabled = code_of(call.enabled) if call.enabled is not None else None
        return call.scaler, call.deprecated, device, enabled, call.by_position

    assert read('torch.autocast("cuda")') == (False, False, '"cuda"', None, False)
    assert read('torch.autocast("cpu")') is None
    assert read("torch.autocast(*spec)") is None  # its device type is not in sight
    assert read("torch.cuda.amp.autocast(False, torch.float16)") == (
        False,
        True,
        None,
        "False",
        False,
    )
    assert read("torch.cuda.amp.autocast(True, None, True, 4)")[-1] is True  # type: ignore[index]
    assert read("torch.amp.GradScaler(enabled=use_amp)") == (True, False, None, "use_amp", False)
    scaler = read("torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, True)")
    assert scaler is not None and scaler[-1] is True  # `enabled` by position
    assert read("torch.cpu.amp.autocast()") is None


def test_where_amp_objects_run_and_what_decides_their_device_type() -> None:
    parsed = parse(
        """
        import torch
        import torch.nn as nn
        from contextlib import nullcontext

        class Net(nn.Module):
            def forward(self, x):
                with torch.autocast("cuda", enabled=False):
                    return x

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        device_type = "cuda" if "cuda" in str(device) else "cpu"
        ctx = nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()
        if device.type == "cuda":
            scaler = torch.cuda.amp.GradScaler()
        if device.type != "cuda":
            other = torch.amp.GradScaler("cuda")
        model.to(device)
        """
    )
    companions = parsed.facts.companions
    in_model = parsed.one(cst.Call, 'torch.autocast("cuda", enabled=False)')
    assert not companions.in_training_code(in_model)
    scaler = parsed.one(cst.Call, "torch.cuda.amp.GradScaler()")
    assert companions.in_training_code(scaler)
    assert companions.under_cuda_test(scaler)
    assert not companions.under_cuda_test(parsed.one(cst.Call, 'torch.amp.GradScaler("cuda")'))
    amp = companions.amp_device_for(scaler, None)
    assert amp is not None and amp.cuda_only  # it runs on CUDA only: the deprecation alone
    hand_made = parsed.one(cst.IfExp, '"cuda" if "cuda" in str(device) else "cpu"')
    assert companions.amp_uses_hand_made_type(hand_made)  # it chooses the autocast


def test_a_hand_made_device_type_that_no_amp_object_reads() -> None:
    parsed = parse(
        """
        import torch
        device_type = "cuda" if "cuda" in str(device) else "cpu"
        print(device_type)
        """
    )
    hand_made = parsed.one(cst.IfExp, '"cuda" if "cuda" in str(device) else "cpu"')
    assert not parsed.facts.companions.amp_uses_hand_made_type(hand_made)


def test_the_device_a_metric_is_fed_from_and_its_move() -> None:
    parsed = parse(
        """
        import torch
        import torchmetrics

        device = torch.device("cuda")
        model = Net().to(device)
        acc = torchmetrics.Accuracy(task="binary")
        cpu_acc = torchmetrics.Accuracy(task="binary")
        inline = torchmetrics.Accuracy(task="binary").to(device)
        for x, y in loader:
            acc.update(model(x), y)
            cpu_acc.update(model(x), y)
            cpu_acc.update(torch.zeros(3), y)

        def late(loader):
            f1 = torchmetrics.F1Score(task="binary")
            dev = torch.device("cuda")
            f1(torch.ones(2, device=dev), y)
        """
    )
    companions = parsed.facts.companions
    built = [c for c in parsed.all(cst.Call) if code_of(c.func) == "torchmetrics.Accuracy"]
    assert [code_of(companions.metric_bound(c) or cst.Name("_")) for c in built] == [
        "acc",
        "cpu_acc",
        "_",  # moved where it is built
    ]
    feed = companions.metric_feed("acc", built[0])
    assert feed is not None and isinstance(feed.device, ParamsOf)
    assert feed.move is not None and feed.move.code == "device"
    assert code_of(feed.use) == "acc.update(model(x), y)"
    assert companions.metric_feed("cpu_acc", built[1]) is None  # also fed CPU tensors
    f1 = parsed.one(cst.Call, 'torchmetrics.F1Score(task="binary")')
    late = companions.metric_feed("f1", f1)
    assert late is not None and late.move is None
    assert late.reason.startswith("`dev` is not known where the metric is built")
