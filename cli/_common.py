"""Options shared by several commands and the helpers that print results."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from devfix.errors import UnknownRuleError
from devfix.registry import select_passes
from devfix.report import EXIT_FAILED

F = TypeVar("F", bound=Callable[..., Any])


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def rule_options(function: F) -> F:
    """`--select` / `--ignore`, by code, code prefix or kebab name, comma-separated or repeated."""
    function = click.option(
        "--ignore",
        multiple=True,
        metavar="RULES",
        help="Skip these rules (code, code prefix such as DF1, or name).",
    )(function)
    function = click.option(
        "--select",
        multiple=True,
        metavar="RULES",
        help="Run only these rules (code, code prefix such as DF1, or name).",
    )(function)
    return function


def resolve_rules(
    select: tuple[str, ...], ignore: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Validate selectors early so a typo is one clear usage error, not a failure per file."""
    chosen, skipped = _split(select), _split(ignore)
    try:
        select_passes(chosen, skipped)
    except UnknownRuleError as error:
        raise click.UsageError(str(error)) from None
    return chosen, skipped


def exits(function: Callable[..., int]) -> Callable[..., None]:
    """Commands return their exit code; this turns it into the process's exit status."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        sys.exit(function(*args, **kwargs))

    return wrapper


def echo_err(message: str) -> None:
    click.echo(message, err=True)


def fail(message: str) -> int:
    echo_err(f"devfix: error: {message}")
    return EXIT_FAILED
