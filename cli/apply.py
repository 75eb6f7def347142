"""`devfix apply`: write the fixes (or show them with --diff)."""

from __future__ import annotations

import sys

import click

from devfix.cli._common import (
    changed_since_option,
    echo_err,
    exits,
    progress_printer,
    report_option,
    restrict_to_changed,
    run_options,
    write_report,
)
from devfix.engine import fix_paths, fix_source
from devfix.errors import InputError, InternalError
from devfix.formats import summary_table
from devfix.migrate import EXIT_INTERRUPTED, commit_per_rule
from devfix.report import EXIT_CLEAN, EXIT_FAILED, Tally, failure_line, finding_line
from devfix.sources import decode
from devfix.state import RunRecord
from devfix.types import FileResult, FileStatus, Options


@click.command("apply")
@click.argument("paths", nargs=-1, type=click.Path())
@run_options
@click.option("--diff", is_flag=True, help="Print unified diffs; write nothing.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors and the summary.")
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="Review each fix (unsafe ones too) as a diff and answer y/n/a/d/A/e/u/q/?.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="With -i (implied): do not ask again about fixes rejected in an earlier review.",
)
@report_option
@changed_since_option
@click.option(
    "--commit",
    is_flag=True,
    help="In a git repository: make a branch and one commit per rule.",
)
@click.option(
    "--branch", default="devfix/migration", show_default=True, help="Branch for --commit."
)
@click.option(
    "--allow-dirty", is_flag=True, help="With --commit: allow uncommitted changes in the files."
)
@exits
def apply_command(
    paths: tuple[str, ...],
    options: Options,
    diff: bool,
    quiet: bool,
    interactive: bool,
    resume: bool,
    report: str | None,
    changed_since: str | None,
    commit: bool,
    branch: str,
    allow_dirty: bool,
) -> int:
    """Rewrite PATHS in place with the fixes (`-`: read stdin, write the result to stdout).

    With no PATHS there is nothing to do and the exit code is 0 (as pre-commit expects).
    """
    if paths == ("-",):
        return _apply_stdin(options)
    if "-" in paths:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    targets = list(paths)
    if changed_since is not None:
        targets = restrict_to_changed(changed_since, targets)
    if not targets:
        echo_err("devfix: no files to fix.")
        return EXIT_CLEAN
    if interactive or resume:  # interactive review: devfix.cli.review, devfix.review
        if diff:
            raise click.UsageError("--interactive and --diff cannot be combined")
        from devfix.cli.review import run_review

        return run_review(targets, options, resume=resume)
    if commit:
        if diff:
            raise click.UsageError("--commit and --diff cannot be combined")
        return commit_per_rule(targets, options, branch=branch, allow_dirty=allow_dirty)
    tally = Tally()
    results: list[FileResult] = []
    progress = progress_printer()
    state = RunRecord(options.cache_dir) if not diff and options.cache_dir else None
    try:
        for result in fix_paths(
            targets, options, write=not diff, want_diff=diff, progress=progress
        ):
            if state is not None:
                state.done(result)
            results.append(result)
            tally.add(result)
            if result.status is FileStatus.FAILED:
                progress(0, 0)
                echo_err(failure_line(result))
                continue
            if not quiet and (result.findings or result.diff):
                progress(0, 0)
                _echo_findings(result, options)
            if diff and result.diff:
                click.echo(result.diff, nl=False)
    except KeyboardInterrupt:
        progress(0, 0)
        where = f"; finished files are listed in {state.path}" if state is not None else ""
        echo_err(f"devfix: interrupted after {tally.files} files{where}. No file is half-written.")
        if state is not None:
            state.finish(interrupted=True)
        return EXIT_INTERRUPTED
    progress(0, 0)
    if state is not None:
        state.finish(interrupted=False)
    if report is not None:
        write_report(report, results)
    table = summary_table(results)
    if table and not quiet and tally.files > 1:
        echo_err(table)
    echo_err(tally.apply_summary(dry_run=diff))
    return tally.apply_exit_code(dry_run=diff)


def _echo_findings(result: FileResult, options: Options) -> None:
    applied = {(f.cell, f.line, f.col, f.code) for f in result.applied}
    for finding in result.findings:
        was_applied = (finding.cell, finding.line, finding.col, finding.code) in applied
        echo_err(finding_line(result.path, finding, options, applied=was_applied))


def _apply_stdin(options: Options) -> int:
    data = sys.stdin.buffer.read()
    try:
        document = decode(data, "-")
        result = fix_source(document.text, options, path="-")
    except (InputError, InternalError) as error:
        echo_err(f"-: error: {error}")
        sys.stdout.buffer.write(data)
        return EXIT_FAILED
    sys.stdout.buffer.write(document.with_text(result.output).encode())
    tally = Tally()
    tally.add(
        FileResult(
            "-",
            FileStatus.CHANGED if result.changed else FileStatus.UNCHANGED,
            findings=result.findings,
            applied=result.applied,
            hidden_unsafe=result.hidden_unsafe,
            remaining=result.remaining,
        )
    )
    for finding in result.findings:
        echo_err(finding_line("-", finding, options))
    echo_err(tally.apply_summary(dry_run=False))
    return tally.apply_exit_code(dry_run=False)
