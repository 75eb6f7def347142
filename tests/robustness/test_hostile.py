"""Issue 33's adversarial probe: each odd or hostile input is one clear line for that file (or
correct behaviour), the run goes on with the other files, and nothing the user wrote is lost."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from devfix import isolation, sources
from devfix.engine import check_source
from devfix.errors import InputError
from devfix.report import failure_line, finding_line
from devfix.settings import Settings, usable_cores
from devfix.types import FileResult, FileStatus, Options
from tests.robustness.cli import FIXABLE, FIXED, assert_no_traceback, devfix, error_lines

pytestmark = pytest.mark.slow


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    document = {"cells": [{**cell, "source": source}], "metadata": {}, "nbformat": 4}
    return json.dumps({**document, "nbformat_minor": 5})  # `\ud800` stays a JSON escape


def test_a_notebook_with_a_lone_surrogate_is_one_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.ipynb").write_text(_notebook("import torch\nname = '\ud800'\n"))
    (tmp_path / "b.py").write_text(FIXABLE)
    completed = devfix("apply", "--no-cache", "-j", "1", ".", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 2
    assert error_lines(completed) == [
        "a.ipynb: error: is not a valid notebook: code cell 1, line 2 holds a lone surrogate "
        "('\\ud800'), which Python code cannot contain"
    ]
    assert (tmp_path / "b.py").read_text() == FIXED


def test_a_worker_error_is_that_file_s_internal_error_and_the_run_goes_on() -> None:
    def fix(path: str) -> FileResult:
        if path == "b.py":
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return FileResult(path, FileStatus.UNCHANGED)

    work = [(name, name) for name in ("a.py", "b.py", "c.py")]
    results = list(isolation.run_isolated(fix, work, workers=1, per_file=isolation.Limits()))
    assert [r.status for r in results] == [
        FileStatus.UNCHANGED,
        FileStatus.FAILED,
        FileStatus.UNCHANGED,
    ]
    assert results[1].internal_error and results[1].reason.startswith("UnicodeEncodeError: ")


def test_gitignore_lines_git_skips_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("!\n\\\nskipped.py\n")
    (tmp_path / "skipped.py").write_text(FIXABLE)
    (tmp_path / "kept.py").write_text(FIXABLE)
    completed = devfix("check", "--no-cache", ".", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 1
    assert "kept.py:2:5: DF302" in completed.stdout and "skipped.py" not in completed.stdout


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("", ("--exclude", "!"), "exclude pattern '!' is not a gitignore pattern"),
        ('[tool.devfix]\nextend-exclude = ["a\\\\"]\n', (), "exclude pattern 'a\\\\' is not"),
        ("tool = 5\n", (), "`tool` must be a table"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", (), "nested too deeply"),
        ("[tool.devfix]\nselect = []\n", (), "`select` is empty, so it selects no rule"),
        (
            "[tool.devfix.data-parallel]\nkeep-per-process-batch = 1\n",
            (),
            "option `keep-per-process-batch` of `data-parallel` must be true or false, not 1",
        ),
    ],
)
def test_odd_configuration_is_one_line_and_exit_2(
    tmp_path: Path, setup: str, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(setup)
    (tmp_path / "a.py").write_text(FIXABLE)
    for command in ("check", "apply"):
        completed = devfix(command, "--no-cache", *args, "a.py", cwd=tmp_path)
        assert_no_traceback(completed)
        assert completed.returncode == 2, completed.stderr
        assert len(completed.stderr.splitlines()) == 1, completed.stderr
        assert message in completed.stderr, completed.stderr
    assert (tmp_path / "a.py").read_text() == FIXABLE


def test_more_jobs_than_cores_start_one_worker_per_core() -> None:
    assert Settings.resolve(Options(jobs=64)).workers == min(64, usable_cores())
    assert Settings.resolve(Options(jobs=1)).workers == 1
    assert Settings.resolve(Options(jobs=0)).workers == usable_cores()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "read-only"])
def test_report_is_never_written_through_a_link_a_fifo_or_a_read_only_file(
    tmp_path: Path, kind: str
) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside.md"
    tree.mkdir()
    (tree / "a.py").write_text(FIXABLE)
    report = tree / "report.md"
    if kind == "symlink":
        outside.write_text("mine\n")
        report.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(report)
    else:
        report.write_text("mine\n")
        report.chmod(0o444)
    completed = devfix("check", "--no-cache", "--report", "report.md", "a.py", cwd=tree, timeout=30)
    assert_no_traceback(completed)
    assert completed.returncode == 2
    assert "devfix: error: cannot write report report.md: " in completed.stderr
    if kind == "symlink":
        assert outside.read_text() == "mine\n" and report.is_symlink()
    elif kind == "fifo":
        assert stat.S_ISFIFO(report.lstat().st_mode)
    else:
        assert report.read_text() == "mine\n"


def test_cache_entries_devfix_could_not_have_written_are_not_trusted(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    first = devfix("check", "a.py", cwd=tmp_path)
    (cache,) = (tmp_path / ".devfix_cache").glob("results-*.json")
    entries = json.loads(cache.read_text())
    (key,) = entries
    honest = entries[key]["findings"][0]
    forged = [
        {**honest, "message": "ok\n::error file=a.py::injected\x1b[2K"},
        {**honest, "line": 10_000, "end_line": 10_000},
        {**honest, "code": "DF999"},
    ]
    for finding in forged:
        cache.write_text(json.dumps({key: {"findings": [finding]}}))
        again = devfix("check", "a.py", cwd=tmp_path)
        assert again.stdout == first.stdout, again.stdout
        assert not any(line.startswith("::") for line in again.stdout.splitlines())


def test_control_characters_in_messages_are_escaped_in_text_output() -> None:
    settings = Settings.resolve(Options())
    (finding,) = check_source(FIXABLE, "a.py", settings)
    hostile = dataclasses.replace(finding, message="x\n::error::y\x1b[31m")
    line = finding_line("a.py", hostile, settings)
    assert line == "a.py:2:5: DF302 [*] x\\n::error::y\\x1b[31m"
    failed = FileResult("a.py", FileStatus.FAILED, reason="bad\r\n::error::z")
    assert failure_line(failed) == "a.py: error: bad\\r\\n::error::z"


def test_a_file_name_of_255_bytes_is_rewritten(tmp_path: Path) -> None:
    name = "m" * 252 + ".py"
    (tmp_path / name).write_text(FIXABLE)
    completed = devfix("apply", "--no-cache", name, cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / name).read_text() == FIXED
    assert [p.name for p in tmp_path.iterdir() if p.name != name] == []


def test_apply_diff_of_stdin_prints_a_diff_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    completed = devfix(
        "apply",
        "--no-cache",
        "--diff",
        "-",
        "--stdin-filename",
        "a.py",
        cwd=tmp_path,
        stdin=FIXABLE,
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.startswith("--- a/a.py\n+++ b/a.py\n@@ ")
    assert "+w = torch.load('w.pt', map_location=\"cpu\")\n" in completed.stdout
    assert (tmp_path / "a.py").read_text() == FIXABLE


def _no_room() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_full_disk_leaves_no_empty_gitignore_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(FIXABLE)
    completed = subprocess.run(
        [sys.executable, "-m", "devfix", "apply", "-j", "1", "a.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_no_room,
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    assert completed.returncode == 2, completed.stderr
    assert "a.py: error: cannot be written: File too large" in completed.stderr
    ignore = tmp_path / ".devfix_cache" / ".gitignore"
    assert not ignore.exists() or ignore.read_text().endswith("*\n")
    assert (tmp_path / "a.py").read_text() == FIXABLE


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "re-read"])
def test_an_edit_saved_just_before_the_rename_is_kept_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\n")
    document = sources.read(str(path))
    original_keep_owner = sources._keep_owner

    def edit_meanwhile(temporary: str, info: os.stat_result) -> None:
        original_keep_owner(temporary, info)
        path.write_text("import torch  # saved by an editor meanwhile\n")

    monkeypatch.setattr(sources, "_keep_owner", edit_meanwhile)
    if not exchange:
        monkeypatch.setattr(sources, "_exchange", lambda first, second: False)
    with pytest.raises(InputError, match="changed on disk"):
        sources.write_atomic(str(path), document.with_text("import torch  # devfix\n"))
    assert path.read_text() == "import torch  # saved by an editor meanwhile\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]
