"""A fixed, deterministic sample of real code (torch's own sources, the standard library).

In process, through the engine: no crash, rewritten files compile, a second run changes nothing,
unchanged files are byte-identical, and the standard library comes out unchanged. Then the CLI
(`devfix check`, `devfix apply --unsafe-fixes`) runs over a copy of the sample and must agree.
`bench/sweep.py` runs the same checks over the whole trees (see docs/robustness.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robustness.sweep_core import (
    FileOutcome,
    Tally,
    check_file,
    python_files,
    sample,
    stdlib_root,
    torch_root,
)

# one worker builds the module-scoped fixture once (pytest-xdist, tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("robustness-sweep")]

#: Sizes keep the run inside CI time: the passes cost about 0.1 s per KB of torch code on a CI core.
TORCH_SMALL = (120, 8_000)
TORCH_REWRITTEN = (12, 20_000)  # files that use torch.load / DataParallel / .cuda(): fixes happen
STDLIB = (240, 40_000)
CLI_SUBSET = 40
_REWRITE_CANDIDATE = re.compile(r"torch\.load\(|DataParallel\(|\.cuda\(\)")


def _small(files: list[str], limit: int) -> list[str]:
    return [f for f in files if os.path.getsize(f) <= limit]


def _rewrite_candidates(files: list[str]) -> list[str]:
    found = []
    for path in files:
        with open(path, "rb") as handle:
            if _REWRITE_CANDIDATE.search(handle.read().decode("utf-8", "replace")):
                found.append(path)
    return found


def choose() -> dict[str, tuple[str, list[str]]]:
    """tree -> (root, files): the same files on every run with the same torch and Python."""
    torch_files = python_files(torch_root())
    root = torch_root()
    small = sample(_small(torch_files, TORCH_SMALL[1]), TORCH_SMALL[0], root)
    rewritten = sample(
        _rewrite_candidates(_small(torch_files, TORCH_REWRITTEN[1])), TORCH_REWRITTEN[0], root
    )
    stdlib = sample(_small(python_files(stdlib_root()), STDLIB[1]), STDLIB[0], stdlib_root())
    return {
        "torch": (root, sorted(set(small) | set(rewritten))),
        "stdlib": (stdlib_root(), stdlib),
    }


@pytest.fixture(scope="module")
def swept() -> dict[str, tuple[str, Tally, dict[str, FileOutcome]]]:
    results = {}
    for tree, (root, files) in choose().items():
        tally = Tally(tree)
        outcomes = {}
        for path in files:
            outcome = check_file(path, run_check=False)
            tally.add(outcome, root)
            outcomes[os.path.relpath(path, root)] = outcome
        results[tree] = (root, tally, outcomes)
    return results


@pytest.mark.parametrize("tree", ["torch", "stdlib"])
def test_sample_has_no_crash_broken_output_or_instability(
    swept: dict[str, tuple[str, Tally, dict[str, FileOutcome]]], tree: str
) -> None:
    _, tally, _ = swept[tree]
    problems = [
        line for kind, lines in tally.examples.items() if kind != "refused" for line in lines
    ]
    assert problems == []
    assert tally.files >= 100


def test_torch_sample_exercises_rewrites(
    swept: dict[str, tuple[str, Tally, dict[str, FileOutcome]]],
) -> None:
    _, tally, _ = swept["torch"]
    assert tally.changed >= 1, "the sample should contain files devfix rewrites"


def test_stdlib_comes_out_unchanged(
    swept: dict[str, tuple[str, Tally, dict[str, FileOutcome]]],
) -> None:
    _, tally, _ = swept["stdlib"]
    assert tally.changed_files == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devfix", *args, "--no-cache", "-j", "2"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_agrees_on_a_copy(
    swept: dict[str, tuple[str, Tally, dict[str, FileOutcome]]], tmp_path: Path
) -> None:
    """`devfix check` and `apply --unsafe-fixes` on copied files: no internal error, and each
    file ends up as the in-process run said (rewritten files exactly, others byte-identical)."""
    copies: dict[Path, tuple[bytes, FileOutcome]] = {}
    for tree, (root, _, outcomes) in swept.items():
        names = sorted(outcomes, key=lambda n: (not outcomes[n].changed, n))[:CLI_SUBSET]
        for name in names:
            target = tmp_path / tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(os.path.join(root, name), target)
            copies[target] = (target.read_bytes(), outcomes[name])
    for command in (("check", "--unsafe-fixes"), ("apply", "--unsafe-fixes")):
        completed = _cli(*command, ".", cwd=tmp_path)
        assert "INTERNAL ERROR" not in completed.stderr, completed.stderr
        assert "Traceback" not in completed.stderr, completed.stderr
        assert completed.returncode in (0, 1, 2), completed.stderr
    for path, (original, outcome) in copies.items():
        data = path.read_bytes()
        if outcome.changed and outcome.output is not None:
            generated = b"@generated" in original[:4000]
            assert data == outcome.output or (generated and data == original), path
        else:
            assert data == original, path
