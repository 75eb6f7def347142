"""The `devfix` command: a thin click layer over :mod:`devfix.engine`.

Exit codes (every command): 0 nothing found / nothing to change; 1 findings remain (`check`,
`apply`) or files would change (`apply --diff`); 2 a file failed (does not parse, cannot be
read or written) or the command was used wrongly.
"""

from __future__ import annotations

import click

from devfix import __version__
from devfix.cli.apply import apply_command
from devfix.cli.check import check_command
from devfix.cli.explain import explain_command
from devfix.cli.rules import rules_command
from devfix.cli.server import server_command
from devfix.cli.verify import verify_command

EXIT_CODES_HELP = (
    "Exit codes: 0 nothing found or nothing to change; 1 findings remain, or files would change "
    "(apply --diff); 2 a file failed or bad usage."
)


@click.group(help=f"Fix PyTorch device-mismatch bugs.\n\n{EXIT_CODES_HELP}")
@click.version_option(__version__, prog_name="devfix")
def main() -> None:
    """The command group; each subcommand is defined in its own module."""


main.add_command(apply_command)
main.add_command(check_command)
main.add_command(explain_command)
main.add_command(rules_command)
main.add_command(server_command)
main.add_command(verify_command)
