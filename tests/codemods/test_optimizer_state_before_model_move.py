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
    # SGD's state is created at the first step, on the parameters' device: the code works, so
    # it is reported without a reorder.
    finding = assert_declined(
        RULE,
        """
        import torch as t
        opt = t.optim.SGD(net.parameters(), lr=0.1)
        net = net.to(t.device("cuda"))
        """,
        reason="no fix: it runs correctly as written",
    )
    assert "robustness" in finding.message


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
        optimizer = torch.optim.Adagrad(model.parameters())
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
        optimizer = torch.optim.Adagrad(model.parameters())
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


def test_optimizer_from_a_project_factory_restored_before_the_move() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from engine.solver import build_optimizer

        def main(cfg):
            net = build_net(cfg)
            state = None
            if cfg.resume:
                state = torch.load(cfg.resume, map_location="cpu")
                net.load_state_dict(state["net"])
            # optimizer, restored when resuming
            opt = build_optimizer(cfg, net)
            if state is not None:
                opt.load_state_dict(state["opt"])
            net = net.cuda()
            train(net, opt)
        """,
        """
        import torch
        from engine.solver import build_optimizer

        def main(cfg):
            net = build_net(cfg)
            state = None
            if cfg.resume:
                state = torch.load(cfg.resume, map_location="cpu")
                net.load_state_dict(state["net"])
            net = net.cuda()
            # optimizer, restored when resuming
            opt = build_optimizer(cfg, net)
            if state is not None:
                opt.load_state_dict(state["opt"])
            train(net, opt)
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_factory_optimizer_built_early_without_a_restore_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from engine.solver import build_optimizer, get_optimizer_grouped_parameters

        model = Net()
        groups = get_optimizer_grouped_parameters(model)
        opt = build_optimizer(cfg, model)
        model.to("cuda")
        """,
    )


def test_restore_through_a_checkpoint_helper_goes_after_the_move() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import optim
        from tools import checkpoint as ckpt

        def fit(opts, device):
            model = Segmenter(opts)
            groups = model.param_groups(opts.lr)
            optimizer = optim.SGD(groups, momentum=0.9)
            if opts.start_epoch > 0:
                ckpt.load_epoch(opts.dir, opts.start_epoch, model, optimizer)
            model.to(device)
            for epoch in range(opts.start_epoch, opts.epochs):
                run_epoch(model, optimizer, device)
        """,
        """
        import torch
        from torch import optim
        from tools import checkpoint as ckpt

        def fit(opts, device):
            model = Segmenter(opts)
            groups = model.param_groups(opts.lr)
            model.to(device)
            optimizer = optim.SGD(groups, momentum=0.9)
            if opts.start_epoch > 0:
                ckpt.load_epoch(opts.dir, opts.start_epoch, model, optimizer)
            for epoch in range(opts.start_epoch, opts.epochs):
                run_epoch(model, optimizer, device)
        """,
        unsafe=True,
    )


def test_restore_whose_result_is_kept_goes_after_the_move() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        def resume_from(path, net, optimizer):
            state = torch.load(path, map_location="cpu")
            net.load_state_dict(state["net"])
            optimizer.load_state_dict(state["opt"])
            return state["epoch"]

        def main(path):
            net = nn.GRU(8, 8)
            optimizer = torch.optim.Adam(net.parameters())
            first_epoch = 0
            if path:
                first_epoch = resume_from(path, net, optimizer)
            net.cuda()
            for epoch in range(first_epoch, 5):
                optimizer.step()
        """,
        """
        import torch
        import torch.nn as nn

        def resume_from(path, net, optimizer):
            state = torch.load(path, map_location="cpu")
            net.load_state_dict(state["net"])
            optimizer.load_state_dict(state["opt"])
            return state["epoch"]

        def main(path):
            net = nn.GRU(8, 8)
            first_epoch = 0
            net.cuda()
            optimizer = torch.optim.Adam(net.parameters())
            if path:
                first_epoch = resume_from(path, net, optimizer)
            for epoch in range(first_epoch, 5):
                optimizer.step()
        """,
        unsafe=True,
    )
    assert "resume_from(..., optimizer)" in findings[0].message


def test_helper_that_restores_only_the_model_is_not_a_restore() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from solver import make_optimizer

        def load_weights(model, path, optimizer):
            model.weights_from(path)
            print(optimizer)

        def main(path):
            model = Net()
            optimizer = make_optimizer(model)
            load_weights(model, path, optimizer)
            model.cuda()
        """,
    )


def test_wrapping_move_keeps_the_restore_and_moves_the_model_first() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn
        from torch import optim

        def train(args):
            net = PoseNet()
            optimizer = optim.Adam(
                [{"params": weights_of(net.backbone)}, {"params": weights_of(net.head), "lr": 1e-3}]
            )
            if args.checkpoint:
                state = torch.load(args.checkpoint)
                copy_matching(net, state["state_dict"])
                optimizer.load_state_dict(state["optimizer"])
            net = nn.DataParallel(net).cuda()
            for batch in loader:
                optimizer.step()
        """,
        """
        import torch
        import torch.nn as nn
        from torch import optim

        def train(args):
            net = PoseNet()
            net = net.cuda()
            optimizer = optim.Adam(
                [{"params": weights_of(net.backbone)}, {"params": weights_of(net.head), "lr": 1e-3}]
            )
            if args.checkpoint:
                state = torch.load(args.checkpoint)
                copy_matching(net, state["state_dict"])
                optimizer.load_state_dict(state["optimizer"])
            net = nn.DataParallel(net).cuda()
            for batch in loader:
                optimizer.step()
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "which the move wraps" in findings[0].message


def test_model_not_moved_early_when_the_device_comes_later_or_the_model_runs() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch.nn import DataParallel

        def train(args, batch):
            net = Net()
            optimizer = torch.optim.Adam(net.parameters())
            if args.resume:
                load_into(net, args.resume)
                optimizer.load_state_dict(torch.load(args.resume)["optimizer"])
            device = pick_device(args)
            net = DataParallel(net).to(device)
        """,
        reason="`device` is bound only after it",
    )
    assert_declined(
        RULE,
        """
        import torch
        from torch.nn import DataParallel

        def train(args, batch):
            net = Net()
            optimizer = torch.optim.Adam(net.parameters())
            if args.resume:
                load_into(net, args.resume)
                optimizer.load_state_dict(torch.load(args.resume)["optimizer"])
            writer.add_graph(net, torch.zeros(1, 3, 32, 32))
            net = DataParallel(net).cuda()
        """,
        reason="runs `net` on its current device",
    )
