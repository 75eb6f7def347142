from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

SCRIPTS = Path(__file__).parent / "scripts"

Runner = Callable[..., "subprocess.CompletedProcess[str]"]
Verify = Callable[..., "subprocess.CompletedProcess[str]"]


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


def verify_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`devfix verify ARGS` as a command of its own: the script runs in a fresh interpreter."""
    from devfix.vgpu import child_env

    return subprocess.run(
        [sys.executable, "-m", "devfix", "verify", *args],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=cwd,
        timeout=600,
    )


@pytest.fixture
def verify(monkeypatch: pytest.MonkeyPatch) -> Verify:
    """`devfix verify ARGS` in `cwd`, the command itself in this process; its exit status and
    output as a finished process's. Every script runs in a forked child of this worker's warm
    server for its GPU count instead of an interpreter (or a server) of its own that imports
    torch again: a single run (`launch.run_one`'s `warm`), `--batch` (the server it asks
    for) and `--fix`'s rounds (the repair's `WarmRunner`). The fresh-interpreter path is
    `verify_command`'s, and test_repair_interactive.py runs the installed command with the
    server it starts itself."""
    from click.testing import CliRunner

    from devfix.cli import main
    from devfix.vgpu import launch, repair, warm
    from tests.warm_servers import SERVER_ENV, SharedWarmRunner

    shared = warm.runner

    def shared_runner(gpus: int, env: Any = None) -> Any:
        return shared(gpus, SERVER_ENV)

    def run_one(*args: Any, gpus: int, **options: Any) -> int:
        return launch.run_one(*args, gpus=gpus, warm=shared_runner(gpus), **options)

    monkeypatch.setattr(importlib.import_module("devfix.cli.verify"), "run_one", run_one)
    monkeypatch.setattr(warm, "runner", shared_runner)
    monkeypatch.setattr(repair, "WarmRunner", SharedWarmRunner)

    def invoke(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        result = CliRunner().invoke(main, ["verify", *args], prog_name="devfix")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return subprocess.CompletedProcess(
            ["devfix", "verify", *args], result.exit_code, result.stdout, result.stderr
        )

    return invoke
