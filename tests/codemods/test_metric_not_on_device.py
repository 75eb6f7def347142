"""DF205 metric-not-on-device."""

from __future__ import annotations

from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF205"


def test_metric_in_a_training_script_follows_the_model() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torchmetrics.classification import MulticlassAccuracy

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        train_acc = MulticlassAccuracy(num_classes=10)  # running accuracy
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            train_acc.update(logits, labels)
        print(train_acc.compute())
        """,
        """
        import torch
        from torchmetrics.classification import MulticlassAccuracy

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        train_acc = MulticlassAccuracy(num_classes=10).to(device)  # running accuracy
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            train_acc.update(logits, labels)
        print(train_acc.compute())
        """,
    )


def test_metric_collection_called_in_an_evaluation_function() -> None:
    assert_fix(
        RULE,
        """
        import torchmetrics as tm

        def evaluate(model, loader, device):
            metrics = tm.MetricCollection({
                "acc": tm.Accuracy(task="binary"),
                "f1": tm.F1Score(task="binary"),
            })
            model.eval()
            for x, y in loader:
                preds = model(x.to(device)).sigmoid()
                metrics(preds, y.to(device))
            return metrics.compute()
        """,
        """
        import torchmetrics as tm

        def evaluate(model, loader, device):
            metrics = tm.MetricCollection({
                "acc": tm.Accuracy(task="binary"),
                "f1": tm.F1Score(task="binary"),
            }).to(device)
            model.eval()
            for x, y in loader:
                preds = model(x.to(device)).sigmoid()
                metrics(preds, y.to(device))
            return metrics.compute()
        """,
    )


def test_model_moved_with_cuda() -> None:
    assert_fix(
        RULE,
        """
        from torchmetrics import MeanSquaredError

        net = Regressor().cuda()
        mse = MeanSquaredError()
        for x, y in batches:
            mse.update(net(x.cuda()), y.cuda())
        """,
        """
        from torchmetrics import MeanSquaredError

        net = Regressor().cuda()
        mse = MeanSquaredError().cuda()
        for x, y in batches:
            mse.update(net(x.cuda()), y.cuda())
        """,
    )


def test_metric_built_in_the_loop_is_moved_and_reported_as_per_step() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torchmetrics import Accuracy

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        for x, y in loader:
            out = model(x.to(device))
            acc = Accuracy(task="multiclass", num_classes=3)
            print(acc(out, y.to(device)))
        """,
        """
        import torch
        from torchmetrics import Accuracy

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        for x, y in loader:
            out = model(x.to(device))
            acc = Accuracy(task="multiclass", num_classes=3).to(device)
            print(acc(out, y.to(device)))
        """,
    )
    assert "built anew on every iteration" in findings[0].message


def test_metric_in_a_lightning_step() -> None:
    assert_fix(
        RULE,
        """
        import pytorch_lightning as pl
        import torchmetrics

        class Classifier(pl.LightningModule):
            def validation_step(self, batch, batch_idx):
                x, y = batch
                f1 = torchmetrics.F1Score(task="multiclass", num_classes=5)
                self.log("val_f1", f1(self(x), y))
        """,
        """
        import pytorch_lightning as pl
        import torchmetrics

        class Classifier(pl.LightningModule):
            def validation_step(self, batch, batch_idx):
                x, y = batch
                f1 = torchmetrics.F1Score(task="multiclass", num_classes=5).to(self.device)
                self.log("val_f1", f1(self(x), y))
        """,
    )


def test_metric_attribute_set_in_a_lightning_step() -> None:
    assert_fix(
        RULE,
        """
        import lightning as L
        from torchmetrics import AUROC

        class Model(L.LightningModule):
            def training_step(self, batch, batch_idx):
                self.auroc = AUROC(task="binary")
                return self.loss(batch)
        """,
        """
        import lightning as L
        from torchmetrics import AUROC

        class Model(L.LightningModule):
            def training_step(self, batch, batch_idx):
                self.auroc = AUROC(task="binary").to(self.device)
                return self.loss(batch)
        """,
    )


def test_device_bound_after_the_metric_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torchmetrics import Accuracy

        acc = Accuracy(task="binary")
        device = torch.device("cuda")
        model = Net().to(device)
        for x, y in loader:
            acc.update(model(x.to(device)), y.to(device))
        """,
        reason="is not known where the metric is built",
    )


def test_registered_moved_cpu_fed_and_collected_metrics_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torchmetrics
        from torch import nn
        from torchmetrics import F1Score, MetricCollection

        class LitModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.train_acc = torchmetrics.Accuracy(task="binary")

        device = torch.device("cuda")
        model = Net().to(device)
        moved = torchmetrics.Accuracy(task="binary").to(device)
        later = torchmetrics.Recall(task="binary")
        later.to(device)
        on_cpu = F1Score(task="multiclass", num_classes=3)
        collection = MetricCollection([torchmetrics.Precision(task="binary")]).to(device)
        predictions, targets = [], []
        for x, y in loader:
            out = model(x.to(device))
            moved.update(out, y.to(device))
            later.update(out, y.to(device))
            predictions.extend(out.argmax(1).tolist())
            targets.extend(y.tolist())
        print(on_cpu(torch.tensor(predictions), torch.tensor(targets)))
        """,
    )


def test_metric_handed_to_other_code_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torchmetrics import Accuracy

        model = Net().to("cuda")
        acc = Accuracy(task="binary")
        trainer = Trainer(model, metrics=[acc])
        for x, y in loader:
            acc.update(model(x.cuda()), y.cuda())
        """,
    )


def test_functional_metrics_are_not_objects() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torchmetrics.functional import accuracy

        model = Net().to("cuda")
        for x, y in loader:
            print(accuracy(model(x.cuda()), y.cuda(), task="binary"))
        """,
    )


def test_metrics_added_to_a_plain_objects_collection_follow_its_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torchmetrics import Metric, MetricCollection

        class Learner:
            def __init__(self, net, device=None):
                self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
                self.net = net.to(self.device)
                self.scores = MetricCollection([])

            def track(self, *metrics):
                for metric in metrics:
                    self.scores.add_metrics(metric)  # user metrics
        """,
        """
        import torch
        from torchmetrics import Metric, MetricCollection

        class Learner:
            def __init__(self, net, device=None):
                self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
                self.net = net.to(self.device)
                self.scores = MetricCollection([])

            def track(self, *metrics):
                for metric in metrics:
                    self.scores.add_metrics(metric.to(self.device))  # user metrics
        """,
        unsafe=True,
    )
    assert "not an `nn.Module`" in findings[0].message


def test_metrics_of_a_plain_list_move_to_their_inputs() -> None:
    assert_fix(
        RULE,
        """
        import torchmetrics as tm

        class Scores(object):
            def __init__(self, metrics):
                self.metrics = [m() if isinstance(m, type) else m for m in metrics]

            def __call__(self, logits, labels):
                out = {}
                for metric in self.metrics:
                    if isinstance(metric, tm.Metric):
                        # torchmetrics object
                        metric.update(logits, labels)
                        out[type(metric).__name__] = metric.compute()
                return out
        """,
        """
        import torchmetrics as tm

        class Scores(object):
            def __init__(self, metrics):
                self.metrics = [m() if isinstance(m, type) else m for m in metrics]

            def __call__(self, logits, labels):
                out = {}
                for metric in self.metrics:
                    if isinstance(metric, tm.Metric):
                        # torchmetrics object
                        metric.to(logits.device)
                        metric.update(logits, labels)
                        out[type(metric).__name__] = metric.compute()
                return out
        """,
        unsafe=True,
    )


def test_metrics_held_by_a_module_or_not_known_to_be_torchmetrics_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torchmetrics
        from torch import nn

        class Head(nn.Module):
            def __init__(self, metrics):
                super().__init__()
                self.metrics = nn.ModuleList(metrics)
                self.bag = torchmetrics.MetricCollection([])
                self.device = "cuda"

            def add(self, metric):
                self.bag.add_metrics(metric)

            def forward(self, x, y):
                for metric in self.metrics:
                    if isinstance(metric, torchmetrics.Metric):
                        metric.update(x, y)

        class Plain:
            def __init__(self, metrics):
                self.metrics = metrics

            def __call__(self, x, y):
                for metric in self.metrics:
                    metric.update(x, y)
        """,
    )
