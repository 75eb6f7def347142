"""Each file is parsed and fixed in a worker process, so that a crash costs that file only.

libcst's native parser can die (SIGSEGV on nesting it cannot handle, SIGABRT when an
allocation fails) or take minutes; an interpreter cannot recover from the first two. So the
work runs in worker processes (as many as `--jobs`, one for `-j 1`), each given one file at a
time:

* a worker that dies is reported as that file's error (its signal named) and replaced, and the
  run goes on with the other files;
* a file that uses more than `--timeout-per-file` seconds of CPU time has its worker killed
  and is reported (CPU time, read from /proc, so a busy machine does not make a real file time
  out; where there is no /proc, wall-clock time);
* each worker's address space is limited to what it uses at start plus the memory budget
  (`--max-memory`), so a file that needs more stops with a MemoryError in its worker (one
  line) instead of the system's out-of-memory killer taking a process;
* workers die with the main process (Linux: `PR_SET_PDEATHSIG`; elsewhere a thread that
  watches the parent), so a killed run leaves nothing running that still writes files.

Workers are forked, so starting one costs milliseconds and nothing is pickled but each file's
path and result. Where `fork` does not exist (Windows), files are processed in this process,
without isolation.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

from devfix import limits
from devfix.types import FileResult, FileStatus

J = TypeVar("J")

#: How often the main process looks at the CPU time of busy workers (seconds); a quarter of
#: `--timeout-per-file` when that is shorter, so a file is stopped within a quarter of its limit
#: past it (a file of twice its limit could otherwise finish between two looks).
POLL_SECONDS = 0.5
#: A worker whose address space has grown by more than this share of the budget is replaced
#: after its file (Python keeps freed memory, so the next file would start with less).
RETIRE_SHARE = 0.5


@dataclass(frozen=True)
class Limits:
    """Per-file limits; 0 switches one off."""

    timeout_seconds: float = limits.DEFAULT_TIMEOUT_SECONDS
    max_memory_mib: int = limits.DEFAULT_MAX_MEMORY_MIB


def can_isolate() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_isolated(
    function: Callable[[J], FileResult],
    work: Sequence[tuple[str, J]],
    *,
    workers: int,
    per_file: Limits,
    initializer: Callable[[], None] | None = None,
) -> Iterator[FileResult]:
    """`function(job)` for each `(path, job)` of `work` in worker processes; results in order.

    An exception raised by `function` (a bug: the engine turns every error into a result)
    becomes that file's internal error, and the run goes on with the other files.
    """
    if not work:
        return
    if not can_isolate():  # pragma: no cover - Windows
        for path, job in work:
            try:
                yield function(job)
            except Exception as error:
                yield _crash_result(path, error)
        return
    pool = _Pool(function, per_file, initializer, min(max(workers, 1), len(work)))
    try:
        yield from pool.run(work)
    finally:
        pool.close()


@dataclass
class _Worker:
    process: Any  # multiprocessing's Process (its fork flavour has no public type)
    connection: Connection
    #: (index, path) of the file being worked on, and the worker's CPU seconds when it began.
    job: tuple[int, str] | None = None
    cpu_at_start: float = 0.0
    wall_at_start: float = 0.0
    #: It said it will exit after its last reply (it grew too big): nothing more is sent to it.
    retiring: bool = False


class _Pool(Generic[J]):
    def __init__(
        self,
        function: Callable[[J], FileResult],
        per_file: Limits,
        initializer: Callable[[], None] | None,
        size: int,
    ) -> None:
        self.function = function
        self.per_file = per_file
        self.initializer = initializer
        self.size = size
        self.context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []

    def _start(self) -> _Worker:
        ours, theirs = self.context.Pipe(duplex=True)
        process = self.context.Process(
            target=_worker_main,
            args=(theirs, self.function, self.per_file, self.initializer, os.getpid()),
            daemon=True,
        )
        process.start()
        theirs.close()
        worker: _Worker = _Worker(process, ours)
        self.workers.append(worker)
        return worker

    def run(self, work: Sequence[tuple[str, J]]) -> Iterator[FileResult]:
        pending = deque(enumerate(work))
        finished: dict[int, FileResult] = {}
        next_index = 0
        while len(self.workers) < self.size:
            self._start()
        while next_index < len(work):
            for worker in self.workers:
                if worker.job is None and not worker.retiring and pending:
                    index, (path, job) = pending.popleft()
                    worker.job = (index, path)
                    worker.cpu_at_start = _cpu_seconds(worker.process.pid)
                    worker.wall_at_start = time.monotonic()
                    worker.connection.send((index, path, job))
            busy = [w for w in self.workers if w.job is not None]
            wait(
                [w.connection for w in busy] + [w.process.sentinel for w in self.workers],
                timeout=(
                    min(POLL_SECONDS, self.per_file.timeout_seconds / 4)
                    if self.per_file.timeout_seconds
                    else None
                ),
            )
            for worker in list(self.workers):
                self._collect(worker, finished)
            self._stop_overdue(finished)
            while len(self.workers) < min(self.size, len(pending) + len(self._busy())):
                self._start()  # in place of one that died, was stopped or retired
            while next_index in finished:
                yield finished.pop(next_index)
                next_index += 1

    def _busy(self) -> list[_Worker]:
        return [w for w in self.workers if w.job is not None]

    def _collect(self, worker: _Worker, finished: dict[int, FileResult]) -> None:
        """Take the worker's replies; notice if it has died (and on which file)."""
        self._read_replies(worker, finished)
        if worker.process.is_alive():
            return
        worker.process.join()
        self._read_replies(worker, finished)  # what it sent just before it exited
        if worker.job is not None:
            index, path = worker.job
            finished[index] = _death_result(path, worker.process.exitcode, self.per_file)
        self._forget(worker)

    @staticmethod
    def _read_replies(worker: _Worker, finished: dict[int, FileResult]) -> None:
        while True:
            try:
                if not worker.connection.poll():
                    return
                kind, index, payload, worker.retiring = worker.connection.recv()
            except (EOFError, OSError):
                return  # it has gone: the caller sees that from its exit
            if kind == "raise":
                raise payload
            finished[index] = payload
            worker.job = None

    def _stop_overdue(self, finished: dict[int, FileResult]) -> None:
        limit = self.per_file.timeout_seconds
        if not limit:
            return
        for worker in self._busy():
            assert worker.job is not None
            used = _cpu_seconds(worker.process.pid) - worker.cpu_at_start
            if _HAVE_PROC:
                overdue = used > limit
            else:  # pragma: no cover - no /proc: wall-clock time
                overdue = time.monotonic() - worker.wall_at_start > limit
            if not overdue:
                continue
            with contextlib.suppress(OSError):
                os.kill(worker.process.pid, signal.SIGKILL)
            worker.process.join()
            index, path = worker.job
            finished[index] = FileResult(
                path,
                FileStatus.FAILED,
                reason=f"took more than {limit:g} s of CPU time; stopped (--timeout-per-file)",
            )
            self._forget(worker)

    def _forget(self, worker: _Worker) -> None:
        with contextlib.suppress(OSError):
            worker.connection.close()
        self.workers.remove(worker)

    def close(self) -> None:
        """Idle workers are told to stop; busy ones (an interrupted run) are killed."""
        for worker in self.workers:
            with contextlib.suppress(OSError):
                if worker.job is None:
                    worker.connection.send(None)
                else:
                    os.kill(worker.process.pid, signal.SIGKILL)
        for worker in self.workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                with contextlib.suppress(OSError):
                    os.kill(worker.process.pid, signal.SIGKILL)
                worker.process.join()
            with contextlib.suppress(OSError):
                worker.connection.close()
        self.workers = []


#: Signal number -> name (11 -> SIGSEGV).
_SIGNAL_NAMES = {int(sig): sig.name for sig in signal.Signals}


def _death_result(path: str, exitcode: int | None, per_file: Limits) -> FileResult:
    """What to say about a file whose worker died while working on it."""
    signal_number = -exitcode if exitcode is not None and exitcode < 0 else None
    name = _SIGNAL_NAMES.get(signal_number or 0, f"status {exitcode}")
    budget = per_file.max_memory_mib
    if signal_number == signal.SIGKILL:
        return FileResult(
            path,
            FileStatus.FAILED,
            reason="its worker process was killed (SIGKILL), most likely by the system for "
            "lack of memory; nothing was written"
            + (f" (lower --max-memory, now {budget:,} MiB, or --jobs)" if budget else ""),
        )
    if signal_number == signal.SIGABRT and budget:
        return FileResult(
            path,
            FileStatus.FAILED,
            reason=f"its worker process aborted (SIGABRT), most likely over the memory budget "
            f"of {budget:,} MiB per file (--max-memory); nothing was written",
        )
    return FileResult(
        path,
        FileStatus.FAILED,
        reason=f"the parser crashed on this file ({name})",
        internal_error=True,
    )


# -- inside a worker ----------------------------------------------------------------------------


def _worker_main(
    connection: Connection,
    function: Callable[[J], FileResult],
    per_file: Limits,
    initializer: Callable[[], None] | None,
    parent: int,
) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    limits.memory_budget_mib = per_file.max_memory_mib
    start_size = _limit_address_space(per_file.max_memory_mib)
    if initializer is not None:
        initializer()
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, path, job = message
        payload: FileResult | BaseException
        try:
            kind, payload = "done", _memory_reason(function(job), per_file)
        except MemoryError:
            kind, payload = "done", _over_budget(path, per_file)
        except Exception as error:  # a bug: that file's internal error, the run goes on
            kind, payload = "done", _crash_result(path, error)
        except BaseException as error:  # SystemExit and the like: raised in the main process
            kind, payload = "raise", _picklable(error)
        # Python keeps memory it has freed: a worker that grew much starts afresh.
        retiring = bool(start_size and per_file.max_memory_mib) and (
            _address_space() - start_size > RETIRE_SHARE * per_file.max_memory_mib * 2**20
        )
        connection.send((kind, index, payload, retiring))
        if retiring:
            return


def _crash_result(path: str, error: Exception) -> FileResult:
    """A worker error is that file's internal error: it must never stop the run."""
    return FileResult(
        path,
        FileStatus.FAILED,
        reason=f"{type(error).__name__}: {error}".encode("utf-8", "backslashreplace").decode(),
        internal_error=True,
    )


def _memory_reason(result: FileResult, per_file: Limits) -> FileResult:
    """The engine reports a MemoryError as an internal error; it is the budget speaking."""
    if result.internal_error and result.reason.startswith("MemoryError"):
        return _over_budget(result.path, per_file)
    return result


def _over_budget(path: str, per_file: Limits) -> FileResult:
    return FileResult(
        path,
        FileStatus.FAILED,
        reason=f"needs more than the memory budget of {per_file.max_memory_mib:,} MiB per file "
        "(--max-memory); nothing was written",
    )


def _picklable(error: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """End this worker when the main process ends, however it ends."""
    armed = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    if not armed:  # pragma: no cover - not Linux

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()


def _address_space() -> int:
    """This process's virtual memory size in bytes (0 if unknown)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit_address_space(budget_mib: int) -> int:
    """Cap the address space at its size now plus the budget; returns the size now."""
    size = _address_space()
    if not budget_mib or not size:
        return size
    import resource

    with contextlib.suppress(ValueError, OSError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + budget_mib * 2**20
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return size


_HAVE_PROC = os.path.exists("/proc/self/stat")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int | None) -> float:
    """User plus system CPU seconds of a process (0 where /proc is missing)."""
    if pid is None or not _HAVE_PROC:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


__all__ = ["Limits", "can_isolate", "run_isolated"]
