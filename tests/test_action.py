"""The GitHub Action (action.yml): its shell steps (action/devfix-action.sh) run here as they run
in CI, on a sample repository with a pull request's base commit and a change on top of it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "action" / "devfix-action.sh"
ACTION = ROOT / "action.yml"
EXAMPLES = ROOT / "examples"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=devfix", "-c", "user.email=devfix@localhost", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose base commit has a DF304 finding, and a later commit adding DF101."""
    repo = tmp_path / "sample"
    repo.mkdir()
    git(repo, "init", "-q")
    shutil.copyfile(EXAMPLES / "hard_coded_device.py", repo / "train.py")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "models").mkdir()
    shutil.copyfile(EXAMPLES / "tensor_factory_without_device.py", repo / "models" / "encoder.py")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "change")
    return repo, base


def step(repo: Path, name: str, **inputs: str) -> tuple[int, dict[str, str], str, str]:
    """Run one step of the action: its exit status, its outputs, stdout and stderr."""
    outputs = repo.parent / "github-output"
    outputs.write_text("", encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DEVFIX_", "GITHUB_"))
    }
    env.update(inputs, GITHUB_OUTPUT=str(outputs), GITHUB_ACTION_PATH=str(ROOT))
    # `devfix` is the one installed beside this interpreter, as the install step leaves it
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        ["bash", str(SCRIPT), name], cwd=repo, env=env, capture_output=True, text=True
    )
    written = dict(
        line.split("=", 1) for line in outputs.read_text(encoding="utf-8").splitlines() if line
    )
    return done.returncode, written, done.stdout, done.stderr


def sarif_results(path: Path) -> list[tuple[str, str]]:
    log = json.loads(path.read_text(encoding="utf-8"))
    return [
        (result["ruleId"], result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for result in log["runs"][0]["results"]
    ]


def test_sarif_of_the_files_a_pull_request_changes(repo: tuple[Path, str]) -> None:
    folder, base = repo
    code, outputs, _out, err = step(
        folder, "check", DEVFIX_CHANGED_SINCE=base, DEVFIX_FORMAT="sarif"
    )
    assert code == 0, err
    assert outputs == {"sarif-file": "devfix.sarif", "exit-code": "1"}
    assert sarif_results(folder / "devfix.sarif") == [("DF101", "models/encoder.py")]

    failed = step(folder, "finish", DEVFIX_EXIT_CODE="1", DEVFIX_FAIL_ON_FINDINGS="true")
    assert failed[0] == 1
    assert "findings remain" in failed[3]
    assert step(folder, "finish", DEVFIX_EXIT_CODE="1", DEVFIX_FAIL_ON_FINDINGS="false")[0] == 0
    assert step(folder, "finish", DEVFIX_EXIT_CODE="0")[0] == 0
    assert step(folder, "finish", DEVFIX_EXIT_CODE="2", DEVFIX_FAIL_ON_FINDINGS="false")[0] == 2


def test_every_file_without_a_base(repo: tuple[Path, str]) -> None:
    folder, _base = repo
    code, outputs, _out, err = step(folder, "check", DEVFIX_SARIF_FILE="out/all.sarif")
    assert code == 0, err
    assert outputs["exit-code"] == "1"
    assert sorted(sarif_results(folder / "out" / "all.sarif")) == [
        ("DF101", "models/encoder.py"),
        ("DF304", "train.py"),
        ("DF304", "train.py"),
        ("DF304", "train.py"),
    ]


def test_nothing_changed_gives_an_empty_log(repo: tuple[Path, str]) -> None:
    folder, _base = repo
    code, outputs, _out, err = step(folder, "check", DEVFIX_CHANGED_SINCE="HEAD")
    assert code == 0, err
    assert outputs == {"sarif-file": "devfix.sarif", "exit-code": "0"}
    assert sarif_results(folder / "devfix.sarif") == []


def test_annotations_with_select_and_unsafe_fixes(repo: tuple[Path, str]) -> None:
    folder, _base = repo
    shutil.copyfile(EXAMPLES / "device_in_data_pipeline.py", folder / "pipeline.py")
    code, outputs, out, err = step(
        folder,
        "check",
        DEVFIX_FORMAT="github",
        DEVFIX_SELECT="DF2",
        DEVFIX_UNSAFE_FIXES="true",
        DEVFIX_PATHS="pipeline.py train.py",
    )
    assert code == 0, err
    assert outputs == {"exit-code": "1"}
    lines = out.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("::warning file=pipeline.py,line=") for line in lines)
    assert "title=DF201 device-in-data-pipeline::" in lines[0]
    assert "devfix check --format github --select DF2 --unsafe-fixes pipeline.py train.py" in err


def test_an_unknown_ref_fails_the_job(repo: tuple[Path, str]) -> None:
    folder, _base = repo
    code, outputs, _out, err = step(folder, "check", DEVFIX_CHANGED_SINCE="no-such-ref")
    assert code == 0
    assert outputs["exit-code"] == "2"
    assert "could not fetch no-such-ref" in err
    assert step(folder, "finish", DEVFIX_EXIT_CODE=outputs["exit-code"])[0] == 2


def test_action_runs_the_script_with_its_inputs() -> None:
    """action.yml and the script agree: each step runs a command the script has, each variable
    the steps set is one the script reads, and each input reaches a step."""
    action = ACTION.read_text(encoding="utf-8")
    script = SCRIPT.read_text(encoding="utf-8")
    assert re.search(r"^runs:\n  using: composite$", action, re.MULTILINE)
    commands = re.findall(
        r'run: bash "\$GITHUB_ACTION_PATH/action/devfix-action\.sh" (\w+)', action
    )
    assert commands == ["install", "check", "finish"]
    assert all(re.search(rf"^{name}\) {name} ;;$", script, re.MULTILINE) for name in commands)
    assert len(re.findall(r"^\s+run: ", action, re.MULTILINE)) == len(commands)
    variables = re.findall(
        r"^\s+(DEVFIX_\w+): \$\{\{ (?:inputs|steps)\.([\w.-]+) \}\}", action, re.M
    )
    assert {name for name, _ in variables} == set(re.findall(r"\$\{(DEVFIX_\w+)", script))
    block = action[action.index("inputs:\n") : action.index("outputs:\n")]
    inputs = re.findall(r"^  ([\w-]+):$", block, re.MULTILINE)
    assert "changed-since" in inputs and "select" in inputs and "unsafe-fixes" in inputs
    for name in inputs:
        assert f"inputs.{name}" in action, name
    assert "default: ${{ github.event.pull_request.base.sha }}" in block
    assert "github/codeql-action/upload-sarif@" in action
