"""Running the devfix command line on generated inputs, as a user (or an attacker) would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: One DF302 fix (`torch.load` gets `map_location`): a file every run has something to do with.
FIXABLE = "import torch\nw = torch.load('w.pt')\n"
FIXED = "import torch\nw = torch.load('w.pt', map_location=\"cpu\")\n"


def devfix(
    *args: str,
    cwd: Path,
    prelude: str = "",
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`devfix ARGS` in `cwd`; with `prelude`, that Python code runs first in the main
    process (to change a setting or simulate an edit, as a second process would)."""
    if prelude:
        command = [sys.executable, "-c", f"{prelude}\nfrom devfix.cli import main\nmain()"]
    else:
        command = [sys.executable, "-m", "devfix"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def error_lines(completed: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line for line in completed.stderr.splitlines() if ": error:" in line or "INTERNAL" in line
    ]


def assert_no_traceback(completed: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in completed.stderr, completed.stderr
    assert completed.returncode >= 0, f"killed by signal {-completed.returncode}"
