"""Options shared by several commands and the helpers that print results."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from devfix import engine, limits
from devfix.config import ConfigError, find_config, load_config
from devfix.errors import UnknownRuleError
from devfix.formats import migration_report
from devfix.gitops import GitError, changed_since
from devfix.registry import select_passes
from devfix.report import EXIT_FAILED
from devfix.sources import SOURCE_SUFFIXES
from devfix.types import FileResult, Options

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
        engine.tune_collector()
        sys.exit(function(*args, **kwargs))

    return wrapper


def echo_err(message: str) -> None:
    click.echo(message, err=True)


class OneLineError(click.ClickException):
    """`devfix: error: MESSAGE` on stderr and exit status 2, without click's usage lines."""

    exit_code = EXIT_FAILED

    def show(self, file: Any = None) -> None:
        echo_err(f"devfix: error: {self.format_message()}")


def fail(message: str) -> int:
    echo_err(f"devfix: error: {message}")
    return EXIT_FAILED


#: Options of both `check` and `apply` that are not part of the run's Options.
report_option = click.option(
    "--report", type=click.Path(dir_okay=False), help="Write a .json or .md report."
)
changed_since_option = click.option(
    "--changed-since", metavar="REF", help="Only files changed since this git ref."
)


def run_options(function: F) -> F:
    """The options every run over files shares, turned into one `options: Options` argument.

    `--select`, `--extend-select`, `--ignore`, `--unsafe-fixes`, `--exclude`,
    `--extend-exclude`, `--jobs`, `--config`, `--no-cache`. Flags override the configuration file
    (`[tool.devfix]` in pyproject.toml, or devfix.toml, found from the first path upwards).
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        settings = build_options(
            paths=kwargs.get("paths", ()),
            select=kwargs.pop("select"),
            extend_select=kwargs.pop("extend_select"),
            ignore=kwargs.pop("ignore"),
            unsafe_fixes=kwargs.pop("unsafe_fixes"),
            exclude=kwargs.pop("exclude"),
            extend_exclude=kwargs.pop("extend_exclude"),
            jobs=kwargs.pop("jobs"),
            config=kwargs.pop("config"),
            no_cache=kwargs.pop("no_cache"),
        )
        kwargs["options"] = dataclasses.replace(
            settings,
            timeout_per_file=kwargs.pop("timeout_per_file"),
            max_memory_mib=kwargs.pop("max_memory"),
        )
        return function(*args, **kwargs)

    decorators = [
        *limit_options,
        click.option("--config", type=click.Path(dir_okay=False), help="Configuration file."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the result cache."),
        click.option(
            "-j", "--jobs", type=int, default=0, help="Worker processes (0 = one per core)."
        ),
        click.option(
            "--extend-exclude",
            multiple=True,
            metavar="PATTERNS",
            help="More gitignore-style patterns to skip.",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="PATTERNS",
            help="Gitignore-style patterns to skip, replacing the default excludes.",
        ),
        click.option(
            "--unsafe-fixes", is_flag=True, default=None, help="Also apply fixes marked unsafe."
        ),
        click.option("--extend-select", multiple=True, metavar="RULES", help="Add these rules."),
    ]
    decorated: Any = rule_options(wrapper)
    for decorator in decorators:
        decorated = decorator(decorated)
    return decorated  # type: ignore[no-any-return]


#: `--timeout-per-file` and `--max-memory` (devfix.limits, devfix.isolation).
limit_options = [
    click.option(
        "--max-memory",
        type=click.IntRange(min=0),
        default=limits.DEFAULT_MAX_MEMORY_MIB,
        show_default=True,
        metavar="MIB",
        help="Memory budget of one file; a file that needs more is refused (0: no budget).",
    ),
    click.option(
        "--timeout-per-file",
        type=click.FloatRange(min=0),
        default=limits.DEFAULT_TIMEOUT_SECONDS,
        show_default=True,
        metavar="SECONDS",
        help="CPU seconds one file may take; a file that takes longer is stopped (0: no limit).",
    ),
]


def build_options(
    *,
    paths: tuple[str, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    unsafe_fixes: bool | None,
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    jobs: int,
    config: str | None,
    no_cache: bool,
) -> Options:
    """Merge command-line flags over the configuration file into one frozen Options."""
    try:
        if config is not None:
            settings = load_config(Path(config))
        else:
            start = next((Path(p) for p in paths if p != "-" and os.path.exists(p)), Path.cwd())
            settings = load_config(find_config(start))
    except ConfigError as error:
        raise OneLineError(str(error)) from None
    chosen = _split(select) or settings.select or ()
    extra = _split(extend_select) + settings.extend_select
    if chosen and extra:
        chosen = chosen + extra
    skipped = _split(ignore) or settings.ignore or ()
    chosen, skipped = resolve_rules(chosen, skipped)
    use_cache = not no_cache and settings.cache is not False
    return Options(
        select=chosen,
        ignore=skipped,
        unsafe_fixes=bool(unsafe_fixes if unsafe_fixes is not None else settings.unsafe_fixes),
        jobs=jobs,
        pass_options=settings.pass_options,
        exclude=_split(exclude) or settings.exclude,
        extend_exclude=_split(extend_exclude) + settings.extend_exclude,
        root=str(settings.root),
        cache_dir=str(settings.root / ".devfix_cache") if use_cache else None,
    )


def progress_printer() -> Callable[[int, int], None]:
    """A progress line (files, files/s, ETA) on a terminal's stderr; nothing on a pipe.

    Call it with (0, 0) at the end to clear the line.
    """
    stream = sys.stderr
    enabled = stream.isatty()
    started = time.monotonic()

    def show(done: int, total: int) -> None:
        if not enabled:
            return
        if total == 0:
            stream.write("\r\033[K")
            stream.flush()
            return
        elapsed = max(time.monotonic() - started, 1e-6)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else 0.0
        stream.write(f"\r\033[K{done}/{total} files  {rate:.1f} files/s  ETA {eta:.0f}s")
        stream.flush()

    return show


def restrict_to_changed(ref: str, paths: list[str]) -> list[str]:
    """The source files under `paths` changed since git `ref` (usage error if git says no)."""
    try:
        changed = changed_since(ref, paths or ["."])
    except GitError as error:
        raise click.UsageError(str(error)) from None
    return [path for path in changed if path.endswith(SOURCE_SUFFIXES)]


def write_report(path: str, results: list[FileResult]) -> None:
    if not path.endswith((".json", ".md")):
        raise click.UsageError("--report must name a .json or .md file")
    text = migration_report(results, markdown=path.endswith(".md"))
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        raise click.UsageError(f"cannot write report {path}: {error.strerror}") from None
