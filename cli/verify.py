"""``devfix verify``: run a script on virtual GPUs and prove it is free of device errors."""

from __future__ import annotations

import json

import click

from devfix.vgpu.launch import NotebookError, run_batch, run_one, run_one_json


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
    help="On a device error, apply the devfix finding at the line that put the root tensor on "
    "its device, run again, and repeat until the script runs (see README).",
)
@click.option("--unsafe-fixes", is_flag=True, help="With --fix: unsafe fixes may be applied too.")
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="With --fix: at most this many runs that apply a fix.",
)
@click.option(
    "--keep-partial",
    is_flag=True,
    help="With --fix: keep the edits when the last run still fails (default: restore).",
)
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def verify_command(
    ctx: click.Context,
    gpus: int,
    env_pairs: tuple[str, ...],
    batch: bool,
    output_format: str,
    repair: bool,
    unsafe_fixes: bool,
    max_rounds: int,
    keep_partial: bool,
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
    that line. The exit status is the script's.
    """
    env = _parse_env(env_pairs)
    if batch and output_format == "json":
        raise click.UsageError("--format json runs one script; it cannot go with --batch")
    if repair and (batch or output_format == "json"):
        raise click.UsageError("--fix runs one script with text output")
    if repair:
        from devfix.vgpu.repair import repair as repair_script
        from devfix.vgpu.repair import repairable

        refusal = repairable(script)
        if refusal is not None:
            click.echo(f"devfix verify: {refusal}", err=True)
            ctx.exit(2)
        code = repair_script(
            script,
            args,
            gpus=gpus,
            env=env,
            unsafe=unsafe_fixes,
            max_rounds=max_rounds,
            keep_partial=keep_partial,
            echo=lambda text, err: click.echo(text, err=err),
        )
        ctx.exit(code)
    try:
        if output_format == "json":
            code, result = run_one_json(script, args, gpus=gpus, env=env)
            click.echo(json.dumps(result, indent=2))
        elif batch:
            code = run_batch(
                [script, *args],
                gpus=gpus,
                env=env,
                echo=lambda text, err: click.echo(text, err=err),
            )
        else:
            code = run_one(script, args, gpus=gpus, env=env)
    except NotebookError as error:
        click.echo(f"devfix verify: {error}", err=True)
        code = 2
    ctx.exit(code)
