"""A warm process that imports torch once and forks a child per script.

Starting an interpreter that imports torch costs 1.5–2 s; a golden suite runs hundreds of
scripts. ``python -m devfix.vgpu.warm --gpus N`` installs the virtual GPUs (``--gpus 0``: plain
CPU torch), imports torch and the modules scripts use, and then serves requests, one JSON line
each on stdin: ``{"script", "args", "cwd", "env", "stdout", "stderr"}``. For each it forks a
child that runs the script as ``python -m devfix.vgpu`` would, with

* its own working directory (``cwd``), its own ``os.environ`` (``env``, replacing the
  server's; :mod:`tempfile` reads ``TMPDIR`` from it), ``sys.argv`` and ``sys.path[0]``,
  fresh seeds for ``random``,
* stdin from ``/dev/null`` and stdout/stderr written to the given files,
* its own process group (a timeout kills the script and its DataLoader workers),

and answers ``{"pid": ...}`` at once and ``{"rc": ...}`` when the child has exited (negative:
killed by that signal, as :mod:`subprocess` reports it). A server that cannot install the
virtual GPUs (the shim does not build) answers ``{"failed": message}`` instead of ``{"ready"}``
and exits. The server ignores SIGINT (Ctrl-C reaches its client, which stops the child); a
child gets Python's own handler back.

What a child shares with the server and cannot change: whatever torch read while it was
imported (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``: give them to the server), the number of
virtual GPUs, and ``PYTHONHASHSEED``.

:class:`WarmRunner` is the client; :func:`runner` keeps one server per GPU count.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Union

#: What scripts import, and what building an optimizer imports (torch._dynamo: seconds): a
#: warm process imports these once, before it forks.
PRELOAD = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.optim",
    "torch.utils.data",
    "torch.nn.parallel",
    "torch.distributed",
    "torch._dynamo",
)

StrPath = Union[str, "os.PathLike[str]"]


# --------------------------------------------------------------------------------------------
# The server.


def _prepare(gpus: int) -> None:
    if gpus:
        from devfix.vgpu.runtime import install

        install(gpus)
        from devfix.vgpu import _checks

        _checks.table()  # the op table a first device mismatch needs
    for name in PRELOAD:
        __import__(name)
    if gpus:
        # the diagnosis after a device-mismatch death runs devfix's passes (libcst: seconds)
        from devfix.registry import all_passes

        all_passes()


def _child(request: dict[str, Any], gpus: int, private: Sequence[int]) -> int:
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores it
    for fd in private:  # the server's protocol pipes are not the script's
        with contextlib.suppress(OSError):
            os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, key in ((1, "stdout"), (2, "stderr")):
        out = os.open(request[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # the server's imports already asked tempfile for its folder: ask again with this
    # environment (TMPDIR), as a fresh interpreter would
    tempfile.tempdir = None
    _warning_options(os.environ.get("PYTHONWARNINGS", ""))
    import random

    random.seed()
    script = request["script"]
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))
    from devfix.vgpu.__main__ import run_script_here

    return run_script_here(script, list(request["args"]), virtual=gpus > 0)


def _warning_options(spec: str) -> None:
    """The warning filters a fresh interpreter would take from ``PYTHONWARNINGS`` (the server
    read its own at start-up; a child's environment is the request's)."""
    import warnings

    setoption = getattr(warnings, "_setoption", None)
    if not spec or setoption is None:
        return
    for option in spec.split(","):
        try:
            setoption(option.strip())
        except Exception as error:  # as the interpreter does: report it and go on
            print(f"Invalid -W option ignored: {error}", file=sys.stderr)


def serve(gpus: int, requests: IO[str], replies: IO[str]) -> None:
    # Ctrl-C in a terminal reaches the whole foreground group, the server too: its client
    # stops the running child (in a group of its own), and the server ends when its client
    # closes the pipe, not with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from devfix.vgpu._shim import ShimBuildError

    try:
        _prepare(gpus)
    except ShimBuildError as error:  # as `python -m devfix.vgpu` reports it
        replies.write(json.dumps({"failed": str(error)}) + "\n")
        replies.flush()
        return
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                code = _child(request, gpus, (replies.fileno(), requests.fileno()))
            finally:
                from devfix.vgpu.__main__ import exit_without_teardown

                exit_without_teardown(code)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    gpus = 2
    if args[:1] == ["--gpus"] and len(args) > 1 and args[1].isdigit():
        gpus = int(args[1])
    elif args:
        print("usage: python -m devfix.vgpu.warm [--gpus N]", file=sys.stderr)
        return 2
    # replies go to a private copy of stdout: children's fds 1 and 2 are their own files
    replies = os.fdopen(os.dup(1), "w")
    serve(gpus, sys.stdin, replies)
    return 0


# --------------------------------------------------------------------------------------------
# The client.


class WarmStartError(RuntimeError):
    """The server could not install the virtual GPUs (the message says why)."""


class WarmRunner:
    """Runs scripts in children of one warm server (``gpus`` virtual GPUs; 0: plain torch).

    The server starts at once, or with ``start=False`` at the first :meth:`run` (an owner
    that may run nothing starts nothing). ``env`` is the server's environment on top of
    ours: what torch reads at import comes from it.
    """

    def __init__(
        self, gpus: int, env: Mapping[str, str] | None = None, *, start: bool = True
    ) -> None:
        self.gpus = gpus
        self._env = dict(env or {})
        self._lock = threading.Lock()
        self._started: subprocess.Popen[str] | None = None
        self._ready = False
        if start:
            self._start()

    def _start(self) -> subprocess.Popen[str]:
        if self._started is None:
            from devfix.vgpu import child_env

            self._started = subprocess.Popen(
                [sys.executable, "-m", "devfix.vgpu.warm", "--gpus", str(self.gpus)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=child_env(self._env),
            )
        return self._started

    @property
    def _proc(self) -> subprocess.Popen[str]:
        return self._start()

    def exited(self) -> bool:
        """Whether the server was started and has ended."""
        return self._started is not None and self._started.poll() is not None

    def _reply(self, timeout: float | None) -> dict[str, Any]:
        assert self._proc.stdout is not None
        if timeout is not None:
            ready, _, _ = select.select([self._proc.stdout], [], [], max(timeout, 0))
            if not ready:
                raise TimeoutError
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm runner (gpus={self.gpus}) exited")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(
        self,
        script: StrPath,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: StrPath | None = None,
        timeout: float | None = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Like :func:`devfix.vgpu.run_script`, in a forked child of the warm server (no
        limit with ``timeout=None``). Raises :class:`WarmStartError` when the server could not
        install the virtual GPUs, :class:`subprocess.TimeoutExpired` past ``timeout``; on any
        other exception while the script runs (Ctrl-C) its process group is killed first."""
        from devfix.vgpu import child_env

        with self._lock, tempfile.TemporaryDirectory(prefix="devfix-warm-") as tmp:
            if not self._ready:
                hello = self._reply(None)
                if "failed" in hello:
                    raise WarmStartError(str(hello["failed"]))
                self._ready = True
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            request = {
                "script": os.path.abspath(os.fspath(script)),
                "args": list(args),
                "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
                "env": child_env(env),
                "stdout": str(out),
                "stderr": str(err),
            }
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            pid = int(self._reply(None)["pid"])
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                left = None if deadline is None else deadline - time.monotonic()
                rc = int(self._reply(left)["rc"])
            except TimeoutError:
                _kill_group(pid)
                self._reply(None)
                raise subprocess.TimeoutExpired(
                    [os.fspath(script), *args], timeout or 0, _read(out), _read(err)
                ) from None
            except BaseException:  # Ctrl-C: the script's group must not live on
                _kill_group(pid)
                with contextlib.suppress(Exception):  # the server's answer for the killed child
                    self._reply(5)
                raise
            cmd = [sys.executable, "-m", "devfix.vgpu", "--gpus", str(self.gpus)]
            return subprocess.CompletedProcess(
                [*cmd, os.fspath(script), *args], rc, _read(out), _read(err)
            )

    def close(self) -> None:
        proc = self._started
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


_RUNNERS: dict[tuple[int, tuple[tuple[str, str], ...]], WarmRunner] = {}


def runner(gpus: int, env: Mapping[str, str] | None = None) -> WarmRunner:
    """The shared warm runner for ``gpus`` (started on first use, closed at exit)."""
    key = (gpus, tuple(sorted((env or {}).items())))
    found = _RUNNERS.get(key)
    if found is None or found.exited():
        found = _RUNNERS[key] = WarmRunner(gpus, env)
    return found


@atexit.register
def close_all() -> None:
    """Close every shared runner and wait for its server (at exit, or earlier by a process
    that exits without running atexit handlers, such as a pytest-xdist worker: a server left
    to exit on its own is never waited for, and its CPU time is missing from its parent's)."""
    for r in _RUNNERS.values():
        r.close()
    _RUNNERS.clear()


if __name__ == "__main__":
    raise SystemExit(main())
