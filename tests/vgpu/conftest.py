from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import pytest

SCRIPTS = Path(__file__).parent / "scripts"

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="session")
def vgpu_run() -> Runner:
    """Run a script (a name in scripts/ or a path) under N virtual GPUs, in a forked child of
    a warm process (devfix.vgpu.warm): the same isolation as a fresh interpreter, without
    importing torch again."""
    from tests.warm_servers import warm_run

    def run(
        script: str | Path, gpus: int = 2, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[str]:
        path = SCRIPTS / script if isinstance(script, str) else script
        return warm_run(path, gpus, args=args, timeout=300, cwd=path.parent)

    return run
