"""Property-based tests: generated modules never crash devfix, and what it writes is sound.

Two sources of modules:

* the golden `before` scripts, reshaped at random: unrelated code in many syntax forms (match,
  walrus, f-strings, decorators, type hints, async, lambdas, line continuations) with random
  names, comment lines between statements, tab indentation, CRLF line endings, nesting in a
  function or an `if` block;
* `hypothesmith` (arbitrary syntactically valid modules, behind `import torch`).

Properties: `check_source` and `fix_source` raise nothing but InputError, the output compiles,
a second run changes nothing, and the findings on the golden part do not depend on the names
chosen for unrelated code. Example counts are small and derandomized, for CI.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from devfix.engine import check_source, fix_source
from devfix.errors import InputError
from devfix.types import Options

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
UNSAFE = Options(unsafe_fixes=True, jobs=1)
SNIPPETS = sorted(GOLDEN.glob("*/*.before.py"))
FAST = settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Unrelated code in many syntax forms; {a}, {b}, {c} are random identifiers.
FRAGMENTS = (
    "def {a}({b}: int, *{c}: str, **kw: float) -> 'list[int]':\n    return [{b}] * 2\n",
    "@staticmethod\n@(lambda f: f)\ndef {a}({b}=lambda {c}: {c} + 1):\n    return {b}\n",
    "if ({a} := len('{b}')) > 2:\n    {c} = {a}\n",
    "{a} = f\"{{'{b}'!r:>{{10}}}} {{ {{1, 2}} }} {{1 + 2=}}\"\n",
    "def {a}({b}):\n    match {b}:\n        case [1, *{c}]:\n            return {c}\n"
    "        case {{'k': {c}}} if {c}:\n            return 0\n        case _:\n            return None\n",
    "{a} = 1 + \\\n    2 + \\\n    3\n",
    "class {a}:\n    {b}: 'dict[str, int]' = {{}}\n\n    async def {c}(self):\n"
    "        async with self as s:\n            async for x in s:\n                yield x\n",
    "{a} = [{b} for {b} in range(3) if {b} for {c} in ({b},)]\n",
    "try:\n    pass\nexcept (ValueError, TypeError) as {a}:\n    raise RuntimeError('{b}') from {a}\n"
    "finally:\n    {c} = None\n",
    "global {a}\n{a}: int\n{b}, *{c} = (1, 2, 3)\n",
    "with open('{a}') as {b}, open('{c}') as d:\n    pass\n",
    "{a} = '''\n    torch.load('{b}')  # not code\n'''\n",
    "{a} = {{**{{}}, '{b}': ...}}; {c} = (yield_ := 1)\n",
)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: (
        n not in {"torch", "nn", "self", "cls", "kw", "x", "s", "d", "f"}
        and not __import__("keyword").iskeyword(n)
        and not __import__("keyword").issoftkeyword(n)
    )
)


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(ast.parse(text), "<generated>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True


def _logical_line_starts(text: str) -> list[int]:
    """0-based numbers of the lines where a logical line (a statement) begins."""
    starts: list[int] = []
    expect_start = True
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NEWLINE,):
            expect_start = True
        elif token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        elif expect_start and token.type != tokenize.ENDMARKER:
            starts.append(token.start[0] - 1)
            expect_start = False
    return starts


@st.composite
def reshaped_golden(draw: st.DrawFn) -> str:
    text = SNIPPETS[draw(st.integers(0, len(SNIPPETS) - 1))].read_text()
    lines = text.splitlines(keepends=True)
    if draw(st.booleans()):  # comment lines between statements, at random indentation
        starts = set(_logical_line_starts(text))
        out = []
        for number, line in enumerate(lines):
            if number in starts and draw(st.integers(0, 3)) == 0:
                out.append(
                    " " * draw(st.integers(0, 8))
                    + "# "
                    + draw(st.text("ab c#'\"\\", max_size=12))
                    + "\n"
                )
            out.append(line)
        lines = out
    text = "".join(lines)
    if draw(st.booleans()):  # unrelated code before or after
        fragment = FRAGMENTS[draw(st.integers(0, len(FRAGMENTS) - 1))]
        names = draw(st.lists(NAMES, min_size=3, max_size=3, unique=True))
        code = fragment.format(a=names[0], b=names[1], c=names[2])
        text = (code + "\n" + text) if draw(st.booleans()) else (text + "\n" + code)
    nesting = draw(st.sampled_from(["none", "none", "function", "if"]))
    if nesting == "function":
        text = "def _wrapped():\n" + textwrap.indent(text, "    ", lambda line: True) + "    pass\n"
    elif nesting == "if":
        text = "if True:\n" + textwrap.indent(text, "    ", lambda line: True) + "    pass\n"
    if draw(st.booleans()):  # tabs for each four leading spaces
        text = re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), text)
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    assume(_compiles(text))
    return text


def _check_properties(text: str) -> None:
    try:
        found = check_source(text, "<generated>", UNSAFE)
        result = fix_source(text, UNSAFE, path="<generated>")
    except InputError:
        # Allowed only for code Python itself rejects (the strategies keep that out mostly).
        assert not _compiles(text)
        return
    assert [(f.code, f.line, f.col) for f in found] == [
        (f.code, f.line, f.col) for f in result.findings
    ]
    if not result.changed:
        assert result.output == text
        return
    assert _compiles(result.output), result.output
    again = fix_source(result.output, UNSAFE, path="<generated>")
    assert not again.changed, (text, result.output, again.output)
    if "\r\n" in text and "\n" not in text.replace("\r\n", ""):
        assert "\n" not in result.output.replace("\r\n", ""), "CRLF file got LF lines"


@FAST
@given(reshaped_golden())
def test_reshaped_golden_scripts(text: str) -> None:
    _check_properties(text)


@FAST
@given(
    st.integers(0, len(SNIPPETS) - 1),
    st.integers(0, len(FRAGMENTS) - 1),
    st.lists(NAMES, min_size=6, max_size=6, unique=True),
)
def test_findings_do_not_depend_on_unrelated_names(
    snippet: int, fragment: int, names: list[str]
) -> None:
    text = SNIPPETS[snippet].read_text()
    found = []
    for a, b, c in (names[:3], names[3:]):
        code = FRAGMENTS[fragment].format(a=a, b=b, c=c)
        module = text + "\n" + code
        assume(_compiles(module))
        found.append(
            [
                (f.code, f.line, f.col, f.applicability)
                for f in check_source(module, "<generated>", UNSAFE)
                if f.line <= text.count("\n")
            ]
        )
    assert found[0] == found[1]


def test_hypothesmith_generated_modules() -> None:
    hypothesmith = pytest.importorskip("hypothesmith")

    @settings(
        max_examples=15,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(hypothesmith.from_node())
    def run(code: str) -> None:
        _check_properties("import torch\n" + code)

    run()
