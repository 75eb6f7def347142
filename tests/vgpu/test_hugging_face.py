"""The real Hugging Face libraries (transformers, accelerate, peft) under the virtual GPUs.

Each script builds tiny models from configs and a word-level tokenizer (nothing comes from a
hub: HF_HUB_OFFLINE=1) and trains or runs two or three steps. They run in forked children of
the worker's warm server, as the other runtime scripts do; each child imports transformers
itself (the server does not, so that a golden folder's own `transformers.py` stand-in is what
its scripts import).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from tests.golden_cases import GOLDEN
from tests.warm_servers import warm_run

SCRIPTS = Path(__file__).parent / "scripts"
REAL = GOLDEN / "hugging_face"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(
            importlib.util.find_spec(name) is None
            for name in ("transformers", "accelerate", "peft")
        ),
        reason="the test extra's transformers, accelerate and peft are not installed",
    ),
]


def _run(script: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
        "TMPDIR": str(tmp_path),
        "TOKENIZERS_PARALLELISM": "false",
    }
    return warm_run(script, 2, env=env, cwd=script.parent, timeout=300)


def test_trainer_wraps_the_model_in_data_parallel(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "hf_trainer_data_parallel.py", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trainer: DataParallel over 2 GPUs" in done.stdout, done.stdout


def test_dispatch_model_hooks_and_offload(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "hf_dispatch.py", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in (
        "dispatch: {",
        "cpu_offload: loss on cpu",
        "disk offload: loss",
        "inputs off the embedding's GPU: loss on cuda:0 generate on cuda:0",
    ):
        assert line in done.stdout, (line, done.stdout)


def test_peft_on_a_sharded_model(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "hf_peft_sharded.py", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "adapter tensors trained over cuda:0 and cuda:1" in done.stdout, done.stdout


def test_seed002_dies_in_a_data_parallel_replica_and_devfix_s_fix_trains(tmp_path: Path) -> None:
    """Seed 002 on the real libraries (its golden's tier 2 checks the error and devices): the
    error comes from DataParallel's replica 0, which Trainer made, and devfix's `after` trains
    without DataParallel, as model-parallel."""
    before = REAL / "seed002_prot_t5_lora_classifier.before.py"
    failed = _run(before, tmp_path)
    assert failed.returncode != 0
    assert "Caught RuntimeError in replica 0 on device 0." in failed.stderr, failed.stderr[-3000:]
    trained = _run(before.with_name("seed002_prot_t5_lora_classifier.after.py"), tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "TrainOutput(global_step=2" in trained.stdout, trained.stdout
