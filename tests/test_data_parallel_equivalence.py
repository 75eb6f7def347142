"""DF401 equivalence: the converted script trains to the same weights as the DataParallel one.

Each golden `before` runs with plain `python` on the CPU (one process, global batch B, no
shuffling); its `after` runs under `torchrun --standalone --nproc_per_node=2` on the CPU (gloo,
two processes with B // 2 each). Both write their final weights to `$CHECKPOINT`; the
DataParallel checkpoint's `module.` prefix is stripped before comparing.

Nothing is retried: a converted script that crashes at exit (the gloo shutdown abort the
conversion's `dist.barrier()` before `destroy_process_group()` avoids) fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "data_parallel"
CASES = [
    "seed001_transformer",
    "cifar_checkpoints",
    "argparse_main",
    "resume_dp_checkpoint",
    "gan_two_models",
    "teacher_student",
    "hf_train_function",
    "factories_cpu_fallback",
]


def _env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, **extra: str) -> None:
    completed = subprocess.run(
        args, capture_output=True, text=True, timeout=240, env=_env(**extra), cwd=str(cwd)
    )
    assert completed.returncode == 0, (
        f"{' '.join(args)} exited {completed.returncode}\n{completed.stderr[-4000:]}"
    )


def _python(script: Path, cwd: Path, **extra: str) -> None:
    _run([sys.executable, str(script)], cwd, **extra)


def _torchrun(script: Path, cwd: Path, **extra: str) -> None:
    _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(script),
        ],
        cwd,
        **extra,
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


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_converted_script_trains_to_the_same_weights(case: str, tmp_path: Path) -> None:
    before = GOLDEN / f"{case}.before.py"
    after = GOLDEN / f"{case}.after.py"
    extra: dict[str, str] = {}
    if case == "resume_dp_checkpoint":
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
