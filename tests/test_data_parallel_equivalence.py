"""DF401 equivalence: the converted script trains to the same weights as the DataParallel one.

Each golden `before` of golden/data_parallel/ runs with plain `python` on the CPU (one process,
global batch B, no shuffling); its `after` runs under `torchrun --standalone --nproc_per_node=2`
on the CPU (gloo, two processes with B // 2 each). Both write their final weights to
`$CHECKPOINT`; the DataParallel checkpoint's `module.` prefix is stripped before comparing.
The plain runs, and `torchrun` itself (the launcher, as the `torchrun` command calls it:
`torch.distributed.run.main()`), are forked from a warm process (devfix.vgpu.warm); the two
workers it starts are fresh interpreters that run the script as devfix runs scripts
(tests/torchrun_worker.py, their `PYTHON_EXEC`). Workers forked from a process that had
imported torch hung now and then at exit (the DDP reducer's process group, destroyed with the
GIL held, joined a gloo thread that waited for the GIL), and fresh ones ended by the
interpreter's own teardown aborted now and then ("terminate called without an active
exception").

Each `before` also runs under 2 virtual GPUs, where `nn.DataParallel` really replicates the
model and splits the batch: a script that runs there must train to the CPU run's weights; one
that dies must die inside a replica, of the error its golden header declares (the bug the
conversion removes).

Nothing is retried: a converted script that crashes in `destroy_process_group()` (the gloo
shutdown abort the conversion's `dist.barrier()` before it avoids) or in an atexit handler
fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import torchrun_worker
from tests.warm_servers import warm_run

torch = pytest.importorskip("torch")
#: one worker takes the module: two `torchrun` runs at once would share the two cores
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torchrun")]

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "data_parallel"
CASES = sorted(
    path.name[: -len(".before.py")]
    for path in GOLDEN.glob("*.before.py")
    if path.with_name(path.name.replace(".before.py", ".after.py")).exists()
)
#: the `torchrun` command: its console script calls this
TORCHRUN = "from torch.distributed.run import main\n\nmain()\n"


def _env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    env.update(extra)
    return env


def _warm(
    script: Path, cwd: Path, gpus: int, args: tuple[str, ...] = (), **extra: str
) -> subprocess.CompletedProcess[str]:
    return warm_run(script, gpus, args=args, env=_env(**extra), cwd=cwd)


def _python(script: Path, cwd: Path, **extra: str) -> None:
    completed = _warm(script, cwd, 0, **extra)
    assert completed.returncode == 0, (
        f"python {script.name} exited {completed.returncode}\n{completed.stderr[-4000:]}"
    )


def _torchrun(script: Path, cwd: Path, **extra: str) -> None:
    """`torchrun --standalone --nproc_per_node=2 script` (a free rendezvous port of its own:
    two at once do not meet), its workers started by tests/torchrun_worker.py."""
    launcher = cwd / "torchrun.py"
    launcher.write_text(TORCHRUN)
    worker = cwd / "torchrun-python"
    worker.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{torchrun_worker.__file__}" "$@"\n')
    worker.chmod(0o755)
    args = ("--standalone", "--nproc_per_node=2", str(script))
    completed = _warm(launcher, cwd, 0, args, PYTHON_EXEC=str(worker), **extra)
    assert completed.returncode == 0, (
        f"torchrun {' '.join(args)} exited {completed.returncode}\n{completed.stderr[-4000:]}"
    )


def _weights(path: Path) -> dict[str, Any]:
    state = torch.load(path, map_location="cpu")
    return {
        (key[len("module.") :] if key.startswith("module.") else key): value
        for key, value in state.items()
    }


def _assert_same(before: Path, after: Path) -> None:
    expected, got = _weights(before), _weights(after)
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.allclose(expected[key], got[key], atol=1e-5, rtol=0), (
            f"{key}: max difference {(expected[key] - got[key]).abs().max().item():.3g}"
        )


def _resumes(before: Path) -> bool:
    return "RESUME_FROM" in before.read_text()


@pytest.mark.parametrize("case", CASES)
def test_converted_script_trains_to_the_same_weights(case: str, tmp_path: Path) -> None:
    before = GOLDEN / f"{case}.before.py"
    after = GOLDEN / f"{case}.after.py"
    extra: dict[str, str] = {}
    if _resumes(before):
        # A checkpoint from an earlier DataParallel run: its keys carry `module.`.
        first = tmp_path / "dataparallel.pt"
        _python(before, tmp_path, CHECKPOINT=str(first))
        assert all(key.startswith("module.") for key in torch.load(first, map_location="cpu"))
        extra["RESUME_FROM"] = str(first)
    _python(before, tmp_path, CHECKPOINT=str(tmp_path / "before.pt"), **extra)
    _torchrun(after, tmp_path, CHECKPOINT=str(tmp_path / "after.pt"), **extra)
    _assert_same(tmp_path / "before.pt", tmp_path / "after.pt")
    saved = torch.load(tmp_path / "after.pt", map_location="cpu")
    assert not any(key.startswith("module.") for key in saved), "saved through the DDP wrapper"


@pytest.mark.parametrize("case", CASES)
def test_dataparallel_itself_on_two_virtual_gpus(case: str, tmp_path: Path) -> None:
    from devfix.vgpu.golden import check_failure, parse_golden_header

    before = GOLDEN / f"{case}.before.py"
    extra: dict[str, str] = {}
    if _resumes(before):
        first = tmp_path / "dataparallel.pt"
        _python(before, tmp_path, CHECKPOINT=str(first))
        extra["RESUME_FROM"] = str(first)
    virtual = _warm(before, tmp_path, 2, CHECKPOINT=str(tmp_path / "dp.pt"), **extra)
    if virtual.returncode == 0:
        _python(before, tmp_path, CHECKPOINT=str(tmp_path / "cpu.pt"), **extra)
        _assert_same(tmp_path / "cpu.pt", tmp_path / "dp.pt")
        return
    expectation = parse_golden_header(before.read_text())
    assert expectation is not None and expectation.gpus == 2, f"{case}: no gpus=2 header"
    problem = check_failure(expectation, virtual)
    assert problem is None, f"{problem}\n{virtual.stderr[-3000:]}"
    assert "Caught RuntimeError in replica 1 on device 1." in virtual.stderr, (
        f"{case}: failed outside a DataParallel replica\n{virtual.stderr[-3000:]}"
    )
