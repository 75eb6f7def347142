"""Fidelity checks, each group in its own interpreter under the virtual GPUs."""

from __future__ import annotations

import pytest

GROUPS = {
    "fid_core.py": [
        "cuda-api",
        "tensors",
        "autograd",
        "module-to",
        "optim",
        "save-load",
        "misc",
        "real-errors",
    ],
    "fid_layers.py": ["rnn", "packed", "layers", "amp"],
    "fid_parallel.py": ["dataloader", "dataparallel", "dataparallel-cpu-module"],
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(GROUPS))
def test_fidelity_group(vgpu_run, script: str) -> None:
    r = vgpu_run(script)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in GROUPS[script]:
        assert f"OK {name}\n" in r.stdout, (name, r.stdout, r.stderr)


@pytest.mark.slow
def test_unsupported_corners_fail_clearly(vgpu_run) -> None:
    r = vgpu_run("unsupported.py")
    for name in (
        "grow-out",
        "compile",
        "nccl",
        "cuda-graph",
        "cuda-graph-ctx",
        "spawn",
        "spawn-dataloader",
        "out-same-size",
    ):
        assert f"OK {name}\n" in r.stdout, (name, r.stdout, r.stderr)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert (
        last == "devfix verify: not supported under virtual GPUs: torch.compile (inductor for cuda)"
    )


@pytest.mark.slow
def test_load_of_a_cuda1_checkpoint_with_one_gpu(vgpu_run, tmp_path) -> None:
    """torch.load without map_location raises torch's own text (serialization.py)."""
    ckpt = str(tmp_path / "ckpt.pt")
    saved = vgpu_run("save_on_gpu1.py", gpus=2, args=(ckpt,))
    assert saved.returncode == 0, saved.stderr
    r = vgpu_run("load_without_map_location.py", gpus=1, args=(ckpt,))
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "RuntimeError: Attempting to deserialize object on CUDA device 1 but "
        "torch.cuda.device_count() is 1. Please use torch.load with map_location to map your "
        "storages to an existing device."
    )


@pytest.mark.slow
def test_memory_statistics_start_at_zero(vgpu_run) -> None:
    r = vgpu_run("memory_at_start.py", gpus=1)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "0 0 0\n512\n"


@pytest.mark.slow
def test_backward_runs_on_the_calling_thread_with_each_graphs_device_current(
    vgpu_run, tmp_path
) -> None:
    """The backward of a graph on virtual GPUs runs on the script's thread (not a device
    thread of autograd's: the kernels would run on another core, with cold caches); inside
    hooks the current device is still the one of the graph's part being differentiated, and
    a graph that crosses devices gets its gradients on each side."""
    script = tmp_path / "hooks.py"
    script.write_text(
        "import threading, torch\n"
        "seen = []\n"
        "def hook(name):\n"
        "    def record(grad):\n"
        "        seen.append((name, torch.cuda.current_device(), str(grad.device),\n"
        "                     threading.current_thread() is threading.main_thread()))\n"
        "    return record\n"
        "a = torch.ones(2, device='cuda:0', requires_grad=True)\n"
        "b = a.to('cuda:1') * 3\n"
        "a.register_hook(hook('a'))\n"
        "b.register_hook(hook('b'))\n"
        "b.sum().backward()\n"
        "print(seen, a.grad.tolist(), torch.cuda.current_device())\n"
    )
    r = vgpu_run(script, gpus=2)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("[('b', 1, 'cuda:1', True), ('a', 0, 'cuda:0', True)] [3.0, 3.0] 0\n"), (
        r.stdout
    )
