"""Devices: GPU 0 becomes the process's GPU."""

from __future__ import annotations

import pytest

from devfix.codemods.data_parallel import devices
from devfix.codemods.data_parallel.script import Decline
from tests.codemods.data_parallel.planning import planned, script_of


def test_cuda_zero_spellings() -> None:
    out = planned(
        """
        import torch
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        model = torch.nn.DataParallel(Net().cuda(0))
        print("on cuda:0")
        """,
        devices.plan_devices,
    )
    assert 'torch.device("cuda" if' in out
    assert "Net().cuda()" in out
    assert 'print("on cuda:0")' in out  # what the script says, not where it runs


def test_the_scripts_own_set_device_goes() -> None:
    out = planned(
        """
        import torch

        def main_worker(gpus):
            torch.cuda.set_device("cuda:{}".format(gpus[0]))
            model = torch.nn.DataParallel(Net().cuda(), device_ids=gpus)

        main_worker([0, 1])
        """,
        devices.plan_devices,
    )
    assert "set_device" not in out


@pytest.mark.parametrize("spelling", ['"cuda:1"', "x.cuda(1)"])
def test_another_fixed_gpu_is_declined(spelling: str) -> None:
    script, plan = script_of(
        f"import torch\nmodel = torch.nn.DataParallel(Net())\ny = {spelling}\n"
    )
    with pytest.raises(Decline, match="hard-codes GPU"):
        devices.plan_devices(script, plan)
