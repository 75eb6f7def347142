"""Files devfix cannot or must not rewrite: one line naming the file and the reason, the run goes
on with the other files, exit 2, and the bad file is left exactly as it was.

Files that look odd but are fine (a latin-1 coding cookie, a UTF-8 BOM, CRLF line endings, an
empty file, a folder named `x.py`, notebooks with markdown, raw or `%%bash` cells, a notebook
for another kernel) are fixed or left alone with their bytes kept, and are no failure.

One tree holds every case; `devfix check` and `devfix apply --unsafe-fixes` each run once over
it, as a user would (a subprocess), and the tests read their output.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from devfix.engine import fix_file
from devfix.sources import MAX_SOURCE_BYTES
from devfix.types import FileStatus, Options

# one worker builds the module-scoped fixture once (pytest-xdist, tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bad-input-tree")]

LOAD = 'state = torch.load("model.pt")\n'
FIXED = 'state = torch.load("model.pt", map_location="cpu")\n'
TORCH = "import torch\n"

#: name -> (bytes, the reason expected in `name: error: <reason>`, or None for a good file)
CASES: dict[str, tuple[bytes, str | None]] = {
    "py2_print.py": (b'import torch\nprint "loading"\n' + LOAD.encode(), "does not parse (line 2"),
    "py2_except.py": (
        b"import torch\ntry:\n    " + LOAD.encode() + b"except IOError, error:\n    pass\n",
        "does not parse (line 4",
    ),
    "py2_async_keyword.py": (
        b"import torch\nx = torch.ones(2).to('cuda', async=True)\n" + LOAD.encode(),
        "does not parse (line 2",
    ),
    "py2_backticks.py": (b"import torch\nname = `torch`\n" + LOAD.encode(), "does not parse"),
    "unclosed_bracket.py": (b"import torch\nx = torch.load(\n", "does not parse"),
    "not_utf8.py": (
        b'import torch\nname = "caf\xe9"\n' + LOAD.encode(),
        "is not valid UTF-8 (byte 0xE9 at line 2, column 12)",
    ),
    "bad_cookie.py": (
        b"# -*- coding: klingon -*-\nimport torch\nname = 'caf\xe9'\n",
        "invalid coding cookie",
    ),
    "nul_bytes.py": (b"import torch\n\x00" + LOAD.encode(), "NUL bytes"),
    "invalid_notebook.ipynb": (b'{"cells": [', "is not valid notebook JSON"),
    # JSON's `\ud800` escape decodes to a character no UTF-8 text holds: once a traceback that
    # stopped the whole run.
    "lone_surrogate.ipynb": (
        b'{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": '
        b'null, "source": "import torch\\nname = \'\\ud800\'\\n"}], "metadata": {}, '
        b'"nbformat": 4, "nbformat_minor": 5}',
        "code cell 1, line 2 holds a lone surrogate",
    ),
    # Like the standard library's pydoc_data/topics.py: libcst nests the pieces of an implicit
    # concatenation, and thousands of them exceed the stack.
    "deep_concatenation.py": (
        b"import torch\nx = (\n" + b"    'piece'\n" * 3000 + b")\n" + LOAD.encode(),
        None,  # handled since libcst's visitors get a deeper recursion limit: fixed like good.py
    ),
    # Good files among the bad ones: still fixed, their encoding and line endings kept.
    "good.py": ((TORCH + LOAD).encode(), None),
    "latin1_cookie.py": (
        b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n" + LOAD.encode(),
        None,
    ),
    "bom.py": (b"\xef\xbb\xbf" + (TORCH + LOAD).encode(), None),
    # A codec Python lacks (a package registers it at start-up) over UTF-8 bytes: read as UTF-8.
    "unknown_codec.py": (b"# -*- coding: future_fstrings -*-\n" + (TORCH + LOAD).encode(), None),
    "crlf.py": ((TORCH + LOAD).replace("\n", "\r\n").encode(), None),
    "mixed_endings.py": (b"import torch\r\nx = 1\n" + LOAD.encode(), None),
    # Python measures a tab to column 8, so this block is deeper than the `with`; libcst's
    # tokenizer cannot read it, devfix still fixes the file and keeps its tabs.
    "tabs_under_spaces.py": (
        b"import torch\nif True:\n    with open('f') as f:\n\t    " + LOAD.encode(),
        None,
    ),
    "inconsistent_tabs.py": (
        b"import torch\nif True:\n        x = 1\n\t" + LOAD.encode(),
        "inconsistent use of tabs and spaces in indentation",
    ),
    "empty.py": (b"", None),
    "only_comment.py": (b"# torch.load('x')", None),
}
EXPECTED_AFTER: dict[str, bytes] = {
    "good.py": (TORCH + FIXED).encode(),
    "latin1_cookie.py": b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n"
    + FIXED.encode(),
    "bom.py": b"\xef\xbb\xbf" + (TORCH + FIXED).encode(),
    "unknown_codec.py": b"# -*- coding: future_fstrings -*-\n" + (TORCH + FIXED).encode(),
    "crlf.py": (TORCH + FIXED).replace("\n", "\r\n").encode(),
    "mixed_endings.py": b"import torch\r\nx = 1\n" + FIXED.encode(),
    "tabs_under_spaces.py": b"import torch\nif True:\n    with open('f') as f:\n\t    "
    + FIXED.encode(),
    "deep_concatenation.py": b"import torch\nx = (\n"
    + b"    'piece'\n" * 3000
    + b")\n"
    + FIXED.encode(),
}


def _notebook(cells: list[dict[str, object]], language: str = "python") -> bytes:
    document = {
        "cells": cells,
        "metadata": {"kernelspec": {"language": language, "name": language}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(document, indent=1) + "\n").encode()


def _cell(kind: str, source: str) -> dict[str, object]:
    cell: dict[str, object] = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


MIXED_NOTEBOOK = _notebook(
    [
        _cell("markdown", "# torch.load(x) in prose"),
        _cell("raw", "torch.load(raw)"),
        _cell("code", "%%bash\necho torch.load(x)"),
        _cell("code", TORCH + LOAD),
    ]
)
R_NOTEBOOK = _notebook([_cell("code", 'library(torch)\nx <- torch.load("m.pt")')], "R")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def error_lines(self, name: str) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith(f"{name}: ")]


def devfix(*args: str, cwd: Path, preexec: Callable[[], object] | None = None) -> Run:
    completed = subprocess.run(
        [sys.executable, "-m", "devfix", *args, "--no-cache", "-j", "1"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=preexec,
    )
    return Run(completed.returncode, completed.stdout, completed.stderr)


def _build(tree: Path) -> dict[str, bytes]:
    tree.mkdir()
    originals: dict[str, bytes] = {}
    for name, (data, _) in CASES.items():
        (tree / name).write_bytes(data)
        originals[name] = data
    for name, data in (("mixed_cells.ipynb", MIXED_NOTEBOOK), ("r_kernel.ipynb", R_NOTEBOOK)):
        (tree / name).write_bytes(data)
        originals[name] = data
    (tree / "x.py").mkdir()  # a folder that looks like a source file
    (tree / "x.py" / "inner.py").write_text(TORCH + LOAD)
    (tree / "readonly.py").write_text(TORCH + LOAD)
    (tree / "readonly.py").chmod(0o444)
    originals["readonly.py"] = (TORCH + LOAD).encode()
    (tree / "broken_link.py").symlink_to("nowhere.py")
    (tree / "loop_a.py").symlink_to("loop_b.py")
    (tree / "loop_b.py").symlink_to("loop_a.py")
    os.mkfifo(tree / "fifo.py")  # reading it would block forever
    with open(tree / "huge.py", "wb") as handle:
        handle.write(b"import torch\n" + LOAD.encode())
        line = b"# " + b"x" * 1021 + b"\n"
        handle.write(line * (50 * 1024))  # 50 MiB
    originals["huge.py"] = b""  # compared by size only
    return originals


@pytest.fixture(scope="module")
def tree_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], Run, Run]:
    root = tmp_path_factory.mktemp("bad-input")
    tree = root / "tree"
    originals = _build(tree)
    checked = devfix("check", "--unsafe-fixes", "tree", cwd=root)
    applied = devfix("apply", "--unsafe-fixes", "tree", cwd=root)
    return tree, originals, checked, applied


BAD = [name for name, (_, reason) in CASES.items() if reason is not None]


@pytest.mark.parametrize("name", BAD)
def test_bad_file_is_one_error_line_and_untouched(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run], name: str
) -> None:
    tree, originals, checked, applied = tree_runs
    reason = CASES[name][1]
    assert reason is not None
    for run in (checked, applied):
        lines = run.error_lines(f"tree/{name}")
        assert len(lines) == 1, run.stderr
        assert lines[0].startswith(f"tree/{name}: error: ") and reason in lines[0], lines[0]
        assert "INTERNAL ERROR" not in lines[0]
    assert (tree / name).read_bytes() == originals[name]


def test_runs_exit_2_and_count_every_failure(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run],
) -> None:
    _, _, checked, applied = tree_runs
    assert checked.returncode == 2 and applied.returncode == 2
    assert "Traceback" not in checked.stderr + applied.stderr
    assert "INTERNAL ERROR" not in checked.stderr + applied.stderr
    # BAD + broken link + two loop links + FIFO + huge (+ read-only, for apply only)
    assert f"{len(BAD) + 5} files failed" in checked.stderr
    assert f"{len(BAD) + 6} files failed" in applied.stderr


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("broken_link.py", "cannot be read: No such file or directory"),
        ("loop_a.py", "cannot be read: Too many levels of symbolic links"),
        ("loop_b.py", "cannot be read: Too many levels of symbolic links"),
        ("fifo.py", "is not a regular file"),
        (
            "huge.py",
            f"is 50.0 MiB; devfix reads source files up to {MAX_SOURCE_BYTES // 2**20} MiB",
        ),
    ],
)
def test_unusable_paths_are_reported(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run], name: str, reason: str
) -> None:
    tree, _, checked, applied = tree_runs
    for run in (checked, applied):
        assert run.error_lines(f"tree/{name}") == [f"tree/{name}: error: {reason}"]
    if name == "huge.py":
        assert (tree / name).stat().st_size == 13 + len(LOAD) + 1024 * 50 * 1024


def test_read_only_file_is_checked_but_not_rewritten(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run],
) -> None:
    tree, originals, checked, applied = tree_runs
    assert "tree/readonly.py:2:9: DF302" in checked.stdout
    assert applied.error_lines("tree/readonly.py") == [
        "tree/readonly.py: error: is read-only; not rewritten"
    ]
    assert (tree / "readonly.py").read_bytes() == originals["readonly.py"]
    assert stat.S_IMODE((tree / "readonly.py").stat().st_mode) == 0o444


@pytest.mark.parametrize("name", sorted(EXPECTED_AFTER))
def test_good_files_among_bad_ones_are_fixed_with_their_bytes_kept(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run], name: str
) -> None:
    tree, _, _, applied = tree_runs
    assert applied.error_lines(f"tree/{name}") == [], applied.stderr
    assert (tree / name).read_bytes() == EXPECTED_AFTER[name]


def test_harmless_oddities_are_no_failure(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run],
) -> None:
    tree, originals, checked, applied = tree_runs
    for name in ("empty.py", "only_comment.py", "r_kernel.ipynb"):
        for run in (checked, applied):
            assert run.error_lines(f"tree/{name}") == [], run.stderr
        assert (tree / name).read_bytes() == originals[name]
    # A folder named x.py is walked like any folder.
    assert (tree / "x.py" / "inner.py").read_text() == TORCH + FIXED


def test_notebook_with_non_python_cells_fixes_only_the_python_cell(
    tree_runs: tuple[Path, dict[str, bytes], Run, Run],
) -> None:
    tree, originals, _, applied = tree_runs
    assert applied.error_lines("tree/mixed_cells.ipynb") == [], applied.stderr
    after = json.loads((tree / "mixed_cells.ipynb").read_text())
    before = json.loads(originals["mixed_cells.ipynb"])
    assert [c["source"] for c in after["cells"][:3]] == [c["source"] for c in before["cells"][:3]]
    assert after["cells"][3]["source"] == TORCH + FIXED


def test_no_temporary_files_are_left(tree_runs: tuple[Path, dict[str, bytes], Run, Run]) -> None:
    tree = tree_runs[0]
    assert [p.name for p in tree.rglob("*devfix-tmp*")] == []


def test_in_process_api_reports_instead_of_raising(tmp_path: Path) -> None:
    for name, (data, reason) in CASES.items():
        path = tmp_path / name
        path.write_bytes(data)
        result = fix_file(str(path), Options(unsafe_fixes=True, jobs=1))
        if name.endswith(".ipynb"):
            continue  # fix_file handles .py; notebooks go through devfix.notebooks
        if reason is None:
            assert result.status is not FileStatus.FAILED, (name, result.reason)
        else:
            assert result.status is FileStatus.FAILED and not result.internal_error, name
            assert reason in (result.reason or ""), (name, result.reason)
        assert path.read_bytes() == EXPECTED_AFTER.get(name, data), name


def test_broken_link_named_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "gone.py").symlink_to("nowhere.py")
    (tmp_path / "ok.py").write_text(TORCH + LOAD)
    run = devfix("apply", "gone.py", "ok.py", cwd=tmp_path)
    assert run.returncode == 2
    assert run.error_lines("gone.py") == ["gone.py: error: broken symbolic link"]
    assert (tmp_path / "ok.py").read_text() == TORCH + FIXED


def _drop_file_permission_override() -> None:
    """Make root obey file modes in the child: drop CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _can_drop_capabilities() -> bool:
    try:
        completed = subprocess.run(
            [sys.executable, "-c", "pass"], preexec_fn=_drop_file_permission_override, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0


def test_unreadable_file(tmp_path: Path) -> None:
    preexec: Callable[[], object] | None = None
    if os.geteuid() == 0:
        # Root reads anything; a child without the DAC capabilities does not (like any user).
        if not _can_drop_capabilities():
            pytest.skip("running as root without CAP_SETPCAP: cannot make a file unreadable")
        preexec = _drop_file_permission_override
    secret = tmp_path / "secret.py"
    secret.write_text(TORCH + LOAD)
    secret.chmod(0)
    (tmp_path / "ok.py").write_text(TORCH + LOAD)
    try:
        for command in ("check", "apply"):
            run = devfix(command, ".", cwd=tmp_path, preexec=preexec)
            assert run.returncode == 2, run.stderr
            assert run.error_lines("secret.py") == [
                "secret.py: error: cannot be read: Permission denied"
            ], run.stderr
    finally:
        secret.chmod(0o644)
    assert secret.read_text() == TORCH + LOAD
    assert (tmp_path / "ok.py").read_text() == TORCH + FIXED
