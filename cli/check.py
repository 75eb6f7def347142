"""`devfix check`: report findings, write nothing."""

from __future__ import annotations

import sys

import click
from devfix.cli._common import echo_err, exits, resolve_rules, rule_options

from devfix.engine import check_source, fix_paths
from devfix.errors import InputError, InternalError
from devfix.report import Tally, failure_line, finding_line, json_report
from devfix.sources import decode
from devfix.types import FileResult, FileStatus, Options


@click.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@rule_options
@click.option("--unsafe-fixes", is_flag=True, help="Count unsafe fixes as fixable ([*]).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: `path:line:col: CODE [*] message`; json: an array of finding objects.",
)
@click.option("--stdin-filename", default="-", help="Name to show for `-` (stdin).")
@click.option("-j", "--jobs", type=int, default=0, help="Worker processes (0 = one per core).")
@exits
def check_command(
    paths: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    unsafe_fixes: bool,
    output_format: str,
    stdin_filename: str,
    jobs: int,
) -> int:
    """Report device-mismatch findings in PATHS (files or folders; `-` for stdin)."""
    chosen, skipped = resolve_rules(select, ignore)
    options = Options(select=chosen, ignore=skipped, unsafe_fixes=unsafe_fixes, jobs=jobs)
    tally = Tally()
    results: list[FileResult] = []
    file_paths = [path for path in paths if path != "-"]
    if "-" in paths:
        results.append(_check_stdin(stdin_filename, options))
    results.extend(fix_paths(file_paths, options, write=False, check_only=True))
    for result in results:
        tally.add(result)
        if result.status is FileStatus.FAILED:
            echo_err(failure_line(result))
        elif output_format == "text":
            for finding in result.findings:
                click.echo(finding_line(result.path, finding, options))
    if output_format == "json":
        click.echo(json_report(results))
    echo_err(tally.check_summary())
    return tally.check_exit_code()


def _check_stdin(name: str, options: Options) -> FileResult:
    try:
        text = decode(sys.stdin.buffer.read(), name).text
        found = tuple(check_source(text, name, options))
    except InputError as error:
        return FileResult(name, FileStatus.FAILED, reason=str(error))
    except InternalError as error:
        return FileResult(name, FileStatus.FAILED, reason=str(error), internal_error=True)
    return FileResult(name, FileStatus.UNCHANGED, findings=found, remaining=found)
