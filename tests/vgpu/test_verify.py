"""`python -m devfix.vgpu` / `devfix verify`: exit status, traceback, the post-mortem."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devfix.vgpu import child_env
from tests.vgpu.conftest import SCRIPTS


@pytest.mark.slow
def test_dataparallel_hard_coded_cuda0_fails_on_replica_1(vgpu_run) -> None:
    r = vgpu_run("dp_before.py")
    assert r.returncode == 1
    err = r.stderr
    assert "Caught RuntimeError in replica 1 on device 1." in err
    assert (
        "Expected all tensors to be on the same device, but found at least two devices, "
        "cuda:1 and cuda:0!"
    ) in err
    assert "devfix/vgpu/" not in err.split("devfix verify: the script died")[0]  # no own frames
    post = err.split("devfix verify: the script died of a device mismatch", 1)[1]
    assert f"at {SCRIPTS / 'dp_before.py'}:12" in post
    assert "return self.fc(x) + offset" in post
    assert "devices involved: cuda:1, cuda:0" in post


@pytest.mark.slow
def test_dataparallel_fixed_runs_over_two_gpus(vgpu_run) -> None:
    r = vgpu_run("dp_after.py")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "gathered on cuda:0\n"


@pytest.mark.slow
def test_verify_command_exit_status_and_env(tmp_path) -> None:
    script = tmp_path / "s.py"
    script.write_text(
        "import os, sys, torch\n"
        "print(torch.cuda.device_count(), os.environ['FOO'], sys.argv[1:])\n"
        "sys.exit(3)\n"
    )
    code = (
        "import sys\n"
        "try:\n from devfix.cli.verify import verify_command\n"
        "except ImportError:\n from cli.verify import verify_command\n"
        "verify_command(sys.argv[1:])\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "--gpus", "3", "--env", "FOO=bar", str(script), "--x", "1"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=240,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout == "3 bar ['--x', '1']\n"
