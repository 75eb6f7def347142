"""Test helpers: every fix is checked for its output, its stability and its re-parse."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import libcst as cst

from devfix.engine import check_source, fix_source
from devfix.types import Applicability, Finding, Options


def _options(rule: str, unsafe: bool, torch_version: str | None = None) -> Options:
    return Options(select=(rule,), unsafe_fixes=unsafe, torch_version=torch_version)


def assert_fix(
    rule: str, before: str, after: str, *, unsafe: bool = False, torch_version: str | None = None
) -> list[Finding]:
    """devfix(before) == after; devfix(after) == after; after parses. Returns the findings.
    `torch_version`: the release the project declares (None: the installed torch)."""
    before, after = textwrap.dedent(before), textwrap.dedent(after)
    result = fix_source(before, _options(rule, unsafe, torch_version))
    assert result.output == after, f"--- got ---\n{result.output}\n--- expected ---\n{after}"
    cst.parse_module(result.output)
    again = fix_source(result.output, _options(rule, unsafe, torch_version))
    assert again.output == result.output, "a second run changed the output"
    assert result.findings, "a fix without a finding"
    return list(result.findings)


def assert_noop(rule: str, source: str, *, unsafe: bool = True) -> None:
    """No finding at all, and the text comes through byte-identical."""
    source = textwrap.dedent(source)
    result = fix_source(source, _options(rule, unsafe))
    assert result.output == source
    assert not result.findings, [f.message for f in result.findings]


def assert_declined(rule: str, source: str, *, reason: str) -> Finding:
    """One display-only finding whose message contains `reason`; the text is unchanged."""
    source = textwrap.dedent(source)
    result = fix_source(source, _options(rule, True))
    assert result.output == source
    findings = [f for f in check_source(source, options=_options(rule, True))]
    assert len(findings) == 1, [f.message for f in findings]
    assert findings[0].applicability is Applicability.DISPLAY_ONLY
    assert reason in findings[0].message, findings[0].message
    return findings[0]


def copy_tracked_files(root: Path, destination: Path) -> Path:
    """The files git tracks under `root`, copied to `destination` as a release or a fresh clone
    has them (symbolic links stay links: `devfix/codemods` -> `../codemods`)."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, names):
        source = root / os.fsdecode(name)
        target = destination / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return destination
