"""The pytest plugin (`pytest --vgpus N`, `@pytest.mark.vgpus(N)`) on the sample project in
examples/vgpus_project: its tests pass on the CPU and fail on 2 virtual GPUs, with the
provenance line `devfix verify` prints. Each run is a pytest of its own: the plugin's start
(virtual GPUs installed before the tests import torch) is what is under test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parent.parent / "examples" / "vgpus_project"


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from devfix.vgpu import child_env

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=child_env({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    pytest.importorskip("torch", reason="the virtual GPU runtime needs torch")
    target = tmp_path / "vgpus_project"
    shutil.copytree(PROJECT, target)
    return target


def test_the_sample_project_passes_on_cpu_and_fails_on_two_virtual_gpus(project: Path) -> None:
    plain = _pytest(project)
    assert plain.returncode == 0, plain.stdout[-2000:]
    assert "2 passed" in plain.stdout
    virtual = _pytest(project, "--vgpus", "2")
    assert virtual.returncode == 1, virtual.stdout[-3000:]
    out = virtual.stdout
    assert "2 failed" in out
    assert (
        "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, "
        "different from other tensors on cuda:0"
    ) in out
    # verify's provenance line, and the rule that fixes it
    assert (
        "  the cpu tensor `index` (shape [5]) was created at tagger.py:15 by torch.arange(...) "
        "without device=  (root cause)\n    -> DF101 fixes it: "
    ) in out, out[-3000:]


def test_the_marker_runs_one_test_on_virtual_gpus(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the virtual GPU runtime needs torch")
    (tmp_path / "test_marked.py").write_text(
        "import pytest\nimport torch\n\n\n"
        "def test_plain():\n    assert not torch.cuda.is_available()\n\n\n"
        "@pytest.mark.vgpus(2)\ndef test_on_two_gpus():\n"
        "    assert torch.cuda.device_count() == 2\n"
        "    weights = torch.ones(3)\n"
        "    assert (torch.ones(3, device='cuda:1') * weights).sum() == 3\n"
    )
    done = _pytest(tmp_path, "-p", "no:xdist")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 failed, 1 passed" in done.stdout
    assert "on 2 virtual GPUs (a pytest of its own: test_marked.py::test_on_two_gpus" in done.stdout
    assert "found at least two devices, cuda:1 and cpu!" in done.stdout
    assert "the cpu tensor `other` (shape [3]) was created at test_marked.py:12" in done.stdout


def test_without_the_option_nothing_changes(tmp_path: Path) -> None:
    (tmp_path / "test_cpu.py").write_text(
        "import torch\n\n\ndef test_no_gpu():\n    assert not torch.cuda.is_available()\n"
    )
    done = _pytest(tmp_path, "-p", "no:xdist")
    assert done.returncode == 0, done.stdout[-2000:]
