"""`devfix apply`: write the fixes (or show them with --diff)."""

from __future__ import annotations

import sys

import click
from devfix.cli._common import echo_err, exits, resolve_rules, rule_options

from devfix.engine import fix_paths, fix_source
from devfix.errors import InputError, InternalError
from devfix.report import EXIT_FAILED, Tally, failure_line, finding_line
from devfix.sources import decode
from devfix.types import FileResult, FileStatus, Options


@click.command("apply")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@rule_options
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes marked unsafe.")
@click.option("--diff", is_flag=True, help="Print unified diffs; write nothing.")
@click.option("-j", "--jobs", type=int, default=0, help="Worker processes (0 = one per core).")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors and the summary.")
@exits
def apply_command(
    paths: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    unsafe_fixes: bool,
    diff: bool,
    jobs: int,
    quiet: bool,
) -> int:
    """Rewrite PATHS in place with the fixes (`-`: read stdin, write the result to stdout)."""
    chosen, skipped = resolve_rules(select, ignore)
    options = Options(select=chosen, ignore=skipped, unsafe_fixes=unsafe_fixes, jobs=jobs)
    if paths == ("-",):
        return _apply_stdin(options)
    if "-" in paths:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    tally = Tally()
    for result in fix_paths(list(paths), options, write=not diff, want_diff=diff):
        tally.add(result)
        if result.status is FileStatus.FAILED:
            echo_err(failure_line(result))
            continue
        if not quiet:
            _echo_findings(result, options)
        if diff and result.diff:
            click.echo(result.diff, nl=False)
    echo_err(tally.apply_summary(dry_run=diff))
    return tally.apply_exit_code(dry_run=diff)


def _echo_findings(result: FileResult, options: Options) -> None:
    applied = {(f.line, f.col, f.code) for f in result.applied}
    for finding in result.findings:
        was_applied = (finding.line, finding.col, finding.code) in applied
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
