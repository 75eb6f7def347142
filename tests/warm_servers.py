"""The warm torch servers the tests share (devfix.vgpu.warm).

A server is started per GPU count and per server environment, in every pytest worker, and one
costs seconds of CPU (torch, torch._dynamo and devfix's passes are imported): every test that
runs scripts in warm children asks for its server with this one environment, so a worker
starts one server per GPU count. It holds what torch reads once, at import or at interpreter
start: one intra-op thread, no real CUDA devices, a fixed hash seed. Each script still gets
its own environment (``run(..., env=...)``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SERVER_ENV = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def warm_run(
    script: Path,
    gpus: int,
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a forked child of the shared server for ``gpus`` (0: plain CPU
    torch); ``env`` is the script's whole environment (None: this process's)."""
    from devfix.vgpu.warm import runner

    return runner(gpus, SERVER_ENV).run(script, args=args, env=env, cwd=cwd, timeout=timeout)


class SharedWarmRunner:
    """Stands in for a :class:`devfix.vgpu.warm.WarmRunner` that code makes and closes itself
    (`devfix verify --fix` starts one server for its rounds): the runs go to this worker's
    shared server for ``gpus``, and ``close()`` leaves that running. The code's ``env`` for
    its server is not used (the shared server's is ``SERVER_ENV``); each run's environment
    still is the run's own."""

    def __init__(self, gpus: int, env: Mapping[str, str] | None = None, *, start: bool = True):
        from devfix.vgpu.warm import runner

        self.gpus = gpus
        self._runner = runner(gpus, SERVER_ENV)

    def run(self, script: Path, **options: Any) -> subprocess.CompletedProcess[str]:
        return self._runner.run(script, **options)

    def close(self) -> None:
        pass
