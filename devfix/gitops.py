"""Git operations for bulk runs: files changed since a ref, and one commit per rule."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from devfix.errors import DevfixError


class GitError(DevfixError):
    """git is missing, the folder is not a repository, or a git command failed."""


def _git(args: Sequence[str], cwd: str) -> str:
    try:
        completed = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    if completed.returncode != 0:
        message = completed.stderr.strip().splitlines()
        raise GitError(f"git {' '.join(args)}: {message[-1] if message else 'failed'}")
    return completed.stdout


def toplevel(path: str) -> str:
    """The top folder of the git repository holding `path`; GitError if there is none."""
    start = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)) or "."
    try:
        return _git(["rev-parse", "--show-toplevel"], start).strip()
    except GitError as error:
        if "not a git repository" in str(error):
            raise GitError(f"not a git repository: {path}") from None
        raise


def changed_since(ref: str, paths: Sequence[str]) -> list[str]:
    """Files under `paths` that differ from `ref` (committed, staged, unstaged or untracked)."""
    root = toplevel(paths[0] if paths else ".")
    targets = [os.path.relpath(os.path.abspath(p), root) for p in paths] or ["."]
    _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root)
    changed = _git(["diff", "--name-only", "--diff-filter=d", ref, "--", *targets], root)
    untracked = _git(["ls-files", "--others", "--exclude-standard", "--", *targets], root)
    found: list[str] = []
    for line in sorted(set(changed.splitlines()) | set(untracked.splitlines())):
        full = os.path.join(root, line)
        if os.path.isfile(full):
            found.append(os.path.relpath(full))
    return found


def dirty_files(paths: Sequence[str]) -> list[str]:
    """Tracked or untracked files under `paths` with uncommitted changes."""
    root = toplevel(paths[0] if paths else ".")
    targets = [os.path.relpath(os.path.abspath(p), root) for p in paths] or ["."]
    status = _git(["status", "--porcelain", "--untracked-files=no", "--", *targets], root)
    return [line[3:] for line in status.splitlines() if line.strip()]


def start_branch(paths: Sequence[str], branch: str) -> None:
    root = toplevel(paths[0] if paths else ".")
    existing = _git(["branch", "--list", branch], root).strip()
    if existing:
        raise GitError(f"branch {branch!r} already exists; name another with --branch")
    _git(["checkout", "-q", "-b", branch], root)


def commit(paths: Sequence[str], files: Sequence[str], message: str) -> str:
    """Stage exactly `files` and commit them; returns the new commit's hash."""
    root = toplevel(paths[0] if paths else ".")
    relative = [os.path.relpath(os.path.abspath(f), root) for f in files]
    _git(["add", "--", *relative], root)
    _git(["commit", "-q", "-m", message, "--", *relative], root)
    return _git(["rev-parse", "HEAD"], root).strip()
