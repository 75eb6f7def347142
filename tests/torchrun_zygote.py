"""`torchrun` workers forked from a process that imported torch once (tests only).

`torchrun` starts each worker as `$PYTHON_EXEC -u script.py ARGS` (default: `sys.executable`);
a fresh interpreter importing torch, `torch.distributed` and, for the optimizer,
`torch._dynamo` costs ~5 s of CPU before the script starts, twice per `torchrun` run.

    python tests/torchrun_zygote.py serve SOCKET     # imports torch, then forks on request
    python tests/torchrun_zygote.py run SOCKET -u script.py ARGS...

`run` is what `PYTHON_EXEC` starts (through a one-line shell script, see :func:`executable`):
a small interpreter without torch that hands its argv, environment, working directory and its
stdin/stdout/stderr (the descriptors themselves) to the server, relays SIGTERM/SIGINT/SIGHUP to
the worker and exits as the worker did. The server forks a worker per request; the worker takes
those descriptors, environment, directory and argv (`sys.path[0]` is the script's folder), runs
the script as `__main__` at the top level of this module and then ends as an interpreter does
(atexit handlers, finalization, C++ static destructors): a script that crashes at exit, such
as a gloo process group torn down while its peer still talks, still crashes. A worker whose
`run` process goes away is killed.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from devfix.vgpu.warm import PRELOAD  # what a worker starts with imported


def executable(folder: Path, sock: Path) -> Path:
    """A file for `PYTHON_EXEC` that runs its arguments as a worker of the server at `sock`."""
    path = folder / "torchrun-python"
    path.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{os.path.abspath(__file__)}" run "{sock}" "$@"\n'
    )
    path.chmod(0o755)
    return path


# --------------------------------------------------------------------------------------------
# The client (`run`).


def _client(sock_path: str, argv: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([request + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
    replies = conn.makefile("r")
    pid = int(json.loads(replies.readline())["pid"])

    def relay(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, relay)
    line = replies.readline()
    rc = int(json.loads(line)["rc"]) if line else 1
    if rc < 0:  # killed by a signal: end the same way, as the worker's parent would see it
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


# --------------------------------------------------------------------------------------------
# The server (`serve`).


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, ancillary, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * 4))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
    return json.loads(data), fds


def _serve(sock_path: str) -> dict[str, Any] | None:
    """Accept requests and fork a worker for each; returns the request in a worker (None in
    the server when it is told to stop by its stdin closing)."""
    for name in PRELOAD:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    print("ready", flush=True)
    running: dict[int, socket.socket] = {}  # worker pid -> its client's connection
    while True:
        ready, _, _ = select.select([listener, sys.stdin, *running.values()], [], [], 0.05)
        if sys.stdin in ready and not sys.stdin.readline():
            for pid in running:
                _kill(pid)
            return None
        for pid, conn in list(running.items()):
            if conn in ready and not conn.recv(1, socket.MSG_PEEK):  # its client went away
                _kill(pid)
        if listener in ready:
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in running.values():
                    other.close()
                conn.close()
                request["fds"] = fds
                return request
            for fd in fds:
                os.close(fd)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            running[pid] = conn
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = running.pop(pid, None)
            if conn is not None:
                try:
                    rc = os.waitstatus_to_exitcode(status)
                    conn.sendall(json.dumps({"rc": rc}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _become_worker(request: dict[str, Any]) -> str:
    """Take the client's descriptors, environment, directory and argv; the script to run."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(request["fds"][:3]):
        os.dup2(fd, target)
    for fd in request["fds"]:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = list(request["argv"])
    unbuffered = False
    while argv and argv[0].startswith("-"):  # the interpreter's own flags: torchrun gives -u
        unbuffered |= argv.pop(0) == "-u"
    if unbuffered:
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    import random
    import tempfile

    random.seed()
    tempfile.tempdir = None
    return argv[0]


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        raise SystemExit(_client(sys.argv[2], sys.argv[3:]))
    if sys.argv[1:2] != ["serve"]:
        raise SystemExit("usage: torchrun_zygote.py serve SOCKET | run SOCKET ARGS...")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _request = _serve(sys.argv[2])
    if _request is None:
        raise SystemExit(0)
    _script = _become_worker(_request)
    del _request
    import runpy

    # At the top level, as `python script.py` runs it: an exception prints its traceback and
    # exits 1, SystemExit exits with its code, and the interpreter then finalizes as usual.
    runpy.run_path(_script, run_name="__main__")
