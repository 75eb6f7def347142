"""``devfix verify``: run a script on virtual GPUs and prove it is free of device errors."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from devfix.report import EXIT_INTERRUPTED
from devfix.vgpu.launch import NotebookError, run_batch, run_one, run_one_json, timed_out_line
from devfix.vgpu.sizes import MEMORY_ENV, parse_memory

if TYPE_CHECKING:
    from devfix.vgpu.repair import Decision, Offer

PROMPT = "Apply this fix and run again? [y,n,e,q,?] "
HELP = """\
y - apply this fix and run the script again
n - do not apply this fix (the next fix on the same line is offered; with none left, stop)
e - edit the file's proposed result in $EDITOR (your edit is written and the script runs again)
q - quit: stop the repair here
? - print this help"""


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"expected K=V, got {p!r}", param_hint="--env")
        k, v = p.split("=", 1)
        env[k] = v
    return env


@click.command(
    "verify",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Number of virtual CUDA devices (cuda:0 … cuda:N-1).",
)
@click.option(
    "--gpu-memory",
    metavar="SIZE",
    default=None,
    help="Memory each virtual GPU reports (`get_device_properties`, `mem_get_info`), e.g. "
    '512KiB: `device_map="auto"` then spreads a small model as it spreads a large one '
    "over real GPUs.  [default: 80GiB]",
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="K=V",
    help="Environment variable for the script (repeatable).",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Every argument is a script: run each in a forked child of one warm process "
    "(torch imported once) and print a summary; exit 1 if any failed.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: print one JSON object on stdout (exit code and the diagnosis of a device "
    "error); the script's own stdout goes to stderr. Not with --batch.",
)
@click.option(
    "--fix",
    "repair",
    is_flag=True,
    help="On a device error, apply the devfix finding on the root tensor's provenance (or, "
    "where none covers it, a fix made from the run), run again, and repeat until the script "
    "runs (see docs/vgpu.md).",
)
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: unsafe fixes may be applied too.")
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="With --fix: at most this many fixes, one per round (one more run judges the last).",
)
@click.option(
    "--keep-partial",
    is_flag=True,
    help="With --fix: keep the edits when the last run still fails (default: restore).",
)
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="With --fix: show each round's fix as a diff (unsafe ones too) and answer y/n/e/q/? "
    "before it is applied; needs a terminal on stdin.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop a run of the script (and its child processes) after SECONDS: exit 124. With "
    "--fix, every run has this budget and a run past it ends the repair. With --batch, per "
    "script (default there 3600).",
)
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def verify_command(
    ctx: click.Context,
    gpus: int,
    gpu_memory: str | None,
    env_pairs: tuple[str, ...],
    batch: bool,
    output_format: str,
    repair: bool,
    unsafe_fixes: bool,
    max_rounds: int,
    keep_partial: bool,
    interactive: bool,
    timeout: float | None,
    script: str,
    args: tuple[str, ...],
) -> None:
    """Run SCRIPT with N virtual GPUs backed by the CPU.

    Options go before SCRIPT; everything after it is the script's own command line
    (`devfix verify train.py --help` prints the script's help, `--gpus` after SCRIPT is the
    script's). A notebook (.ipynb) runs its code cells in order; magics and `!` lines are
    skipped.

    Tensors on the virtual GPUs report cuda:k and mixing devices raises PyTorch's own errors.
    On a device-mismatch death, the user's line, the devices and the devfix findings tied to
    that line are printed after the traceback, with, for each device involved, the tensor on
    it (operand, shape), the line of the script that put it there and the devfix finding at
    that line. The exit status is the script's (124 when it ran past --timeout).

    With --fix, a device error is repaired from the run: the finding on the root tensor's
    provenance is applied (unsafe ones with --unsafe-fixes); where no finding covers it, a fix
    is made from the run (`runtime fix`, kept only if the next run gets past the error). The
    script runs again, and so on until it runs: at most --max-rounds fixes, each run within
    --timeout. With -i, each fix is shown as a diff and applied only when you answer y.
    """
    env = _parse_env(env_pairs)
    if gpu_memory is not None:
        try:
            parse_memory(gpu_memory)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--gpu-memory") from None
        env[MEMORY_ENV] = gpu_memory
    if batch and output_format == "json":
        raise click.UsageError("--format json runs one script; it cannot go with --batch")
    if repair and (batch or output_format == "json"):
        raise click.UsageError("--fix runs one script with text output")
    if interactive and not repair:
        raise click.UsageError("-i/--interactive goes with --fix")
    if interactive and not sys.stdin.isatty():
        click.echo(
            "devfix verify: error: --fix -i needs a terminal on stdin (it reads one key per "
            "answer); without -i, --fix applies the fixes the flags allow.",
            err=True,
        )
        ctx.exit(2)
    if repair:
        from devfix.vgpu.repair import repair as repair_script
        from devfix.vgpu.repair import repairable

        refusal = repairable(script)
        if refusal is not None:
            click.echo(f"devfix verify: {refusal}", err=True)
            ctx.exit(2)
        try:
            code = repair_script(
                script,
                args,
                gpus=gpus,
                env=env,
                unsafe=unsafe_fixes,
                max_rounds=max_rounds,
                keep_partial=keep_partial,
                echo=lambda text, err: click.echo(text, err=err),
                timeout=timeout,
                ask=_ask if interactive else None,
            )
        except KeyboardInterrupt:
            click.echo("devfix verify --fix: interrupted", err=True)
            code = EXIT_INTERRUPTED
        ctx.exit(code)
    try:
        if output_format == "json":
            code, result = run_one_json(script, args, gpus=gpus, env=env, timeout=timeout)
            if result["timed_out"] and timeout is not None:
                click.echo(timed_out_line(timeout), err=True)
            click.echo(json.dumps(result, indent=2))
        elif batch:
            code = run_batch(
                [script, *args],
                gpus=gpus,
                env=env,
                echo=lambda text, err: click.echo(text, err=err),
                timeout=timeout,
            )
        else:
            code = run_one(script, args, gpus=gpus, env=env, timeout=timeout)
    except NotebookError as error:
        click.echo(f"devfix verify: {error}", err=True)
        code = 2
    ctx.exit(code)


def _ask(offer: Offer) -> Decision:
    """One interactive round's answer, read from the terminal (`devfix apply -i`'s rendering)."""
    from devfix.cli.review import read_key, show_proposal
    from devfix.vgpu.repair import Answer, Decision

    show_proposal(offer.proposal, (offer.number, offer.total))
    if offer.fix.from_the_run:
        click.echo(
            "A fix made from this run, not a devfix rule: y keeps it only if the next run gets "
            "past this error."
        )
    while True:
        try:
            key = read_key(PROMPT)
        except EOFError:
            key = "q"
        if key == "y":
            return Decision(Answer.APPLY)
        if key == "n":
            return Decision(Answer.SKIP)
        if key == "q":
            return Decision(Answer.QUIT)
        if key == "e":
            edited = _edit(offer.proposed)
            if edited is not None:
                return Decision(Answer.APPLY, edited)
        else:
            click.echo(HELP)


def _edit(proposed: str) -> str | None:
    """The user's edit of the proposed code in $EDITOR; None (back to the prompt) when the
    editor failed, nothing was saved, or the edit does not parse."""
    import libcst as cst

    try:
        edited = click.edit(proposed, extension=".py", require_save=True)
    except click.ClickException as error:
        click.echo(f"devfix: the editor failed ({error.format_message()}); back to the prompt.")
        return None
    if edited is None or edited == proposed:
        click.echo("No edit was saved; back to the prompt (y takes the fix as shown).")
        return None
    try:
        cst.parse_module(edited)
    except cst.ParserSyntaxError as error:
        click.echo(
            f"devfix: the edited code does not parse (line {error.raw_line}); the edit was "
            "discarded."
        )
        return None
    return edited
