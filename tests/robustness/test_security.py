"""devfix reads and rewrites code; it never runs it, and it writes only inside the paths given.

(Only `devfix verify` runs a script, and only the one the user named; not tested here.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HOSTILE = """\
import torch
import os
open({marker!r}, "w").write("module body ran")
if __name__ == "__main__":
    open({marker!r}, "w").write("main ran")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        open({marker!r}, "w").write("class body ran")


def __getattr__(name):
    open({marker!r}, "w").write("module getattr ran")


state = torch.load("weights.pt")
"""


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devfix", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_code_is_never_run_and_nothing_is_written_outside_the_given_paths(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    target, sibling = tmp_path / "project" / "src", tmp_path / "project" / "other"
    for folder in (target, sibling):
        folder.mkdir(parents=True)
        (folder / "train.py").write_text(HOSTILE.format(marker=str(marker)))
        (folder / "__init__.py").write_text(HOSTILE.format(marker=str(marker)))
    project = tmp_path / "project"
    before = _snapshot(tmp_path)
    for command in (("check",), ("apply", "--diff"), ("apply", "--unsafe-fixes")):
        completed = _run(*command, "--no-cache", "src", cwd=project)
        assert "Traceback" not in completed.stderr, completed.stderr
        # Paths in reports are as given, relative to the working directory.
        for line in (completed.stdout + completed.stderr).splitlines():
            if ": DF" in line or ": error:" in line:
                assert line.startswith("src/"), line
    assert not marker.exists()
    after = _snapshot(tmp_path)
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    # Besides the files given, only devfix's own state folder in the working directory (the
    # run-state log `apply` keeps for resuming after a kill, written even with --no-cache).
    own_state = {name for name in changed if name.startswith("project/.devfix_cache/")}
    assert changed - own_state == {"project/src/train.py", "project/src/__init__.py"}
