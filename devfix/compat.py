"""A rewrite must run on every Python the file's project supports, not only on libcst's grammar.

libcst parses a superset of what any one interpreter accepts (Python 3.12's f-strings, for one),
so a rewrite that libcst reads back can still fail to compile. Two checks guard each rewrite:

- the interpreter that runs devfix compiles it;
- the oldest Python the project declares (`requires-python` in the nearest pyproject.toml;
  without one, the running Python) accepts its grammar: :func:`ast.parse`'s `feature_version`
  for keywords and statements, and the pre-3.12 f-string rules (PEP 701), which
  `feature_version` does not enforce, checked on libcst's tree.

A check the original text already fails is not held against the rewrite: devfix does not judge
the project's own code, only what its fixes add.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
import warnings
from pathlib import Path

import libcst as cst

from devfix import config

#: `ast.parse(feature_version=...)` accepts nothing older.
_OLDEST_FEATURE_VERSION = (3, 7)
#: PEP 701 (Python 3.12) lifted the f-string limits that :func:`fstring_problem` checks.
_PEP_701 = (3, 12)

_LOWER_BOUND = re.compile(r"(>=|~=|==|>)\s*(\d+)\.(\d+)")


def rewrite_problem(before: str, after: str, path: str) -> str | None:
    """Why `after` (a rewrite of `before`) must not be written, or None when it may."""
    running = sys.version_info[:2]
    problem = _compile_problem(after, path)
    if problem is not None and _compile_problem(before, path) is None:
        return f"does not compile on the running Python {_dotted(running)} ({problem})"
    oldest = oldest_python(path)
    if oldest >= running:
        return None
    fstrings = _new_lines_start_fstrings(before, after)
    problem = _grammar_problem(after, oldest, fstrings=fstrings)
    if problem is not None and _grammar_problem(before, oldest, fstrings=fstrings) is None:
        return f"needs a newer Python than the project's oldest, {_dotted(oldest)} ({problem})"
    return None


#: An f-string's opening quote: only a line that holds one can start a field a rewrite broke.
_FSTRING_START = re.compile(r"(?<![\w])[rRbBuU]?[fF][rRbBuU]?['\"]")


def _new_lines_start_fstrings(before: str, after: str) -> bool:
    """A line the rewrite added or changed holds an f-string opening (else no f-string of the
    rewrite can be new or newly broken, and libcst need not parse the file again)."""
    old = set(before.splitlines())
    return any(line not in old and _FSTRING_START.search(line) for line in after.splitlines())


def oldest_python(path: str) -> tuple[int, int]:
    """The oldest Python `path`'s project declares; the running one when it declares none."""
    start = os.path.dirname(os.path.abspath(path)) if os.path.exists(path) else os.getcwd()
    return _declared_oldest(start) or sys.version_info[:2]


@functools.lru_cache(maxsize=256)
def _declared_oldest(folder: str) -> tuple[int, int] | None:
    found = config.nearest_file(folder, ("pyproject.toml",))
    if found is None:
        return None
    try:
        data = config.read_toml(Path(found))
    except config.ConfigError:
        return None
    project = data.get("project")
    specifier = project.get("requires-python") if isinstance(project, dict) else None
    if not isinstance(specifier, str):
        return None
    return lowest_version(specifier)


def lowest_version(specifier: str) -> tuple[int, int] | None:
    """The lowest `major.minor` a `requires-python` specifier admits (`>=3.9,<4` -> (3, 9))."""
    bounds = [
        (int(major), int(minor))
        for _operator, major, minor in _LOWER_BOUND.findall(specifier)
        if major == "3"
    ]
    return max(bounds) if bounds else None


def _compile_problem(text: str, path: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:
        return type(error).__name__
    return None


def _grammar_problem(text: str, oldest: tuple[int, int], *, fstrings: bool = True) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text, feature_version=max(oldest, _OLDEST_FEATURE_VERSION))
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:
        return type(error).__name__
    return fstring_problem(text) if fstrings and oldest < _PEP_701 else None


def fstring_problem(text: str) -> str | None:
    """The first f-string in `text` that only Python 3.12 and later accept (PEP 701)."""
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return "libcst cannot parse it"
    collector = _FStringLimits(module)
    module.visit(collector)
    return collector.problem


class _FStringLimits(cst.CSTVisitor):
    """The first replacement field that only Python 3.12's f-strings allow."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module
        self.problem: str | None = None
        self.quotes: list[str] = []

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.quotes.append(node.start.lstrip("rRfFbBuU"))

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self.quotes.pop()

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self.problem is not None or not self.quotes:
            return
        quote = self.quotes[-1]
        field = self.module.code_for_node(node.expression)
        if quote in field:
            self.problem = f"an f-string's replacement field reuses its quote {quote}"
        elif "\\" in field:
            self.problem = "a backslash in an f-string's replacement field"
        elif "#" in field:
            self.problem = "a '#' in an f-string's replacement field"
        elif len(quote) == 1 and "\n" in self.module.code_for_node(node):
            self.problem = "an f-string's replacement field spans lines"


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"
