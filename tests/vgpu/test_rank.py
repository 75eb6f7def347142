"""One rank of a torchrun/accelerate launch under the virtual GPUs (devfix/vgpu/_dist.py): the
environment names the rank, `init_process_group("nccl")` runs, and the peers mirror this rank.

The scripts run in forked children of the worker's warm server, each with its own environment
(the rank variables), as `devfix verify --env LOCAL_RANK=1 ...` runs them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import torch

from tests.vgpu.conftest import SCRIPTS, Verify
from tests.warm_servers import warm_run

pytestmark = pytest.mark.slow

LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR")


def _run(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    base.update(TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"))
    base.update(TOKENIZERS_PARALLELISM="false")
    return warm_run(script, 2, env={**base, **env}, cwd=script.parent, timeout=300)


def test_a_ddp_training_script_runs_as_rank_1_of_2(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "rank_ddp_train.py", tmp_path, LOCAL_RANK="1", RANK="1", WORLD_SIZE="2")
    assert done.returncode == 0, done.stderr[-3000:]
    refused = (
        "refused DistributedDataParallel device_ids and output_device arguments only work with "
        "single-device/multiple-device GPU modules or CPU modules\n"
    )
    assert done.stdout == (
        "world 1 2 nccl True\n"
        "sampler [1, 3, 5, 7, 9, 11, 13, 15]\n"
        "ddp True True module.0.weight\n"
        "trained True ['cuda:1']\n" + refused * 2 + "destroyed False\n"
    )


HARD_CODED = """import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
model = DistributedDataParallel(nn.Linear(4, 4).to(local_rank), device_ids=[local_rank])
scale = torch.ones(4, device="cuda:0")  # every rank's copy on GPU 0
out = model(torch.randn(2, 4)) * scale
"""


def test_a_tensor_hard_coded_on_cuda0_meets_rank_1s_activations(
    tmp_path: Path, verify: Verify
) -> None:
    (tmp_path / "train.py").write_text(HARD_CODED)
    r = verify("--gpus", "2", "--env", "LOCAL_RANK=1", "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-3000:]
    assert (
        "RuntimeError: Expected all tensors to be on the same device, but found at least two "
        "devices, cuda:1 and cuda:0!"
    ) in r.stderr
    assert "  at train.py:12\n    out = model(torch.randn(2, 4)) * scale\n" in r.stderr


COLLECTIVES = """import torch
import torch.distributed as dist

dist.init_process_group(backend="cpu:gloo,cuda:nccl")
n, rank = dist.get_world_size(), dist.get_rank()
torch.cuda.set_device(0)
x = torch.tensor([1.0, 2.0], device="cuda")
for op in ("SUM", "AVG", "MAX", "PRODUCT"):
    y = x.clone()
    dist.all_reduce(y, op=getattr(dist.ReduceOp, op))
    print(op, y.tolist())
outs = [torch.zeros(2, device="cuda") for _ in range(n)]
dist.all_gather(outs, x)
flat = torch.zeros(2 * n, device="cuda")
dist.all_gather_into_tensor(flat, x)
part = torch.zeros(1, device="cuda")
dist.reduce_scatter_tensor(part, torch.arange(float(n), device="cuda"))
objects = [None] * n
dist.all_gather_object(objects, rank)
print("gather", [o.tolist() for o in outs], flat.tolist(), part.tolist(), objects)
cpu = torch.ones(1)
dist.all_reduce(cpu)  # a CPU tensor goes to the gloo part of the group
print("cpu", cpu.tolist(), dist.get_backend())
"""


@pytest.mark.parametrize(
    ("env", "n", "rank"),
    [({"LOCAL_RANK": "1"}, 2, 1), ({"LOCAL_RANK": "0", "RANK": "2", "WORLD_SIZE": "3"}, 3, 2)],
)
def test_collectives_act_as_if_every_peer_held_the_same_tensor(
    tmp_path: Path, env: dict[str, str], n: int, rank: int
) -> None:
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    done = _run(script, tmp_path, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == (
        f"SUM {[1.0 * n, 2.0 * n]}\n"
        "AVG [1.0, 2.0]\n"
        "MAX [1.0, 2.0]\n"
        f"PRODUCT {[1.0, 2.0**n]}\n"
        f"gather {[[1.0, 2.0]] * n} {[1.0, 2.0] * n} {[rank * n * 1.0]} {[rank] * n}\n"
        f"cpu [{float(n)}] cpu:gloo,cuda:nccl\n"
    )


NCCL_CPU = """import torch
import torch.distributed as dist

dist.init_process_group("nccl")
dist.all_reduce(torch.ones(1))
"""


def test_an_nccl_collective_on_a_cpu_tensor_raises_ncclss_error(tmp_path: Path) -> None:
    script = tmp_path / "cpu.py"
    script.write_text(NCCL_CPU)
    done = _run(script, tmp_path, LOCAL_RANK="1")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == "RuntimeError: No backend type associated with device type cpu"


NO_BACKEND_CPU = """import torch
import torch.distributed as dist

dist.init_process_group()
print(dist.get_backend())
dist.all_reduce(torch.ones(1))
"""


def test_a_group_that_names_no_backend_is_nccl_alone_from_torch_2_6(tmp_path: Path) -> None:
    script = tmp_path / "cpu.py"
    script.write_text(NO_BACKEND_CPU)
    done = _run(script, tmp_path, LOCAL_RANK="1")
    if torch.torch_version.TorchVersion(torch.__version__) >= "2.6":
        assert done.returncode == 1, done.stderr[-3000:]
        assert done.stdout == "nccl\n"
        last = done.stderr.strip().splitlines()[-1]
        assert last == "RuntimeError: No backend type associated with device type cpu"
    else:
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == "cpu:gloo,cuda:nccl\n"


NO_RANK = """import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

# gloo over CPU modules is torch's own, as before
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
model = DistributedDataParallel(nn.Linear(2, 1))
model(torch.ones(3, 2)).sum().backward()
print("gloo", dist.get_backend(), dist.get_world_size(), model.module.weight.grad.tolist())
dist.destroy_process_group()
print("nccl available", dist.is_nccl_available())
dist.init_process_group("nccl")
"""


def test_without_a_rank_in_the_environment_nccl_is_still_unsupported(tmp_path: Path) -> None:
    script = tmp_path / "no_rank.py"
    script.write_text(NO_RANK)
    done = _run(script, tmp_path)
    assert done.returncode == 1
    assert done.stdout.startswith("gloo gloo 1 [[3.0, 3.0]]\nnccl available False\n"), done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "devfix verify: not supported under virtual GPUs: the nccl process-group backend "
        "(backend='nccl')"
    )


HF = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("transformers", "accelerate")),
    reason="the test extra's transformers and accelerate are not installed",
)


@HF
def test_trainer_trains_a_tiny_llama_as_rank_1_of_2(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "rank_hf_trainer.py", tmp_path, LOCAL_RANK="1", WORLD_SIZE="2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trainer: rank 1 of 2, DistributedDataParallel on cuda:1, loss " in done.stdout


@HF
def test_a_model_mapped_over_both_gpus_is_refused_by_accelerate(tmp_path: Path) -> None:
    done = _run(SCRIPTS / "rank_hf_device_map.py", tmp_path, LOCAL_RANK="1", WORLD_SIZE="2")
    assert done.returncode == 1, done.stderr[-3000:]
    refusal = (
        "You can't train a model that has been loaded with `device_map='auto'` in any "
        "distributed mode."
    )
    assert "loaded over [0, 1]\n" in done.stdout
    assert f"Trainer: prepare raised: {refusal}" in done.stdout
    tail = done.stderr.strip().splitlines()
    assert tail[-1].startswith(f"ValueError: {refusal}"), tail[-3:]
    assert "in prepare_model" in tail[-3], tail[-3:]


KEEPS_ITS_OBJECTS = """
import weakref

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
model = DistributedDataParallel(nn.Linear(2, 1))
model(torch.ones(3, 2)).sum().backward()
dist.destroy_process_group()
weakref.finalize(model, print, "model freed").atexit = False  # when it is freed, not at exit
print("done")
"""


def test_a_finished_script_keeps_its_ddp_model_until_the_process_exits(tmp_path: Path) -> None:
    # Freeing the model frees its gloo group with the GIL held, which can deadlock with the
    # group's worker thread (it hung this suite once): the runner keeps what the script made.
    for ending in ("", "raise RuntimeError('after training')\n"):
        script = tmp_path / "keeps.py"
        script.write_text(KEEPS_ITS_OBJECTS + ending)
        done = _run(script, tmp_path)
        assert done.stdout == "done\n", done.stderr[-2000:]
        assert done.returncode == (1 if ending else 0)
