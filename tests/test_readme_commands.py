"""Every `devfix <command>` and every option the README names exists in the CLI's `--help`.

The README's code spans and code blocks are read as command lines: after `devfix CMD` (or a
bare `CMD` that starts a span, such as `apply --commit`), each `-x`/`--option` must be one of
that command's options; a span that is only options (`--unsafe-fixes`, `-j/--jobs N`) must name
an option of some command. Text after `#` (a shell comment) and command lines of other tools
(`pip`, `git`, `python`) are not read. For `devfix verify`, everything after SCRIPT belongs to
the script.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from devfix.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
SPAN = re.compile(r"`([^`\n]+)`")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
DEVFIX_COMMAND = re.compile(r"(?<![\w./-])devfix\s+([a-z][\w-]*)")
SEPARATORS = re.compile(r"&&|\|\||[|;]")
SCRIPT = re.compile(r"^(SCRIPT|\S+\.(py|ipynb))$")


def _help(*command: str) -> str:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def _section(text: str, title: str) -> list[str]:
    """The lines of a `--help` section ("Options:", "Commands:")."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    section = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break
        section.append(line)
    return section


@cache
def commands() -> frozenset[str]:
    rows = _section(_help(), "Commands:")
    return frozenset(row.split()[0] for row in rows if row.startswith("  ") and row.strip())


@cache
def options(command: str) -> frozenset[str]:
    """The option names `devfix COMMAND --help` lists (the first column of "Options:")."""
    found: set[str] = set()
    for row in _section(_help(command), "Options:"):
        stripped = row.strip()
        if stripped.startswith("-"):
            column = re.split(r"\s{2,}", stripped)[0]
            found.update(OPTION.findall(column))
    return frozenset(found)


def _snippets(text: str) -> list[str]:
    """Code-block lines and code spans of a Markdown text."""
    snippets = [
        line for block in FENCE.findall(text) for line in block.splitlines() if line.strip()
    ]
    prose = FENCE.sub("", text)
    snippets += SPAN.findall(prose)
    return snippets


def _segments(snippet: str) -> list[str]:
    """A snippet's shell commands, comments dropped (`# devfix: ignore` spans stay whole)."""
    if snippet.lstrip().startswith("#"):
        return []
    code = re.split(r"\s#", snippet, maxsplit=1)[0]
    return [segment.strip() for segment in SEPARATORS.split(code) if segment.strip()]


def _option_tokens(arguments: str, command: str) -> list[str]:
    tokens = arguments.replace("[", " ").replace("]", " ").replace("/", " ").split()
    if command == "verify":
        for index, token in enumerate(tokens):
            if SCRIPT.match(token):
                tokens = tokens[:index]
                break
    return [name for token in tokens for name in OPTION.findall(token) if token.startswith(name)]


def named_in(text: str) -> tuple[set[str], set[tuple[str, str]], set[str]]:
    """(commands named, (command, option) pairs, options named on their own) in `text`."""
    named_commands: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    loose: set[str] = set()
    for snippet in _snippets(text):
        for segment in _segments(snippet):
            match = DEVFIX_COMMAND.search(segment)
            first = segment.split()[0]
            if match:
                command, arguments = match.group(1), segment[match.end() :]
                named_commands.add(command)
            elif first in commands():
                command, arguments = first, segment[len(first) :]
            else:
                if first.startswith("-"):
                    loose.update(_option_tokens(segment, ""))
                continue
            pairs.update((command, option) for option in _option_tokens(arguments, command))
    return named_commands, pairs, loose


def named_in_readme() -> tuple[set[str], set[tuple[str, str]], set[str]]:
    return named_in(README.read_text(encoding="utf-8"))


def test_the_readme_names_commands_and_options() -> None:
    # the scan itself finds what the README is known to show
    named_commands, pairs, loose = named_in_readme()
    assert {"apply", "check", "verify", "rules"} <= named_commands
    assert ("apply", "--diff") in pairs and ("apply", "--commit") in pairs
    assert "--unsafe-fixes" in loose


def test_every_devfix_command_in_the_readme_exists() -> None:
    named_commands, _, _ = named_in_readme()
    assert named_commands <= commands(), sorted(named_commands - commands())


def test_every_option_in_the_readme_belongs_to_its_command() -> None:
    _, pairs, _ = named_in_readme()
    wrong = sorted(f"devfix {c} {o}" for c, o in pairs if o not in options(c))
    assert not wrong, wrong


def test_every_option_named_alone_exists() -> None:
    _, _, loose = named_in_readme()
    known = set().union(*(options(command) for command in commands()))
    assert loose <= known, sorted(loose - known)


def test_the_commands_table_lists_every_command() -> None:
    readme = README.read_text(encoding="utf-8")
    table = readme[readme.index("## Commands") :]
    table = table[: table.index("\n\n", table.index("| Command |"))]
    listed = set(re.findall(r"^\| `devfix (\w+)", table, re.MULTILINE))
    assert listed == commands(), (sorted(listed), sorted(commands()))


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("devfix rules --select DF1", {("rules", "--select")}),
        ("devfix verify --gpus 4 train.py --lr 0.5", {("verify", "--gpus")}),
        ("pip install . && devfix apply --diff examples/", {("apply", "--diff")}),
        ("devfix check  # --not-read", set()),
        ("`check --unsafe-fixes`", {("check", "--unsafe-fixes")}),
    ],
)
def test_the_scan_reads_command_lines(snippet: str, expected: set[tuple[str, str]]) -> None:
    text = snippet if snippet.startswith("`") else f"```\n{snippet}\n```\n"
    assert named_in(text)[1] == expected


@pytest.mark.slow
def test_the_quick_start_summary_quoted_in_the_readme_is_what_devfix_prints() -> None:
    import subprocess
    import sys

    quoted = re.search(r"It ends with a summary \(`([^`]*?); \.\.\.`\)", README.read_text())
    assert quoted is not None, "the README no longer quotes the quick start's summary"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "devfix",
            "apply",
            "--diff",
            "--unsafe-fixes",
            "--no-cache",
            "examples/",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1].startswith(f"devfix: {quoted.group(1)};"), run.stderr[-300:]
