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
def test_parallel_builds_are_atomic(tmp_path) -> None:
    """Two processes building at once into an empty cache both end with the one complete file.
    They build a small stand-in through the same compile and link step as the shim (the race is
    the same; the real shim's build takes ten seconds, and every run of the suite makes it)."""
    cache = tmp_path / "cache"
    stand_in = tmp_path / "stand_in.cpp"
    stand_in.write_text('extern "C" int devfix_vgpu_stand_in() { return 7; }\n')
    env = child_env({"DEVFIX_VGPU_CACHE": str(cache)})
    build = (
        "import ctypes, pathlib, sys\n"
        "from devfix.vgpu import _shim\n"
        "_shim._SOURCE = pathlib.Path(sys.argv[1])\n"
        "path = _shim.shim_path()\n"
        "assert ctypes.CDLL(str(path)).devfix_vgpu_stand_in() == 7\n"
        "print(path)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", build, str(stand_in)],
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
    assert [f.name for f in cache.iterdir()] == [os.path.basename(paths.pop())]


@pytest.mark.slow
def test_the_built_shim_loads_and_reports_the_virtual_gpus(tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(
        "import torch\nprint(torch.cuda.device_count(), torch._C._get_accelerator())\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "devfix.vgpu", "--gpus", "3", str(script)],
        capture_output=True,
        text=True,
        env=child_env(),
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
