"""Node ranges from devfix/positions.py equal libcst's PositionProvider, node for node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from devfix import positions
from devfix.tree import build_tables

ROOT = Path(__file__).resolve().parents[1]

ODD_LAYOUTS = {
    "crlf": "import torch\r\n\r\nx = torch.zeros(3)  # c\r\nif x:\r\n    y = (1,\r\n         2)\r\n",
    "no_trailing_newline": "def f():\n    return 1",
    "tabs_and_continuations": "def f(a,\n\tb):\n\tz = a + \\\n\t    b\n\treturn z\n",
    "comments_and_blank_lines": "# head\n\n\nclass A:\n    # c\n\n    x = 1\n\n# tail\n",
    "empty": "",
    "strings": 'x = """a\nb"""\ny = f"{x!r:>{3}}" + rb"\\n"\n',
    "decorators_and_semicolons": "@a\n@b.c(1)\ndef f(): pass; x = 1\n",
}


def _goldens() -> list[Path]:
    """One golden script of every four (PositionProvider itself is the slow side here)."""
    return sorted((ROOT / "golden").rglob("*.py"))[::4]


def _same_ranges(source: str) -> int:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = positions.node_ranges(module)
    nodes = build_tables(module).nodes
    for node in nodes:
        assert ours[node] == expected[node], (type(node).__name__, module.code_for_node(node))
    return len(nodes)


@pytest.mark.parametrize("name", sorted(ODD_LAYOUTS))
def test_ranges_match_libcst_on_odd_layouts(name: str) -> None:
    assert _same_ranges(ODD_LAYOUTS[name]) >= 1


def test_ranges_match_libcst_on_a_quarter_of_the_goldens() -> None:
    files = _goldens()
    assert len(files) > 25
    assert sum(_same_ranges(path.read_text(encoding="utf-8")) for path in files) > 5_000
