from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest


def _bytecode_in_the_pytest_cache() -> None:
    """With PYTHONDONTWRITEBYTECODE set, keep compiled bytecode in `.pytest_cache/bytecode`
    instead of writing none: the suite starts devfix in hundreds of subprocesses, and each
    one compiled every devfix module again (about 0.4 s a start; the command-line tests took
    28 % longer on a fresh clone). The checkout still gets no `__pycache__` folders, which is
    what that setting is for; pytest's rewritten test modules are cached there too."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(
        Path(__file__).resolve().parents[1] / ".pytest_cache" / "bytecode"
    )
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_bytecode_in_the_pytest_cache()

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


#: what the controller tells its workers: they parse the command line again, without the
#: options pytest_cmdline_main sets below
_LOADGROUP = "devfix_loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run the suite on every core with pytest-xdist when it is installed (the test extra
    installs it) and the command line gives no `-n`; `-n 0` or `-p no:xdist` runs in one
    process. Workers get whole `xdist_group`s (`--dist loadgroup`, also with an explicit `-n`):
    a module whose tests share an expensive module-scoped fixture marks itself so that fixture
    is built once."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a worker: group as the controller schedules
        if workerinput.get(_LOADGROUP):
            config.option.loadgroup = True
        return
    if config.option.numprocesses is None and not config.option.tx:
        workers = default_workers(config)
        if workers:
            config.option.numprocesses = workers
    if (config.option.numprocesses or config.option.tx) and config.option.dist == "no":
        config.option.dist = "loadgroup"
    if config.option.dist == "loadgroup":
        # Hand out work in the order pytest_collection_modifyitems leaves (slow tests first),
        # not xdist's (the largest groups first, then every other test in collection order).
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(pytest-xdist, on the controller) Tell a worker that tests are scheduled by group."""
    if node.config.getvalue("dist") == "loadgroup":
        node.workerinput[_LOADGROUP] = True


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, slow tests first (in their collection order, and so the others):
    the worker that takes the last tests ends on in-process ones of milliseconds, not on a
    script or a compiler run that keeps the whole run waiting after the other workers are
    done. A run in one process keeps pytest's order (`--ff`, `-x` as usual)."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    _name_groups(config, items)


def _name_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker under `--dist loadgroup`: a grouped test's id is `id@group`, which the
    controller schedules by. pytest-xdist (3.8) writes it to `item._nodeid`, which pytest 9.2
    no longer reads (a node's id is `item._id`), so every group was split across the workers;
    write it where this pytest reads it when xdist's did not take."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted(
            {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
        )
        if not groups or item.nodeid.endswith("@" + "_".join(groups)):
            continue
        named = f"{item.nodeid}@{'_'.join(groups)}"
        if hasattr(item, "_id"):
            from _pytest.nodeid import coerce_node_id  # pytest >= 9.2

            item._id = coerce_node_id(named)
        else:
            item._nodeid = named


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Close the warm torch servers this process started (devfix.vgpu.warm) and wait for
    them: an xdist worker ends without running atexit handlers, and a server it does not wait
    for takes its CPU time out of the run's accounting (bench/suite_time.py)."""
    warm = sys.modules.get("devfix.vgpu.warm")
    if warm is not None:
        warm.close_all()
