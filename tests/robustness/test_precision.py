"""Precision: code that is already right comes through every rule untouched.

Every golden `after` file (the fixed form of a real bug) and every `noop` file (correct code with
look-alikes, equivalent spellings included) goes through `apply --unsafe-fixes` with every rule,
not only the rule of its folder: no file may change, and each must still compile. The sample of
torch and the standard library in `test_sweep.py` and `bench/sweep.py` (every file of both trees)
hold the same line on code nobody wrote for devfix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from devfix.engine import fix_paths
from devfix.types import FileStatus, Options
from tests.golden_cases import GOLDEN

pytestmark = pytest.mark.slow

CORRECT = sorted([*GOLDEN.glob("*/*.after.py"), *GOLDEN.glob("*/*.noop.py")])


def test_there_is_correct_code_for_every_rule_folder() -> None:
    folders = {path.parent.name for path in GOLDEN.glob("*/*.before.py")}
    assert folders <= {path.parent.name for path in CORRECT}
    assert len(CORRECT) >= 100


def test_correct_code_is_left_byte_for_byte_by_every_rule(tmp_path: Path) -> None:
    copies = {}
    for path in CORRECT:
        target = tmp_path / path.parent.name / path.name
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, target)
        copies[target] = path.read_bytes()
    results = list(fix_paths([str(tmp_path)], Options(unsafe_fixes=True, jobs=2)))
    assert len(results) == len(CORRECT)
    assert [r.path for r in results if r.status is FileStatus.FAILED] == []
    changed = [r.path for r in results if r.status is FileStatus.CHANGED]
    assert changed == [], changed
    for target, original in copies.items():
        assert target.read_bytes() == original
        compile(original, str(target), "exec", dont_inherit=True)
