"""DF301 optimizer-state-before-model-move."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF301"


def test_seed_003_resume_order() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import optim

        model = Net()
        optimizer = optim.Adam(model.parameters(), lr=1e-3)  # the optimizer
        checkpoint = torch.load("checkpoint.pth", map_location="cpu")
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        model = model.to(device)
        for epoch in range(3):
            optimizer.step()
        """,
        """
        import torch
        from torch import optim

        model = Net()
        checkpoint = torch.load("checkpoint.pth", map_location="cpu")
        model.load_state_dict(checkpoint["model_state_dict"])
        model = model.to(device)
        optimizer = optim.Adam(model.parameters(), lr=1e-3)  # the optimizer
        optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        for epoch in range(3):
            optimizer.step()
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "load_state_dict` runs before `model.to(device)`" in findings[0].message


def test_load_goes_after_scheduler_built_after_move() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def main(ckpt):
            model = Net()
            opt = torch.optim.AdamW(model.parameters())
            opt.load_state_dict(ckpt["opt"])
            model.cuda()
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
            scaler = torch.amp.GradScaler("cuda")
            sched.load_state_dict(ckpt["sched"])
        """,
        """
        import torch

        def main(ckpt):
            model = Net()
            model.cuda()
            opt = torch.optim.AdamW(model.parameters())
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
            opt.load_state_dict(ckpt["opt"])
            scaler = torch.amp.GradScaler("cuda")
            sched.load_state_dict(ckpt["sched"])
        """,
    )


def test_adagrad_is_a_definite_bug_and_sgd_is_robustness() -> None:
    findings = assert_fix(
        RULE,
        """
        from torch.optim import Adagrad as AG
        opt = AG(net.parameters())
        net.to(device)
        """,
        """
        from torch.optim import Adagrad as AG
        net.to(device)
        opt = AG(net.parameters())
        """,
    )
    assert "definite bug" in findings[0].message
    findings = assert_fix(
        RULE,
        """
        import torch as t
        opt = t.optim.SGD(net.parameters(), lr=0.1)
        net = net.to(t.device("cuda"))
        """,
        """
        import torch as t
        net = net.to(t.device("cuda"))
        opt = t.optim.SGD(net.parameters(), lr=0.1)
        """,
    )
    assert "robustness" in findings[0].message


def test_resume_block_is_moved_whole_as_unsafe() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        if args.resume:
            state = torch.load(args.resume, map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        model.to(device)
        """,
        """
        import torch
        model = Net()
        model.to(device)
        optimizer = torch.optim.Adam(model.parameters())
        if args.resume:
            state = torch.load(args.resume, map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        model = Net().to(device)
        optimizer = torch.optim.Adam(model.parameters())
        optimizer.load_state_dict(torch.load(p, map_location="cpu"))
        x = x.to(device)
        other = torch.optim.SGD(head.parameters(), lr=0.1)
        model.to(torch.float16)

        def build(model):
            return torch.optim.SGD(model.parameters(), lr=0.1)

        def train(model, optimizer):
            model.to(device)
        """,
    )


def test_declines_when_a_loop_uses_the_optimizer_before_the_move() -> None:
    assert_declined(
        RULE,
        """
        import torch
        optimizer = torch.optim.Adam(model.parameters())
        for group in optimizer.param_groups:
            group["lr"] = 0.1
        model.to(device)
        """,
        reason="line 4 uses `optimizer` before the model move",
    )


def test_declines_when_the_move_needs_a_moved_statement() -> None:
    assert_declined(
        RULE,
        """
        import torch
        optimizer = torch.optim.Adam(model.parameters())
        device = pick(optimizer)
        model.to(device)
        """,
        reason="the model move reads `device`",
    )


def test_plain_tensors_are_not_modules() -> None:
    # `w.to(device)` returns a new tensor: the optimizer must keep the leaf it was given.
    assert_noop(
        RULE,
        """
        import torch
        w = torch.zeros(3, requires_grad=True)
        optimizer = torch.optim.SGD([w], lr=0.1)
        w = w.to(device)
        """,
    )
