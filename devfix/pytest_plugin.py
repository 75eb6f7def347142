"""The pytest plugin: a project's own tests on virtual GPUs, so that CPU-only CI catches
device bugs.

Registered through the ``pytest11`` entry point and off unless asked:

* ``pytest --vgpus N`` installs ``cuda:0 … cuda:N-1`` (:mod:`devfix.vgpu`) before the
  project's conftest files and test modules import torch, so every test runs on them;
* ``@pytest.mark.vgpus(N)`` runs one test on N virtual GPUs: in this process when it already
  has N, else in a pytest of its own started for that test (the virtual GPUs must be
  installed before torch is imported).

A test that dies of a device error gets the diagnosis ``devfix verify`` prints after the
traceback: the line, the devices, and for each device the tensor on it and the line of the
test's or the project's code that put it there (the provenance line), with the devfix finding
there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "vgpus"
#: set in a pytest this plugin starts for one marked test
_CHILD_ENV = "DEVFIX_PYTEST_VGPUS_CHILD"
_installed = 0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("devfix", "devfix virtual GPUs")
    group.addoption(
        "--vgpus",
        type=int,
        default=None,
        metavar="N",
        help="Run the tests on N virtual CUDA GPUs backed by the CPU (devfix.vgpu): a device "
        "mismatch raises PyTorch's own CUDA error, with devfix's diagnosis.",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Install the virtual GPUs before the conftest files (and through them torch) load."""
    gpus = getattr(early_config.known_args_namespace, "vgpus", None)
    if gpus:
        _install(int(gpus))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(n): run this test on n virtual CUDA GPUs (devfix.vgpu; in a pytest of its "
        "own unless the run has --vgpus n)",
    )
    gpus = config.getoption("vgpus", None)
    if gpus:
        _install(int(gpus))  # an xdist worker, or a run whose conftests loaded otherwise


def _install(gpus: int) -> None:
    global _installed
    if _installed == gpus:
        return
    if gpus < 1:
        raise pytest.UsageError("--vgpus must be at least 1")
    if "torch" in sys.modules:
        raise pytest.UsageError(
            f"--vgpus {gpus}: torch was imported before devfix could install the virtual GPUs "
            "(by another plugin or by a conftest.py outside the tests' folders); they must be "
            "installed first"
        )
    from devfix.vgpu import install
    from devfix.vgpu._shim import ShimBuildError

    try:
        install(gpus)
    except ShimBuildError as error:
        raise pytest.UsageError(f"--vgpus {gpus}: {error}") from None
    _installed = gpus


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A marked test in a process without its GPUs: run it in a pytest of its own."""
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return None
    gpus = int(marker.args[0]) if marker.args else int(marker.kwargs.get("n", 2))
    if _installed == gpus:
        return None
    if os.environ.get(_CHILD_ENV):
        pytest.fail(f"{MARKER}({gpus}) in a run with {_installed or 'no'} virtual GPUs")
    done = _run_alone(pyfuncitem, gpus)
    if done.returncode != 0:
        output = (done.stdout or "") + (done.stderr or "")
        pytest.fail(
            f"on {gpus} virtual GPUs (a pytest of its own: {pyfuncitem.nodeid} --vgpus "
            f"{gpus}):\n{_failure_text(output)}",
            pytrace=False,
        )
    return True


def _run_alone(item: pytest.Function, gpus: int) -> subprocess.CompletedProcess[str]:
    config = item.config
    argv = [
        sys.executable,
        "-m",
        "pytest",
        item.nodeid,
        f"--vgpus={gpus}",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "--rootdir",
        str(config.rootpath),
    ]
    if config.inipath is not None:
        argv += ["-c", str(config.inipath)]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):  # the entry point is not read
        argv += ["-p", "devfix.pytest_plugin"]
    env = {**os.environ, _CHILD_ENV: "1"}
    return subprocess.run(
        argv, cwd=str(config.rootpath), env=env, capture_output=True, text=True, check=False
    )


def _failure_text(output: str) -> str:
    """The child's failure report, from its first failure header on."""
    lines = output.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("___")), 0)
    return "\n".join(lines[start:]).strip()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    if not _installed or call.excinfo is None:
        return
    report = outcome.get_result()
    if not report.failed:
        return
    text = diagnosis(call.excinfo.value)
    if not text:
        return
    longrepr = report.longrepr
    if hasattr(longrepr, "addsection"):
        longrepr.addsection("devfix: the test died of a device mismatch", text)
    else:
        report.sections.append(("devfix: the test died of a device mismatch", text))


def diagnosis(exc: BaseException) -> str:
    """``devfix verify``'s diagnosis of a device error, without its first line."""
    from devfix.vgpu.diagnose import report_for_exception

    try:
        text = report_for_exception(exc, "")
    except Exception:  # the test's own failure stays what the user sees
        return ""
    lines = text.strip("\n").splitlines()
    return "\n".join(lines[1:]) if lines else ""
