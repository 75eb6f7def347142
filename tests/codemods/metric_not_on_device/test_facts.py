"""codemods.metric_not_on_device.facts: torchmetrics classes, where a metric is bound, used and fed
from, and the metrics plain objects keep."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.devices import ParamsOf
from devfix.codemods.analysis.names import code_of
from devfix.codemods.metric_not_on_device.facts import Metrics
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
    metrics = parsed.facts.own(Metrics)
    calls = {code_of(c.func): c for c in parsed.all(cst.Call)}
    assert metrics.metric_class(calls["tm.classification.BinaryAccuracy"]) == (
        "torchmetrics.classification.BinaryAccuracy"
    )
    assert metrics.metric_class(calls["accuracy"]) is None
    assert metrics.metric_inside_metric(calls["tm.Recall"])
    assert not metrics.metric_inside_metric(calls["tm.MetricCollection"])
    uses = metrics.metric_uses("acc", calls["tm.classification.BinaryAccuracy"])
    assert [code_of(u) for u in uses] == ["acc.update(p, t)", "acc(p, t)"]
    assert metrics.metric_escapes("kept", calls["tm.Precision"])
    assert not metrics.metric_escapes("acc", calls["tm.classification.BinaryAccuracy"])


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
    held = parsed.facts.own(Metrics).held_metrics()
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
    assert parsed.facts.own(Metrics).held_metrics() == []


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
    metrics = parsed.facts.own(Metrics)
    built = [c for c in parsed.all(cst.Call) if code_of(c.func) == "torchmetrics.Accuracy"]
    assert [code_of(metrics.metric_bound(c) or cst.Name("_")) for c in built] == [
        "acc",
        "cpu_acc",
        "_",  # moved where it is built
    ]
    feed = metrics.metric_feed("acc", built[0])
    assert feed is not None and isinstance(feed.device, ParamsOf)
    assert feed.move is not None and feed.move.code == "device"
    assert code_of(feed.use) == "acc.update(model(x), y)"
    assert metrics.metric_feed("cpu_acc", built[1]) is None  # also fed CPU tensors
    f1 = parsed.one(cst.Call, 'torchmetrics.F1Score(task="binary")')
    late = metrics.metric_feed("f1", f1)
    assert late is not None and late.move is None
    assert late.reason.startswith("`dev` is not known where the metric is built")
