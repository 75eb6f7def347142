"""Issue 19, item 11: what devfix prints about odd trees and odd names, and read-only folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.robustness.cli import FIXABLE, FIXED, assert_no_traceback, devfix

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def test_links_out_of_the_tree_are_counted_once(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "shared.py").write_text(FIXABLE)
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(FIXABLE)
    (src / "shared.py").symlink_to(tmp_path / "elsewhere" / "shared.py")
    (src / "also_shared.py").symlink_to(tmp_path / "elsewhere" / "shared.py")
    for command in ("check", "apply"):
        completed = devfix(command, "--no-cache", "src", cwd=tmp_path)
        assert_no_traceback(completed)
        summary = completed.stderr.splitlines()[-1]
        assert "in 1 file" in summary or "1 file changed" in summary, summary
        assert "2 symbolic links to files outside the folder skipped" in summary, summary
        assert "shared.py" not in completed.stdout + completed.stderr
    assert (tmp_path / "elsewhere" / "shared.py").read_text() == FIXABLE


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("red\x1b[31mname.py", '"red\\033[31mname.py"'),
        ("two\nlines.py", '"two\\nlines.py"'),
        (os.fsdecode(b"latin\xe9.py"), '"latin\\351.py"'),
        ("café.py", "café.py"),
    ],
    ids=["ansi", "newline", "not-utf8", "accent"],
)
def test_names_are_printed_escaped_as_git_does(tmp_path: Path, name: str, shown: str) -> None:
    (tmp_path / name).write_text(FIXABLE)
    (tmp_path / name.replace(".py", "_x.py")).write_text("import torch\nprint 'x'\n")
    completed = devfix("check", "--no-cache", ".", cwd=tmp_path)
    assert "\x1b" not in completed.stdout + completed.stderr
    # The whole path is quoted, as git quotes it: "red\033[31mname.py".
    where = shown
    finding = completed.stdout.splitlines()[0]
    assert finding.startswith(f"{where}:2:5: DF302 [*]"), finding
    failure = completed.stderr.splitlines()[0]
    assert failure.startswith(f"{where.replace('.py', '_x.py')}: error: does not parse"), failure


def test_sarif_uris_are_percent_encoded(tmp_path: Path) -> None:
    for name in ("my file#1%.py", "café.py"):
        (tmp_path / name).write_text(FIXABLE)
    completed = devfix("check", "--no-cache", "--format", "sarif", ".", cwd=tmp_path)
    log = json.loads(completed.stdout)
    uris = sorted(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for result in log["runs"][0]["results"]
    )
    assert uris == ["caf%C3%A9.py", "my%20file%231%25.py"]
    absolute = devfix(
        "check", "--no-cache", "--format", "sarif", str(tmp_path / "café.py"), cwd=tmp_path
    )
    [result] = json.loads(absolute.stdout)["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "file://" + str(tmp_path).replace(" ", "%20") + "/caf%C3%A9.py"


def test_read_only_folder_is_kept_like_a_read_only_file(tmp_path: Path) -> None:
    """Root may write anywhere; the mode bits decide for folders as they do for files."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "train.py").write_text(FIXABLE)
    (tmp_path / "open.py").write_text(FIXABLE)
    locked.chmod(0o555)
    try:
        completed = devfix("apply", "--no-cache", ".", cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    assert completed.returncode == 2, completed.stderr
    assert "locked/train.py: error: is in a read-only folder; not rewritten" in completed.stderr
    assert (locked / "train.py").read_text() == FIXABLE
    assert (tmp_path / "open.py").read_text() == FIXED


def test_where_findings_go_is_what_the_readme_says(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FIXABLE)
    check = devfix("check", "--no-cache", "train.py", cwd=tmp_path)
    assert "train.py:2:5: DF302" in check.stdout and "DF302" not in check.stderr
    diff = devfix("apply", "--no-cache", "--diff", "train.py", cwd=tmp_path)
    assert diff.stdout.startswith("--- a/train.py\n"), diff.stdout
    assert "train.py:2:5: DF302" in diff.stderr and "DF302" not in diff.stdout
    applied = devfix("apply", "--no-cache", "train.py", cwd=tmp_path)
    assert "train.py:2:5: DF302" in applied.stderr and applied.stdout == ""
    readme = " ".join(README.read_text().split())
    assert (
        "`check` prints its findings on stdout; `apply` prints them on stderr, with errors "
        "and the closing summary, so that its stdout carries only what `--diff` and `-` "
        "write."
    ) in readme
