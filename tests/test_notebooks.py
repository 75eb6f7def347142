"""Jupyter notebooks: code cells fixed as one module, everything else byte-identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devfix import notebooks
from devfix.engine import fix_file, fix_paths
from devfix.errors import InputError
from devfix.sources import discover
from devfix.types import FileStatus, Options

DEVFIX = os.path.join(os.path.dirname(sys.executable), "devfix")
OPTIONS = Options(select=("DF101",), jobs=1)
EXAMPLE = Path(__file__).parent.parent / "examples" / "lstm_tagger.ipynb"

MODEL = textwrap.dedent(
    """\
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 12, batch_first=True)

        def forward(self, x):
            h0 = torch.zeros(1, x.shape[0], 12)  # initial state
            c0 = torch.zeros(1, x.shape[0], 12)
            return self.lstm(x, (h0, c0))[0]"""
)

MAGICS = textwrap.dedent(
    """\
    %matplotlib inline
    %load_ext autoreload
    !pip install --quiet numpy
    files = !ls
    torch.zeros?
    import torch
    import torch.nn as nn
    for i in range(2):
        !echo $i \\
            and more
    message = ("total %d"
    %(len(files)))
    other = "%s" \\
    %(message)
    doc = \"\"\"
    %not a magic, in a string
    !nor this
    \"\"\""""
)


def _cell(source: str, *, as_list: bool = True, outputs: list[Any] | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": f"c{abs(hash(source)) % 10**6}",
        "metadata": {"collapsed": False},
        "outputs": outputs or [],
        "source": source.splitlines(keepends=True) if as_list else source,
    }


def _markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": "md", "metadata": {}, "source": [text]}


def _notebook(cells: list[dict[str, Any]], **dump: Any) -> str:
    data = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, **dump)


OUTPUTS = [
    {"name": "stdout", "output_type": "stream", "text": ["épisode 1 — loss 0.5\n"]},
    {
        "data": {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure>"]},
        "metadata": {"needs_background": "light"},
        "output_type": "display_data",
    },
]


def _write(tmp_path: Path, text: str, name: str = "nb.ipynb") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


FIXED_H0 = "h0 = torch.zeros(1, x.shape[0], 12, device=x.device)  # initial state"
FIXED_C0 = "c0 = torch.zeros(1, x.shape[0], 12, device=x.device)"


@pytest.mark.parametrize(
    "dump",
    [
        {"indent": 1, "sort_keys": True, "ensure_ascii": False},  # nbformat's own layout
        {"indent": 2},  # JupyterLab-ish, ASCII escapes, insertion order
        {"separators": (",", ":")},  # minified
    ],
)
@pytest.mark.parametrize("trailing_newline", [True, False])
def test_round_trip_changes_only_the_fixed_lines(
    tmp_path: Path, dump: dict[str, Any], trailing_newline: bool
) -> None:
    cells = [
        _markdown("# Tagger\n"),
        _cell(MAGICS, outputs=OUTPUTS),
        _cell(MODEL, outputs=OUTPUTS),
        _cell("%%time\nscratch = torch.zeros(3)\n"),
        _cell("import numpy\n%matplotlib inline"),
        _cell("model = Tagger()\nout = model(torch.randn(2, 5, 6))", as_list=False),
    ]
    original = _notebook(cells, **dump) + ("\n" if trailing_newline else "")
    path = _write(tmp_path, original)
    result = fix_file(str(path), OPTIONS)
    assert result.status is FileStatus.CHANGED, result.reason
    new = path.read_text(encoding="utf-8")
    expected = original.replace(
        "h0 = torch.zeros(1, x.shape[0], 12)  # initial state", FIXED_H0
    ).replace("c0 = torch.zeros(1, x.shape[0], 12)", FIXED_C0)
    assert new == expected
    data = json.loads(new)
    assert data["cells"][1]["source"] == json.loads(original)["cells"][1]["source"]
    assert isinstance(data["cells"][5]["source"], str)
    # Locations are in cells, counting code cells only (the markdown cell is not counted).
    assert [(f.cell, f.line, f.col) for f in result.findings] == [(2, 7, 14), (2, 8, 14)]
    # A second run changes nothing.
    assert fix_file(str(path), OPTIONS).status is FileStatus.UNCHANGED
    assert path.read_text(encoding="utf-8") == expected


def test_magics_are_kept_and_continuations_stay_code() -> None:
    text = _notebook([_cell(MAGICS), _cell(MODEL)], indent=1)
    notebook = notebooks.Notebook(text, "nb.ipynb")
    code_lines = notebook.code.splitlines()
    placeholders = [line for line in code_lines if "~~devfix-magic~~" in line]
    assert len(placeholders) == 7  # 5 lines, plus the loop's shell line and its continuation
    assert "    pass  # ~~devfix-magic~~ 5" in code_lines  # indented inside the loop
    assert "%(len(files)))" in code_lines and "%(message)" in code_lines
    assert "%not a magic, in a string" in code_lines and "!nor this" in code_lines
    # Restoring the placeholders gives the cells back exactly.
    assert notebook.split(notebook.code) == {}
    assert notebook.split(notebook.code + "\n") == {2: MODEL + "\n"}


#: Pieces of cell text, magic-looking ones, brackets, quotes and every line break
#: `str.splitlines` knows, so that generated lines start after each of them.
_PIECES = [
    "%time x", "!ls", "  !pip", "a = %who", "b.c =!pwd", "?obj", "obj??", "1.5?", "x = 1",
    "(", ")", "[", "]", "{", "}", "'", "'''", '"', '"""', "\\", "# note ( '", " ", "\t", "!=", "%",
    "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_the_magic_and_continuation_shortcuts_agree_with_the_line_by_line_rules(
    pieces: list[str],
) -> None:
    """A cell that `_MAYBE_MAGIC` passes over has no line that starts a magic, and a line
    `_logical_line_complete` answers without tokenizing gets the tokenizer's answer."""
    source = "".join(pieces)
    lines = source.splitlines(keepends=True)
    if notebooks._MAYBE_MAGIC.search(source) is None:
        assert not any(notebooks._is_magic_start(line) for line in lines)
    for line in lines:
        split = [line[:1], line[1:]]  # two pieces: the tokenizer decides
        assert notebooks._logical_line_complete([line]) == notebooks._logical_line_complete(split)


def test_a_big_cell_without_magics_is_masked_without_tokenizing(monkeypatch: Any) -> None:
    cell = "import torch\n" + "x = [1,\n     2]  # a (note)\n" * 2_000
    monkeypatch.setattr(notebooks, "_logical_line_complete", None)  # any call fails
    notebook = notebooks.Notebook(_notebook([_cell(cell)]), "nb.ipynb")
    assert notebook.code.endswith(cell)


def test_cell_magic_cells_are_not_analysed(tmp_path: Path) -> None:
    cell = "%%time\n" + MODEL
    path = _write(tmp_path, _notebook([_cell("import torch\nimport torch.nn as nn"), _cell(cell)]))
    result = fix_file(str(path), OPTIONS, check_only=True)
    assert result.findings == ()


def test_cells_are_one_module_for_name_resolution(tmp_path: Path) -> None:
    cells = [
        _cell("import torch as t\nfrom torch import nn"),
        _markdown("The model:"),
        _cell(MODEL.replace("torch.zeros", "t.zeros")),
    ]
    path = _write(tmp_path, _notebook(cells, indent=1))
    result = fix_file(str(path), OPTIONS)
    assert [(f.cell, f.line) for f in result.applied] == [(2, 7), (2, 8)]
    assert "t.zeros(1, x.shape[0], 12, device=x.device)" in path.read_text()


def test_cell_that_does_not_parse_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, _notebook([_cell("import torch"), _cell("x = 1\ndef f(:\n")]))
    result = fix_file(str(path), OPTIONS)
    assert result.status is FileStatus.FAILED
    assert result.reason.startswith("cell 2 does not parse (line 2")


@pytest.mark.slow  # starts devfix subprocesses
def test_invalid_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"cells": [\n  {"cell_type": "code",,}\n]}')
    done = subprocess.run(
        [DEVFIX, "check", str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert errors == [
        f"{path}: error: is not valid notebook JSON (line 2, column 24): "
        "Expecting property name enclosed in double quotes"
    ]
    with pytest.raises(InputError, match="nbformat 4"):
        notebooks.Notebook('{"worksheets": []}', "old.ipynb")


def test_non_python_notebooks_are_left_alone(tmp_path: Path) -> None:
    text = _notebook([_cell("import torch\n" + MODEL)])
    data = json.loads(text)
    data["metadata"]["language_info"] = {"name": "R"}
    path = _write(tmp_path, json.dumps(data))
    assert fix_file(str(path), OPTIONS).status is FileStatus.UNCHANGED


@pytest.mark.slow  # starts devfix subprocesses
def test_check_reports_cell_locations_in_text_and_json(tmp_path: Path) -> None:
    path = _write(tmp_path, EXAMPLE.read_text(encoding="utf-8"), "tagger.ipynb")
    text = subprocess.run(
        [DEVFIX, "check", "--select", "DF101", "tagger.ipynb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith(
        "tagger.ipynb:cell 2:8:14: DF101 [*] `torch.zeros` creates a CPU tensor in `forward`"
    )
    as_json = subprocess.run(
        [DEVFIX, "check", "--select", "DF101", "--format", "json", "tagger.ipynb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    rows = json.loads(as_json.stdout)
    assert [(r["path"], r["cell"], r["line"], r["col"]) for r in rows] == [
        ("tagger.ipynb", 2, 8, 14),
        ("tagger.ipynb", 2, 9, 14),
    ]
    assert path.read_text(encoding="utf-8") == EXAMPLE.read_text(encoding="utf-8")


@pytest.mark.slow  # starts devfix subprocesses
def test_apply_diff_is_the_notebook_files_diff_and_applies(tmp_path: Path) -> None:
    path = _write(tmp_path, EXAMPLE.read_text(encoding="utf-8"), "tagger.ipynb")
    done = subprocess.run(
        [DEVFIX, "apply", "--diff", "--select", "DF101", "tagger.ipynb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stdout.startswith("--- a/tagger.ipynb\n+++ b/tagger.ipynb\n@@ ")
    assert (
        '+    "        h0 = torch.zeros(1, x.shape[0], self.n_hidden, device=x.device)'
        in done.stdout
    )
    assert "tagger.ipynb:cell 2:8:14: DF101" in done.stderr
    applied = subprocess.run(
        ["git", "apply", "-"], input=done.stdout, text=True, cwd=tmp_path, capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
    fixed = tmp_path / "fixed.ipynb"
    fixed.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    subprocess.run([DEVFIX, "apply", "--select", "DF101", str(fixed)], capture_output=True)
    assert path.read_text(encoding="utf-8") == fixed.read_text(encoding="utf-8")


def test_example_notebook_round_trip(tmp_path: Path) -> None:
    original = EXAMPLE.read_text(encoding="utf-8")
    path = _write(tmp_path, original)
    result = fix_file(str(path), Options(unsafe_fixes=True, jobs=1))
    assert result.status is FileStatus.CHANGED
    new = path.read_text(encoding="utf-8")
    assert new == original.replace(
        "self.n_hidden)  # initial state", "self.n_hidden, device=x.device)  # initial state"
    ).replace(
        'c0 = torch.zeros(1, x.shape[0], self.n_hidden)\\n"',
        'c0 = torch.zeros(1, x.shape[0], self.n_hidden, device=x.device)\\n"',
    )


def test_discovery_includes_notebooks_but_not_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    _write(tmp_path, EXAMPLE.read_text(encoding="utf-8"), "b.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    _write(tmp_path / ".ipynb_checkpoints", "{}", "b-checkpoint.ipynb")
    found = sorted(os.path.basename(str(p)) for p in discover([str(tmp_path)]))
    assert found == ["a.py", "b.ipynb"]
    results = list(fix_paths([str(tmp_path)], OPTIONS, write=False, check_only=True))
    assert sum(len(r.findings) for r in results) == 2


def test_empty_and_magic_only_notebooks(tmp_path: Path) -> None:
    path = _write(tmp_path, _notebook([_cell(""), _cell("%pip install torch"), _markdown("x")]))
    assert fix_file(str(path), OPTIONS).status is FileStatus.UNCHANGED
    path = _write(tmp_path, _notebook([]), "empty.ipynb")
    assert fix_file(str(path), OPTIONS).status is FileStatus.UNCHANGED


def test_imports_added_at_the_top_join_the_first_code_cell() -> None:
    text = _notebook(
        [_markdown("x"), _cell("%%bash\nls"), _cell("import torch\nx = 1"), _cell("y")]
    )
    notebook = notebooks.Notebook(text, "nb.ipynb")
    assert notebook.code.startswith("# ~~devfix-cell~~ 2\nimport torch\nx = 1\n# ~~devfix-cell~~ 3")
    assert notebook.split("import os\n" + notebook.code) == {2: "import os\nimport torch\nx = 1"}
    rebuilt = json.loads(notebook.rebuild("import os\n" + notebook.code))
    assert rebuilt["cells"][2]["source"] == ["import os\n", "import torch\n", "x = 1"]


def test_review_of_a_notebook_edits_and_markers(tmp_path: Path, monkeypatch: Any) -> None:
    from devfix import review

    monkeypatch.chdir(tmp_path)
    _write(tmp_path, EXAMPLE.read_text(encoding="utf-8"), "tagger.ipynb")
    session = review.ReviewSession(review.analyse_paths(["."], OPTIONS), OPTIONS)
    item = session.current()
    assert item is not None and item.location == "tagger.ipynb:cell 2:8:14"
    assert item.diff.startswith("--- a/tagger.ipynb:cell 2\n+++ b/tagger.ipynb:cell 2\n")
    proposed = session.proposed_text()
    with pytest.raises(InputError, match="cell markers"):
        session.edited(proposed.replace("# ~~devfix-cell~~ 3\n", ""))
    session.edited(proposed.replace("# initial state", "# initial state, on x's device"))
    session.answer("n")
    review.write_reviewed(session)
    data = json.loads((tmp_path / "tagger.ipynb").read_text(encoding="utf-8"))
    assert (
        "        h0 = torch.zeros(1, x.shape[0], self.n_hidden, device=x.device)"
        "  # initial state, on x's device\n" in data["cells"][2]["source"]
    )
    assert data["cells"][4]["source"][0] == "%%time\n"


def test_a_notebook_that_reloads_its_own_save_and_builds_adam_early_is_left_alone(
    tmp_path: Path,
) -> None:
    cells = [
        _cell("import os\nimport torch\nfrom torch import nn\n"),
        _cell("net = nn.Linear(3, 1)\nopt = torch.optim.Adam(net.parameters())\n"),
        _cell(
            'dev = "cuda" if torch.cuda.is_available() else "cpu"\nnet = net.to(dev)\n'
            "for _ in range(2):\n    net(torch.randn(4, 3, device=dev)).sum().backward()\n"
            "    opt.step()\n"
        ),
        _cell('torch.save(net.state_dict(), os.path.join(\n    "runs", "best.pt"))\n'),
        _cell('net.load_state_dict(torch.load(\n    os.path.join("runs", "best.pt")))\n'),
    ]
    original = _notebook(cells, indent=1)
    path = _write(tmp_path, original)
    result = fix_file(str(path), Options(unsafe_fixes=True))
    assert path.read_text() == original
    # The early Adam is reported (a robustness finding), not moved.
    (finding,) = [f for f in result.findings if f.code == "DF301"]
    assert not finding.has_fix and "runs correctly as written" in finding.message
    assert not [f for f in result.findings if f.code == "DF302"]


@pytest.mark.slow  # starts devfix subprocesses
def test_add_ignore_suppresses_findings_in_notebook_cells_too(tmp_path: Path) -> None:
    cells = [
        _cell("import torch\n"),
        _markdown("a note"),
        _cell("%time x = 1\nw = torch.load('w.pt')\n"),
    ]
    path = _write(tmp_path, _notebook(cells, indent=1))
    (tmp_path / "a.py").write_text("import torch\nw = torch.load('w.pt')\n")

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "devfix", "check", "--no-cache", *args, "."],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    baseline = check("--add-ignore")
    assert "added suppression comments for 2 findings in 2 files" in baseline.stderr
    assert check().returncode == 0
    source = json.loads(path.read_text())["cells"][2]["source"]
    assert source == ["%time x = 1\n", "w = torch.load('w.pt')  # devfix: ignore[DF302]\n"]
