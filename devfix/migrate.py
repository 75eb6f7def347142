"""Bulk migration: a record of finished files, and one git commit per rule (`apply --commit`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import IO

from devfix.cache import CACHE_FOLDER, ensure_cache_folder
from devfix.engine import fix_paths
from devfix.gitops import GitError, commit, dirty_files, start_branch
from devfix.report import plural
from devfix.settings import Settings
from devfix.types import FileResult, FileStatus

#: What a shell reports for a run stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


class RunState:
    """`run-state.jsonl` in the cache folder: one line per finished file, flushed as it goes.

    After a kill, the lines say which files were done; every other file is as it was, since
    each write is a single atomic rename.
    """

    def __init__(self, directory: str | None) -> None:
        self.path = os.path.join(directory or CACHE_FOLDER, "run-state.jsonl")
        self._stream: IO[str] | None = None
        with contextlib.suppress(OSError):
            ensure_cache_folder(os.path.dirname(self.path))
            self._stream = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
            self._write({"started": time.time(), "argv": sys.argv[1:]})

    def _write(self, record: dict[str, object]) -> None:
        if self._stream is not None:
            self._stream.write(json.dumps(record) + "\n")
            self._stream.flush()

    def done(self, result: FileResult) -> None:
        self._write({"path": result.path, "status": result.status.value})

    def finish(self, *, interrupted: bool) -> None:
        self._write({"finished": not interrupted, "interrupted": interrupted})
        if self._stream is not None:
            self._stream.close()
            self._stream = None


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
    dirty = set(dirty_files(paths))
    touched = [p for p in rewritten if any(os.path.abspath(p).endswith(os.sep + d) for d in dirty)]
    if touched and not allow_dirty:
        raise GitError(
            "uncommitted changes in files devfix would rewrite: "
            + ", ".join(touched)
            + " (commit them first, or pass --allow-dirty)"
        )
    start_branch(paths, branch)
    failed = False
    for pass_class in settings.passes:
        rule_settings = replace(settings.only(pass_class), cache_dir=None)
        results = list(fix_paths(paths, rule_settings, write=True))
        failed = failed or any(r.status is FileStatus.FAILED for r in results)
        changed = [r.path for r in results if r.status is FileStatus.CHANGED]
        if changed:
            commit(paths, changed, _message(pass_class.CODE, pass_class.NAME, results))
            say(f"devfix: committed {pass_class.CODE} ({plural(len(changed), 'file')}) on {branch}")
    return failed
