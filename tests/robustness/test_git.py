"""Issue 19, item 3: `apply --commit` never commits the user's own edits (whatever the file
names), treats untracked files as uncommitted, and puts everything back when a hook fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.robustness.cli import FIXABLE, FIXED, assert_no_traceback, devfix

pytestmark = pytest.mark.slow

#: Two rules' fixes (DF302 and DF304): two commits.
#: A training script (DF304 judges programs that train) with a DF304 and a DF302 finding.
TWO_RULES = (
    'import torch\n\ndevice = torch.device("cuda")\nw = torch.load("w.pt")\n'
    "model = torch.nn.Linear(2, 2).to(device)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x in loader:\n"
    "    model(x.to(device)).sum().backward()\n"
    "    opt.step()\n"
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "config", "user.name", "Dev")
    (repo / ".gitignore").write_text(".devfix_cache/\n")
    return repo


def _state(repo: Path) -> tuple[str, str, str, str, dict[str, bytes]]:
    """Branch, HEAD, index, status and every file: what a failed --commit must leave alone."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts and ".devfix_cache" not in p.parts
    }
    return (
        _git(repo, "symbolic-ref", "HEAD"),
        _git(repo, "rev-parse", "HEAD"),
        _git(repo, "ls-files", "-s"),
        _git(repo, "status", "--porcelain", "-z"),
        files,
    )


@pytest.mark.parametrize("name", ["two words.py", "café.py", 'quote"d.py', "tab\there.py"])
def test_commit_refuses_uncommitted_edits_whatever_the_name(repo: Path, name: str) -> None:
    (repo / "src" / name).write_text(FIXABLE)
    (repo / "src" / "other.py").write_text(FIXABLE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "src" / name).write_text(FIXABLE + "# my edit, not committed yet\n")
    before = _state(repo)
    completed = devfix("apply", "--commit", "src", cwd=repo)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert "uncommitted changes in files devfix would rewrite" in completed.stderr
    assert _state(repo) == before
    assert "devfix/migration" not in _git(repo, "branch")


def test_untracked_files_count_as_uncommitted(repo: Path) -> None:
    (repo / "src" / "tracked.py").write_text(FIXABLE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "src" / "new.py").write_text(FIXABLE)  # its original is in no commit
    before = _state(repo)
    completed = devfix("apply", "--commit", "src", cwd=repo)
    assert completed.returncode == 2, completed.stderr
    assert "src/new.py" in completed.stderr and "--allow-dirty" in completed.stderr
    assert _state(repo) == before
    allowed = devfix("apply", "--commit", "--allow-dirty", "src", cwd=repo)
    assert allowed.returncode == 0, allowed.stderr
    assert (repo / "src" / "new.py").read_text() == FIXED


#: Passes the first commit, fails every later one (so the second rule's commit fails).
HOOK = """#!/bin/sh
if [ -f "$(git rev-parse --git-dir)/hook-ran" ]; then
    echo "lint: line too long" >&2
    exit 3
fi
touch "$(git rev-parse --git-dir)/hook-ran"
"""


@pytest.mark.parametrize("fails_on", ["first commit", "second commit"])
def test_a_failing_hook_leaves_everything_as_it_was(repo: Path, fails_on: str) -> None:
    (repo / "src" / "train.py").write_text(TWO_RULES)
    (repo / "src" / "eval.py").write_text(FIXABLE)
    (repo / "notes.txt").write_text("draft\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "notes.txt").write_text("draft, staged\n")  # the user's staged work elsewhere
    _git(repo, "add", "notes.txt")
    (repo / "scratch.txt").write_text("untracked\n")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    if fails_on == "first commit":
        (repo / ".git" / "hook-ran").touch()
    before = _state(repo)
    completed = devfix("apply", "--commit", "src", cwd=repo)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert (
        "devfix: error: the pre-commit hook failed (exit status 3): lint: line too long; "
        "devfix put back the branch, the index and the files as they were"
    ) in completed.stderr
    assert _state(repo) == before
    assert _git(repo, "branch", "--list", "devfix/migration") == ""
    # Nothing was half-done: once the hook passes, the same command does the whole job.
    hook.unlink()
    again = devfix("apply", "--commit", "src", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert "nothing to fix" not in again.stderr
    assert len(_git(repo, "log", "--format=%s", "main..devfix/migration").splitlines()) == 2


#: Stops devfix (git's parent) with a signal from inside the first commit, which then succeeds.
STOPPING_HOOK = """#!/bin/sh
devfix=$(awk '{print $4}' /proc/$PPID/stat)
kill -%s "$devfix"
"""


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
def test_an_interrupted_commit_run_is_rolled_back_and_can_run_again(
    repo: Path, signal_name: str
) -> None:
    (repo / "src" / "train.py").write_text(TWO_RULES)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(STOPPING_HOOK % signal_name)
    hook.chmod(0o755)
    before = _state(repo)
    completed = devfix("apply", "--commit", "src", cwd=repo)
    assert_no_traceback(completed)
    assert completed.returncode == 130, completed.stderr
    assert "devfix: interrupted; devfix put back the branch, the index and the files" in (
        completed.stderr
    )
    assert "Aborted!" not in completed.stderr
    assert _state(repo) == before
    assert _git(repo, "branch", "--list", "devfix/migration") == ""
    assert not (repo / ".git" / "index.lock").exists()
    hook.unlink()
    again = devfix("apply", "--commit", "src", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert len(_git(repo, "log", "--format=%s", "main..devfix/migration").splitlines()) == 2


def test_commit_refusals_before_anything_is_done_are_one_clear_line(repo: Path) -> None:
    (repo / "src" / "a.py").write_text(FIXABLE)
    unborn = devfix("apply", "--commit", "--allow-dirty", "src", cwd=repo)
    assert unborn.returncode == 2, unborn.stderr
    assert "devfix: error: the repository has no commit yet" in unborn.stderr
    assert "git <command>" not in unborn.stderr  # git's usage text stays out
    (repo / ".gitignore").write_text(".devfix_cache/\nsrc/scratch.py\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "src" / "scratch.py").write_text(FIXABLE)
    before = _state(repo)
    ignored = devfix("apply", "--commit", "--allow-dirty", "src/scratch.py", cwd=repo)
    assert ignored.returncode == 2, ignored.stderr
    assert "git ignores src/scratch.py, so devfix does not commit it" in ignored.stderr
    assert "hint:" not in ignored.stderr
    assert _state(repo) == before


def test_files_of_a_submodule_are_reported_not_half_committed(repo: Path, tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    _git(inner, "init", "-q", "-b", "main")
    _git(
        inner,
        "-c",
        "user.email=d@e",
        "-c",
        "user.name=D",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )
    (repo / "src" / "a.py").write_text(FIXABLE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    _git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "vendor")
    _git(repo, "commit", "-q", "-m", "vendor")
    (repo / "vendor" / "m.py").write_text(FIXABLE)
    _git(repo / "vendor", "add", "m.py")
    _git(repo / "vendor", "-c", "user.email=d@e", "-c", "user.name=D", "commit", "-q", "-m", "m")
    before = _state(repo)
    completed = devfix("apply", "--commit", "--allow-dirty", ".", cwd=repo)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert "files in a submodule or a nested repository: vendor/m.py (in vendor)" in (
        completed.stderr
    )
    assert _state(repo) == before
    assert _git(repo, "branch", "--list", "devfix/migration") == ""


def test_a_killed_commit_run_is_rolled_back_by_the_next_run(repo: Path) -> None:
    (repo / "src" / "train.py").write_text(TWO_RULES)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    before = _state(repo)
    hook = repo / ".git" / "hooks" / "post-commit"  # after the first rule's commit: SIGKILL
    hook.write_text(STOPPING_HOOK % "KILL")
    hook.chmod(0o755)
    killed = devfix("apply", "--commit", "src", cwd=repo)
    assert killed.returncode == -9, killed.stderr
    assert _git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/devfix/migration"
    hook.unlink()
    again = devfix("apply", "--commit", "src", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert "an earlier --commit run was stopped before it ended; devfix put back" in again.stderr
    assert len(_git(repo, "log", "--format=%s", "main..devfix/migration").splitlines()) == 2
    _git(repo, "checkout", "-q", "main")
    _git(repo, "branch", "-q", "-D", "devfix/migration")
    assert _state(repo) == before
    assert not (repo / ".git" / "devfix-commit-run.json").exists()
