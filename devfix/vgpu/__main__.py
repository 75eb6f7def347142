"""``python -m devfix.vgpu --gpus N [--env K=V] script.py [args...]``.

Runs an unmodified script in this (fresh) interpreter with ``cuda:0 … cuda:N-1`` backed by the
CPU. On a device-mismatch death it prints, after the traceback, the user's line that triggered
it, the devices involved and the devfix findings for that code. The exit status is the script's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import sys
import threading
import traceback
from typing import NoReturn, Sequence

USAGE = "usage: python -m devfix.vgpu [--gpus N] [--env K=V]... SCRIPT [ARGS...]"


def parse_args(argv: Sequence[str]) -> tuple[int, dict[str, str], str, list[str]]:
    gpus = 2
    env: dict[str, str] = {}
    i = 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        if a == "--gpus" or a.startswith("--gpus="):
            val = a.split("=", 1)[1] if "=" in a else argv[i + 1] if i + 1 < len(argv) else ""
            i += 1 if "=" in a else 2
            if not val.isdigit() or int(val) < 1:
                raise SystemExit(f"devfix verify: --gpus expects a positive integer, got {val!r}")
            gpus = int(val)
            continue
        if a == "--env" or a.startswith("--env="):
            val = (
                a.split("=", 1)[1]
                if a.startswith("--env=")
                else (argv[i + 1] if i + 1 < len(argv) else "")
            )
            i += 1 if a.startswith("--env=") else 2
            if "=" not in val:
                raise SystemExit(f"devfix verify: --env expects K=V, got {val!r}")
            k, v = val.split("=", 1)
            env[k] = v
            continue
        if a == "--":
            i += 1
        break
    if i >= len(argv):
        raise SystemExit(USAGE)
    return gpus, env, argv[i], argv[i + 1 :]


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def hide_runtime_frames(text: str) -> str:
    """Drop the runtime's own frames from a formatted traceback (a real GPU has none)."""
    out: list[str] = []
    skipping = False
    for ln in text.splitlines(keepends=True):
        if ln.startswith('  File "'):
            skipping = _RUNTIME_DIR in ln
        elif skipping and not ln.startswith("    "):
            skipping = False
        if not skipping:
            out.append(ln)
    return "".join(out)


def _print_user_traceback(exc: BaseException, script: str) -> None:
    tb = exc.__traceback__
    target = os.path.abspath(script)
    t = tb
    while t is not None and os.path.abspath(t.tb_frame.f_code.co_filename) != target:
        t = t.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, t if t is not None else tb))
    sys.stderr.write(hide_runtime_frames(text))
    from devfix.vgpu.errors import UNSUPPORTED_PREFIX

    lines = [ln for ln in text.splitlines() if UNSUPPORTED_PREFIX in ln]
    if lines:
        msg = lines[-1]
        sys.stderr.write(msg[msg.index(UNSUPPORTED_PREFIX) :] + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    gpus, env, script, args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.update(env)
    from devfix.vgpu import _shim
    from devfix.vgpu.runtime import install

    try:
        install(gpus)
    except _shim.ShimBuildError as e:
        print(str(e), file=sys.stderr)
        return 2
    return run_script_here(script, args)


#: What a finished script left (its globals, the exception that ended it), kept until the
#: process exits without teardown (:func:`exit_without_teardown`, the only way out of both
#: callers of :func:`run_script_here`). Freeing a script's DDP model drops its gloo process
#: group with the GIL held (pybind frees the Reducer so), and the group's destructor joins a
#: worker thread that may be waiting for the GIL to drop the Python state a finished
#: collective captured: a deadlock (seen in this runtime, whose device modes are such state).
_KEPT: list[object] = []


def run_script_here(script: str, args: Sequence[str], *, virtual: bool = True) -> int:
    """Run ``script`` as ``__main__`` in this interpreter; return its exit status. What the
    script made stays alive (``_KEPT``): the caller exits without teardown.

    With ``virtual`` (the GPUs are installed), a death prints the traceback without the
    runtime's frames and, for a device mismatch, the diagnosis; without, the plain traceback.
    """
    if not os.path.exists(script):
        print(f"devfix verify: no such script: {script}", file=sys.stderr)
        return 2
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        _KEPT.append(runpy.run_path(script, run_name="__main__"))
    except SystemExit as e:
        _KEPT.append(e)
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException as e:
        _KEPT.append(e)  # its traceback holds the script's frames, and so its objects
        if not virtual:
            traceback.print_exception(type(e), e, e.__traceback__)
            return 130 if isinstance(e, KeyboardInterrupt) else 1
        _print_user_traceback(e, script)
        from devfix.vgpu.diagnose import report_for_exception

        text = report_for_exception(e, script)
        if text:
            sys.stderr.write(text)
        sys.stderr.flush()
        _write_diagnosis(e)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0


#: set by `devfix verify --format json`: the file the diagnosis of a device error goes to
DIAGNOSIS_ENV = "DEVFIX_VERIFY_DIAGNOSIS"


def _write_diagnosis(exc: BaseException) -> None:
    target = os.environ.get(DIAGNOSIS_ENV)
    if not target:
        return
    from devfix.vgpu.diagnose import diagnose_exception

    try:
        data = diagnose_exception(exc)
    except Exception as error:  # the script's own failure stays what the user sees
        data = {"error": str(exc).strip().splitlines()[-1:], "diagnosis_failed": str(error)}
    if data is None:
        return
    with open(target, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _skip_operator_deregistration() -> None:
    """Drop torch.library's exit-time finalizers: each takes one operator registration back
    out of the dispatcher (about 180 of them, 0.1 s), in a process about to end with
    `os._exit`, where nothing can see the dispatcher again."""
    import weakref

    library = sys.modules.get("torch.library")
    deregister = getattr(library, "_del_library", None)
    registry = getattr(weakref.finalize, "_registry", None)  # CPython's table of finalizers
    if deregister is None or not isinstance(registry, dict):
        return
    for finalizer in list(registry):
        info = finalizer.peek()
        if info is not None and info[1] is deregister:
            finalizer.atexit = False


def exit_without_teardown(code: int) -> NoReturn:
    """Finish like the interpreter would, minus C++ static destructors, then exit with `code`.

    With the virtual CUDA device guard, autograd keeps one worker thread per virtual device; at
    process teardown one of them could still be joinable, and libstdc++ then aborts the process
    ("terminate called without an active exception", exit -6) after the script had succeeded.
    Python-level shutdown (non-daemon threads, atexit handlers such as DataLoader worker cleanup,
    buffered output) still runs.
    """
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    _skip_operator_deregistration()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
