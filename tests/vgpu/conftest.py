from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

SCRIPTS = Path(__file__).parent / "scripts"

#: scripts started together at the first use, so their interpreters overlap on the cores
PREFETCH = [
    "fid_core.py",
    "fid_layers.py",
    "fid_parallel.py",
    "unsupported.py",
    "dp_before.py",
    "dp_after.py",
    "run_battery.py",
]

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def _start(script: Path, gpus: int) -> subprocess.Popen[str]:
    from devfix.vgpu import child_env, command

    return subprocess.Popen(
        command(script, gpus=gpus),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


@pytest.fixture(scope="session")
def vgpu_run() -> Iterator[Runner]:
    procs = {(name, 2): _start(SCRIPTS / name, 2) for name in PREFETCH}

    def run(script: str | Path, gpus: int = 2) -> subprocess.CompletedProcess[str]:
        path = SCRIPTS / script if isinstance(script, str) else script
        p = procs.pop((str(script), gpus), None) or _start(path, gpus)
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    yield run
    for p in procs.values():
        p.kill()
        p.communicate()
