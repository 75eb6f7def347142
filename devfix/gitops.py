"""Git operations for bulk runs: files changed since a ref, and one commit per rule.

Everything git prints about paths is read NUL-separated (`-z`), so file names with spaces,
quotes or non-ASCII characters (which git otherwise quotes) are compared as they are, and
paths are handed to git as literal pathspecs (`*` in a name is not a pattern).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from devfix.errors import DevfixError
from devfix.sources import replace_file


class GitError(DevfixError):
    """git is missing, the folder is not a repository, or a git command failed."""


def _run(
    args: Sequence[str],
    cwd: str,
    *,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    literal: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS`; `literal`: paths are never pathspec patterns (check-ignore reads paths,
    and refuses the flag)."""
    try:
        return subprocess.run(
            ["git", *(["--literal-pathspecs"] if literal else []), *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError:
        raise GitError("git is not installed") from None


def _failure(args: Sequence[str], completed: subprocess.CompletedProcess[bytes]) -> GitError:
    message = os.fsdecode(completed.stderr).strip().splitlines()
    return GitError(f"git {' '.join(args)}: {message[-1] if message else 'failed'}")


def _git(args: Sequence[str], cwd: str, *, stdin: bytes | None = None) -> str:
    completed = _run(args, cwd, stdin=stdin)
    if completed.returncode != 0:
        raise _failure(args, completed)
    return os.fsdecode(completed.stdout)


def _names(args: Sequence[str], cwd: str) -> list[str]:
    """The NUL-separated entries a `-z` command prints."""
    return [entry for entry in _git(args, cwd).split("\0") if entry]


def toplevel(path: str) -> str:
    """The top folder of the git repository holding `path`; GitError if there is none."""
    start = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)) or "."
    try:
        return _git(["rev-parse", "--show-toplevel"], start).strip()
    except GitError as error:
        if "not a git repository" in str(error):
            raise GitError(f"not a git repository: {path}") from None
        raise


def _targets(paths: Sequence[str], root: str) -> list[str]:
    return [os.path.relpath(os.path.abspath(p), root) for p in paths] or ["."]


def changed_since(ref: str, paths: Sequence[str]) -> list[str]:
    """Files under `paths` that differ from `ref` (committed, staged, unstaged or untracked)."""
    root = toplevel(paths[0] if paths else ".")
    targets = _targets(paths, root)
    if _run(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root).returncode != 0:
        raise GitError(f"unknown git ref: {ref}")
    changed = _names(["diff", "--name-only", "-z", "--diff-filter=d", ref, "--", *targets], root)
    untracked = _names(["ls-files", "-z", "--others", "--exclude-standard", "--", *targets], root)
    found: list[str] = []
    for name in sorted(set(changed) | set(untracked)):
        full = os.path.join(root, name)
        if os.path.isfile(full):
            found.append(os.path.relpath(full))
    return found


def _status(paths: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The repository's top folder, and `git status` per path under `paths` (two letters, as
    in `--porcelain`; untracked files are `??`), relative to that folder."""
    root = toplevel(paths[0] if paths else ".")
    entries = _names(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *_targets(paths, root)],
        root,
    )
    status: dict[str, str] = {}
    renamed_from = False
    for entry in entries:
        if renamed_from:  # `R  new\0old`: the old name follows the new one
            status.setdefault(entry, "R ")
            renamed_from = False
            continue
        code, name = entry[:2], entry[3:]
        status[name] = code
        renamed_from = "R" in code or "C" in code
    return root, status


def dirty_files(paths: Sequence[str]) -> list[str]:
    """Files under `paths` with uncommitted changes, untracked ones included (their content is
    in no commit), relative to the repository's top folder."""
    return sorted(_status(paths)[1])


def dirty_among(paths: Sequence[str], files: Sequence[str]) -> list[str]:
    """Those of `files` (as given) that are untracked or differ from the last commit."""
    root, status = _status(paths)
    dirty = {os.path.realpath(os.path.join(root, name)) for name in status}
    return [file for file in files if os.path.realpath(file) in dirty]


def uncommittable(paths: Sequence[str], files: Sequence[str]) -> str | None:
    """Why `files` cannot be committed on a branch of the repository holding `paths` (before
    anything is done), or None: the repository has no commit yet, a file is in a submodule (or
    another nested repository), or git ignores it."""
    root = toplevel(paths[0] if paths else ".")
    if _run(["rev-parse", "--verify", "-q", "HEAD"], root).returncode != 0:
        return "the repository has no commit yet; make a first commit, then run `apply --commit`"
    nested: list[str] = []
    tops: dict[str, str] = {}
    for file in files:
        folder = os.path.dirname(os.path.realpath(file))
        if folder not in tops:
            tops[folder] = toplevel(folder)
        if os.path.realpath(tops[folder]) != os.path.realpath(root):
            nested.append(f"{file} (in {os.path.relpath(tops[folder], root)})")
    if nested:
        return (
            "files in a submodule or a nested repository: "
            + ", ".join(nested)
            + "; run `devfix apply --commit` inside it, or leave it out of the paths"
        )
    relative = [os.path.relpath(os.path.realpath(f), root) for f in files]
    ignored = _run(["check-ignore", "-z", "--stdin"], root, stdin=_z(relative), literal=False)
    names = [n for n in os.fsdecode(ignored.stdout).split("\0") if n]
    if names:
        return (
            "git ignores " + ", ".join(names) + ", so devfix does not commit it; fix it without "
            "--commit, or stop ignoring it"
        )
    return None


def _z(names: Sequence[str]) -> bytes:
    return "".join(name + "\0" for name in names).encode("utf-8", "surrogateescape")


# -- one branch of commits, undone whole if a commit fails --------------------------------------


@dataclass
class Branch:
    """The branch devfix made, and what it needs to put things back if a commit fails:
    the branch that was checked out, the index entries and the bytes of the files it may
    rewrite."""

    root: str
    name: str
    #: `refs/heads/x` that was checked out, or None (a detached HEAD at `head`).
    previous_ref: str | None
    head: str
    #: Index lines (`mode sha stage\tpath`) of the files, as `git ls-files -s` gives them.
    index: dict[str, str] = field(default_factory=dict)
    #: Absolute path -> (bytes, mode) before devfix wrote anything.
    contents: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    #: Files committed that were not among those (put back from `head` if need be).
    others: set[str] = field(default_factory=set)

    def commit(self, files: Sequence[str], message: str) -> str:
        """Stage exactly `files` and commit them; returns the new commit's hash. If git (a
        hook) refuses, everything is put back as it was before :func:`start_branch` and the
        GitError names the hook."""
        relative = [os.path.relpath(os.path.realpath(f), self.root) for f in files]
        self.others.update(name for name in relative if name not in self.index)
        try:
            _git(["add", "--", *relative], self.root)
        except GitError as error:
            self.undo()
            raise GitError(f"{error}; {UNDONE}") from None
        args = ["commit", "-q", "-m", message, "--", *relative]
        # Git's trace (on stderr, one JSON object a line) says which hook ran and how it ended.
        completed = _run(args, self.root, env={"GIT_TRACE2_EVENT": "2"})
        if completed.returncode != 0:
            self.undo()
            raise GitError(f"{_commit_failure(args, completed)}; {UNDONE}")
        return _git(["rev-parse", "HEAD"], self.root).strip()

    # -- the record that lets a later run roll back a run that was killed ------------------

    def record(self) -> None:
        """Keep this branch's way back in the git directory, for a run killed before it ends."""
        data = {
            "root": self.root,
            "name": self.name,
            "previous_ref": self.previous_ref,
            "head": self.head,
            "index": self.index,
            "contents": {
                path: [base64.b64encode(data).decode(), mode]
                for path, (data, mode) in self.contents.items()
            },
        }
        replace_file(_record_path(self.root), json.dumps(data).encode(), 0o644)

    def forget(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_record_path(self.root))

    @classmethod
    def recorded(cls, root: str) -> Branch | None:
        try:
            with open(_record_path(root), "rb") as handle:
                data = json.loads(handle.read())
            contents = {
                path: (base64.b64decode(text), int(mode))
                for path, (text, mode) in data["contents"].items()
            }
            return cls(
                data["root"],
                data["name"],
                data["previous_ref"],
                data["head"],
                dict(data["index"]),
                contents,
            )
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as error:
            raise GitError(f"{_record_path(root)} is damaged ({error}); remove it") from None

    def undo(self) -> None:
        """Check out the previous branch, restore the files' index entries and bytes, and
        delete the new branch; the work tree is never checked out over."""
        if self.previous_ref is not None:
            _git(["symbolic-ref", "HEAD", self.previous_ref], self.root)
        else:
            _git(["update-ref", "--no-deref", "HEAD", self.head], self.root)
        lines = []
        for name, line in self.index.items():
            # Mode 0 removes a path (a file that was not in the index: untracked before).
            lines.append(line if line else f"0 {'0' * 40}\t{name}")
        if lines:
            _git(["update-index", "-z", "--index-info"], self.root, stdin=_z(lines))
        for path, (data, mode) in self.contents.items():
            replace_file(path, data, mode)
        if self.others:
            _git(["checkout", "-q", self.head, "--", *sorted(self.others)], self.root)
        with contextlib.suppress(GitError):
            _git(["branch", "-q", "-D", self.name], self.root)
        self.forget()


UNDONE = "devfix put back the branch, the index and the files as they were"


def _commit_failure(args: Sequence[str], completed: subprocess.CompletedProcess[bytes]) -> str:
    """Which hook failed (from git's trace2 events) and the last line it printed."""
    output: list[str] = []
    hooks: dict[object, str] = {}
    failed: list[tuple[str, object]] = []
    for line in os.fsdecode(completed.stderr).splitlines():
        event = _trace_event(line)
        if event is None:
            if line.strip():
                output.append(line.strip())
        elif event.get("event") == "child_start" and event.get("child_class") == "hook":
            hooks[event.get("child_id")] = str(event.get("hook_name", "a"))
        elif event.get("event") == "child_exit" and event.get("child_id") in hooks:
            code = event.get("code")
            if code:
                failed.append((hooks[event.get("child_id")], code))
    said = f": {output[-1]}" if output else ""
    if failed:
        hook, code = failed[-1]
        return f"the {hook} hook failed (exit status {code}){said}"
    return f"git {' '.join(args[:2])} failed{said}"


def _trace_event(line: str) -> dict[str, object] | None:
    if not line.startswith('{"event":'):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _record_path(root: str) -> str:
    git_dir = _git(["rev-parse", "--absolute-git-dir"], root).strip()
    return os.path.join(git_dir, "devfix-commit-run.json")


def roll_back_stopped_run(paths: Sequence[str]) -> str | None:
    """An earlier `apply --commit` killed before it ended (its record is still there): put the
    branch, the index and the files back as they were before it, if its branch holds only
    devfix's commits; a sentence saying so, or None when there was no such run."""
    root = toplevel(paths[0] if paths else ".")
    stopped = Branch.recorded(root)
    if stopped is None:
        return None
    subjects = _run(["log", "--format=%s", f"{stopped.head}..refs/heads/{stopped.name}"], root)
    made = os.fsdecode(subjects.stdout).splitlines() if subjects.returncode == 0 else []
    if any(not subject.startswith("devfix: ") for subject in made):
        raise GitError(
            f"an earlier --commit run was stopped, and {stopped.name!r} now has commits devfix did "
            f"not make; look at it, delete it, and remove {_record_path(root)}"
        )
    stopped.undo()
    return (
        f"devfix: an earlier --commit run was stopped before it ended; {UNDONE} "
        f"(its {len(made)} commit(s) on {stopped.name!r} are gone)"
    )


def start_branch(paths: Sequence[str], branch: str, files: Sequence[str] = ()) -> Branch:
    """Create and check out `branch`, remembering how to put back `files` (see Branch)."""
    root = toplevel(paths[0] if paths else ".")
    existing = _git(["branch", "--list", branch], root).strip()
    if existing:
        raise GitError(f"branch {branch!r} already exists; name another with --branch")
    previous_ref = _run(["symbolic-ref", "-q", "HEAD"], root).stdout.decode().strip() or None
    started = Branch(root, branch, previous_ref, _git(["rev-parse", "HEAD"], root).strip())
    relative = [os.path.relpath(os.path.realpath(f), root) for f in files]
    for name in relative:
        started.index[name] = ""
    if relative:
        listed = _names(["ls-files", "-s", "-z", "--", *relative], root)
        for line in listed:
            started.index[line.split("\t", 1)[1]] = line
    for name in relative:
        path = os.path.join(root, name)
        with open(path, "rb") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            started.contents[path] = (handle.read(), mode)
    started.record()
    _git(["checkout", "-q", "-b", branch], root)
    return started
