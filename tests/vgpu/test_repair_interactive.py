"""`devfix verify --fix -i` driven in a real pseudo-terminal through the installed `devfix`
command, as `devfix apply -i` is in tests/test_review_pty.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devfix.vgpu import child_env

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow

DEVFIX = os.path.join(os.path.dirname(sys.executable), "devfix")
PROMPT = "Apply this fix and run again? [y,n,e,q,?]"
CASE = Path(__file__).resolve().parents[2] / "golden" / "_repair" / "buffer_built_in_init"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "case"
    shutil.copytree(CASE, folder)
    return folder


def _spawn(work: Path, *args: str) -> pexpect.spawn:
    env = {**child_env(), "NO_COLOR": "1", "TERM": "xterm"}
    return pexpect.spawn(
        DEVFIX,
        ["verify", "--fix", "-i", *args, "train.py"],
        cwd=str(work),
        env=env,
        encoding="utf-8",
        timeout=300,
        dimensions=(50, 200),
    )


def _finish(child: pexpect.spawn) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    tail = str(child.before)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -1), tail


def test_yes_applies_the_shown_unsafe_fix_and_the_script_runs(work: Path) -> None:
    """Without --unsafe-fixes: interactively, the unsafe fix is offered (marked) all the same."""
    child = _spawn(work)
    child.expect_exact(PROMPT)
    screen = str(child.before)
    assert "devfix verify --fix: round 1: Expected all tensors to be on the same device" in screen
    assert "[1/1] encoder.py:11:9  DF103 tensor-attribute-not-buffer" in screen
    assert "UNSAFE fix: it may change what the program does" in screen
    assert "-        self.scale = torch.tensor([math.sqrt(hid_dim)])" in screen
    assert "+        self.register_buffer(" in screen
    child.send("y")
    code, tail = _finish(child)
    assert code == 0, tail
    assert "devfix verify --fix: round 1: applied DF103 at encoder.py:11 (unsafe)" in tail
    assert "devfix verify --fix: round 2: the script runs (changed: encoder.py)" in tail
    assert "register_buffer" in (work / "encoder.py").read_text()


def test_help_then_no_stops_and_writes_nothing(work: Path) -> None:
    before = (work / "encoder.py").read_text()
    child = _spawn(work, "--unsafe-fixes")
    child.expect_exact(PROMPT)
    child.send("?")
    child.expect_exact("n - do not apply this fix")
    child.expect_exact(PROMPT)
    child.send("n")
    code, tail = _finish(child)
    assert code == 1
    assert "round 1: every fix at the root's line was skipped: stop" in tail
    assert "is the plain tensor attribute `scale` set at encoder.py:11" in tail
    assert (work / "encoder.py").read_text() == before


def test_without_a_terminal_it_refuses_before_running(work: Path) -> None:
    def verify(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DEVFIX, "verify", *args, "train.py"],
            cwd=work,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )

    r = verify("--fix", "-i")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("devfix verify: error: --fix -i needs a terminal on stdin")
    alone = verify("-i")
    assert alone.returncode == 2 and "-i/--interactive goes with --fix" in alone.stderr
