"""Options shared by several commands and the helpers that print results."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from devfix import engine, limits, sources
from devfix.cache import CACHE_FOLDER
from devfix.config import ConfigError, find_config, load_config, torch_near
from devfix.errors import InputError, UnknownRuleError
from devfix.formats import migration_report
from devfix.gitops import GitError, changed_since
from devfix.report import EXIT_FAILED
from devfix.settings import Settings
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


#: Options of both `check` and `apply` that are not part of the run's Settings.
report_option = click.option(
    "--report", type=click.Path(dir_okay=False), help="Write a .json or .md report."
)
changed_since_option = click.option(
    "--changed-since", metavar="REF", help="Only files changed since this git ref."
)
details_option = click.option(
    "--show-details",
    is_flag=True,
    help="Print each finding's whole message, with the fix it suggests (a line of a finding "
    "with a fix otherwise stops after the problem; one without keeps its reason).",
)


def run_options(unsafe_fixes_help: str) -> Callable[[F], F]:
    """The options every run over files shares, turned into one `settings: Settings` argument.

    `--select`, `--extend-select`, `--ignore`, `--unsafe-fixes` (its help: `unsafe_fixes_help`),
    `--exclude`, `--extend-exclude`, `--jobs`, `--config`, `--no-cache`, `--timeout-per-file`,
    `--max-memory`. Flags override the configuration file (`[tool.devfix]` in pyproject.toml,
    or devfix.toml, found from the first path upwards).
    """

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs["settings"] = build_settings(
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
                timeout_per_file=kwargs.pop("timeout_per_file"),
                max_memory_mib=kwargs.pop("max_memory"),
            )
            return function(*args, **kwargs)

        decorators = [
            *limit_options,
            click.option("--config", type=click.Path(dir_okay=False), help="Configuration file."),
            click.option("--no-cache", is_flag=True, help="Do not read or write the result cache."),
            click.option(
                "-j",
                "--jobs",
                type=click.IntRange(min=0),
                default=0,
                help="Worker processes (default 0: one per core).",
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
            click.option("--unsafe-fixes", is_flag=True, default=None, help=unsafe_fixes_help),
            click.option(
                "--extend-select", multiple=True, metavar="RULES", help="Add these rules."
            ),
        ]
        decorated: Any = rule_options(wrapper)
        for decorator in decorators:
            decorated = decorator(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate


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


def build_settings(
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
    timeout_per_file: float = limits.DEFAULT_TIMEOUT_SECONDS,
    max_memory_mib: int = limits.DEFAULT_MAX_MEMORY_MIB,
) -> Settings:
    """Merge command-line flags over the configuration file, resolved once into Settings."""
    start = next((Path(p) for p in paths if p != "-" and os.path.exists(p)), Path.cwd())
    try:
        found = load_config(Path(config) if config is not None else find_config(start))
    except ConfigError as error:
        raise OneLineError(str(error)) from None
    chosen = _split(select) or found.select or ()
    extra = _split(extend_select) + found.extend_select
    if chosen and extra:
        chosen = chosen + extra
    use_cache = not no_cache and found.cache is not False
    options = Options(
        select=chosen,
        ignore=_split(ignore) or found.ignore or (),
        unsafe_fixes=bool(unsafe_fixes if unsafe_fixes is not None else found.unsafe_fixes),
        jobs=jobs,
        pass_options=found.pass_options,
        # A project without a configuration file may still pin torch in a requirements.txt.
        torch_version=found.torch_version or (torch_near(start) if found.path is None else None),
        exclude=_split(exclude) or found.exclude,
        extend_exclude=_split(extend_exclude) + found.extend_exclude,
        root=str(found.root),
        cache_dir=str(found.root / CACHE_FOLDER) if use_cache else None,
        timeout_per_file=timeout_per_file,
        max_memory_mib=max_memory_mib,
    )
    for pattern in (*(options.exclude or ()), *options.extend_exclude):
        problem = sources.invalid_pattern(pattern)
        if problem is not None:
            raise OneLineError(
                f"exclude pattern {pattern!r} is not a gitignore pattern ({problem})"
            )
    try:
        return Settings.resolve(options)
    except UnknownRuleError as error:
        # One clear usage error for a typo, not a failure per file.
        raise click.UsageError(str(error)) from None


#: The rate and ETA are shown once this much time has passed and this many files are done:
#: before that, start-up (worker processes, imports) dominates and the estimate is nonsense.
ETA_AFTER_SECONDS = 3.0
ETA_AFTER_FILES = 5


def progress_printer() -> Callable[[int, int], None]:
    """A progress line (files, then files/s and ETA) on a terminal's stderr; nothing on a pipe.

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
        line = f"{done}/{total} files"
        elapsed = max(time.monotonic() - started, 1e-6)
        if elapsed >= ETA_AFTER_SECONDS and done >= ETA_AFTER_FILES:
            rate = done / elapsed
            line += f"  {rate:.1f} files/s  ETA {(total - done) / rate:.0f}s"
        stream.write(f"\r\033[K{line}")
        stream.flush()

    return show


def restrict_to_changed(ref: str, paths: list[str]) -> list[str]:
    """The source files under `paths` changed since git `ref` (usage error if git says no)."""
    try:
        changed = changed_since(ref, paths or ["."])
    except GitError as error:
        raise OneLineError(str(error)) from None
    return [path for path in changed if path.endswith(SOURCE_SUFFIXES)]


def require_existing(paths: Iterable[str]) -> None:
    """A path that does not exist is a usage error (not a file that failed to be checked)."""
    for path in paths:
        if path != "-" and not os.path.lexists(path):
            raise OneLineError(f"no such file or folder: {path}")


def say_empty_folders(paths: Iterable[str], results: Iterable[FileResult]) -> None:
    """One line for each folder given that holds nothing to look at."""
    # absolute: results name `./a.py` as `a.py`, and a folder may be given as `.` or `x/..`
    found = [os.path.abspath(result.path) for result in results]
    for path in paths:
        if not os.path.isdir(path):
            continue
        prefix = os.path.join(os.path.abspath(path), "")
        if not any(name.startswith(prefix) for name in found):
            echo_err(f"devfix: no Python files or notebooks under {path}")


def write_report(
    path: str, results: list[FileResult], settings: Settings, *, applies: bool = True
) -> None:
    """`applies`: the run writes fixes (`apply`), so the report counts those applied."""
    if not path.endswith((".json", ".md")):
        raise click.UsageError("--report must name a .json or .md file")
    text = migration_report(results, settings, markdown=path.endswith(".md"), applies=applies)
    try:
        sources.write_report(path, text.encode("utf-8"))
    except InputError as error:
        raise OneLineError(f"cannot write report {path}: {error}") from None
