"""Issue 19, items 1, 9, 10 and the CR-only case of 11: files devfix must refuse in one line
(too deep, too slow, too big, notebooks included) while the run goes on, and a parser crash
that costs one file, not the run (docs/robustness.md, "Limits")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.robustness.cli import FIXABLE, FIXED, assert_no_traceback, devfix, error_lines

pytestmark = pytest.mark.slow

#: libcst's parser dies with SIGSEGV on these (10,000 chained `and`s; 2,000 nested calls).
AND_CHAIN = "import torch\nx = " + " and ".join(["a"] * 10_000) + "\n"
NESTED_CALLS = "import torch\nx = " + "f(" * 2_000 + "a" + ")" * 2_000 + "\n"
#: The same chain of 10,000 terms joined by backslashes: one logical line for Python and libcst.
CONTINUED_CHAIN = "import torch\nx = 1 \\\n" + "    + 1 \\\n" * 9_998 + "    + 1\n"


def _deep_tree(root: Path) -> None:
    root.mkdir()
    (root / "a_chain.py").write_text(AND_CHAIN)
    (root / "b_calls.py").write_text(NESTED_CALLS)
    (root / "b_continued.py").write_text(CONTINUED_CHAIN)
    (root / "c_ok.py").write_text(FIXABLE)


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("command", ["check", "apply"])
def test_deep_nesting_is_one_line_and_the_run_goes_on(
    tmp_path: Path, command: str, jobs: str
) -> None:
    _deep_tree(tmp_path / "src")
    completed = devfix(command, "--no-cache", "-j", jobs, "src", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert error_lines(completed) == [
        "src/a_chain.py: error: too deeply nested for devfix (9,999 levels)",
        "src/b_calls.py: error: too deeply nested for devfix (4,000 levels)",
        "src/b_continued.py: error: too deeply nested for devfix (9,999 levels)",
    ]
    if command == "apply":
        assert (tmp_path / "src" / "c_ok.py").read_text() == FIXED
        assert (tmp_path / "src" / "a_chain.py").read_text() == AND_CHAIN
    else:
        assert "src/c_ok.py:2:5: DF302 [*]" in completed.stdout


#: The depth check switched off, so that libcst itself gets (and crashes on) the deep files.
NO_DEPTH_LIMIT = "import devfix.limits\ndevfix.limits.MAX_NESTING = 10**9"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_parser_crash_costs_one_file_and_its_worker_is_replaced(
    tmp_path: Path, jobs: str
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    # Two crashes, with files to do before, between and after them: each worker that dies
    # is replaced, and every other file is still fixed.
    names = ["a_ok.py", "b_chain.py", "c_ok.py", "d_chain.py", "e_ok.py"]
    for name in names:
        (src / name).write_text(AND_CHAIN if "chain" in name else FIXABLE)
    completed = devfix(
        "apply", "--no-cache", "-j", jobs, "src", cwd=tmp_path, prelude=NO_DEPTH_LIMIT
    )
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert error_lines(completed) == [
        f"src/{name}: INTERNAL ERROR: the parser crashed on this file (SIGSEGV). Nothing was "
        "written; please report this as a devfix bug with the file attached."
        for name in ("b_chain.py", "d_chain.py")
    ]
    for name in names:
        assert (src / name).read_text() == (AND_CHAIN if "chain" in name else FIXED)
    assert "3 files changed" in completed.stderr


def test_timeout_per_file_stops_one_file(tmp_path: Path) -> None:
    # 900 chained subscripts: under the depth limit, but a second of libcst's time each; two
    # of them, so that a fast machine still needs four times the limit.
    chain = "a" + "[0]" * 900
    (tmp_path / "a_slow.py").write_text(f"import torch\nx = {chain}\ny = {chain}\n")
    (tmp_path / "b_ok.py").write_text(FIXABLE)
    completed = devfix(
        "apply", "--no-cache", "-j", "1", "--timeout-per-file", "0.5", ".", cwd=tmp_path
    )
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert error_lines(completed) == [
        "a_slow.py: error: took more than 0.5 s of CPU time; stopped (--timeout-per-file)"
    ]
    assert (tmp_path / "b_ok.py").read_text() == FIXED


def test_memory_budget_refuses_before_parsing(tmp_path: Path) -> None:
    # The 3 MB generated file: gigabytes for libcst. Refused under the default budget.
    rows = "".join(f"x{i} = [1, 2, 3]\n" for i in range(180_000))
    (tmp_path / "a_generated.py").write_text("import torch\n" + rows)
    (tmp_path / "b_ok.py").write_text(FIXABLE)
    completed = devfix("check", "--no-cache", "-j", "1", ".", cwd=tmp_path, timeout=120)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    [line] = error_lines(completed)
    assert line.startswith("a_generated.py: error: would need about ")
    assert line.endswith(
        " MiB to parse, over the memory budget of 2,048 MiB per file (--max-memory)"
    )
    assert "b_ok.py:2:5: DF302" in completed.stdout


def test_memory_budget_is_enforced_when_the_estimate_is_wrong(tmp_path: Path) -> None:
    """The estimate says 1 byte per token; the worker's address-space limit stops the parse."""
    (tmp_path / "a_dense.py").write_text(
        "import torch\nx = [" + ", ".join(["torch.zeros(1)"] * 40_000) + "]\n"
    )
    (tmp_path / "b_ok.py").write_text(FIXABLE)
    completed = devfix(
        "apply",
        "--no-cache",
        "-j",
        "1",
        "--max-memory",
        "100",
        ".",
        cwd=tmp_path,
        prelude="import devfix.limits\ndevfix.limits.BYTES_PER_TOKEN = 1",
    )
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    [line] = error_lines(completed)
    assert line.startswith("a_dense.py: error: ") and "memory budget of 100 MiB" in line, line
    assert (tmp_path / "b_ok.py").read_text() == FIXED


def _notebook(*sources: str, metadata: str = "{}") -> str:
    cells = ",".join(
        json.dumps({"cell_type": "code", "metadata": {}, "outputs": [], "source": source})
        for source in sources
    )
    return f'{{"cells": [{cells}], "metadata": {metadata}, "nbformat": 4, "nbformat_minor": 5}}'


def test_notebook_code_obeys_the_size_limit(tmp_path: Path) -> None:
    """The issue's 12 MB notebook of code (libcst ran out of memory on it)."""
    cell = "import torch\n" + "x = 1  # " + "y" * 90 + "\n"
    (tmp_path / "big.ipynb").write_text(_notebook(*[cell * 1_000] * 110))
    (tmp_path / "ok.py").write_text(FIXABLE)
    completed = devfix("check", "--no-cache", "-j", "1", ".", cwd=tmp_path, timeout=120)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert error_lines(completed) == [
        "big.ipynb: error: has 11.9 MiB of code; devfix parses up to 10 MiB"
    ]
    assert "ok.py:2:5: DF302" in completed.stdout


def test_deeply_nested_notebook_json_is_bad_input(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.ipynb").write_text(_notebook(FIXABLE, metadata=f'{{"x": {deep}}}'))
    (tmp_path / "ok.py").write_text(FIXABLE)
    completed = devfix("check", "--no-cache", "-j", "1", ".", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 2, completed.stderr
    assert error_lines(completed) == [
        "deep.ipynb: error: too deeply nested for devfix (100,002 levels)"
    ]


def test_a_cell_holding_devfix_own_marker_text(tmp_path: Path) -> None:
    """The cell-marker comment devfix puts between cells, already in a cell."""
    first = "import torch\n# ~~devfix-cell~~ 2\nw = torch.load('a.pt')\n"
    second = "pass  # ~~devfix-magic~~ 0\nv = torch.load('b.pt')\n"
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(_notebook(first, second))
    completed = devfix("check", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    locations = [line.split(": DF")[0] for line in completed.stdout.splitlines()]
    assert locations == ["nb.ipynb:cell 1:3:5", "nb.ipynb:cell 2:2:5"]
    completed = devfix("apply", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    cells = [cell["source"] for cell in json.loads(notebook.read_text())["cells"]]
    assert cells == [
        first.replace("'a.pt')", "'a.pt', map_location=\"cpu\")"),
        second.replace("'b.pt')", "'b.pt', map_location=\"cpu\")"),
    ]


def test_cr_only_line_endings_check_offers_no_fix_apply_would_refuse(tmp_path: Path) -> None:
    (tmp_path / "old_mac.py").write_bytes(FIXABLE.replace("\n", "\r").encode())
    check = devfix("check", "--no-cache", "old_mac.py", cwd=tmp_path)
    [line] = check.stdout.splitlines()
    assert "[*]" not in line, line
    assert line.endswith(
        "devfix cannot rewrite this file (CR-only line endings) (no automatic fix)"
    ), line
    apply = devfix("apply", "--no-cache", "old_mac.py", cwd=tmp_path)
    assert apply.returncode == 2
    assert "will not rewrite it" in apply.stderr
    assert (tmp_path / "old_mac.py").read_bytes() == FIXABLE.replace("\n", "\r").encode()
