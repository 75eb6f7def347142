"""Test helpers: every fix is checked for its output, its stability and its re-parse."""

from __future__ import annotations

import textwrap

import libcst as cst

from devfix.engine import check_source, fix_source
from devfix.types import Applicability, Finding, Options


def _options(rule: str, unsafe: bool) -> Options:
    return Options(select=(rule,), unsafe_fixes=unsafe)


def assert_fix(rule: str, before: str, after: str, *, unsafe: bool = False) -> list[Finding]:
    """devfix(before) == after; devfix(after) == after; after parses. Returns the findings."""
    before, after = textwrap.dedent(before), textwrap.dedent(after)
    result = fix_source(before, _options(rule, unsafe))
    assert result.output == after, f"--- got ---\n{result.output}\n--- expected ---\n{after}"
    cst.parse_module(result.output)
    again = fix_source(result.output, _options(rule, unsafe))
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
