"""`devfix verify` through its command line: argument handling, notebooks, the diagnosis,
`--batch`; and `python -m devfix.vgpu`'s post-mortem on DataParallel replicas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.vgpu.conftest import SCRIPTS, Verify, verify_command

ECHO = (
    "import os, sys, torch\n"
    "print(torch.cuda.device_count(), os.environ.get('FOO'), sys.argv[1:])\n"
    "sys.exit(int(os.environ.get('CODE', '0')))\n"
)


@pytest.mark.slow
def test_everything_after_the_script_is_the_scripts(tmp_path) -> None:
    (tmp_path / "s.py").write_text(ECHO)
    r = verify_command(
        "--gpus", "3", "--env", "FOO=bar", "--env", "CODE=3", "s.py",
        "--gpus", "4", "--lr", "0.5", "--env", "X=1",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert r.stdout == "3 bar ['--gpus', '4', '--lr', '0.5', '--env', 'X=1']\n"


@pytest.mark.slow
def test_help_after_the_script_is_the_scripts_help(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "train.py").write_text(
        "import argparse\nargparse.ArgumentParser(description='trains a thing').parse_args()\n"
    )
    r = verify("train.py", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: train.py [-h]") and "trains a thing" in r.stdout
    own = verify("--help", cwd=tmp_path)
    assert "devfix verify [OPTIONS] SCRIPT [ARGS]..." in own.stdout.splitlines()[0]


MEMORY = """
import torch
props = torch.cuda.get_device_properties(1)
free, total = torch.cuda.mem_get_info(0)
print(props.total_memory, total, free <= total)
"""


@pytest.mark.slow
def test_gpu_memory_is_what_each_virtual_gpu_reports(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "memory.py").write_text(MEMORY)
    r = verify("--gpu-memory", "80KiB", "memory.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["81920", "81920", "True"]
    default = verify("memory.py", cwd=tmp_path)
    assert default.stdout.split()[:2] == [str(80 * 1024**3)] * 2
    bad = verify("--gpu-memory", "lots", "memory.py", cwd=tmp_path)
    assert bad.returncode == 2
    assert "not a memory size: 'lots'" in bad.stderr and "--gpu-memory" in bad.stderr


def _notebook(cells: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": src, "outputs": []}
                if kind == "code"
                else {"cell_type": kind, "metadata": {}, "source": src}
                for kind, src in cells
            ],
            "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


@pytest.mark.slow
def test_a_notebook_runs_its_code_cells_in_order(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "nb.ipynb").write_text(
        _notebook(
            [
                ("markdown", "# Training\n"),
                ("code", "!pip install nothing\n%matplotlib inline\nimport torch\nsteps = []\n"),
                ("code", "%%time\nraise SystemExit('cell magics are skipped')\n"),
                ("code", "steps.append(torch.ones(1, device='cuda').device)\nprint(steps)\n"),
                ("code", "x = torch.ones(2, device='cuda:1')\ny = x + torch.ones(2)\n"),
            ]
        )
    )
    r = verify("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "[device(type='cuda', index=0)]\n"
    assert "found at least two devices, cuda:1 and cpu!" in r.stderr
    assert "  at nb.ipynb:cell 4:2\n    y = x + torch.ones(2)\n" in r.stderr


@pytest.mark.slow
def test_a_broken_notebook_is_one_line(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "nb.ipynb").write_text("{not json")
    r = verify("nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("devfix verify: nb.ipynb: is not valid notebook JSON")
    assert len(r.stderr.strip().splitlines()) == 1


ENCODER = """import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, vocab, hid_dim, max_len=100):
        super().__init__()
        self.tok_embedding = nn.Embedding(vocab, hid_dim)
        self.pos_embedding = nn.Embedding(max_len, hid_dim)
        self.scale = torch.sqrt(torch.FloatTensor([hid_dim]))
        self.offsets = torch.arange(0, max_len)

    def forward(self, src):
        src = self.tok_embedding(src) * self.scale
        return src + self.pos_embedding(self.offsets[: src.shape[1]].to(src.device))


model = Encoder(10, 8).to("cuda")
model(torch.randint(0, 10, (2, 5), device="cuda"))
"""


@pytest.mark.slow
def test_diagnosis_names_the_finding_of_the_failing_expression(
    tmp_path: Path, verify: Verify
) -> None:
    """Seed 001's shape: `self.tok_embedding(src) * self.scale` with a CPU `self.scale`; a
    DF101 on an unrelated `arange` in the same class is not what broke."""
    (tmp_path / "src").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "src" / "model.py").write_text(ENCODER)
    r = verify("../src/model.py", cwd=tmp_path / "scripts")
    assert r.returncode == 1
    post = r.stderr.split("devfix verify: the script died of a device mismatch\n", 1)[1]
    assert post.startswith(
        "  at ../src/model.py:14\n    src = self.tok_embedding(src) * self.scale\n"
        "  devices involved: cuda:0, cpu\n"
    ), post
    # the CPU operand's provenance: the attribute set in __init__, and the rule that fixes it
    assert (
        "  the cpu tensor `other` (shape [1]) is the plain tensor attribute `scale` set at "
        "../src/model.py:10 (Module.to() and DataParallel move parameters and buffers, not plain "
        "attributes)  (root cause)\n"
        "      its value was created at ../src/model.py:10 by torch.FloatTensor(...) without "
        "device=\n    -> DF103 fixes it: "
    ) in post, post
    assert (
        "  devfix findings (tied to the failing expression):\n    ../src/model.py:10:9: DF103 "
    ) in post, post
    assert "DF101" not in post and "scripts/../src" not in post
    assert post.rstrip().endswith("  to fix: devfix apply --unsafe-fixes ../src/model.py")


@pytest.mark.slow
def test_no_fix_command_without_a_fix(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "t.py").write_text(
        "import torch\n\n\ndef step(batch):\n    return batch + torch.ones(2, device='cuda:1')\n\n\n"
        "step(torch.ones(2, device='cuda:0'))\n"
    )
    r = verify("t.py", cwd=tmp_path)
    assert r.returncode == 1
    post = r.stderr.split("the script died of a device mismatch\n", 1)[1]
    assert "  at t.py:5\n" in post and "to fix:" not in post


@pytest.mark.slow
def test_batch_runs_each_script_and_summarises(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "ok.py").write_text("import torch\nprint(torch.ones(1, device='cuda:1').device)\n")
    (tmp_path / "bad.py").write_text(
        "import torch\ntorch.ones(1, device='cuda:0') + torch.ones(2)\n"
    )
    (tmp_path / "env.py").write_text("import os\nprint(os.environ['FOO'], os.getcwd())\n")
    r = verify("--env", "FOO=1", "--batch", "ok.py", "bad.py", "env.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.splitlines()[:4] == [
        "==> ok.py: ok",
        "cuda:1",
        "==> bad.py: exit 1",
        "==> env.py: ok",
    ]
    assert f"1 {tmp_path}" in r.stdout
    assert "found at least two devices, cuda:0 and cpu!" in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "devfix verify: 3 scripts, 2 ran, 1 failed: bad.py (exit 1)"
    )


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
    assert "at dp_before.py:12" in post
    assert "return self.fc(x) + offset" in post
    assert "devices involved: cuda:1, cuda:0" in post


@pytest.mark.slow
def test_dataparallel_fixed_runs_over_two_gpus(vgpu_run) -> None:
    r = vgpu_run("dp_after.py")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "gathered on cuda:0\n"


def test_scripts_folder_exists() -> None:
    assert (SCRIPTS / "dp_before.py").exists()


@pytest.mark.slow
def test_a_warm_child_takes_its_warning_filters_from_pythonwarnings(tmp_path) -> None:
    """As a fresh `python` would: the golden tier turns a warning into the failure this way."""
    from devfix.vgpu import child_env
    from tests.warm_servers import warm_run

    script = tmp_path / "warns.py"
    script.write_text("import warnings\nwarnings.warn('switched off', UserWarning)\nprint('on')\n")
    strict = warm_run(
        script, 0, env=child_env({"PYTHONWARNINGS": "error::UserWarning"}), cwd=tmp_path
    )
    assert strict.returncode == 1 and "UserWarning: switched off" in strict.stderr
    assert strict.stdout == ""
    lenient = warm_run(script, 0, cwd=tmp_path)
    assert lenient.returncode == 0 and lenient.stdout == "on\n", lenient.stderr


@pytest.mark.slow
def test_a_warm_child_takes_its_temporary_folder_from_tmpdir(tmp_path) -> None:
    """As a fresh `python` would, though the server's imports already asked `tempfile` (the
    golden tier gives each script a temporary folder of its own this way)."""
    from devfix.vgpu import child_env
    from tests.warm_servers import warm_run

    script = tmp_path / "tmp.py"
    script.write_text("import tempfile\nprint(tempfile.mkdtemp())\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    done = warm_run(script, 0, env=child_env({"TMPDIR": str(mine)}), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    made = Path(done.stdout.strip())
    assert made.parent == mine and made.is_dir()


@pytest.mark.slow
def test_a_warm_child_ends_with_its_own_finalizers_but_keeps_the_dispatcher(tmp_path) -> None:
    """At exit a child runs the script's atexit handlers and finalizers, but not torch.library's
    finalizers that take each operator registration back out of the dispatcher (0.1 s a run,
    in a process that ends with `os._exit`)."""
    from tests.warm_servers import warm_run

    script = tmp_path / "ends.py"
    script.write_text(
        "import atexit, weakref, torch, torch.library\n"
        "def deregistrations():\n"
        "    return sum(\n"
        "        1 for f in list(weakref.finalize._registry)\n"
        "        if f.atexit and f.peek() and f.peek()[1] is torch.library._del_library\n"
        "    )\n"
        "print('while running:', deregistrations() > 0)\n"
        "class Box: pass\n"
        "box = Box()\n"
        "weakref.finalize(box, print, 'finalized')\n"
        "atexit.register(lambda: print('at exit:', deregistrations()))\n"
    )
    for gpus in (0, 2):
        done = warm_run(script, gpus, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "while running: True\nat exit: 0\nfinalized\n", gpus
