"""``devfix verify``: run a script on virtual GPUs and prove it is free of device errors."""

from __future__ import annotations

import click

from devfix.vgpu.launch import NotebookError, run_batch, run_one


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
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def verify_command(
    ctx: click.Context,
    gpus: int,
    env_pairs: tuple[str, ...],
    batch: bool,
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
    that line are printed after the traceback. The exit status is the script's.
    """
    env = _parse_env(env_pairs)
    try:
        if batch:
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
