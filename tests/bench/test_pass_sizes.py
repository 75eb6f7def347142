"""bench/pass_sizes.py: one file per pass, and issue 14's median under 200 lines."""

from __future__ import annotations

import statistics
from pathlib import Path
from types import ModuleType

import pytest

import devfix.codemods
from devfix.registry import all_passes


def test_each_pass_has_its_own_file_in_codemods(pass_sizes: ModuleType) -> None:
    files = pass_sizes.pass_files()
    assert sorted(files) == sorted(p.CODE for p in all_passes())
    assert len(set(files.values())) == len(files)
    assert files["DF401"].name == "__init__.py"  # a pass that is a package: its __init__
    codemods = Path(devfix.codemods.__file__).resolve().parent
    assert all(codemods in path.parents for path in files.values())


def test_the_median_pass_file_is_under_the_target(
    pass_sizes: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = [pass_sizes.line_count(path) for path in pass_sizes.pass_files().values()]
    assert statistics.median(counts) < pass_sizes.TARGET
    assert pass_sizes.main(["--check"]) == 0
    assert f"median {statistics.median(counts):g} lines" in capsys.readouterr().out
