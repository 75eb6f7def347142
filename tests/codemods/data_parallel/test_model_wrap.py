"""Model wrap: every spelling of the guard, several models, frozen ones, optimizers after."""

from __future__ import annotations

import libcst as cst
import pytest

from devfix.codemods.data_parallel import model_wrap
from devfix.codemods.data_parallel.script import Decline, Script
from devfix.context import FileContext
from tests.codemods.data_parallel.planning import planned, script_of

TAIL = """
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in loader:
    model(x).sum().backward()
    opt.step()
"""


def _wrapped(lines: str) -> str:
    out = planned("import torch\nfrom torch import nn\n" + lines + TAIL, model_wrap.plan_wraps)
    # Short snippets have a line length of 79: the DDP block's comment sits above its `if`.
    return out.replace(
        "    # devfix DF401: one replica per process; DDP averages the gradients\n", ""
    )


def test_a_plain_wrap_becomes_the_ddp_block() -> None:
    out = _wrapped("model = nn.DataParallel(Net().cuda(), device_ids=[0, 1])\n")
    assert "    model = Net().cuda()\n    if distributed:" in out
    assert "device_ids=[0, 1]" not in out


@pytest.mark.parametrize("method", ["to(device)", "cuda()", "train()", "apply(init_weights)"])
def test_a_method_that_returns_the_model_may_follow_the_wrap(method: str) -> None:
    out = _wrapped(f"model = nn.DataParallel(Net()).{method}\n")
    assert f"    model = Net().{method}\n    if distributed:" in out


def test_a_guard_that_only_wraps_goes() -> None:
    out = _wrapped(
        "model = Net()\nif torch.cuda.device_count() >= 2:\n    model = nn.DataParallel(model)\n"
    )
    assert "device_count" not in out
    assert "    model = Net()\n    if distributed:" in out


def test_a_guard_keeps_its_other_statements() -> None:
    out = _wrapped(
        "model = Net()\nif args.cuda:\n    model = nn.DataParallel(model)\n    model.cuda()\n"
    )
    assert "    if args.cuda:\n        model.cuda()\n    if distributed:" in out


def test_a_guard_with_a_cpu_branch_is_negated_when_its_body_empties() -> None:
    out = _wrapped(
        "model = Net()\nif n_gpu > 1:\n    model = nn.DataParallel(model)\nelse:\n"
        "    print('one device')\n"
    )
    assert "    if not (n_gpu > 1):\n        print('one device')\n    if distributed:" in out


def test_an_emptied_else_branch_goes() -> None:
    out = _wrapped(
        "model = Net()\nif n_gpu == 1:\n    print('one')\nelse:\n    model = nn.DataParallel(model)\n"
    )
    assert "    if n_gpu == 1:\n        print('one')\n    if distributed:" in out


def test_a_conditional_expression_collapses() -> None:
    out = _wrapped("model = nn.DataParallel(Net()) if n_gpu > 1 else Net()\n")
    assert "    model = Net()\n    if distributed:" in out


def test_a_frozen_model_is_only_unwrapped() -> None:
    out = planned(
        """
        import torch
        teacher = torch.nn.DataParallel(Teacher())
        student = torch.nn.DataParallel(Student())
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        """,
        model_wrap.plan_wraps,
    )
    assert "    teacher = Teacher()\n    student = Student()\n    if distributed:" in out
    assert "DistributedDataParallel(teacher" not in out


@pytest.mark.parametrize(
    ("setup", "trained"),
    [
        ("opt = torch.optim.Adam(model.parameters())", True),
        ("params = list(model.parameters())\nopt = torch.optim.Adam(params)", True),
        ("opt = build_optimizer(cfg, model)", True),
        ("model.requires_grad_(False)", False),
        ("for p in model.parameters():\n    p.requires_grad = False", False),
    ],
)
def test_what_trains_a_model(setup: str, trained: bool) -> None:
    source = f"import torch\nmodel = torch.nn.DataParallel(Net())\n{setup}\n"
    if trained:
        script, _plan = script_of(source)
        assert script.wraps[0].trained
    else:
        with pytest.raises(Decline, match="no optimizer trains the wrapped model"):
            script_of(source)


def test_an_optimizer_built_before_its_models_wrap_moves_after_it() -> None:
    out = planned(
        """
        import torch
        netG, netD = G(), D()
        optD = torch.optim.Adam(netD.parameters())
        netG = torch.nn.DataParallel(netG)
        netD = torch.nn.DataParallel(netD)
        optG = torch.optim.Adam(netG.parameters())
        """,
        model_wrap.plan_wraps,
    )
    assert out.index("netD = DistributedDataParallel(netD)") < out.index("optD = ")


def test_in_a_factory_the_process_group_says_whether_to_wrap() -> None:
    out = planned(
        """
        import torch

        def set_model():
            model = torch.nn.DataParallel(Net())
            return model

        def main():
            model = set_model()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).sum().backward()

        main()
        """,
        model_wrap.plan_wraps,
    )
    assert "    if dist.is_initialized():" in out
    assert "device_ids=[torch.cuda.current_device()]" in out


def test_the_replicas_loss_mean_goes() -> None:
    out = _wrapped(
        "model = nn.DataParallel(Net())\nloss = model(x)\nif args.n_gpu > 1:\n    loss = loss.mean()\n"
    )
    assert "mean()" not in out


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            "class W(nn.Module):\n    def f(self):\n        self.m = nn.DataParallel(m)\n",
            "inside a class",
        ),
        ("for m in ms:\n    m = nn.DataParallel(m)\n", "inside a loop"),
        ("models = [nn.DataParallel(m)]\n", "part of a larger expression"),
        ("self.model = nn.DataParallel(m)\n", "not assigned to a plain name"),
        ("model = nn.DataParallel(m, dim=1)\n", "`dim` other than 0"),
    ],
)
def test_wraps_that_cannot_be_converted(source: str, reason: str) -> None:
    with pytest.raises(Decline, match=reason):
        script_of("import torch\nfrom torch import nn\n" + source)


@pytest.mark.parametrize(
    ("header", "found"),
    [
        # `nn` reaches the script only through a project's star import; `torch` is imported.
        ("import torch\nfrom models import *\n", True),
        ("from utils.common import *\n", True),
        # A name the file binds itself is not the star import's, whatever it is called.
        ("import torch\nfrom models import *\nnn = make_namespace()\n", False),
        # No star import: an unbound `nn` is no DataParallel.
        ("import torch\n", False),
    ],
)
def test_data_parallel_spelled_through_a_star_import(header: str, found: bool) -> None:
    source = header + "model = nn.DataParallel(Darknet(cfg))\n" + TAIL
    script = Script(FileContext(cst.parse_module(source), "train.py", source))
    calls = model_wrap.data_parallel_calls(script)
    assert [script.code(call.func) for call in calls] == (["nn.DataParallel"] if found else [])
