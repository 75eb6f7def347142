"""What users rely on in CI and in review, driven through the `devfix` command as they run it:
exit codes, counts and marks, diffs for `git apply`, notebook locations in every format, messages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden_cases import GOLDEN

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NOTEBOOK = EXAMPLES / "lstm_tagger.ipynb"

pytestmark = pytest.mark.slow


def devfix(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devfix", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        timeout=300,
    )


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def make_repository(root: Path) -> Path:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "dev")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def training_repo(tmp_path: Path) -> Path:
    """A user's repository: scripts in a subfolder, a notebook, a venv and a build folder."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    for name in (
        "tensor_factory_without_device.py",
        "device_in_data_pipeline.py",
        "hard_coded_device.py",
    ):
        shutil.copy(EXAMPLES / name, root / "scripts" / name)
    shutil.copy(EXAMPLES / "torch_load_without_map_location.py", root / "load.py")
    shutil.copy(NOTEBOOK, root / "tagger.ipynb")
    # The last line is fixed and has no newline: the diff must say so for `git apply`.
    (root / "last_line.py").write_text(
        "import torch\n\n\ndef restore(path, device):\n    return torch.load(path)"
    )
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "build").mkdir()
    shutil.copy(EXAMPLES / "hard_coded_device.py", root / "build" / "copy.py")
    return make_repository(root)


# -- 1 (review) is in tests/test_review_pty.py -----------------------------------------------


# -- 2. apply --commit: apply's output and exit code, plus the commits -------------------------


def test_apply_commit_has_the_exit_code_and_output_of_apply(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in ("tensor_factory_without_device.py", "tensor_attribute_not_buffer.py"):
        shutil.copy(EXAMPLES / name, reference / name)
    committed = tmp_path / "committed"
    shutil.copytree(reference, committed)
    make_repository(committed)
    plain = devfix("apply", ".", cwd=reference)
    with_commit = devfix("apply", "--commit", ".", cwd=committed)
    assert plain.returncode == 1  # a finding is left (DF401 display-only)
    assert with_commit.returncode == plain.returncode, with_commit.stderr
    commit_lines = [line for line in with_commit.stderr.splitlines() if "committed" in line]
    assert commit_lines == ["devfix: committed DF101 (1 file) on devfix/migration"]
    rest = [line for line in with_commit.stderr.splitlines() if line not in commit_lines]
    assert rest == plain.stderr.splitlines()
    assert "(fixed)" in with_commit.stderr and "rule " in with_commit.stderr
    body = git(committed, "log", "-1", "--format=%b")
    assert "1 fix in 1 file:" in body and "fix(es)" not in body and "1 fixes" not in body


def test_apply_commit_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "tensor_factory_without_device.py", tmp_path / "model.py")
    completed = devfix("apply", "--commit", "model.py", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr == "devfix: error: not a git repository: model.py\n"
    assert (tmp_path / "model.py").read_text() == (
        EXAMPLES / "tensor_factory_without_device.py"
    ).read_text()


# -- 3. notebook locations in github, SARIF and Markdown output -------------------------------


def _apply_replacements(text: str, replacements: list[dict[str, object]]) -> str:
    """Apply SARIF replacements (1-based lines and columns) to `text`, last first."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + column - 1

    spans = []
    for replacement in replacements:
        region = replacement["deletedRegion"]
        inserted = replacement["insertedContent"]
        assert isinstance(region, dict) and isinstance(inserted, dict)
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        spans.append((start, end, inserted["text"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def test_notebook_findings_in_github_sarif_and_markdown_name_the_cell(tmp_path: Path) -> None:
    notebook = tmp_path / "tagger.ipynb"
    shutil.copy(NOTEBOOK, notebook)
    raw = notebook.read_text(encoding="utf-8")
    github = devfix("check", "--format", "github", "tagger.ipynb", cwd=tmp_path)
    first = github.stdout.splitlines()[0]
    assert first.startswith("::warning file=tagger.ipynb,line=")
    assert "::cell 2, line 8: `torch.zeros`" in first
    json_line = int(re.search(r",line=(\d+),", first).group(1))  # type: ignore[union-attr]
    assert "h0 = torch.zeros" in raw.splitlines()[json_line - 1]

    sarif = json.loads(devfix("check", "--format", "sarif", "tagger.ipynb", cwd=tmp_path).stdout)
    results = sarif["runs"][0]["results"]
    assert [r["properties"]["cell"] for r in results] == [2, 2]
    assert results[0]["locations"][0]["logicalLocations"] == [{"name": "cell 2", "kind": "module"}]
    region = results[0]["locations"][0]["physicalLocation"]["region"]
    assert raw.splitlines()[region["startLine"] - 1][region["startColumn"] - 1 :].startswith(
        "torch.zeros"
    )
    # Each fix, applied by a SARIF consumer to the file as it is, gives what `apply` writes.
    replacements = [
        change
        for result in results
        for fix in result["fixes"]
        for artifact in fix["artifactChanges"]
        for change in artifact["replacements"]
    ]
    patched = _apply_replacements(raw, replacements)
    json.loads(patched)
    devfix("apply", "tagger.ipynb", cwd=tmp_path)
    assert patched == notebook.read_text(encoding="utf-8")

    shutil.copy(NOTEBOOK, notebook)
    devfix("check", "--report", "report.md", "tagger.ipynb", "--select", "DF101", cwd=tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "left: cell 2, line 8 DF101" in report and "left: line" not in report


def test_sarif_fix_on_a_notebook_spanning_lines_keeps_valid_json(tmp_path: Path) -> None:
    """A fix that inserts a line (DF204) becomes a replacement that adds a list element."""
    source = (EXAMPLES / "batch_not_moved_to_device.py").read_text()
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": []}
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        dict(cell, source=source.splitlines(keepends=True)),
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
    raw = path.read_text(encoding="utf-8")
    sarif = json.loads(
        devfix("check", "--format", "sarif", "--unsafe-fixes", "train.ipynb", cwd=tmp_path).stdout
    )
    (result,) = sarif["runs"][0]["results"]
    replacements = result["fixes"][0]["artifactChanges"][0]["replacements"]
    patched = _apply_replacements(raw, replacements)
    devfix("apply", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert json.loads(patched) == json.loads(path.read_text(encoding="utf-8"))


# -- 4. --diff output that git apply accepts ---------------------------------------------------


@pytest.mark.parametrize("where", ["dot", "subfolder", "absolute"])
def test_diff_is_accepted_by_git_apply(training_repo: Path, where: str) -> None:
    target = {
        "dot": ".",
        "subfolder": "scripts",
        "absolute": str(training_repo / "scripts"),
    }[where]
    completed = devfix("apply", "--diff", "--unsafe-fixes", target, cwd=training_repo)
    assert completed.returncode == 1, completed.stderr
    assert "a/./" not in completed.stdout and "--- /" not in completed.stdout
    patch = training_repo.parent / "fix.patch"
    patch.write_text(completed.stdout)
    check = subprocess.run(
        ["git", "apply", "--check", str(patch)], cwd=training_repo, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    if where == "dot":
        assert "--- a/tagger.ipynb" in completed.stdout
        assert "\\ No newline at end of file" in completed.stdout
        assert "build/" not in completed.stdout and ".venv" not in completed.stdout
        git(training_repo, "apply", str(patch))
        again = devfix("apply", "--diff", "--unsafe-fixes", ".", cwd=training_repo)
        assert again.stdout == ""


def test_diff_of_files_outside_the_folder_applies_from_their_repository_root(
    training_repo: Path,
) -> None:
    elsewhere = training_repo.parent / "elsewhere"
    elsewhere.mkdir()
    completed = devfix("apply", "--diff", "--unsafe-fixes", "../repo/scripts", cwd=elsewhere)
    assert completed.returncode == 1, completed.stderr
    assert "--- a/scripts/" in completed.stdout and "--- /" not in completed.stdout
    note = f"relative to {training_repo}: run `git apply` there"
    assert sum(note in line for line in completed.stderr.splitlines()) == 1
    patch = training_repo.parent / "fix.patch"
    patch.write_text(completed.stdout)
    check = subprocess.run(
        ["git", "apply", "--check", str(patch)], cwd=training_repo, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


# -- 5. one account of what was applied --------------------------------------------------------


def _count_added_lines(diff: str) -> int:
    return sum(
        1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
    )


def test_marks_table_summary_and_report_count_the_edits_of_the_diff(tmp_path: Path) -> None:
    # Every fix here changes or adds exactly one line, but for DF201's: taking the moves out of
    # the collate function (two findings, two lines) also moves the batch in the loop (a third
    # line), and DF204 does not flag a loop whose collate function moved the batch already.
    for name in (
        "tensor_factory_without_device.py",
        "device_in_data_pipeline.py",
        "batch_not_moved_to_device.py",
        "torch_load_without_map_location.py",
        "loss_weight_on_cpu.py",
    ):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    # Long enough that no fixed line is wrapped: one fix, one changed line.
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 200\n")
    shown = devfix("apply", "--diff", "--unsafe-fixes", "--report", "r.json", ".", cwd=tmp_path)
    added = _count_added_lines(shown.stdout)
    assert added == 7, shown.stdout
    edits = added - 1
    assert "(fixed)" not in shown.stderr  # nothing was written
    assert shown.stderr.count("(would fix)") == edits
    assert f"{edits} fixes to apply" in shown.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert sum(rule["fixes_applied"] for rule in report["rules"].values()) == edits
    table = [line for line in shown.stderr.splitlines() if re.match(r"DF\d{3} ", line)]
    assert sum(int(line.split()[3]) for line in table) == edits  # the `fixed` column
    assert "DF201" in {line.split()[0] for line in table}

    written = devfix("apply", "--unsafe-fixes", ".", cwd=tmp_path)
    assert written.stderr.count("(fixed)") == edits
    assert f"{edits} fixes applied" in written.stderr
    marked = {
        line.split(": ")[1].split()[0] for line in written.stderr.splitlines() if "(fixed)" in line
    }
    assert {"DF101", "DF201", "DF204", "DF302", "DF303"} <= marked


def test_fixes_found_in_a_later_round_are_marked_at_their_place(tmp_path: Path) -> None:
    """Two `.to("cuda:0")` twins: both fixes add the same helper, so one waits a round."""
    (tmp_path / "twins.py").write_text(TWINS)
    checked = devfix("check", "twins.py", cwd=tmp_path).stdout.splitlines()
    written = devfix("apply", "twins.py", cwd=tmp_path)
    lines = [line for line in written.stderr.splitlines() if "DF304" in line]
    # Where `check` reported them, though the second was fixed on rewritten code.
    assert [line.split(": ")[0] for line in lines] == [line.split(": ")[0] for line in checked]
    assert [line.split(": ")[0] for line in lines] == ["twins.py:5:17", "twins.py:9:17"]
    assert all(line.endswith("(fixed)") for line in lines), lines
    assert "2 fixes applied" in written.stderr


TWINS = """\
import torch


def load_inputs(x):
    return x.to("cuda:0")


def load_targets(x):
    return x.to("cuda:0")


def train(model, loader, optimizer):
    for x, y in loader:
        loss = (model(load_inputs(x)) - load_targets(y)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


# -- 6. --jobs -----------------------------------------------------------------------------------


def test_negative_jobs_is_a_usage_error(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "tensor_factory_without_device.py", tmp_path / "model.py")
    completed = devfix("apply", "-j", "-1", "model.py", cwd=tmp_path)
    assert completed.returncode == 2
    assert "Invalid value for '-j' / '--jobs'" in completed.stderr
    assert (tmp_path / "model.py").read_text() == (
        EXAMPLES / "tensor_factory_without_device.py"
    ).read_text()
    assert "0: one per core" in devfix("apply", "--help", cwd=tmp_path).stdout


# -- 7. the reason given for a file that is not UTF-8 ------------------------------------------


def test_latin1_comment_without_cookie_is_reported_as_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_bytes(b"# caf\xe9 model\nimport torch\nx = torch.load('m.pt')\n")
    completed = devfix("check", "model.py", cwd=tmp_path)
    assert completed.returncode == 2
    assert (
        "model.py: error: is not valid UTF-8 (byte 0xE9 at line 1, column 6) and has no coding "
        "cookie\n"
    ) in completed.stderr


# -- 8. check with no path, and an empty folder --------------------------------------------------


def test_check_without_paths_checks_the_working_folder(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "tensor_factory_without_device.py", tmp_path / "model.py")
    (tmp_path / "empty").mkdir()
    completed = devfix("check", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stdout.startswith("model.py:18:15: DF101")
    assert "1 finding in 1 file" in completed.stderr
    assert "no Python files" not in completed.stderr
    for folder in (".", "./", "empty/.."):  # the folder itself, spelled as users spell it
        named = devfix("check", folder, cwd=tmp_path)
        assert named.returncode == 1 and "no Python files" not in named.stderr, folder
    empty = devfix("check", "empty", cwd=tmp_path)
    assert empty.returncode == 0
    assert "devfix: no Python files or notebooks under empty" in empty.stderr


# -- 9. one summary line without double counts ---------------------------------------------------


def test_summaries_count_each_finding_once(tmp_path: Path) -> None:
    for name in (
        "tensor_factory_without_device.py",
        "tensor_attribute_not_buffer.py",
        "hard_coded_device.py",
    ):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    checked = devfix("check", ".", cwd=tmp_path)
    findings = len(checked.stdout.splitlines())
    summary = checked.stderr.splitlines()[-1]
    numbers = re.match(
        r"devfix: (\d+) findings in 3 files: (\d+) fixable, (\d+) fixable with --unsafe-fixes, "
        r"(\d+) not fixable automatically\.$",
        summary,
    )
    assert numbers is not None, summary
    total, fixable, unsafe, none = map(int, numbers.groups())
    assert total == findings == fixable + unsafe + none and fixable and unsafe and none
    table = [line.split() for line in checked.stderr.splitlines() if re.match(r"DF\d{3} ", line)]
    assert sum(int(row[-3]) for row in table) == fixable  # safe findings have their column
    # A fix may make a finding of the next round (DF304 makes the device portable, then DF308
    # makes GradScaler follow it): apply's summary counts what its own lines say.
    written = devfix("apply", ".", cwd=tmp_path).stderr.splitlines()
    lines = [line for line in written if re.match(r"\S+\.py:\d+:\d+: DF\d{3} ", line)]
    fixed = [line for line in lines if line.endswith("(fixed)")]
    left = [line for line in lines if not line.endswith("(fixed)")]
    counts = re.match(
        r"devfix: 2 files changed, (\d+) fixes applied; (\d+) findings left: (\d+) fixable with "
        r"--unsafe-fixes, (\d+) not fixable automatically\.$",
        written[-1],
    )
    assert counts is not None, written[-1]
    applied, remaining, left_unsafe, left_none = map(int, counts.groups())
    assert applied == len(fixed) >= fixable
    assert remaining == len(left) == left_unsafe + left_none
    assert left_none == none and left_unsafe >= unsafe


# -- 10. rules show every fix level; check's --unsafe-fixes does not claim to apply -----------


def test_rules_show_every_applicability_and_check_help_does_not_apply(tmp_path: Path) -> None:
    listing = devfix("rules", cwd=tmp_path).stdout
    for code in ("DF101", "DF102", "DF302"):
        line = next(line for line in listing.splitlines() if line.startswith(code))
        assert " safe, unsafe " in line, line
    doc = devfix("rules", "DF302", cwd=tmp_path).stdout
    assert "Fix applicability: safe or unsafe" in doc and "## Fix safety" in doc
    help_text = " ".join(devfix("check", "--help", cwd=tmp_path).stdout.split())
    unsafe_help = help_text.split("--unsafe-fixes", 1)[1].split(" --")[0]
    assert "apply" not in unsafe_help.lower() and "fixable" in unsafe_help


def test_declared_applicabilities_cover_what_passes_emit() -> None:
    from devfix.engine import fix_paths
    from devfix.registry import all_passes
    from devfix.types import Applicability, Options

    declared = {cls.CODE: set(cls.fix_applicabilities()) for cls in all_passes()}
    seen: dict[str, set[Applicability]] = {}
    paths = [str(EXAMPLES), *map(str, GOLDEN.glob("*/*.before.py"))]
    for result in fix_paths(paths, Options(unsafe_fixes=True), write=False, check_only=True):
        for finding in result.findings:
            if finding.applicability is not Applicability.DISPLAY_ONLY:
                seen.setdefault(finding.code, set()).add(finding.applicability)
    for code, levels in seen.items():
        assert levels <= declared[code], (code, levels)


# -- 12. review state stays inside .devfix_cache/ ------------------------------------------------
# (in tests/test_review_pty.py)


# -- 14. documentation speaks to users -----------------------------------------------------------


def test_documents_speak_to_users() -> None:
    documents = [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    team_talk = re.compile(
        r"for the lead|to merge|\bhelper session|issue \d+|issue #\d+|TODO|our team", re.IGNORECASE
    )
    for document in documents:
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            assert not team_talk.search(line), f"{document.name}:{number}: {line}"


def test_readme_quick_start_and_design_name_existing_things() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install . && devfix apply --diff --unsafe-fixes examples/" in readme
    assert "pip install torch==2.13.0 -e '.[test]' && pytest" in readme
    for module in set(re.findall(r"`devfix\.(\w+)`", readme)) - {"toml"}:
        assert (
            (ROOT / "devfix" / f"{module}.py").exists()
            or (ROOT / module).exists()
            or (ROOT / "devfix" / module).exists()
        ), module
    assert os.path.exists(ROOT / "docs" / "review-and-notebooks.md")


def test_finding_lines_stop_after_the_problem_and_show_details_gives_the_fix(
    tmp_path: Path,
) -> None:
    shutil.copy(EXAMPLES / "tensor_factory_without_device.py", tmp_path / "model.py")
    (tmp_path / "blind.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Gate(nn.Module):\n"
        "    def forward(self):\n        return torch.zeros(3, 4) * 2\n"
    )
    short = devfix("check", "--no-cache", ".", cwd=tmp_path)
    detailed = devfix("check", "--no-cache", "--show-details", ".", cwd=tmp_path)
    [fixable] = [line for line in short.stdout.splitlines() if "[*]" in line]
    [no_fix] = [line for line in short.stdout.splitlines() if "(no automatic fix)" in line]
    assert fixable.endswith("`torch.arange` creates a CPU tensor in `forward`")
    # A finding without a fix keeps its reason on its line.
    assert "no tensor or layer in scope tells which device it needs" in no_fix
    assert "devfix: --show-details prints the fix each finding suggests." in short.stderr
    [full] = [line for line in detailed.stdout.splitlines() if "[*]" in line]
    assert full.startswith(fixable) and "it needs `device=" in full
    assert "--show-details" not in detailed.stderr
    assert short.returncode == detailed.returncode == 1
