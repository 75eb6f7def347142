"""``devfix explain``: read a pasted traceback against the source tree; no GPU, nothing run."""

from __future__ import annotations

import json
import sys

import click


@click.command("explain")
@click.argument("log", required=False, default="-", type=click.Path(allow_dash=True))
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False),
    default=".",
    show_default=True,
    help="The source tree the traceback's frames are looked up in.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object on stdout.",
)
@click.pass_context
def explain_command(ctx: click.Context, log: str, root: str, output_format: str) -> None:
    """Explain the device error of a traceback or log (LOG, or `-`: stdin).

    It reads the log and the source tree, and runs nothing: it needs no GPU and no script
    that runs. It prints the error and the devices it names, your frame (the last frame in
    the source tree; when the error was raised inside a library such as torch, which one, and
    whether your call passes it operands on mixed placements), the operands of your line and
    where each got its device (devfix's static device inference), and the devfix findings
    that cover those lines, with the fix of the first one as a diff. Writes nothing.

    Exit status: 0 when the log had a traceback to explain, 2 when it had none or could not
    be read.
    """
    from devfix.explain import explain, render

    try:
        if log == "-":
            text = sys.stdin.read()
        else:
            with open(log, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as error:
        click.echo(f"devfix explain: cannot read {log}: {error.strerror}", err=True)
        ctx.exit(2)
    result = explain(text, root)
    if output_format == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(render(result), nl=False)
    ctx.exit(0 if result.traceback else 2)
