from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

#: The most workers a default run starts: each one starts its own warm torch servers
#: (devfix.vgpu.warm, a few hundred MB each), so more workers than this cost more memory and
#: start-up than they save.
MAX_DEFAULT_WORKERS = 4


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="Rewrite golden/**/*.after.py from devfix's current output (review the git diff).",
    )


def _names_only_files(config: pytest.Config) -> bool:
    """Whether the command line names test files or test ids only (a targeted run)."""
    args = [arg for arg in config.args if arg]
    if not args:
        return False
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        if "::" not in arg and not path.is_file():
            return False
    return True


def default_workers(config: pytest.Config) -> int:
    """How many xdist workers a run gets when the command line does not say (`-n`): one per
    core (at most MAX_DEFAULT_WORKERS) for the suite, a folder or a `-m`/`-k` selection; none
    for a run that names test files or test ids (starting workers costs more than it saves)."""
    if _names_only_files(config):
        return 0
    if config.getoption("usepdb", False) or config.getoption("collectonly", False):
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    workers = min(cores, MAX_DEFAULT_WORKERS)
    return workers if workers > 1 else 0


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run the suite on every core with pytest-xdist when it is installed (the test extra
    installs it) and the command line gives no `-n`; `-n 0` or `-p no:xdist` runs in one
    process. Workers get whole `xdist_group`s (`--dist loadgroup`): a module whose tests share
    an expensive module-scoped fixture marks itself so that fixture is built once."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.option.numprocesses is not None or config.option.tx:
        return
    workers = default_workers(config)
    if workers:
        config.option.numprocesses = workers
        if config.option.dist == "no":
            config.option.dist = "loadgroup"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Close the warm torch servers this process started (devfix.vgpu.warm) and wait for
    them: an xdist worker ends without running atexit handlers, and a server it does not wait
    for takes its CPU time out of the run's accounting (bench/suite_time.py)."""
    warm = sys.modules.get("devfix.vgpu.warm")
    if warm is not None:
        warm.close_all()
