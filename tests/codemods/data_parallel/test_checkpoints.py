"""Checkpoints: rank 0 writes the unwrapped model; loads lose DataParallel's prefix."""

from __future__ import annotations

from devfix.codemods.data_parallel import checkpoints
from tests.codemods.data_parallel.planning import planned

HEAD = """
import os
import shutil
import torch
"""


def _saved(body: str) -> str:
    return planned(HEAD + body, checkpoints.plan_checkpoints)


def test_a_save_in_the_training_code_runs_on_rank_zero_from_the_module() -> None:
    out = _saved(
        "model = torch.nn.DataParallel(Net())\n"
        'torch.save(model.state_dict(), "m.pt")\n'
        'torch.save(model.module.state_dict(), "n.pt")\n'
    )
    assert "    if rank == 0:\n        torch.save(\n" in out
    assert out.count("(model.module if distributed else model).state_dict()") == 2
    assert "model.module.state_dict()" not in out


def test_a_file_read_back_waits_for_the_write() -> None:
    out = _saved(
        "model = torch.nn.DataParallel(Net())\n"
        'torch.save(model.state_dict(), "m.pt")\n'
        'model.load_state_dict(torch.load("m.pt"))\n'
    )
    assert "        dist.barrier()  # the other processes read this file\n" in out
    assert '    loaded_state = torch.load("m.pt")\n' in out
    assert '        consume_prefix_in_state_dict_if_present(loaded_state, "module.")\n' in out


def test_an_unwrap_that_already_handles_both_is_kept() -> None:
    out = _saved(
        "model = torch.nn.DataParallel(Net())\n"
        'to_save = model.module if hasattr(model, "module") else model\n'
    )
    assert 'to_save = model.module if hasattr(model, "module") else model' in out


def test_isinstance_asks_about_ddp() -> None:
    out = _saved(
        "model = torch.nn.DataParallel(Net())\nok = isinstance(model, torch.nn.DataParallel)\n"
    )
    assert "ok = isinstance(model, DistributedDataParallel)" in out


def test_a_checkpoint_writing_helper_runs_on_rank_zero_as_a_whole() -> None:
    out = _saved(
        """
def save_checkpoint(state, is_best, filename="checkpoint.pth"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "best.pth")

model = torch.nn.DataParallel(Net())
save_checkpoint({"model": model.state_dict()}, True)
"""
    )
    assert (
        '    if os.environ.get("RANK", "0") == "0":\n'
        "        torch.save(state, filename)\n"
        "        if is_best:\n"
        '            shutil.copyfile(filename, "best.pth")\n'
    ) in out


def test_a_helper_that_also_evaluates_gates_only_its_writes() -> None:
    out = _saved(
        """
def test(epoch):
    for x in testloader:
        acc = net(x)
    os.mkdir("ckpt")
    torch.save(net.state_dict(), "ckpt/net.pth")

net = torch.nn.DataParallel(Net())
test(0)
"""
    )
    assert "    for x in testloader:\n        acc = net(x)\n" in out
    assert '    if os.environ.get("RANK", "0") == "0":\n        os.mkdir("ckpt")\n' in out


def test_makedirs_with_exist_ok_runs_everywhere() -> None:
    out = _saved('model = torch.nn.DataParallel(Net())\nos.makedirs("out", exist_ok=True)\n')
    assert '    os.makedirs("out", exist_ok=True)\n' in out
