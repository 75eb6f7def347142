"""`devfix rules`: list the passes, or print one pass's documentation."""

from __future__ import annotations

import click

from devfix.cli._common import exits, fail
from devfix.errors import UnknownRuleError
from devfix.registry import all_passes, find_pass


@click.command("rules")
@click.argument("rule", required=False)
@exits
def rules_command(rule: str | None) -> int:
    """List every rule, or print RULE's documentation (by code or name)."""
    if rule is None:
        for cls in all_passes():
            click.echo(f"{cls.CODE}  {cls.NAME:<38} {cls.APPLICABILITY.value:<12} {cls.summary()}")
        return 0
    try:
        cls = find_pass(rule)
    except UnknownRuleError as error:
        return fail(str(error))
    click.echo(f"# {cls.CODE} {cls.NAME}\n\nFix applicability: {cls.APPLICABILITY.value}\n")
    click.echo(cls.documentation())
    return 0
