"""Bulk migration: one git commit per rule (`apply --commit`); the record of finished files
is devfix.state."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from devfix.engine import fix_paths
from devfix.gitops import GitError, dirty_among, start_branch, uncommittable
from devfix.report import EXIT_INTERRUPTED, plural
from devfix.settings import Settings
from devfix.types import FileResult, FileStatus

__all__ = ["EXIT_INTERRUPTED", "commit_per_rule", "plan"]


def _message(code: str, name: str, results: Sequence[FileResult]) -> str:
    changed = [r for r in results if r.status is FileStatus.CHANGED]
    total = sum(len(r.applied) for r in changed)
    lines = [
        f"devfix: {code} {name}",
        "",
        f"{plural(total, 'fix')} in {plural(len(changed), 'file')}:",
        "",
    ]
    for result in changed:
        counts = Counter(f.code for f in result.applied)
        lines.append(f"- {result.path}: {plural(counts.get(code, len(result.applied)), 'fix')}")
    return "\n".join(lines) + "\n"


def plan(paths: Sequence[str], settings: Settings) -> list[FileResult]:
    """What `apply` would do, file by file, without writing (and without the cache)."""
    return list(fix_paths(paths, replace(settings, cache_dir=None), write=False))


def commit_per_rule(
    paths: Sequence[str],
    settings: Settings,
    planned: Sequence[FileResult],
    *,
    branch: str,
    allow_dirty: bool,
    say: Callable[[str], None],
) -> bool:
    """Create `branch` and commit each rule's fixes separately; True if a file failed.

    `planned` is :func:`plan`'s result. Raises GitError when git refuses, or when a file devfix
    would rewrite has uncommitted changes (unless `allow_dirty`).
    """
    rewritten = [r.path for r in planned if r.status is FileStatus.CHANGED]
    refused = uncommittable(paths, rewritten)
    if refused is not None:
        raise GitError(refused)
    touched = dirty_among(paths, rewritten)
    if touched and not allow_dirty:
        raise GitError(
            "uncommitted changes in files devfix would rewrite: "
            + ", ".join(touched)
            + " (commit them first, or pass --allow-dirty)"
        )
    with _deferred_interrupts():
        started = start_branch(paths, branch, rewritten)
    failed = False
    try:
        with _terminate_as_interrupt():
            for pass_class in settings.passes:
                rule_settings = replace(settings.only(pass_class), cache_dir=None)
                results = list(fix_paths(paths, rule_settings, write=True))
                failed = failed or any(r.status is FileStatus.FAILED for r in results)
                changed = [r.path for r in results if r.status is FileStatus.CHANGED]
                if changed:
                    # Git is never stopped half-way through a commit (a stale index.lock).
                    with _deferred_interrupts():
                        message = _message(pass_class.CODE, pass_class.NAME, results)
                        started.commit(changed, message)
                    say(
                        f"devfix: committed {pass_class.CODE} ({plural(len(changed), 'file')}) "
                        f"on {branch}"
                    )
    except KeyboardInterrupt:
        with _deferred_interrupts():
            started.undo()
        raise
    except BaseException:
        started.forget()  # a commit that failed has undone itself; anything else keeps its work
        raise
    started.forget()
    return failed


_STOPPING = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _deferred_interrupts() -> Iterator[None]:
    """Ctrl-C or SIGTERM during the block takes effect (as KeyboardInterrupt) when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {
        number: signal.signal(number, lambda n, _f: received.append(n)) for number in _STOPPING
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a `kill`, a CI timeout) stops the run as Ctrl-C does, so it is rolled back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
