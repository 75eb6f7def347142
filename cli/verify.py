"""``devfix verify``: run a script on virtual GPUs and prove it is free of device errors."""

from __future__ import annotations

import subprocess

import click

from devfix.vgpu import child_env, command


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise click.BadParameter(f"expected K=V, got {p!r}", param_hint="--env")
        k, v = p.split("=", 1)
        env[k] = v
    return env


@click.command("verify", context_settings={"ignore_unknown_options": True})
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
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def verify_command(
    ctx: click.Context,
    gpus: int,
    env_pairs: tuple[str, ...],
    script: str,
    args: tuple[str, ...],
) -> None:
    """Run SCRIPT with N virtual GPUs backed by the CPU.

    Tensors on the virtual GPUs report cuda:k and mixing devices raises PyTorch's own errors.
    On a device-mismatch death, the user's line, the devices and the devfix findings for that
    code are printed after the traceback. The exit status is the script's.
    """
    env = _parse_env(env_pairs)
    proc = subprocess.run(command(script, gpus=gpus, env=env, args=args), env=child_env(env))
    ctx.exit(proc.returncode)
