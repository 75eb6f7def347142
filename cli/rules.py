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
    """List every rule with the fix levels it can emit (safe, unsafe), or print RULE's
    documentation (by code or name)."""
    if rule is None:
        for cls in all_passes():
            listed = ", ".join(level.value for level in cls.fix_applicabilities())
            click.echo(f"{cls.CODE}  {cls.NAME:<38} {listed:<14} {cls.summary()}")
        return 0
    try:
        cls = find_pass(rule)
    except UnknownRuleError as error:
        return fail(str(error))
    levels = [level.value for level in cls.fix_applicabilities()]
    if len(levels) == 1:
        applicability = f"Fix applicability: {levels[0]}"
    else:
        applicability = (
            f"Fix applicability: {' or '.join(levels)}, depending on the code; "
            '"Fix safety" below says when each applies'
        )
    note = "When the right fix cannot be determined, the finding is reported without one."
    click.echo(f"# {cls.CODE} {cls.NAME}\n\n{applicability}. {note}\n")
    click.echo(cls.documentation())
    return 0
