"""Virtual multi-GPU runtime: run unmodified scripts with ``cuda:0 … cuda:N-1`` on a CPU.

A CPU-only PyTorch build is made to believe N CUDA devices exist. Tensors on them report
``cuda:k`` everywhere, compute real values on the CPU, and mixing devices raises the errors a
CUDA build raises. Scripts run in a fresh interpreter (the shim must load before torch).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Union

from devfix.vgpu.errors import UNSUPPORTED_PREFIX, VGPUUnsupported

__all__ = ["UNSUPPORTED_PREFIX", "VGPUUnsupported", "command", "install", "run_script"]

_ROOT = str(Path(__file__).resolve().parents[2])


def command(
    script: Union[str, os.PathLike[str]],
    *,
    gpus: int = 2,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> list[str]:
    """The argv that runs ``script`` under the virtual GPUs."""
    cmd = [sys.executable, "-m", "devfix.vgpu", "--gpus", str(gpus)]
    for k, v in (env or {}).items():
        cmd += ["--env", f"{k}={v}"]
    return [*cmd, "--", os.fspath(script), *args]


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child interpreter: devfix importable, plus ``env``."""
    e = dict(os.environ)
    pp = e.get("PYTHONPATH")
    e["PYTHONPATH"] = _ROOT + (os.pathsep + pp if pp else "")
    e.update(env or {})
    return e


def run_script(
    script: Union[str, os.PathLike[str]],
    *,
    gpus: int = 2,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 120,
    cwd: Union[str, os.PathLike[str], None] = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter with ``gpus`` virtual GPUs; capture its output."""
    return subprocess.run(
        command(script, gpus=gpus, env=env, args=args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=child_env(env),
    )


def install(gpus: int = 2) -> None:
    """Install the virtual GPUs into this process; must run before ``import torch``."""
    from devfix.vgpu.runtime import install as _install

    _install(gpus)
