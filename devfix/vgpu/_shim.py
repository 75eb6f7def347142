"""Build, cache and load the C++ shim (CUDA device guard and hooks, memory, provenance, fast path).

The shim must be loaded before ``import torch``: torch reads the CUDA hooks once while it is
imported. So nothing here imports torch; the torch install is located with ``importlib``.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Callable

_SOURCE = Path(__file__).with_name("shim.cpp")


class ShimBuildError(RuntimeError):
    """The shim could not be compiled (no compiler, or a compile error)."""


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise ShimBuildError("devfix verify: torch is not installed (pip install torch)")
    return Path(spec.origin).parent


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - odd installs
        return "unknown"


def cache_root() -> Path:
    override = os.environ.get("DEVFIX_VGPU_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "devfix" / "vgpu" / torch_version()


def find_compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def _cxx11_abi(tdir: Path) -> str:
    # Avoid importing torch here: the new ABI mangles std::string as std::__cxx11.
    for lib in (tdir / "lib").glob("libc10.so*"):
        return "1" if b"__cxx11" in lib.read_bytes() else "0"
    return "1"


#: how the shim is compiled (part of the cache key: a changed flag builds it again)
FLAGS = (
    "-shared",
    "-fPIC",
    "-O1",
    "-std=c++17",
    "-w",
    # torch's libraries are release builds: headers compiled without NDEBUG would see
    # debug-only members (RecordFunction::inputs_valid_) that the libraries do not have
    "-DNDEBUG",
)


def shim_path() -> Path:
    """Return the path of the compiled shim, building it first if needed."""
    src = _SOURCE.read_bytes()
    digest = hashlib.sha256(src + sys.version.encode() + " ".join(FLAGS).encode()).hexdigest()[:12]
    out = cache_root() / f"devfix_vgpu_shim_{digest}.so"
    if out.exists():
        return out
    cxx = find_compiler()
    if cxx is None:
        raise ShimBuildError(
            "devfix verify: no C++ compiler found; install g++ "
            "(e.g. `apt-get install g++` or `dnf install gcc-c++`) or set CXX"
        )
    tdir = torch_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".shim-", suffix=".so", dir=out.parent)
    os.close(fd)
    cmd = [
        cxx,
        *FLAGS,
        f"-D_GLIBCXX_USE_CXX11_ABI={_cxx11_abi(tdir)}",
        "-I",
        str(tdir / "include"),
        "-I",
        str(sysconfig.get_paths()["include"]),
        str(_SOURCE),
        "-o",
        tmp,
        "-L",
        str(tdir / "lib"),
        "-lc10",
        "-ltorch_cpu",
        "-ltorch_python",
        f"-Wl,-rpath,{tdir / 'lib'}",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ShimBuildError(
                "devfix verify: compiling the virtual-GPU shim failed:\n" + proc.stderr[-4000:]
            )
        os.replace(tmp, out)  # atomic: parallel builders all end with a complete file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


_loaded: ctypes.CDLL | None = None


def load_shim() -> ctypes.CDLL:
    """Load the shim into the process (RTLD_GLOBAL). Must run before ``import torch``."""
    global _loaded
    if _loaded is None:
        if "torch" in sys.modules:
            raise RuntimeError(
                "devfix.vgpu must be installed before torch is imported "
                "(run the script with `python -m devfix.vgpu` or `devfix verify`)"
            )
        tdir = torch_dir()
        # Load torch's own libraries first so the shim's symbols resolve against them.
        for name in ("libc10.so", "libtorch_cpu.so", "libtorch_python.so"):
            ctypes.CDLL(str(tdir / "lib" / name), mode=ctypes.RTLD_GLOBAL)
        _loaded = ctypes.CDLL(str(shim_path()), mode=ctypes.RTLD_GLOBAL)
    return _loaded


def fast_set_alloc_device() -> Callable[[int], int]:
    """The shim's ``set_alloc_device`` as a Python builtin (a ctypes call costs ten times more);
    the ctypes function where the interpreter does not export its C API."""
    lib = load_shim()
    try:
        maker = ctypes.PyDLL(lib._name).devfix_vgpu_py_set_alloc_device
        maker.restype = ctypes.py_object
        builtin: Callable[[int], int] = maker()
        return builtin
    except (OSError, AttributeError):  # pragma: no cover - an interpreter without its C API
        func = lib.devfix_vgpu_set_alloc_device
        func.restype = ctypes.c_int
        func.argtypes = [ctypes.c_int]
        return func


def _builtins(symbol: str) -> dict[str, Callable[..., Any]]:
    maker = getattr(ctypes.PyDLL(load_shim()._name), symbol)
    maker.restype = ctypes.py_object
    functions: dict[str, Callable[..., Any]] = maker()
    return functions


def provenance_functions() -> dict[str, Callable[..., Any]]:
    """The shim's provenance builtins (``prov_install``, ``prov_of``, ``prov_set``,
    ``prov_mark``, ``prov_site``); see :mod:`devfix.vgpu.provenance`."""
    return _builtins("devfix_vgpu_py_provenance")


def fast_path_functions() -> dict[str, Callable[..., Any]]:
    """The shim's fast-path builtins (``fast_install``, ``fast_add``, ``fast_remove``,
    ``fast_layout``, ``fast_counts``); see :func:`devfix.vgpu.runtime._fast_path`."""
    return _builtins("devfix_vgpu_py_fast_path")
