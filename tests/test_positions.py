"""Node ranges from devfix/positions.py equal libcst's PositionProvider, node for node."""

from __future__ import annotations

from collections.abc import Callable
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
    "form_feed_and_decorator_comments": (
        "import os\n\x0c\n# lead\n@dec  # why\n\n# between\n@dec2\nasync def g():\n    pass\n"
        "a = 1; b = 2\nif __name__ == '__main__':\n    g()\n"
    ),
    "header_only_comments": "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n\n\n",
}


def _statement_of(module: cst.Module) -> Callable[[cst.CSTNode], cst.CSTNode | None]:
    parents = build_tables(module).parents

    def statement_of(node: cst.CSTNode) -> cst.CSTNode | None:
        parent = parents.get(id(node))
        while parent is not None and parent is not module:
            node, parent = parent, parents.get(id(parent))
        return node if parent is module else None

    return statement_of


def _goldens() -> list[Path]:
    """One golden script of every four (PositionProvider itself is the slow side here)."""
    return sorted((ROOT / "golden").rglob("*.py"))[::4]


def _same_ranges(source: str) -> int:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = positions.node_ranges(module)
    by_statement = positions.node_ranges(module, source, _statement_of(module))
    nodes = build_tables(module).nodes
    for node in nodes[1:]:
        assert ours[node] == expected[node], (type(node).__name__, module.code_for_node(node))
        assert by_statement[node] == expected[node], type(node).__name__
    assert isinstance(by_statement, positions.StatementRanges)
    # Every node inside a statement was answered from that statement alone, except where the
    # last line has no line break (that statement's code is then not the text's).
    whole = by_statement._whole is not None
    assert whole == bool(module.body and not module.has_trailing_newline)
    assert by_statement[module] == ours[module] == expected[module]
    return len(nodes)


def test_ranges_by_statement_generate_only_the_statements_asked_about() -> None:
    source = "import torch\n\n\ndef f(x):\n    return x\n\n\nclass A:\n    y = torch.zeros(3)\n"
    module = cst.parse_module(source)
    ranges = positions.node_ranges(module, source, _statement_of(module))
    assert isinstance(ranges, positions.StatementRanges)
    call = module.body[2].body.body[0].body[0].value  # type: ignore[attr-defined]
    assert ranges[call].start.line == 9 and ranges[call].start.column == 8
    assert ranges._recorded_spans and ranges._whole is None
    assert id(module.body[1]) not in ranges._recorded_spans  # `def f` was not generated
    assert ranges[module.body[1]].start.line == 4
    assert id(module.body[1]) in ranges._recorded_spans and ranges._whole is None


@pytest.mark.parametrize("name", sorted(ODD_LAYOUTS))
def test_ranges_match_libcst_on_odd_layouts(name: str) -> None:
    assert _same_ranges(ODD_LAYOUTS[name]) >= 1


def test_ranges_match_libcst_on_a_quarter_of_the_goldens() -> None:
    files = _goldens()
    assert len(files) > 25
    assert sum(_same_ranges(path.read_text(encoding="utf-8")) for path in files) > 5_000


@pytest.mark.parametrize("name", sorted(ODD_LAYOUTS))
def test_module_code_is_libcsts_code(name: str) -> None:
    module = cst.parse_module(ODD_LAYOUTS[name])
    assert positions.module_code(module) == module.code == ODD_LAYOUTS[name]


def test_module_code_is_libcsts_code_on_a_quarter_of_the_goldens() -> None:
    for path in _goldens():
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        assert positions.module_code(module) == module.code, path.name
