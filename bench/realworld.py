"""Score devfix on the real-world corpus: third-party files with hand-written bug sites.

    python bench/realworld.py --files DIR             # score devfix on the corpus in DIR
    python bench/realworld.py --validate DIR          # check the corpus and its site files
    python bench/realworld.py --files DIR --batch N --record   # score cold batch N, record it
    python bench/realworld.py --cold                  # the recorded cold scores, and the targets

DIR holds one folder per corpus file, `DIR/<id>/<basename>`, re-created byte for byte from the
pinned commits of `bench/realworld/manifest.tsv` (see `bench/realworld/fetch.md`). Each file has
`bench/realworld/sites/<id>.toml` listing its bug sites (the format: `bench/realworld/README.md`).

A run copies DIR into a work folder, runs `devfix check --format json` on one copy and
`devfix apply --unsafe-fixes` on another (all rules, every file in one call), then applies again
to a copy of the result. Each site is located by scope and anchor identifiers in the original and
in the rewritten file (Python `ast`; notebooks cell by cell, magics masked) and judged from the
rewritten code with the site's own regexes: fixed, flagged (a finding with a reason on the site),
missed, or wrong-fix (a site where no automatic fix is right, rewritten anyway). Per file it
checks that clean controls come back byte-identical, that rewritten files still parse (notebooks:
still valid JSON with the nbformat keys) and that a second `apply` changes nothing.

Only the standard library is used (plus `tomli` before Python 3.11): the scorer never imports
devfix, it runs the command given by `--devfix` and reads what it wrote.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import importlib.util
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SPEC_DIR = REPO / "bench" / "realworld"
#: One JSON file per cold batch (`batch-N.json`): the scorer's figures from the first run on it.
COLD_DIR = SPEC_DIR / "cold"
#: Issue 27's targets, over the sites of the last three cold batches together.
COLD_TARGETS = {"fixed": 75.0, "fixed_or_flagged": 92.0}

MANIFEST_COLUMNS = ("id", "repo", "commit", "path", "kind", "role", "bytes", "sha256", "note")
KINDS = frozenset(
    {"script", "notebook", "library", "tutorial", "research", "kaggle", "llm-finetune", "inference"}
)
ROLES = frozenset({"buggy", "clean"})
EXPECTS = frozenset({"fix", "flag"})
WHERES = frozenset({"statement", "scope"})
SITE_KEYS = frozenset(
    {
        "name", "rule", "pattern", "scope", "anchor", "line", "expect", "fix", "accept",
        "reject", "where", "order", "gone_ok", "flag_rules",
    }
)  # fmt: skip
SITES_FILE_KEYS = frozenset({"role", "configuration", "batch", "site"})
REQUIRED_SITE_KEYS = ("name", "rule", "pattern", "scope", "anchor", "expect", "fix")
ID_RE = re.compile(r"^[a-z0-9_.-]+$")
RULE_RE = re.compile(r"^(DF\d{3}|new:[a-z0-9]+(-[a-z0-9]+)*)$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
CELL_SCOPE_RE = re.compile(r"^cell (\d+)$")
MODULE_SCOPE = "<module>"

FIXED, FLAGGED, MISSED, WRONG_FIX = "fixed", "flagged", "missed", "wrong-fix"
OUTCOMES = (FIXED, FLAGGED, MISSED, WRONG_FIX)


class CorpusError(Exception):
    """A manifest or site file that does not follow the format (the message says where)."""


# ---------------------------------------------------------------------------------------------
# The corpus description: manifest rows and site files


@dataclass(frozen=True)
class ManifestRow:
    id: str
    repo: str
    commit: str
    path: str
    kind: str
    role: str
    bytes: int
    sha256: str
    note: str

    @property
    def basename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Site:
    name: str
    rule: str
    pattern: str
    scope: str
    anchor: tuple[str, ...]
    expect: str
    fix: str
    line: int | None = None
    accept: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    where: str = "statement"
    order: tuple[str, ...] = ()
    gone_ok: bool = False
    flag_rules: tuple[str, ...] = ()

    @property
    def rules_that_flag(self) -> tuple[str, ...]:
        return self.flag_rules or (self.rule,)


@dataclass(frozen=True)
class SitesFile:
    id: str
    role: str
    configuration: str
    sites: tuple[Site, ...]
    # 0: the development corpus; N >= 1: the Nth cold batch, scored before any pass saw it
    batch: int = 0


def read_manifest(path: Path) -> list[ManifestRow]:
    """The rows of `manifest.tsv`; a row that does not follow the format raises CorpusError."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != MANIFEST_COLUMNS:
        raise CorpusError(f"{path}:1: the header must be {chr(9).join(MANIFEST_COLUMNS)!r}")
    rows: list[ManifestRow] = []
    seen: set[str] = set()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(MANIFEST_COLUMNS):
            raise CorpusError(
                f"{path}:{number}: {len(cells)} columns, expected {len(MANIFEST_COLUMNS)}"
            )
        row_id, repo, commit, file_path, kind, role, size, digest, note = cells
        problems = []
        if not ID_RE.match(row_id):
            problems.append(f"id {row_id!r} is not lower-case [a-z0-9_.-]")
        if row_id in seen:
            problems.append(f"id {row_id!r} appears twice")
        if repo.count("/") != 1 or not all(repo.split("/")):
            problems.append(f"repo {repo!r} is not owner/name")
        if not COMMIT_RE.match(commit):
            problems.append(f"commit {commit!r} is not 40 lower-case hex digits")
        if not file_path or file_path.startswith("/"):
            problems.append(f"path {file_path!r} is not a path inside the repository")
        if kind not in KINDS:
            problems.append(f"kind {kind!r} is not one of {sorted(KINDS)}")
        if role not in ROLES:
            problems.append(f"role {role!r} is not one of {sorted(ROLES)}")
        if not size.isdigit():
            problems.append(f"bytes {size!r} is not a number")
        if not SHA256_RE.match(digest):
            problems.append(f"sha256 {digest!r} is not 64 lower-case hex digits")
        if problems:
            raise CorpusError(f"{path}:{number}: " + "; ".join(problems))
        seen.add(row_id)
        rows.append(
            ManifestRow(row_id, repo, commit, file_path, kind, role, int(size), digest, note)
        )
    return rows


def _strings(value: object, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise CorpusError(f"{where}: `{key}` must be a string or a list of strings")


def parse_site(raw: object, where: str) -> Site:
    if not isinstance(raw, dict):
        raise CorpusError(f"{where}: a [[site]] must be a table")
    unknown = sorted(set(raw) - SITE_KEYS)
    if unknown:
        raise CorpusError(f"{where}: unknown key(s) {', '.join(unknown)}")
    missing = [key for key in REQUIRED_SITE_KEYS if key not in raw]
    if missing:
        raise CorpusError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("name", "rule", "pattern", "scope", "expect", "fix", "where"):
        if key in raw and not isinstance(raw[key], str):
            raise CorpusError(f"{where}: `{key}` must be a string")
    name = raw["name"]
    where = f"{where} ({name})"
    if not RULE_RE.match(raw["rule"]):
        raise CorpusError(f"{where}: rule {raw['rule']!r} is neither DFxxx nor new:<kebab-name>")
    if raw["expect"] not in EXPECTS:
        raise CorpusError(f"{where}: expect {raw['expect']!r} is not one of {sorted(EXPECTS)}")
    site_where = raw.get("where", "statement")
    if site_where not in WHERES:
        raise CorpusError(f"{where}: where {site_where!r} is not one of {sorted(WHERES)}")
    line = raw.get("line")
    if line is not None and (not isinstance(line, int) or isinstance(line, bool) or line < 1):
        raise CorpusError(f"{where}: `line` must be a positive integer")
    gone_ok = raw.get("gone_ok", False)
    if not isinstance(gone_ok, bool):
        raise CorpusError(f"{where}: `gone_ok` must be true or false")
    anchor = _strings(raw["anchor"], where, "anchor")
    if not anchor or not all(a.isidentifier() for a in anchor):
        raise CorpusError(f"{where}: `anchor` must list identifiers or attribute names")
    site = Site(
        name=name,
        rule=raw["rule"],
        pattern=raw["pattern"],
        scope=raw["scope"],
        anchor=anchor,
        expect=raw["expect"],
        fix=raw["fix"],
        line=line,
        accept=_strings(raw.get("accept", []), where, "accept"),
        reject=_strings(raw.get("reject", []), where, "reject"),
        where=site_where,
        order=_strings(raw.get("order", []), where, "order"),
        gone_ok=gone_ok,
        flag_rules=_strings(raw.get("flag_rules", []), where, "flag_rules"),
    )
    for key in ("accept", "reject", "order"):
        for pattern in getattr(site, key):
            try:
                re.compile(pattern)
            except re.error as error:
                raise CorpusError(f"{where}: {key} regex {pattern!r}: {error}") from None
    if site.expect == "fix" and not (site.accept or site.order or site.gone_ok):
        raise CorpusError(f"{where}: a fix site needs `accept`, `order` or `gone_ok`")
    return site


def read_sites(path: Path) -> SitesFile:
    """One `sites/<id>.toml` file; a file that does not follow the format raises CorpusError."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CorpusError(f"{path}: {error}") from None
    unknown = sorted(set(data) - SITES_FILE_KEYS)
    if unknown:
        raise CorpusError(f"{path}: unknown top-level key(s) {', '.join(unknown)}")
    role = data.get("role")
    if role not in ROLES:
        raise CorpusError(f"{path}: role {role!r} is not one of {sorted(ROLES)}")
    configuration = data.get("configuration", "")
    if not isinstance(configuration, str) or not configuration.strip():
        raise CorpusError(f"{path}: `configuration` must be a non-empty string")
    batch = data.get("batch", 0)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
        raise CorpusError(f"{path}: `batch` must be a whole number >= 1 (omit it for batch 0)")
    raw_sites = data.get("site", [])
    if not isinstance(raw_sites, list):
        raise CorpusError(f"{path}: `site` must be an array of tables ([[site]])")
    sites = tuple(parse_site(raw, f"{path}: site {i + 1}") for i, raw in enumerate(raw_sites))
    names = [site.name for site in sites]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise CorpusError(f"{path}: site name(s) used twice: {', '.join(duplicated)}")
    if role == "clean" and sites:
        raise CorpusError(f"{path}: a clean control has no [[site]]")
    if role == "buggy" and not sites:
        raise CorpusError(f"{path}: a buggy file needs at least one [[site]]")
    return SitesFile(path.stem, role, configuration, sites, batch)


# ---------------------------------------------------------------------------------------------
# Reading source: a `.py` file is one unit, a notebook one unit per code cell


@dataclass(eq=False)
class Unit:
    """One parseable piece of a file: the whole `.py` module, or one notebook code cell."""

    cell: int | None  #: 1-based among code cells; None for a `.py` file
    text: str  #: magics and shell lines masked as `pass` (same line count)
    tree: ast.Module | None  #: None when the unit does not parse
    error: str = ""
    _code_lines: list[str] | None = None  #: `text` with comments blanked (computed once)

    def code_lines(self) -> list[str]:
        if self._code_lines is None:
            self._code_lines = split_lines(_blank_comments(self.text))
        return self._code_lines

    def segment(self, node: ast.AST) -> str:
        """The node's source text, comments blanked, runs of whitespace collapsed."""
        start, end = node.lineno - 1, node.end_lineno  # type: ignore[attr-defined]
        lines = self.code_lines()[start:end]
        if not lines:
            return ""
        end_col = node.end_col_offset  # type: ignore[attr-defined]
        if len(lines) == 1:
            text = _slice_utf8(lines[0], node.col_offset, end_col)  # type: ignore[attr-defined]
        else:
            text = (
                _slice_utf8(lines[0], node.col_offset, None)  # type: ignore[attr-defined]
                + "".join(lines[1:-1])
                + _slice_utf8(lines[-1], 0, end_col)
            )
        return collapse(text)


def _slice_utf8(line: str, start: int, end: int | None) -> str:
    """Slice by the UTF-8 byte offsets `ast` gives."""
    data = line.encode("utf-8")
    return data[start:end].decode("utf-8", errors="replace")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, broken where Python breaks them (`\\n`, `\\r\\n`, `\\r`) and
    nowhere else (`str.splitlines` also breaks at form feeds and other separators)."""
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)", text)
    rest = text[sum(map(len, lines)) :]
    return [*lines, rest] if rest else lines


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _blank_comments(text: str) -> str:
    """`text` with every comment replaced by spaces (so the code's offsets stay put)."""
    if re.search(r"\r(?!\n)", text):  # tokenize's rows would not be these lines
        return text
    lines = split_lines(text)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    for token in tokens:
        if token.type == tokenize.COMMENT:
            row, col = token.start
            line = lines[row - 1]
            lines[row - 1] = line[:col] + " " * (token.end[1] - col) + line[token.end[1] :]
    return "".join(lines)


_LINE_MAGIC = re.compile(r"^([ \t]*)([%!?]|[A-Za-z_][\w.]*[ \t]*=[ \t]*[%!])")
_HELP_LINE = re.compile(r"^([ \t]*)[\w.]+\?{1,2}[ \t]*$")


def mask_magics(source: str) -> str | None:
    """A code cell's text with IPython-only lines replaced by `pass` (same indentation and line
    count), or None for a cell-magic cell (`%%bash`, `%%time`), which is not Python."""
    if source.lstrip().startswith("%%"):
        return None
    lines = split_lines(source)
    masked: list[str] = []
    inside = False  # inside a bracket or a string, or after a backslash: `%`/`!` is Python
    shell_continues = False  # the masked line before ended with a backslash
    for line in lines:
        ending = line[len(line.rstrip("\r\n")) :]
        if shell_continues:
            masked.append(ending)
            shell_continues = line.rstrip("\r\n").endswith("\\")
            continue
        match = None if inside else (_LINE_MAGIC.match(line) or _HELP_LINE.match(line))
        if match is not None:
            masked.append(match.group(1) + "pass" + ending)
            shell_continues = line.rstrip("\r\n").endswith("\\")
            continue
        masked.append(line)
        inside = _open_after(masked)
    return "".join(masked)


def _open_after(lines: Sequence[str]) -> bool:
    """True while the text so far ends inside a bracket, a string or after a backslash."""
    try:
        for _token in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            pass
    except tokenize.TokenError:
        return True
    except (SyntaxError, IndentationError):
        return False
    return False


def _parse(text: str, cell: int | None) -> Unit:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as error:
        where = f"cell {cell}: " if cell is not None else ""
        line = getattr(error, "lineno", None)
        return Unit(cell, text, None, f"{where}does not parse (line {line}): {error}")
    return Unit(cell, text, tree)


def _decode(data: bytes) -> str:
    """Python source bytes as text (BOM and coding cookie honoured), newlines kept. A cookie
    naming a codec this interpreter lacks (`# -*- coding: future_fstrings -*-`, registered by a
    package at run time) falls back to UTF-8, which such codecs extend."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8-sig"
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def notebook_cells(data: bytes) -> list[str]:
    """The joined `source` of each code cell (raises ValueError when not a valid notebook)."""
    notebook = json.loads(data.decode("utf-8"))
    problem = notebook_problem(notebook)
    if problem:
        raise ValueError(problem)
    cells: list[str] = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append(source if isinstance(source, str) else "".join(source))
    return cells


def notebook_problem(notebook: object) -> str:
    """Why a parsed JSON value is not a valid nbformat-4 notebook ('' when it is one)."""
    if not isinstance(notebook, dict):
        return "the top level is not a JSON object"
    for key, kind in (("cells", list), ("metadata", dict), ("nbformat", int)):
        if not isinstance(notebook.get(key), kind):
            return f"`{key}` is missing or not a {kind.__name__}"
    if not isinstance(notebook.get("nbformat_minor"), int):
        return "`nbformat_minor` is missing or not an int"
    for index, cell in enumerate(notebook["cells"]):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            return f"cell {index} has no `cell_type`"
        source = cell.get("source")
        if not (
            isinstance(source, str)
            or (isinstance(source, list) and all(isinstance(s, str) for s in source))
        ):
            return f"cell {index} has a `source` that is not text"
        if cell["cell_type"] == "code" and not isinstance(cell.get("outputs"), list):
            return f"code cell {index} has no `outputs` list"
    return ""


@dataclass
class Program:
    """A corpus file read for locating sites."""

    units: list[Unit]
    error: str = ""  #: why the file could not be read at all (not UTF-8, not a notebook...)

    @property
    def parses(self) -> bool:
        return not self.error and all(unit.tree is not None for unit in self.units)

    def problems(self) -> list[str]:
        if self.error:
            return [self.error]
        return [unit.error for unit in self.units if unit.tree is None]


def read_program(data: bytes, filename: str) -> Program:
    if filename.endswith(".ipynb"):
        try:
            sources = notebook_cells(data)
        except (ValueError, UnicodeDecodeError) as error:
            return Program([], f"not a valid notebook: {error}")
        units = []
        for number, source in enumerate(sources, start=1):
            masked = mask_magics(source)
            # a cell magic cell is not Python: an empty unit keeps the cell numbering
            units.append(_parse(masked if masked is not None else "", number))
        return Program(units)
    try:
        text = _decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        return Program([], f"cannot be decoded: {error}")
    return Program([_parse(text, None)])


# ---------------------------------------------------------------------------------------------
# Locating scopes and statements

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _child_statements(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """Statements directly nested in a compound statement (never a def's or class's body)."""
    if isinstance(stmt, _DEFS):
        return
    for name in ("body", "orelse", "finalbody"):
        yield from getattr(stmt, name, [])
    for handler in getattr(stmt, "handlers", []):
        yield from handler.body
    for case in getattr(stmt, "cases", []):
        yield from case.body


def _flatten(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested compound statements included, def/class bodies not."""
    for stmt in body:
        yield stmt
        yield from _flatten(_child_statements(stmt))


@dataclass
class Scope:
    unit: Unit
    node: ast.AST | None  #: the def/class, or None for a module / a cell
    body: list[ast.stmt]

    def statements(self) -> list[ast.stmt]:
        """Statements of the scope, compound ones and their insides; nested defs and classes
        are not statements of the scope (they have scopes of their own)."""
        return [s for s in _flatten(self.body) if not isinstance(s, _DEFS)]

    def _top(self) -> list[ast.stmt]:
        return [s for s in self.body if not isinstance(s, _DEFS)]

    def text(self) -> str:
        """A def's or class's whole source; for a module or a cell its code outside defs and
        classes (the `if __name__ == "__main__":` block included). Comments blanked,
        whitespace collapsed."""
        if self.node is not None:
            return self.unit.segment(self.node)
        return " ".join(self.unit.segment(s) for s in self._top())

    def line_ranges(self) -> list[tuple[int, int]]:
        nodes = [self.node] if self.node is not None else self._top()
        return [(n.lineno, n.end_lineno or n.lineno) for n in nodes]  # type: ignore[attr-defined]


def _defs_named(body: Iterable[ast.stmt], name: str) -> Iterator[ast.stmt]:
    """Defs and classes called `name` in a body, including those under if/try/with blocks."""
    for stmt in _flatten(body):
        if isinstance(stmt, _DEFS) and stmt.name == name:
            yield stmt


def find_scopes(program: Program, scope: str) -> list[Scope]:
    """Every scope matching `scope` ("<module>", "cell N", or a dotted def/class path); a name
    defined twice (a redefinition, a notebook cell run again) gives every definition."""
    units = [unit for unit in program.units if unit.tree is not None]
    if scope == MODULE_SCOPE:
        return [Scope(u, None, u.tree.body) for u in units if u.tree is not None]
    cell = CELL_SCOPE_RE.match(scope)
    if cell:
        number = int(cell.group(1))
        return [Scope(u, None, u.tree.body) for u in units if u.cell == number and u.tree]
    found: list[Scope] = []
    for unit in units:
        assert unit.tree is not None
        nodes: list[ast.stmt] = [unit.tree]  # type: ignore[list-item]
        for part in scope.split("."):
            nodes = [d for n in nodes for d in _defs_named(getattr(n, "body", []), part)]
        found.extend(Scope(unit, node, node.body) for node in nodes)  # type: ignore[attr-defined]
    return found


def identifiers(node: ast.AST) -> set[str]:
    """Names, attribute names, keyword names, import names and parameters in `node`."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.keyword) and sub.arg:
            found.add(sub.arg)
        elif isinstance(sub, ast.alias):
            found.update(sub.name.split("."))
            if sub.asname:
                found.add(sub.asname)
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            found.update(sub.module.split("."))
        elif isinstance(sub, ast.arg):
            found.add(sub.arg)
        elif isinstance(sub, _DEFS):
            found.add(sub.name)
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            found.update(sub.names)
    return found


@dataclass(frozen=True)
class Located:
    """One candidate statement of a site."""

    unit: Unit
    node: ast.stmt

    @property
    def text(self) -> str:
        return self.unit.segment(self.node)

    @property
    def lines(self) -> tuple[int, int]:
        return (self.node.lineno, self.node.end_lineno or self.node.lineno)


def locate(
    scopes: Sequence[Scope], anchor: Sequence[str], kinds: Iterable[str] | None = None
) -> list[Located]:
    """The smallest statements of the scopes holding every anchor.

    A statement is a candidate when it holds every anchor while none of the statements nested in
    it does; of the candidates, those spanning the fewest lines are the site's statements (a
    one-line assignment, not a loop whose header and body happen to hold the anchors between
    them). With `kinds` (node type names), only statements of those types count: the rewritten
    file is searched for the kind of statement the site is in the original, so a site whose
    assignment was rewritten away is "gone" rather than found again in an enclosing loop.
    """
    wanted = set(anchor)
    allowed = set(kinds) if kinds is not None else None
    found: list[Located] = []
    for scope in scopes:
        for stmt in scope.statements():
            if not wanted <= identifiers(stmt):
                continue
            nested = [s for s in _child_statements(stmt) if not isinstance(s, _DEFS)]
            if any(wanted <= identifiers(s) for s in nested):
                continue
            if allowed is None or type(stmt).__name__ in allowed:
                found.append(Located(scope.unit, stmt))
    if not found:
        return found
    least = min(loc.lines[1] - loc.lines[0] for loc in found)
    return [loc for loc in found if loc.lines[1] - loc.lines[0] == least]


# ---------------------------------------------------------------------------------------------
# Judging a site


@dataclass(frozen=True)
class Finding:
    """What `devfix check --format json` reported (the fields the scorer uses)."""

    code: str
    line: int
    end_line: int
    message: str
    cell: int | None = None
    applicability: str = ""


def _any(patterns: Sequence[str], text: str) -> bool:
    return any(re.search(p, text) for p in patterns)


def in_order(patterns: Sequence[str], text: str) -> bool:
    """True when every pattern occurs and the first match of each starts after the first
    match of the one before it ends."""
    position = 0
    for pattern in patterns:
        match = re.search(pattern, text)
        if match is None or match.start() < position:
            return False
        position = match.end()
    return True


def _passes(site: Site, text: str, scope_text: str) -> bool:
    """accept (any), reject (none) and order on the given texts."""
    if site.accept and not _any(site.accept, text):
        return False
    if site.reject and _any(site.reject, text):
        return False
    return not site.order or in_order(site.order, scope_text)


@dataclass
class Verdict:
    outcome: str
    detail: str = ""
    before: list[str] = field(default_factory=list)  #: located statement(s), original
    after: list[str] = field(default_factory=list)  #: located statement(s), rewritten


class SiteNotFound(CorpusError):
    """The site's scope or statement is not in the original file: the site file is wrong."""


def _site_texts(
    site: Site, program: Program, kinds: Iterable[str] | None = None
) -> tuple[list[Scope], list[Located]]:
    scopes = find_scopes(program, site.scope)
    return scopes, locate(scopes, site.anchor, kinds) if scopes else []


def original_location(site: Site, original: Program) -> tuple[list[Scope], list[Located]]:
    scopes, located = _site_texts(site, original)
    if not scopes:
        raise SiteNotFound(f"site {site.name}: scope {site.scope!r} not found")
    if not located:
        raise SiteNotFound(
            f"site {site.name}: no statement in {site.scope} holds all of {list(site.anchor)}"
        )
    return scopes, located


def is_fixed(
    site: Site, program: Program, kinds: Iterable[str] | None = None
) -> tuple[bool, list[str]]:
    """Whether the site passes its predicate in `program`, and the statement texts looked at
    (`kinds`: the node types of the site's statements in the original, see `locate`)."""
    scopes, located = _site_texts(site, program, kinds)
    scope_text = " ".join(scope.text() for scope in scopes)
    texts = [loc.text for loc in located]
    if site.where == "scope":
        return bool(scopes) and _passes(site, scope_text, scope_text), texts
    if not located:
        if site.gone_ok and scopes:
            return _passes(site, scope_text, scope_text), texts
        return False, texts
    return any(_passes(site, text, scope_text) for text in texts), texts


def _finding_within(
    findings: Iterable[Finding],
    rules: Sequence[str] | None,
    where: Iterable[tuple[Unit, int, int]],
) -> Finding | None:
    spans = list(where)
    for finding in findings:
        if rules is not None and finding.code not in rules:
            continue
        if not finding.message.strip():
            continue
        for unit, first, last in spans:
            if unit.cell == finding.cell and first <= finding.line <= last:
                return finding
    return None


def judge(
    site: Site, original: Program, rewritten: Program, findings: Sequence[Finding]
) -> Verdict:
    """The outcome of one site (raises SiteNotFound when the site is not in the original)."""
    scopes, located = original_location(site, original)
    before = [loc.text for loc in located]
    fixed, after = is_fixed(site, rewritten, {type(loc.node).__name__ for loc in located})
    if site.where == "scope":
        spans = [(s.unit, a, b) for s in scopes for a, b in s.line_ranges()]
        new_scopes = find_scopes(rewritten, site.scope)
        changed = " ".join(s.text() for s in new_scopes) != " ".join(s.text() for s in scopes)
    else:
        spans = [(loc.unit, *loc.lines) for loc in located]
        changed = sorted(after) != sorted(before)
    if site.expect == "flag":
        if changed:
            detail = "rewritten, but no automatic fix is right here"
            return Verdict(WRONG_FIX, detail, before, after)
        finding = _finding_within(findings, site.rules_that_flag, spans)
        if finding is not None:
            return Verdict(FLAGGED, f"{finding.code}: {finding.message}", before, after)
        return Verdict(MISSED, "no finding of " + "/".join(site.rules_that_flag), before, after)
    if fixed:
        return Verdict(FIXED, "", before, after)
    finding = _finding_within(findings, None, spans)
    note = ""
    if changed:
        gone = site.where == "statement" and not after
        note = "statement gone" if gone else f"{site.where} rewritten"
        note += ", fix not accepted; "
    if finding is not None:
        return Verdict(FLAGGED, f"{note}{finding.code}: {finding.message}", before, after)
    return Verdict(MISSED, f"{note}no finding on the {site.where}", before, after)


def self_check(site: Site, original: Program) -> str:
    """Why the site is malformed against its original file ('' when it is sound): scope and
    anchor must be found, and a fix site must not already count as fixed unchanged."""
    try:
        original_location(site, original)
    except SiteNotFound as error:
        return str(error)
    if site.expect == "fix" and is_fixed(site, original)[0]:
        return f"site {site.name}: the unchanged original already passes accept/reject/order"
    return ""


# ---------------------------------------------------------------------------------------------
# Running devfix


@dataclass
class FileReport:
    id: str
    role: str
    kind: str
    basename: str
    missing: bool = False
    changed: bool = False
    broken: str = ""  #: why the rewritten file no longer parses / is no longer a notebook
    not_idempotent: bool = False
    errors: list[str] = field(default_factory=list)  #: devfix's error lines for the file
    site_errors: list[str] = field(default_factory=list)  #: sites not found in the original
    verdicts: dict[str, Verdict] = field(default_factory=dict)


def _devfix(
    command: Sequence[str], args: Sequence[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=7200
    )


def _error_lines(stderr: str, relpaths: Iterable[str]) -> dict[str, list[str]]:
    wanted = set(relpaths)
    found: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        for marker in (": error: ", ": INTERNAL ERROR"):
            head, sep, _ = line.partition(marker)
            lines = found.setdefault(head, []) if sep and head in wanted else None
            if lines is not None and line not in lines:  # check and apply both report it
                lines.append(line)
    return found


def _copy(rows: Sequence[ManifestRow], source: Path, target: Path) -> None:
    for row in rows:
        (target / row.id).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / row.id / row.basename, target / row.id / row.basename)


def _findings(stdout: str) -> dict[str, list[Finding]]:
    by_path: dict[str, list[Finding]] = {}
    text = stdout.strip()
    if not text:
        return by_path
    for item in json.loads(text):
        finding = Finding(
            code=item["code"],
            line=item["line"],
            end_line=item.get("end_line", item["line"]),
            message=item.get("message", ""),
            cell=item.get("cell"),
            applicability=item.get("applicability", ""),
        )
        by_path.setdefault(item["path"], []).append(finding)
    return by_path


def examine(
    report: FileReport,
    sites_file: SitesFile | None,
    original_bytes: bytes,
    rewritten_bytes: bytes,
    again_bytes: bytes,
    findings: Sequence[Finding],
    errors: Sequence[str],
    rule: str | None = None,
) -> None:
    """Fill `report` for one file from its three versions: the original, after `apply`, and
    after a second `apply` of that; `findings` are `check`'s on the original."""
    basename = report.basename
    report.errors = list(errors)
    report.changed = rewritten_bytes != original_bytes
    report.not_idempotent = again_bytes != rewritten_bytes
    original = read_program(original_bytes, basename)
    rewritten = read_program(rewritten_bytes, basename) if report.changed else original
    if report.changed and original.parses and not rewritten.parses:
        report.broken = "; ".join(rewritten.problems())
    for site in sites_file.sites if sites_file is not None else ():
        if rule is not None and site.rule != rule:
            continue
        try:
            report.verdicts[site.name] = judge(site, original, rewritten, findings)
        except SiteNotFound as error:
            report.site_errors.append(str(error))


def score(
    rows: Sequence[ManifestRow],
    sites: dict[str, SitesFile],
    files: Path,
    work: Path,
    devfix: Sequence[str],
    jobs: int,
    rule: str | None = None,
) -> list[FileReport]:
    present = [row for row in rows if (files / row.id / row.basename).is_file()]
    reports = {row.id: FileReport(row.id, row.role, row.kind, row.basename) for row in rows}
    for row in rows:
        reports[row.id].missing = row not in present
    relpaths = {row.id: f"{row.id}/{row.basename}" for row in present}
    findings: dict[str, list[Finding]] = {}
    errors: dict[str, list[str]] = {}
    common = ["--no-cache", "--jobs", str(jobs)]
    stages = {name: work / name for name in ("check", "apply", "again")}
    for folder in stages.values():
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    if present:
        _copy(present, files, stages["check"])
        _copy(present, files, stages["apply"])
        paths = list(relpaths.values())
        checked = _devfix(devfix, ["check", "--format", "json", *common, *paths], stages["check"])
        if checked.returncode not in (0, 1, 2):
            raise RuntimeError(
                f"devfix check exited {checked.returncode}: {checked.stderr[-2000:]}"
            )
        try:
            findings = _findings(checked.stdout)
        except (json.JSONDecodeError, KeyError) as error:
            raise RuntimeError(f"devfix check printed no JSON array: {error}") from None
        applied = _devfix(
            devfix, ["apply", "--unsafe-fixes", "-q", *common, *paths], stages["apply"]
        )
        _copy(present, stages["apply"], stages["again"])
        _devfix(devfix, ["apply", "--unsafe-fixes", "-q", *common, *paths], stages["again"])
        errors = _error_lines(checked.stderr + "\n" + applied.stderr, paths)
    for row in present:
        relpath = relpaths[row.id]
        examine(
            reports[row.id],
            sites.get(row.id),
            (files / relpath).read_bytes(),
            (stages["apply"] / relpath).read_bytes(),
            (stages["again"] / relpath).read_bytes(),
            findings.get(relpath, []),
            errors.get(relpath, []),
            rule,
        )
    return [reports[row.id] for row in rows]


# ---------------------------------------------------------------------------------------------
# Summaries


@dataclass
class RuleTally:
    sites: int = 0
    fix_sites: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))


def tally(reports: Sequence[FileReport], sites: dict[str, SitesFile]) -> dict[str, RuleTally]:
    by_rule: dict[str, RuleTally] = {}
    for report in reports:
        if report.id not in sites:
            continue
        for site in sites[report.id].sites:
            verdict = report.verdicts.get(site.name)
            if verdict is None:
                continue
            rule_tally = by_rule.setdefault(site.rule, RuleTally())
            rule_tally.sites += 1
            rule_tally.fix_sites += site.expect == "fix"
            rule_tally.counts[verdict.outcome] += 1
    return dict(sorted(by_rule.items()))


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f} %)" if whole else f"{part}/{whole}"


def summary(
    reports: Sequence[FileReport], sites: dict[str, SitesFile], verbose: bool = False
) -> tuple[str, dict[str, Any]]:
    """The plain-text report and the same figures as a JSON-ready dict."""
    by_rule = tally(reports, sites)
    total = RuleTally()
    for rule_tally in by_rule.values():
        total.sites += rule_tally.sites
        total.fix_sites += rule_tally.fix_sites
        for outcome in OUTCOMES:
            total.counts[outcome] += rule_tally.counts[outcome]
    scored = [r for r in reports if not r.missing]
    clean = [r for r in scored if r.role == "clean"]
    clean_changed = [r.id for r in clean if r.changed]
    broken = [r for r in scored if r.broken]
    unstable = [r.id for r in scored if r.not_idempotent]
    erroring = [r for r in scored if r.errors]
    site_errors = [(r.id, e) for r in scored for e in r.site_errors]
    missing = [r.id for r in reports if r.missing]
    width = max([len(name) for name in by_rule] + [5])
    lines = [
        f"files: {len(scored)} scored ({len(scored) - len(clean)} buggy, {len(clean)} clean)"
        + (f", {len(missing)} missing from the folder" if missing else ""),
        "",
        f"{'rule':<{width}} {'sites':>5} {'fix':>4} {'fixed':>6} {'flagged':>8} {'missed':>7}"
        f" {'wrong-fix':>10}",
    ]
    for name, rule_tally in [*by_rule.items(), ("all", total)]:
        c = rule_tally.counts
        lines.append(
            f"{name:<{width}} {rule_tally.sites:>5} {rule_tally.fix_sites:>4} {c[FIXED]:>6}"
            f" {c[FLAGGED]:>8} {c[MISSED]:>7} {c[WRONG_FIX]:>10}"
        )
    fixed = total.counts[FIXED]
    reached = fixed + total.counts[FLAGGED]
    lines += [
        "",
        f"fixed: {_percent(fixed, total.fix_sites)} of the sites where a fix is expected",
        f"fixed or flagged with a reason: {_percent(reached, total.sites)} of all sites",
        f"clean controls byte-identical: {len(clean) - len(clean_changed)}/{len(clean)}"
        + (f" (rewritten: {', '.join(clean_changed)})" if clean_changed else ""),
        f"files that stop parsing or are no longer valid notebooks: {len(broken)}",
        *(f"  {r.id}: {r.broken}" for r in broken),
        f"files a second apply changes again: {len(unstable)}"
        + (f" ({', '.join(unstable)})" if unstable else ""),
        f"files devfix reported an error for: {len(erroring)}",
        *(f"  {line}" for r in erroring for line in r.errors),
    ]
    if site_errors:
        lines.append(
            f"sites not found in their original file (fix the site file): {len(site_errors)}"
        )
        lines += [f"  {file_id}: {error}" for file_id, error in site_errors]
    misses = [
        (r.id, name, site.rule, site.expect, r.verdicts[name])
        for r in scored
        for site in (sites[r.id].sites if r.id in sites else ())
        for name in [site.name]
        if name in r.verdicts and r.verdicts[name].outcome in (MISSED, WRONG_FIX)
    ]
    lines += ["", f"misses ({len(misses)}): file id, site, rule, expected, outcome, detail"]
    lines += [f"  {i}  {n}  {rule}  {e}  {v.outcome}  {v.detail}" for i, n, rule, e, v in misses]
    partial = [
        (r.id, name, v.detail)
        for r in scored
        for name, v in r.verdicts.items()
        if v.outcome == FLAGGED and ", fix not accepted; " in v.detail
    ]
    if partial:
        lines += ["", f"flagged, but the statement was rewritten wrongly ({len(partial)}):"]
        lines += [f"  {i}  {n}  {d}" for i, n, d in partial]
    reasons = [
        (r.id, site.name, r.verdicts[site.name].detail)
        for r in scored
        for site in (sites[r.id].sites if r.id in sites else ())
        if site.expect == "flag" and r.verdicts.get(site.name, Verdict(MISSED)).outcome == FLAGGED
    ]
    if reasons:  # the scorer cannot judge a reason; a reader can
        lines += ["", f"flag sites and the reason devfix gave ({len(reasons)}):"]
        lines += [f"  {i}  {n}  {shorten(d, 160)}" for i, n, d in reasons]
    if verbose:
        lines += ["", "sites:"]
        for r in scored:
            for name, v in r.verdicts.items():
                lines.append(f"  {r.id} {name}: {v.outcome} {v.detail}")
                lines += [f"    before: {t}" for t in v.before]
                lines += [f"    after:  {t}" for t in v.after] or ["    after:  (not found)"]
    data: dict[str, Any] = {
        "rules": {
            name: {"sites": t.sites, "fix_sites": t.fix_sites, **t.counts}
            for name, t in by_rule.items()
        },
        "total": {"sites": total.sites, "fix_sites": total.fix_sites, **total.counts},
        "fixed_percent": 100 * fixed / total.fix_sites if total.fix_sites else None,
        "fixed_or_flagged_percent": 100 * reached / total.sites if total.sites else None,
        "files": len(scored),
        "clean": len(clean),
        "clean_rewritten": clean_changed,
        "broken": {r.id: r.broken for r in broken},
        "not_idempotent": unstable,
        "devfix_errors": {r.id: r.errors for r in erroring},
        "site_errors": [{"id": i, "error": e} for i, e in site_errors],
        "missing": missing,
        "sites": [
            {
                "id": r.id,
                "site": name,
                "rule": site.rule,
                "expect": site.expect,
                "outcome": r.verdicts[name].outcome,
                "detail": r.verdicts[name].detail,
            }
            for r in scored
            for site in (sites[r.id].sites if r.id in sites else ())
            for name in [site.name]
            if name in r.verdicts
        ],
    }
    return "\n".join(lines), data


# ---------------------------------------------------------------------------------------------
# Cold batches: the first score of files no pass had seen


def read_cold(folder: Path) -> list[dict[str, Any]]:
    """The recorded cold scores, in batch order."""
    records = []
    for path in folder.glob("batch-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        data.setdefault("batch", int(path.stem.split("-", 1)[1]))
        records.append(data)
    return sorted(records, key=lambda data: int(data["batch"]))


def cold_table(folder: Path) -> str:
    """A row per cold batch, and the last three batches' sites together against the targets."""
    records = read_cold(folder)
    if not records:
        return f"no cold batch recorded in {folder}"
    header = (
        "| batch | devfix | files | sites | fixed | flagged | missed | wrong-fix "
        "| clean untouched | broken |"
    )
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for data in records:
        total = data["total"]
        clean = data["clean"]
        lines.append(
            f"| {data['batch']} | {data['commit']} | {data['files']} | {total['sites']}"
            f" | {_percent(total[FIXED], total['fix_sites'])} | {total[FLAGGED]}"
            f" | {total[MISSED]} | {total[WRONG_FIX]}"
            f" | {clean - len(data['clean_rewritten'])}/{clean} | {len(data['broken'])} |"
        )
    notes = [f"batch {d['batch']}: {d['note']}" for d in records if d.get("note")]
    if notes:
        lines += ["", *notes]
    last = records[-3:]
    fix_sites = sum(d["total"]["fix_sites"] for d in last)
    all_sites = sum(d["total"]["sites"] for d in last)
    fixed = sum(d["total"][FIXED] for d in last)
    reached = fixed + sum(d["total"][FLAGGED] for d in last)
    clean = sum(d["clean"] for d in last)
    untouched = clean - sum(len(d["clean_rewritten"]) for d in last)
    broken = sum(len(d["broken"]) for d in last)
    batches = ", ".join(str(d["batch"]) for d in last)

    def verdict(met: bool) -> str:
        return "met" if met else "not met"

    fixed_share = 100 * fixed / fix_sites if fix_sites else 0.0
    reached_share = 100 * reached / all_sites if all_sites else 0.0
    lines += [
        "",
        f"last {len(last)} batch(es) ({batches}):",
        f"  fixed {_percent(fixed, fix_sites)}, target >= {COLD_TARGETS['fixed']:g} %: "
        + verdict(fixed_share >= COLD_TARGETS["fixed"]),
        f"  fixed or flagged {_percent(reached, all_sites)}, target >= "
        f"{COLD_TARGETS['fixed_or_flagged']:g} %: "
        + verdict(reached_share >= COLD_TARGETS["fixed_or_flagged"]),
        f"  clean controls untouched {untouched}/{clean}, target all: "
        + verdict(untouched == clean),
        f"  broken files {broken}, target 0: {verdict(broken == 0)}",
    ]
    if len(last) < 3:
        lines.append(f"  (the targets are judged over three batches; {len(last)} recorded)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Validation of the corpus description against the folder


def validate(
    rows: Sequence[ManifestRow],
    sites_dir: Path,
    files: Path | None,
    every_id: Iterable[str] | None = None,
) -> list[str]:
    """Every problem of the manifest and the site files ('' lines never); with `files`, also
    the bytes and sha256 of each file and every site located in its ORIGINAL file."""
    problems: list[str] = []
    ids = set(every_id) if every_id is not None else {row.id for row in rows}
    for path in sorted(sites_dir.glob("*.toml")):
        if path.stem not in ids:
            problems.append(f"{path.name}: no manifest row has id {path.stem!r}")
    for row in rows:
        sites_path = sites_dir / f"{row.id}.toml"
        if not sites_path.is_file():
            problems.append(f"{row.id}: no sites file {sites_path.name}")
            continue
        try:
            sites_file = read_sites(sites_path)
        except CorpusError as error:
            problems.append(f"{row.id}: {error}")
            continue
        if sites_file.role != row.role:
            problems.append(
                f"{row.id}: role {row.role} in the manifest, {sites_file.role} in {sites_path.name}"
            )
        if files is None:
            continue
        path = files / row.id / row.basename
        if not path.is_file():
            problems.append(f"{row.id}: {path} is missing")
            continue
        data = path.read_bytes()
        if len(data) != row.bytes:
            problems.append(f"{row.id}: {len(data)} bytes, the manifest says {row.bytes}")
        if hashlib.sha256(data).hexdigest() != row.sha256:
            problems.append(f"{row.id}: sha256 differs from the manifest")
        program = read_program(data, row.basename)
        if not program.parses:
            problems.append(f"{row.id}: the original " + "; ".join(program.problems()))
        for site in sites_file.sites:
            reason = self_check(site, program)
            if reason:
                problems.append(f"{row.id}: {reason}")
    return problems


# ---------------------------------------------------------------------------------------------
# Command line


def load(spec: Path, only: Sequence[str]) -> tuple[list[ManifestRow], dict[str, SitesFile]]:
    rows = read_manifest(spec / "manifest.tsv")
    if only:
        unknown = sorted(set(only) - {row.id for row in rows})
        if unknown:
            raise CorpusError(f"--only: no manifest row with id {', '.join(unknown)}")
        rows = [row for row in rows if row.id in only]
    sites = {row.id: read_sites(spec / "sites" / f"{row.id}.toml") for row in rows}
    return rows, sites


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "codemods", "devfix", "cli"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def install_at(commit: str, folder: Path) -> tuple[list[str], str]:
    """Install devfix as committed at `commit` into `folder` (no dependencies: this
    interpreter's are used) and return the command that runs it and the commit's short hash.

    The install is a real one (`pip install --target`), so the old commit's own package layout
    applies and nothing of this checkout is imported by it."""
    short = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", f"{commit}^{{commit}}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    source, site = folder / "source", folder / "site"
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", short],
        capture_output=True, check=True,
    )  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
         "--target", str(site), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    return ["env", f"PYTHONPATH={site}", sys.executable, "-m", "devfix"], short


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/realworld.py", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--files", type=Path, metavar="DIR", help="score devfix on the corpus in DIR"
    )
    action.add_argument(
        "--validate", type=Path, metavar="DIR", help="check the corpus description against DIR"
    )
    action.add_argument(
        "--cold", action="store_true", help="print the recorded cold scores and the targets"
    )
    parser.add_argument(
        "--spec",
        type=Path,
        default=SPEC_DIR,
        help="folder with manifest.tsv and sites/ (default: %(default)s)",
    )
    parser.add_argument(
        "--devfix", default="devfix", help="the devfix command (default: %(default)s)"
    )
    parser.add_argument(
        "--at",
        metavar="COMMIT",
        help="score devfix as it is at COMMIT of this repository (installed into a temporary "
        "folder; the recorded commit is COMMIT's short hash)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ID",
        help="score only this file id (repeatable)",
    )
    parser.add_argument(
        "--rule", help="count only the sites of this rule (devfix still runs every rule)"
    )
    parser.add_argument(
        "--batch", type=int, metavar="N", help="score only the files of cold batch N (0: the rest)"
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"with --batch: record the figures as the batch's cold score in {COLD_DIR.name}/",
    )
    parser.add_argument(
        "--label", metavar="COMMIT", help="the devfix commit to record (default: this checkout's)"
    )
    parser.add_argument(
        "--jobs", type=int, default=0, help="devfix worker processes (0: one per core)"
    )
    parser.add_argument("--keep", type=Path, metavar="WORKDIR", help="work in WORKDIR and keep it")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the figures as JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print each site's statement before and after"
    )
    args = parser.parse_args(argv)

    if args.cold:
        print(cold_table(COLD_DIR))
        return 0
    if args.record and (args.batch is None or args.batch < 1 or args.rule or args.only):
        print(
            "realworld: --record needs --batch N (N >= 1), without --rule or --only",
            file=sys.stderr,
        )
        return 2
    record = COLD_DIR / f"batch-{args.batch}.json"
    if args.record and record.exists():
        print(f"realworld: {record} exists: a batch is scored cold once", file=sys.stderr)
        return 2
    try:
        if args.validate is not None:
            rows = read_manifest(args.spec / "manifest.tsv")
            every_id = [row.id for row in rows]
            if args.only:
                rows = [row for row in rows if row.id in args.only]
            problems = validate(rows, args.spec / "sites", args.validate, every_id)
            for problem in problems:
                print(problem)
            print(f"{len(rows)} files checked, {len(problems)} problems", file=sys.stderr)
            return 1 if problems else 0
        rows, sites = load(args.spec, args.only)
        if args.batch is not None:
            rows = [row for row in rows if sites[row.id].batch == args.batch]
            if not rows:
                raise CorpusError(f"--batch {args.batch}: no file of the corpus is in that batch")
    except CorpusError as error:
        print(f"realworld: {error}", file=sys.stderr)
        return 2
    if not args.files.is_dir():
        print(f"realworld: {args.files} is not a folder", file=sys.stderr)
        return 2
    command = shlex.split(args.devfix)
    if args.at is None and shutil.which(command[0]) is None:
        print(f"realworld: {command[0]!r} not found (pass --devfix)", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if args.at is not None:
            installed = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="devfix-at-")))
            try:
                command, label = install_at(args.at, installed)
            except (OSError, subprocess.CalledProcessError) as error:
                print(f"realworld: cannot install devfix at {args.at}: {error}", file=sys.stderr)
                return 2
            args.label = args.label or label
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            work = args.keep
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="devfix-rw-")))
        reports = score(rows, sites, args.files, work, command, args.jobs, args.rule)
    text, data = summary(reports, sites, args.verbose)
    data["commit"] = args.label or _commit()
    data["rule_filter"] = args.rule
    data["batch"] = args.batch
    header = f"devfix real-world corpus, devfix at {data['commit']}"
    if args.rule:
        header += f", sites of {args.rule} only"
    print(header)
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.record:
        record.parent.mkdir(exist_ok=True)
        record.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"recorded as {record.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
