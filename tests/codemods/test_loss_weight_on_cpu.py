"""DF303 loss-weight-on-cpu."""

from __future__ import annotations

import textwrap

from devfix.engine import fix_source
from devfix.types import Applicability, Options
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF303"


def test_pos_weight_seed_003() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        criterion = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3]))  # imbalanced
        """,
        """
        import torch
        import torch.nn as nn
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        criterion = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3])).to(device)  # imbalanced
        """,
    )


def test_weight_name_and_cuda_move_in_function() -> None:
    assert_fix(
        RULE,
        """
        from torch import nn, tensor

        def main():
            class_weights = tensor([1.0, 5.0]).float()
            model = Net()
            model.cuda()
            loss_fn = nn.CrossEntropyLoss(class_weights, ignore_index=-1)
            return loss_fn
        """,
        """
        from torch import nn, tensor

        def main():
            class_weights = tensor([1.0, 5.0]).float()
            model = Net()
            model.cuda()
            loss_fn = nn.CrossEntropyLoss(class_weights, ignore_index=-1).cuda()
            return loss_fn
        """,
    )


def test_functional_weight_moved_to_input_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn.functional as F
        w = torch.tensor([0.2, 0.8])
        model.to(device)
        for x, y in loader:
            logits = model(x.to(device))
            loss = F.cross_entropy(logits, y.to(device), weight=w)
            loss2 = F.binary_cross_entropy_with_logits(logits, y, pos_weight=2 * w)
        """,
        """
        import torch
        import torch.nn.functional as F
        w = torch.tensor([0.2, 0.8])
        model.to(device)
        for x, y in loader:
            logits = model(x.to(device))
            loss = F.cross_entropy(logits, y.to(device), weight=w.to(logits.device))
            loss2 = F.binary_cross_entropy_with_logits(logits, y, pos_weight=(2 * w).to(logits.device))
        """,
    )


def test_inline_criterion_in_forward_uses_input_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, logits, y):
                return nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))(logits, y)
        """,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, logits, y):
                return nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]).to(logits.device))(logits, y)
        """,
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Model().to(device)
        a = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]).to(device))
        b = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0], device=device))
        c = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0])).to(device)
        d = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
        d.to(device)
        e = nn.CrossEntropyLoss()
        f = nn.CrossEntropyLoss(weight=computed_weights)
        g = nn.CrossEntropyLoss(label_smoothing=0.1)
        h = F.cross_entropy(out, y, weight=w_gpu)
        i = nn.MultiMarginLoss(1, 1.0)
        """,
    )


def test_cpu_only_script_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]))
        loss = criterion(model(x), y)
        """,
    )


def test_declines_when_device_bound_later() -> None:
    assert_declined(
        RULE,
        """
        import torch
        criterion = torch.nn.NLLLoss(weight=torch.ones(10))
        device = torch.device("cuda")
        model.to(device)
        """,
        reason="only bound after the criterion",
    )


def test_declines_when_several_devices() -> None:
    assert_declined(
        RULE,
        """
        import torch
        encoder.to("cuda:0")
        decoder.to("cuda:1")
        criterion = torch.nn.NLLLoss(weight=torch.ones(10))
        """,
        reason="several devices",
    )


def test_declines_functional_with_inline_input() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn.functional as F
        import torch
        w = torch.ones(3)
        loss = F.nll_loss(model(x), y, weight=w)
        """,
        reason="not a plain name",
    )


def test_weights_handed_to_a_project_criterion_factory_move_where_computed() -> None:
    """`get_criterion` lives in another file of the project: whether it returns a module (with
    `.to`) cannot be seen here, and the weights may be `None`; so the weights move where a call
    computes them, on each branch that computes them (unsafe: a judgement that it is a
    tensor)."""
    before = """
        import torch
        from .losses import get_criterion
        from .utils import pick_device

        def run(cfg, model, targets, device=None):
            device = pick_device(device)
            class_weights = targets.class_weights() if cfg.balanced else None
            criterion = get_criterion(cfg.loss, weight=class_weights)
            return fit(model, criterion, device=device)

        def train(cfg, model, data, device):
            weights = None
            if cfg.task == "classification":
                print("classes:", data.n_classes)
                if cfg.use_class_weights:
                    weights = data.compute_class_weights()  # inverse frequencies
            loss_fn = make_loss_fn(
                cfg.loss, weight=weights
            )
            return fit(model, loss_fn, device)
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "targets.class_weights() if", "targets.class_weights().to(device) if"
        ).replace("data.compute_class_weights()  #", "data.compute_class_weights().to(device)  #"),
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}
    # Not applied without --unsafe-fixes.
    assert fix_source(textwrap.dedent(before), Options(select=(RULE,))).output == (
        textwrap.dedent(before)
    )


def test_factory_weights_that_are_not_computed_by_a_call_are_reported() -> None:
    """A list literal (the factory may turn it into a tensor) or a device bound only later:
    reported, not rewritten."""
    for source in (
        """
        import torch
        from .losses import get_criterion

        def run(cfg, model, device):
            weights = [1.0, 4.0] if cfg.balanced else None
            criterion = get_criterion(cfg.loss, weight=weights)
            return fit(model, criterion, device=device)
        """,
        """
        import torch
        from .losses import get_criterion

        def run(cfg, model, targets):
            weights = targets.class_weights()
            criterion = get_criterion(cfg.loss, weight=weights)
            device = cfg.device
            return fit(model.to(device), criterion, device=device)
        """,
    ):
        assert_declined(RULE, source, reason="builds the criterion with `weight=weights`")


def test_criterion_factories_with_weights_already_placed_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from .losses import build_loss

        def run(cfg, counts, device):
            w = torch.tensor(counts, dtype=torch.float, device=device)
            criterion = build_loss(cfg, weight=w)
            other = build_loss(cfg, weight=w.cpu()).to(device)
            return criterion, other
        """,
    )


def test_a_weighted_loss_built_in_a_trainer_subclass_follows_the_logits() -> None:
    """The Trainer placed the model; the criterion is built where it is used, so its weights
    follow the input it is called on (through reshapes that keep the device)."""
    assert_fix(
        RULE,
        """
        import torch
        from transformers import Trainer as HFTrainer


        class BalancedTrainer(HFTrainer):
            def __init__(self, *args, class_counts, **kwargs):
                super().__init__(*args, **kwargs)
                self.class_weights = 1.0 / torch.tensor(class_counts, dtype=torch.float)

            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                scores = outputs.logits
                criterion = torch.nn.CrossEntropyLoss(weight=self.class_weights)
                loss = criterion(scores.reshape(-1, scores.size(-1)), labels.reshape(-1))
                return (loss, outputs) if return_outputs else loss
        """,
        """
        import torch
        from transformers import Trainer as HFTrainer


        class BalancedTrainer(HFTrainer):
            def __init__(self, *args, class_counts, **kwargs):
                super().__init__(*args, **kwargs)
                self.class_weights = 1.0 / torch.tensor(class_counts, dtype=torch.float)

            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                labels = inputs.pop("labels")
                outputs = model(**inputs)
                scores = outputs.logits
                criterion = torch.nn.CrossEntropyLoss(weight=self.class_weights.to(scores.device))
                loss = criterion(scores.reshape(-1, scores.size(-1)), labels.reshape(-1))
                return (loss, outputs) if return_outputs else loss
        """,
    )


def test_a_local_criterion_whose_input_is_bound_later_or_a_cpu_only_helper_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn


        class Scorer:
            def __init__(self, counts):
                self.weights = torch.tensor(counts)

            def score(self, model, batch):
                criterion = nn.CrossEntropyLoss(weight=self.weights)
                logits = model(batch["x"])
                return criterion(logits, batch["y"])
        """,
    )
