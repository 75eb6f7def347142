"""How ``devfix verify`` starts a script: notebooks, single runs and ``--batch``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devfix.vgpu import child_env, command
from devfix.vgpu.diagnose import NOTEBOOK_ENV
from devfix.vgpu.provenance import shown_path

if TYPE_CHECKING:
    from devfix.vgpu.warm import WarmRunner


class NotebookError(ValueError):
    """A notebook that cannot be run (not JSON, no code cells that parse)."""


#: The exit status of a run stopped by ``--timeout`` (GNU timeout's).
TIMED_OUT = 124


def timed_out_line(timeout: float) -> str:
    return f"devfix verify: the script ran past --timeout {timeout:g} s and was stopped"


def _run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float | None,
    stdout: Any = None,
    stderr: Any = None,
    stdin: Any = None,
) -> tuple[int, str | None, str | None, bool]:
    """Run ``argv``; its exit status (:data:`TIMED_OUT` past ``timeout``), captured output, and
    whether it was stopped for running past ``timeout``.

    With a timeout the script gets a process group of its own, and the whole group is killed
    when time is up: DataLoader workers and other children would otherwise outlive it and
    hold the output pipes open.
    """
    if timeout is None:
        done = subprocess.run(argv, env=env, stdout=stdout, stderr=stderr, stdin=stdin, text=True)
        return done.returncode, done.stdout, done.stderr, False
    with subprocess.Popen(
        argv,
        env=env,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return TIMED_OUT, out, err, True
        except BaseException:  # Ctrl-C: the script's group must not live on
            _kill_group(proc)
            raise
    return proc.returncode, out, err, False


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def runnable(script: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The Python file that runs ``script`` and the environment that goes with it.

    A notebook (``.ipynb``) runs its code cells in order, in one module, as the devfix engine
    reads them: cell magics (``%%time``) are left out, line magics and ``!`` shell lines become
    ``pass``. Locations in the diagnosis point back to ``nb.ipynb:cell N:line``.
    """
    if not script.endswith(".ipynb"):
        yield script, {}
        return
    from devfix.errors import InputError
    from devfix.notebooks import Notebook

    try:
        notebook = Notebook(Path(script).read_text(encoding="utf-8"), script)
    except (OSError, UnicodeDecodeError, InputError) as error:
        raise NotebookError(f"{shown_path(script)}: {error}") from None
    if not notebook.code.strip():
        raise NotebookError(f"{shown_path(script)}: the notebook has no Python code cells")
    with tempfile.TemporaryDirectory(prefix="devfix-verify-") as tmp:
        code = Path(tmp) / (Path(script).name + ".py")
        code.write_text(notebook.code, encoding="utf-8")
        spec = {"ipynb": os.path.abspath(script), "py": str(code)}
        yield str(code), {NOTEBOOK_ENV: json.dumps(spec)}


def run_one(
    script: str,
    args: Sequence[str],
    *,
    gpus: int,
    env: Mapping[str, str],
    timeout: float | None = None,
    warm: WarmRunner | None = None,
) -> int:
    """Run one script in a fresh interpreter, its output on ours; its exit status
    (:data:`TIMED_OUT` when it ran past ``timeout`` seconds and was killed).

    With ``warm`` (a server for ``gpus``), the script runs in a forked child of it instead,
    and its output is written to ours when it ends."""
    with runnable(script) as (path, extra):
        full = {**env, **extra}
        if warm is not None:
            code, out, err, timed_out = _run_warm(warm, path, args, env=full, timeout=timeout)
            sys.stdout.write(out or "")
            sys.stderr.write(err or "")
        else:
            code, _, _, timed_out = _run(
                command(path, gpus=gpus, env=full, args=args),
                env=child_env(full),
                timeout=timeout,
            )
    if timed_out and timeout is not None:
        print(timed_out_line(timeout), file=sys.stderr)
    return code


def run_one_json(
    script: str,
    args: Sequence[str],
    *,
    gpus: int,
    env: Mapping[str, str],
    capture: bool = False,
    timeout: float | None = None,
    stdin: Any = None,
    warm: WarmRunner | None = None,
) -> tuple[int, dict[str, Any]]:
    """Run one script like :func:`run_one`, its stdout on our stderr; its exit status and the
    result as data: ``{"script", "exit_code", "timed_out", "diagnosis"}`` (the diagnosis of a
    device error, see :func:`devfix.vgpu.diagnose.diagnose_exception`, else None). With
    ``capture``, the script's output is not shown but returned as ``"stdout"`` and
    ``"stderr"``. ``stdin`` is the script's standard input (default: ours).

    With ``warm`` (a server for ``gpus`` started with ``env``), the script runs in a forked
    child of it instead of a fresh interpreter (:mod:`devfix.vgpu.warm`: torch is imported
    once for all the runs of a repair); its output is captured and its stdin is
    ``/dev/null``."""
    from devfix.vgpu.__main__ import DIAGNOSIS_ENV

    with runnable(script) as (path, extra), tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "diagnosis.json")
        full = {**env, **extra}
        if warm is not None:
            code, out, err, timed_out = _run_warm(
                warm, path, args, env={**full, DIAGNOSIS_ENV: target}, timeout=timeout
            )
            if not capture:  # shown as a fresh interpreter's would be: all on our stderr
                sys.stderr.write((out or "") + (err or ""))
        else:
            code, out, err, timed_out = _run(
                command(path, gpus=gpus, env=full, args=args),
                env={**child_env(full), DIAGNOSIS_ENV: target},
                timeout=timeout,
                stdout=subprocess.PIPE if capture else sys.stderr,
                stderr=subprocess.PIPE if capture else None,
                stdin=stdin,
            )
        diagnosis = None
        if os.path.exists(target):
            with open(target, encoding="utf-8") as f:
                diagnosis = json.load(f)
    result = {
        "script": shown_path(script),
        "exit_code": code,
        "timed_out": timed_out,
        "diagnosis": diagnosis,
    }
    if capture:
        result["stdout"], result["stderr"] = out, err
    return code, result


def _run_warm(
    warm: WarmRunner,
    script: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout: float | None,
) -> tuple[int, str | None, str | None, bool]:
    """:func:`_run` for a forked child of ``warm``: exit status, output, timed out."""
    from devfix.vgpu.warm import WarmStartError

    try:
        done = warm.run(script, args=args, env=env, cwd=os.getcwd(), timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return TIMED_OUT, _text(expired.output), _text(expired.stderr), True
    except WarmStartError as error:  # as `python -m devfix.vgpu` fails: exit 2, the reason
        return 2, "", f"{error}\n", False
    return done.returncode, done.stdout, done.stderr, False


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def run_batch(
    scripts: Sequence[str],
    *,
    gpus: int,
    env: Mapping[str, str],
    echo: Callable[[str, bool], None],
    timeout: float | None = None,
) -> int:
    """Run each script in a forked child of one warm process (torch imported once); print
    each one's output under a header and a summary line. Exit status 1 if any script failed."""
    from devfix.vgpu.warm import runner

    failed: list[str] = []
    limit = 3600.0 if timeout is None else timeout
    warm = runner(gpus)
    for script in scripts:
        name = shown_path(script)
        try:
            with runnable(script) as (path, extra):
                done = warm.run(path, env={**env, **extra}, cwd=os.getcwd(), timeout=limit)
        except NotebookError as error:
            echo(f"devfix verify: {error}", True)
            failed.append(f"{name} (not runnable)")
            continue
        except subprocess.TimeoutExpired:
            failed.append(f"{name} (timed out after {limit:g} s)")
            echo(f"==> {name}: timed out after {limit:g} s", True)
            continue
        status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
        echo(f"==> {name}: {status}", False)
        if done.stdout:
            echo(done.stdout.rstrip("\n"), False)
        if done.stderr:
            echo(done.stderr.rstrip("\n"), True)
        if done.returncode != 0:
            failed.append(f"{name} (exit {done.returncode})")
    ran = len(scripts) - len(failed)
    summary = f"devfix verify: {len(scripts)} scripts, {ran} ran, {len(failed)} failed"
    echo(summary + (": " + ", ".join(failed) if failed else ""), bool(failed))
    return 1 if failed else 0
