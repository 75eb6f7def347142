"""devfix.editor in-process: a buffer's findings and the edits the language server offers."""

from __future__ import annotations

from pathlib import Path

from devfix.editor import (
    Cell,
    FindingCache,
    NotebookBuffer,
    TextBuffer,
    analyse,
    fix_all,
    fix_one,
    ignore,
)
from devfix.engine import fix_source
from devfix.settings import Settings
from devfix.types import Options

ROOT = Path(__file__).resolve().parent.parent
MODEL = (ROOT / "examples" / "tensor_factory_without_device.py").read_text(encoding="utf-8")
SETTINGS = Settings.resolve(Options(select=("DF101",)))

FORWARD = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        noise = torch.randn(x.shape[0], 4)
        scale = torch.ones(4)  # devfix: ignore[DF303]
        return self.proj(x + noise) * scale
"""


def test_findings_of_a_buffer_are_those_of_check() -> None:
    buffer = TextBuffer("file:///m.py", "<untitled>", FORWARD)
    found = analyse(buffer, SETTINGS)
    assert [(f.code, f.line) for f in found.findings] == [("DF101", 11), ("DF101", 12)]
    assert found.problem is None
    assert buffer.place(found.findings[0]) == ("file:///m.py", found.findings[0])


def test_code_that_does_not_parse_has_no_findings_and_says_why() -> None:
    found = analyse(TextBuffer("k", "<untitled>", "import torch\ndef f(:\n"), SETTINGS)
    assert found.findings == ()
    assert found.problem is not None and "does not parse" in found.problem


def test_one_fix_all_fixes_and_an_ignore() -> None:
    buffer = TextBuffer("k", "<untitled>", FORWARD)
    first, second = analyse(buffer, SETTINGS).findings
    [one] = fix_one(buffer, SETTINGS, first).values()
    assert "torch.randn(x.shape[0], 4, device=x.device)" in one
    assert "torch.ones(4)  #" in one  # the other finding left alone
    assert fix_all(buffer, SETTINGS) == {"k": fix_source(FORWARD, SETTINGS).output}
    [ignored] = ignore(buffer, second).values()
    assert "scale = torch.ones(4)  # devfix: ignore[DF101, DF303]\n" in ignored
    assert analyse(TextBuffer("k", "<untitled>", ignored), SETTINGS).findings == (first,)


def test_a_finding_no_longer_there_gets_no_fix() -> None:
    buffer = TextBuffer("k", "<untitled>", FORWARD)
    finding = analyse(buffer, SETTINGS).findings[0]
    moved = TextBuffer("k", "<untitled>", "\n" + FORWARD)
    assert fix_one(moved, SETTINGS, finding) == {}


def test_notebook_cells_are_one_module_and_edits_go_to_their_cell() -> None:
    cells = [
        Cell("cell-a", "import torch\nimport torch.nn as nn\n%matplotlib inline"),
        Cell("cell-b", FORWARD.split("\n\n\n", 1)[1].rstrip("\n")),
        Cell("cell-c", "!nvidia-smi\nprint(1)"),
    ]
    buffer = NotebookBuffer("nb", "<notebook>.ipynb", cells)
    findings = analyse(buffer, SETTINGS).findings
    placed = [buffer.place(f) for f in findings]
    assert [(key, f.line, f.col) for key, f in placed] == [("cell-b", 7, 17), ("cell-b", 8, 17)]
    assert all(f.cell is None for _key, f in placed)
    edits = fix_all(buffer, SETTINGS)
    assert list(edits) == ["cell-b"]
    assert "device=x.device" in edits["cell-b"]
    assert not edits["cell-b"].endswith("\n")  # the cell's own ending is kept


def test_cache_answers_for_text_seen_before(tmp_path: Path) -> None:
    settings = Settings.resolve(Options(select=("DF101",), cache_dir=str(tmp_path / "cache")))
    cache = FindingCache(size=2)
    buffer = TextBuffer("k", str(tmp_path / "m.py"), MODEL)
    first = analyse(buffer, settings, cache)
    assert cache.get(buffer, settings) == first.findings
    cache.save()
    # a new session reads what the last one saved (the result cache `devfix check` uses)
    assert FindingCache().get(buffer, settings) == first.findings
    others = [TextBuffer("k", buffer.path, MODEL + f"# {n}\n") for n in range(3)]
    for other in others:
        analyse(other, settings, cache)
    assert len(cache._memory) == 2  # the oldest texts left the memory
