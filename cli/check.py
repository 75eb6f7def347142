"""`devfix check`: report findings, write nothing (except `--add-ignore` comments)."""

from __future__ import annotations

import sys

import click

from devfix.cli._common import (
    changed_since_option,
    details_option,
    echo_err,
    exits,
    progress_printer,
    report_option,
    require_existing,
    restrict_to_changed,
    run_options,
    say_empty_folders,
    write_report,
)
from devfix.engine import check_source, fix_paths
from devfix.errors import InputError, InternalError
from devfix.formats import github_annotations, sarif_log, summary_table
from devfix.report import (
    DETAILS_HINT,
    EXIT_CLEAN,
    EXIT_FAILED,
    Tally,
    failure_line,
    finding_line,
    json_report,
    plural,
    shortened,
)
from devfix.settings import Settings
from devfix.source_file import open_source
from devfix.sources import decode, write_atomic
from devfix.suppression import add_ignores
from devfix.types import FileResult, FileStatus


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path())
@run_options("Count fixes marked unsafe as fixable (marked [*]); check itself never writes a fix.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github", "sarif"]),
    default="text",
    show_default=True,
    help="text: `path:line:col: CODE [*] message`; json: the documented array of findings; "
    "github: workflow annotations; sarif: SARIF 2.1.0 with the fixes.",
)
@click.option("--stdin-filename", default="-", help="Name to show for `-` (stdin).")
@click.option(
    "--add-ignore",
    is_flag=True,
    help="Write `# devfix: ignore[CODE]` on the line of every current finding (a baseline).",
)
@report_option
@changed_since_option
@details_option
@exits
def check_command(
    paths: tuple[str, ...],
    settings: Settings,
    output_format: str,
    stdin_filename: str,
    add_ignore: bool,
    report: str | None,
    changed_since: str | None,
    show_details: bool,
) -> int:
    """Report device-mismatch findings in PATHS (files or folders; `-` for stdin; default `.`).

    Writes nothing, except the comments of `--add-ignore`.
    """
    require_existing(paths)
    file_paths = [path for path in paths if path != "-"]
    if not paths and changed_since is None:
        file_paths = ["."]
    if changed_since is not None:
        file_paths = restrict_to_changed(changed_since, file_paths)
        if not file_paths and "-" not in paths:
            echo_err(f"devfix: no files changed since {changed_since}.")
            return EXIT_CLEAN
    results: list[FileResult] = []
    if "-" in paths:
        results.append(_check_stdin(stdin_filename, settings))
    progress = progress_printer()
    results.extend(
        fix_paths(
            file_paths,
            settings,
            write=False,
            check_only=True,
            fix_text=output_format == "sarif",
            progress=progress,
        )
    )
    progress(0, 0)
    tally = Tally(settings)
    for result in results:
        tally.add(result)
        if result.status is FileStatus.FAILED:
            echo_err(failure_line(result))
        elif output_format == "text":
            for finding in result.findings:
                click.echo(finding_line(result.path, finding, settings, details=show_details))
    if output_format == "json":
        click.echo(json_report(results))
    elif output_format == "github":
        annotations = github_annotations(results)
        if annotations:
            click.echo(annotations)
    elif output_format == "sarif":
        click.echo(sarif_log(results))
    say_empty_folders(file_paths, results)
    if report is not None:
        write_report(report, results, settings, applies=False)
    if add_ignore:
        return _add_ignores(results)
    table = summary_table(results, settings, fixes=False)
    if table and output_format == "text" and tally.files > 1:
        echo_err(table)
    if (
        output_format == "text"
        and not show_details
        and shortened((f for r in results for f in r.findings), settings)
    ):
        echo_err(DETAILS_HINT)
    echo_err(tally.check_summary())
    return tally.check_exit_code()


def _add_ignores(results: list[FileResult]) -> int:
    added = files = failed = 0
    for result in results:
        if result.status is FileStatus.FAILED:
            failed += 1
            continue
        if not result.findings or result.path == "-":
            continue
        try:
            source = open_source(result.path)
            located = [source.unlocate(f) for f in result.findings]
            in_code = [f for f in located if f is not None]
            text, missed = add_ignores(source.code, in_code)
            missed += len(located) - len(in_code)
            if text != source.code:
                write_atomic(result.path, source.document.with_text(source.render(text)))
                files += 1
        except InputError as error:
            echo_err(f"{result.path}: error: {error}")
            failed += 1
            continue
        added += len(result.findings) - missed
        if missed:
            echo_err(
                f"{result.path}: {plural(missed, 'finding')} could not take a suppression comment"
            )
    echo_err(
        f"devfix: added suppression comments for {plural(added, 'finding')} "
        f"in {plural(files, 'file')}."
    )
    return EXIT_FAILED if failed else EXIT_CLEAN


def _check_stdin(name: str, settings: Settings) -> FileResult:
    try:
        text = decode(sys.stdin.buffer.read(), name).text
        found = tuple(check_source(text, name, settings))
    except InputError as error:
        return FileResult(name, FileStatus.FAILED, reason=str(error))
    except InternalError as error:
        return FileResult(name, FileStatus.FAILED, reason=str(error), internal_error=True)
    return FileResult(name, FileStatus.UNCHANGED, findings=found, remaining=found)
