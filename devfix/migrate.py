"""Bulk migration: one git commit per rule (the record of finished files is devfix.state)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from devfix.engine import fix_paths
from devfix.gitops import GitError, dirty_among, start_branch
from devfix.registry import select_passes
from devfix.report import EXIT_CLEAN, EXIT_FAILED
from devfix.types import FileResult, FileStatus, Options

#: What a shell reports for a run stopped with Ctrl-C.
EXIT_INTERRUPTED = 130


def _message(code: str, name: str, results: Sequence[FileResult]) -> str:
    changed = [r for r in results if r.status is FileStatus.CHANGED]
    total = sum(len(r.applied) for r in changed)
    lines = [
        f"devfix: {code} {name}",
        "",
        f"{total} fix{'es' if total != 1 else ''} in {len(changed)} "
        f"file{'s' if len(changed) != 1 else ''}:",
        "",
    ]
    for result in changed:
        counts = Counter(f.code for f in result.applied)
        lines.append(f"- {result.path}: {counts.get(code, len(result.applied))} fix(es)")
    return "\n".join(lines) + "\n"


def commit_per_rule(
    paths: Sequence[str], options: Options, *, branch: str, allow_dirty: bool
) -> int:
    """Create `branch` and commit each rule's fixes separately; refuse to mix with local edits."""
    try:
        planned = [
            r.path
            for r in fix_paths(paths, replace(options, cache_dir=None), write=False)
            if r.status is FileStatus.CHANGED
        ]
        if not planned:
            print("devfix: nothing to fix; no branch created.", file=sys.stderr)
            return EXIT_CLEAN
        touched = dirty_among(paths, planned)
        if touched and not allow_dirty:
            print(
                "devfix: error: uncommitted changes in files devfix would rewrite: "
                + ", ".join(touched)
                + " (commit them first, or pass --allow-dirty)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        started = start_branch(paths, branch, planned)
        failed = False
        for pass_class in select_passes(options.select, options.ignore):
            rule_options = replace(options, select=(pass_class.CODE,), ignore=())
            results = list(fix_paths(paths, rule_options, write=True))
            failed = failed or any(r.status is FileStatus.FAILED for r in results)
            changed = [r.path for r in results if r.status is FileStatus.CHANGED]
            if changed:
                started.commit(changed, _message(pass_class.CODE, pass_class.NAME, results))
                print(
                    f"devfix: committed {pass_class.CODE} ({len(changed)} files) on {branch}",
                    file=sys.stderr,
                )
    except GitError as error:
        print(f"devfix: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if failed else EXIT_CLEAN
