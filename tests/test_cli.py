"""The `devfix` command as users run it: exit codes, output lines, stdin/stdout, JSON contract."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devfix.cli import main
from tests.golden_cases import GOLDEN

ROOT = Path(__file__).resolve().parent.parent
SEED = GOLDEN / "tensor_factory_without_device" / "seed001_transformer_positions"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devfix", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    # The golden's after is what devfix writes under this repository's line length.
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    copy = tmp_path / "train.py"
    shutil.copy(SEED.with_suffix(".before.py"), copy)
    return copy


@pytest.mark.slow  # starts devfix subprocesses
def test_apply_turns_the_seed_golden_before_into_its_after(seed: Path) -> None:
    completed = run("apply", str(seed))
    assert completed.returncode == 0, completed.stderr
    assert seed.read_text() == SEED.with_suffix(".after.py").read_text()
    assert f"{seed}:22:15: DF101 [*]" in completed.stderr
    assert "1 file changed, 1 fix applied" in completed.stderr
    again = run("apply", str(seed))
    assert again.returncode == 0 and "0 files changed" in again.stderr


@pytest.mark.slow  # starts devfix subprocesses
def test_apply_diff_writes_nothing_and_exits_1(seed: Path) -> None:
    before = seed.read_bytes()
    completed = run("apply", "--diff", str(seed))
    assert completed.returncode == 1
    assert completed.stdout.startswith(f"--- {seed}") or completed.stdout.startswith("--- a/")
    assert "+        pos = torch.arange(0, src_len, device=self.pos_embedding" in completed.stdout
    assert seed.read_bytes() == before


@pytest.mark.slow  # starts devfix subprocesses
def test_check_json_contract(seed: Path) -> None:
    completed = run("check", "--format", "json", str(seed))
    assert completed.returncode == 1
    rows = json.loads(completed.stdout)
    assert [row["code"] for row in rows] == ["DF101"]
    assert set(rows[0]) == {
        "path",
        "line",
        "col",
        "end_line",
        "end_col",
        "code",
        "name",
        "message",
        "fix_title",
        "applicability",
    }
    assert rows[0]["applicability"] == "safe" and rows[0]["line"] == 22


@pytest.mark.slow  # starts devfix subprocesses
def test_check_text_lines_and_clean_exit(seed: Path, tmp_path: Path) -> None:
    completed = run("check", str(seed))
    assert completed.returncode == 1
    assert completed.stdout.startswith(f"{seed}:22:15: DF101 [*] `torch.arange`")
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\nx = torch.zeros(3)\n")
    assert run("check", str(clean)).returncode == 0


@pytest.mark.slow  # starts devfix subprocesses
def test_syntax_error_fails_with_one_line_and_others_are_still_fixed(
    seed: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\ndef f(:\n    pass\n")
    completed = run("apply", str(broken), str(seed))
    assert completed.returncode == 2
    error_lines = [line for line in completed.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1
    assert error_lines[0].startswith(f"{broken}: error: does not parse (line 2, column 7): ")
    assert seed.read_text() == SEED.with_suffix(".after.py").read_text()
    assert broken.read_text() == "import torch\ndef f(:\n    pass\n"


@pytest.mark.slow  # starts devfix subprocesses
def test_stdin_to_stdout() -> None:
    source = SEED.with_suffix(".before.py").read_text()
    completed = run("apply", "-", stdin=source)
    assert completed.returncode == 0
    assert completed.stdout == SEED.with_suffix(".after.py").read_text()
    checked = run("check", "-", stdin=source)
    assert checked.returncode == 1 and checked.stdout.startswith("-:22:15: DF101")


def test_select_and_ignore_by_code_prefix_and_name(seed: Path) -> None:
    runner = CliRunner()
    for selector in ("DF101", "DF1", "tensor-factory-without-device"):
        result = runner.invoke(main, ["check", "--select", selector, str(seed)])
        assert result.exit_code == 1, (selector, result.output)
    ignored = runner.invoke(main, ["check", "--ignore", "DF101", str(seed)])
    assert ignored.exit_code == 0
    unknown = runner.invoke(main, ["check", "--select", "DF999", str(seed)])
    assert unknown.exit_code == 2 and "unknown rule selector 'DF999'" in unknown.output


@pytest.mark.slow  # starts devfix subprocesses
def test_missing_path_is_a_usage_error_not_a_checked_file(tmp_path: Path) -> None:
    for command in ("check", "apply"):
        completed = run(command, str(tmp_path / "nope.py"))
        assert completed.returncode == 2
        assert (
            completed.stderr == f"devfix: error: no such file or folder: {tmp_path / 'nope.py'}\n"
        )


@pytest.mark.slow  # starts devfix subprocesses
def test_new_user_paths_refs_and_reports(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nw = torch.load('w.pt')\n")
    # `apply` with no path works on the current folder, as `check` does.
    applied = subprocess.run(
        [sys.executable, "-m", "devfix", "apply", "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert "map_location" in (tmp_path / "train.py").read_text()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    unknown = subprocess.run(
        [sys.executable, "-m", "devfix", "check", "--changed-since", "nosuchref"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert unknown.returncode == 2
    assert unknown.stderr == "devfix: error: unknown git ref: nosuchref\n"
    (tmp_path / "eval.py").write_text("import torch\nw = torch.load('w.pt')\n")
    reported = subprocess.run(
        [sys.executable, "-m", "devfix", "check", "--report", "r.md", "eval.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert reported.returncode == 1, reported.stderr
    report = (tmp_path / "r.md").read_text()
    assert "| Rule | Files | Fixable left |" in report and "Fixes applied" not in report


@pytest.mark.slow  # starts devfix subprocesses
def test_rules_lists_every_pass_and_prints_documentation() -> None:
    listing = run("rules")
    assert listing.returncode == 0
    assert "DF101  tensor-factory-without-device" in listing.stdout
    doc = run("rules", "tensor-factory-without-device")
    assert "## Why is this bad?" in doc.stdout and "Fix applicability: safe" in doc.stdout
    assert run("rules", "DF999").returncode == 2


@pytest.mark.slow  # starts devfix subprocesses
def test_help_documents_exit_codes() -> None:
    completed = run("--help")
    assert "Exit codes: 0" in " ".join(completed.stdout.split())


@pytest.mark.slow  # starts devfix subprocesses
def test_examples_and_goldens_are_stable_under_a_second_apply(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "examples", tree / "examples")
    for after in GOLDEN.glob("*/*.after.py"):
        shutil.copy(after, tree / f"{after.parent.name}__{after.name}")
    first = run("apply", "--unsafe-fixes", str(tree))
    assert first.returncode in (0, 1), first.stderr
    snapshot = {p: p.read_bytes() for p in tree.rglob("*.py")}
    second = run("apply", "--unsafe-fixes", str(tree))
    assert "0 files changed" in second.stderr, second.stderr
    assert {p: p.read_bytes() for p in tree.rglob("*.py")} == snapshot


def test_readme_rule_table_is_current() -> None:
    from devfix.docs import render

    readme = (ROOT / "README.md").read_text()
    assert render(readme) == readme, "run `python -m devfix.docs README.md`"


def test_examples_show_a_fix_from_every_pass() -> None:
    from devfix.engine import fix_paths
    from devfix.registry import all_passes
    from devfix.types import Options

    applied: set[str] = set()
    for result in fix_paths([str(ROOT / "examples")], Options(unsafe_fixes=True), write=False):
        assert not result.reason, (result.path, result.reason)
        applied |= {finding.code for finding in result.applied}
    assert {cls.CODE for cls in all_passes()} <= applied


def test_interactive_review_does_not_pretend_to_commit(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nw = torch.load('w.pt')\n")
    result = CliRunner().invoke(main, ["apply", "-i", "--commit", str(tmp_path / "a.py")])
    assert result.exit_code == 2
    assert "--interactive and --commit cannot be combined" in result.output
    assert "map_location" not in (tmp_path / "a.py").read_text()
