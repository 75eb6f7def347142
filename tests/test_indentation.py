"""Code indented with tabs and spaces mixed: Python accepts it, libcst does not read it as it is,
and devfix fixes it through an expanded copy written back in the file's own indentation."""

from __future__ import annotations

import libcst as cst
import pytest

from devfix import indentation
from devfix.errors import MixedIndentation
from devfix.fix_loop import check_source, fix_source
from devfix.parsing import parse
from devfix.types import Options

# A script edited in two editors: four spaces at the top, a tab and four spaces (column 12)
# under the `with`, a tab and eight spaces (column 16) in the loop.
SCRIPT = (
    "import torch\n"
    "\n"
    "def main(model, path, names):\n"
    "    labels = []\n"
    "    with open(names) as f:\n"
    "\t    for line in f:\n"
    "\t        labels.append(line.strip())\n"
    "\t    model.load_state_dict(torch.load(path))  # a checkpoint saved on the GPU\n"
    "    text = '''\n"
    "\tkept as written\n"
    "'''\n"
    "    return model, labels, text\n"
)


def test_libcst_cannot_read_it_and_the_error_says_why() -> None:
    compile(SCRIPT, "script.py", "exec")
    with pytest.raises(cst.ParserSyntaxError):
        cst.parse_module(SCRIPT)
    with pytest.raises(MixedIndentation, match=r"tabs and spaces mixed \(line 6\)"):
        parse(SCRIPT, "script.py")


def test_a_fix_keeps_every_other_line_and_the_tabs_of_the_line_it_rewrites() -> None:
    result = fix_source(SCRIPT, Options(select=("DF302",)))
    expected = SCRIPT.replace("torch.load(path)", 'torch.load(path, map_location="cpu")')
    assert result.output == expected
    assert [f.code for f in result.applied] == ["DF302"]
    compile(result.output, "script.py", "exec")
    assert fix_source(result.output, Options(select=("DF302",))).output == result.output


def test_check_reports_on_such_code() -> None:
    findings = check_source(SCRIPT, "script.py", Options(select=("DF302",)))
    assert [(f.code, f.line) for f in findings] == [("DF302", 8)]


def test_expansion_touches_only_the_indentation_of_statement_lines() -> None:
    spaced = indentation.expanded(SCRIPT)
    assert "            for line in f:\n" in spaced
    assert "\tkept as written\n" in spaced  # inside a string: the string's content
    cst.parse_module(spaced)
    assert indentation.restored(SCRIPT, spaced, spaced) == SCRIPT


def test_a_line_the_fixes_add_takes_the_spelling_of_its_block() -> None:
    spaced = indentation.expanded(SCRIPT)
    added = spaced.replace(
        "            model.load_state_dict",
        "            device = 'cpu'\n            model.load_state_dict",
    ).replace("    return model", "    labels.sort()\n    return model")
    restored = indentation.restored(SCRIPT, spaced, added)
    assert "\t    device = 'cpu'\n\t    model.load_state_dict" in restored
    assert "\n    labels.sort()\n    return model" in restored
    compile(restored, "script.py", "exec")


def test_code_with_no_tab_in_its_indentation_is_not_mixed() -> None:
    assert indentation.first_mixed_line("if x:\n    y = '\\t'\n") is None
    assert indentation.first_mixed_line("if x:\n\ty = 1\n") == 2
