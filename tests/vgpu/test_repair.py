"""`devfix verify --fix` on the `golden/_repair/` cases (the root cause in another function or
file than the raising line), and its stop rules. The command runs in this process, its rounds
in the worker's warm server (the `verify` fixture); test_repair_interactive.py runs the
installed command with the server it starts itself."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.vgpu.conftest import Verify, verify_command
from tests.warm_servers import warm_run

REPAIR = Path(__file__).resolve().parents[2] / "golden" / "_repair"
CASES = sorted(p.name for p in REPAIR.iterdir() if p.is_dir())
HEADER = re.compile(r'^# devfix-repair: flags="([^"]*)" fixes="([^"]*)"$', re.M)


def test_there_are_repair_cases() -> None:
    assert len(CASES) >= 2
    for case in CASES:
        assert HEADER.search((REPAIR / case / "train.py").read_text()), case


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_verify_fix_repairs_the_case(case: str, tmp_path: Path, verify: Verify) -> None:
    work = tmp_path / case
    shutil.copytree(REPAIR / case, work)
    flags, fixes = HEADER.search((work / "train.py").read_text()).groups()  # type: ignore[union-attr]
    before = {p.name: p.read_text() for p in work.glob("*.py")}
    # The plain runs go to a forked child of a warm process; only --fix needs the command line.
    assert warm_run(work / "train.py", 2, cwd=work, timeout=300).returncode == 1  # fails as written
    r = verify("--fix", *shlex.split(flags), "train.py", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    applied = re.findall(r"-> applied (DF\d+) at", r.stdout)
    assert applied == fixes.split(), r.stdout
    rounds = len(applied) + 1
    assert f"devfix verify --fix: round {rounds}: the script runs" in r.stdout
    changed = [name for name, text in before.items() if (work / name).read_text() != text]
    assert changed, "the fix wrote nothing"
    done = warm_run(work / "train.py", 2, cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr  # the repaired files run on their own


@pytest.mark.slow
def test_without_unsafe_fixes_it_stops_and_writes_nothing(tmp_path: Path, verify: Verify) -> None:
    work = tmp_path / "case"
    shutil.copytree(REPAIR / "buffer_built_in_init", work)
    before = (work / "encoder.py").read_text()
    r = verify("--fix", "train.py", cwd=work)
    assert r.returncode == 1
    assert (
        "  the finding at the root's line has an unsafe fix (allow it with --unsafe-fixes): stop"
    ) in r.stderr
    assert "is the plain tensor attribute `scale` set at encoder.py:11" in r.stderr
    assert (work / "encoder.py").read_text() == before


@pytest.mark.slow
def test_an_uncovered_site_stops_with_the_suggestion(tmp_path: Path, verify: Verify) -> None:
    (tmp_path / "free.py").write_text(
        "import torch\n"
        "def make(n):\n"
        "    return torch.zeros(n)\n"
        "a = torch.ones(3).cuda()\n"
        "print(a + make(3))\n"
    )
    r = verify("--fix", "--unsafe-fixes", "free.py", cwd=tmp_path)
    assert r.returncode == 1
    assert "no devfix finding with a fix covers the root's line: stop" in r.stderr
    assert (
        'suggested edit (not a devfix rule) at free.py:3: return torch.zeros(n, device="cuda:0")'
    ) in r.stderr


@pytest.mark.slow
def test_a_run_that_still_fails_restores_the_files_unless_keep_partial(
    tmp_path: Path, verify: Verify
) -> None:
    """Round 1 fixes the attribute (DF103); round 2 dies on a CPU tensor no rule covers: the
    edit is undone, or kept with --keep-partial."""
    source = (
        "import torch\n"
        "import torch.nn as nn\n"
        "def make(n):\n"
        "    return torch.zeros(n)\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(3, 3)\n"
        "        self.scale = torch.ones(3)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x) * self.scale\n"
        "device = torch.device('cuda')\n"
        "net = Net().to(device)\n"
        "print(net(torch.randn(2, 3, device=device)) + make(3))\n"
    )
    script = tmp_path / "two.py"
    script.write_text(source)
    r = verify("--fix", "--unsafe-fixes", "two.py", cwd=tmp_path)
    assert r.returncode == 1
    assert (
        "devfix verify --fix: round 1: " in r.stdout and "-> applied DF103 at two.py:9" in r.stdout
    )
    assert "devfix verify --fix: round 2: " in r.stderr
    assert "devfix verify --fix: the script still fails; restored two.py" in r.stderr
    assert script.read_text() == source
    kept = verify("--fix", "--unsafe-fixes", "--keep-partial", "two.py", cwd=tmp_path)
    assert kept.returncode == 1
    assert 'self.register_buffer("scale", torch.ones(3), persistent=False)' in script.read_text()


@pytest.mark.slow
def test_max_rounds_stops_a_repair_that_needs_more(tmp_path: Path, verify: Verify) -> None:
    """factory_in_helper_module needs two fixes; with --max-rounds 1 the first is applied, the
    run after it still fails, and the file gets its text back."""
    work = tmp_path / "case"
    shutil.copytree(REPAIR / "factory_in_helper_module", work)
    before = (work / "inputs.py").read_text()
    r = verify("--fix", "--unsafe-fixes", "--max-rounds", "1", "train.py", cwd=work)
    assert r.returncode == 1
    assert re.findall(r"-> applied (DF\d+) at", r.stdout) == ["DF101"]
    assert "devfix verify --fix: still failing after 1 rounds (--max-rounds)" in r.stderr
    assert "expected self and mask to be on the same device" in r.stderr  # the last run's error
    assert (work / "inputs.py").read_text() == before


@pytest.mark.slow
def test_timeout_stops_the_script_and_says_so(tmp_path: Path) -> None:
    # The script never ends, so the outcome is the same however long torch and the shim take
    # to start on a loaded machine.
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(600)\n")
    r = verify_command("--timeout", "2", "slow.py", cwd=tmp_path)
    assert r.returncode == 124
    assert "devfix verify: the script ran past --timeout 2 s and was stopped" in r.stderr


def test_timeout_kills_the_scripts_whole_process_group(tmp_path: Path) -> None:
    from devfix.vgpu.launch import TIMED_OUT, _run

    (tmp_path / "slow.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    # A plain interpreter (no torch) starts in milliseconds, so the child is spawned long
    # before the budget ends even on a machine under heavy load.
    code, _, _, timed_out = _run(
        [sys.executable, str(tmp_path / "slow.py")], env=dict(os.environ), timeout=10
    )
    assert (code, timed_out) == (TIMED_OUT, True)
    pid_file = tmp_path / "child.pid"
    assert pid_file.exists(), "the script did not spawn its child within 10 s"
    status = Path(f"/proc/{int(pid_file.read_text())}/status")
    # Killed with its process group (a zombie waiting for init to reap it counts as gone).
    # SIGKILL reaches the child asynchronously: give the kernel a moment to finish it.
    deadline = time.monotonic() + 30
    while status.exists() and "State:\tZ" not in _read_or_empty(status):
        assert time.monotonic() < deadline, "the script's child outlived the timeout"
        time.sleep(0.05)


def _read_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.slow
def test_a_round_in_a_warm_child_past_the_timeout_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round (`run_one_json` with a warm server) past its budget: killed, exit 124, timed
    out, its output so far kept; the server runs the next round."""
    from devfix.vgpu.launch import run_one_json
    from devfix.vgpu.warm import runner
    from tests.warm_servers import SERVER_ENV

    (tmp_path / "slow.py").write_text(
        "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
    )
    (tmp_path / "quick.py").write_text("print('ran')\n")
    monkeypatch.chdir(tmp_path)
    warm = runner(2, SERVER_ENV)
    code, result = run_one_json("slow.py", (), gpus=2, env={}, capture=True, timeout=2, warm=warm)
    assert (code, result["timed_out"], result["stdout"]) == (124, True, "started\n")
    code, result = run_one_json("quick.py", (), gpus=2, env={}, capture=True, warm=warm)
    assert (code, result["timed_out"], result["stdout"]) == (0, False, "ran\n")
