"""Building, caching and loading the C++ shim."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from devfix.vgpu import _shim, child_env


def test_cache_dir_is_per_torch_version(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("DEVFIX_VGPU_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _shim.cache_root() == tmp_path / "devfix" / "vgpu" / _shim.torch_version()


def test_missing_compiler_is_one_clear_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DEVFIX_VGPU_CACHE", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(_shim.shutil, "which", lambda name: None)
    with pytest.raises(_shim.ShimBuildError) as ei:
        _shim.shim_path()
    msg = str(ei.value)
    assert "\n" not in msg and "no C++ compiler found; install g++" in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_parallel_builds_are_atomic_and_the_shim_loads(tmp_path) -> None:
    env = child_env({"DEVFIX_VGPU_CACHE": str(tmp_path)})
    build = "from devfix.vgpu import _shim; print(_shim.shim_path())"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", build],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    paths = {o[0].strip() for o in outs}
    assert len(paths) == 1
    assert [f.name for f in tmp_path.iterdir()] == [os.path.basename(paths.pop())]
    script = tmp_path / "probe.py"
    script.write_text(
        "import torch\nprint(torch.cuda.device_count(), torch._C._get_accelerator())\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "devfix.vgpu", "--gpus", "3", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "3 cuda\n"


@pytest.mark.slow
def test_installing_after_torch_is_refused(tmp_path) -> None:
    code = "import torch\nfrom devfix.vgpu import install\ninstall(2)\n"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=300
    )
    assert r.returncode == 1
    assert "devfix.vgpu must be installed before torch is imported" in r.stderr
