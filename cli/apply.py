"""`devfix apply`: write the fixes (or show them with --diff, or commit them with --commit)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

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
from devfix.engine import fix_paths, fix_source
from devfix.errors import InputError, InternalError
from devfix.formats import summary_table
from devfix.gitops import UNDONE, GitError, roll_back_stopped_run, toplevel
from devfix.migrate import EXIT_INTERRUPTED, commit_per_rule, plan
from devfix.names import shown
from devfix.report import (
    DETAILS_HINT,
    EXIT_CLEAN,
    EXIT_FAILED,
    Tally,
    failure_line,
    finding_line,
    shortened,
)
from devfix.settings import Settings
from devfix.source_file import diff_root, unified_diff
from devfix.sources import decode
from devfix.state import RunRecord
from devfix.types import FileResult, FileStatus


@click.command("apply")
@click.argument("paths", nargs=-1, type=click.Path())
@run_options("Also apply fixes marked unsafe.")
@click.option("--diff", is_flag=True, help="Print unified diffs (for `git apply`); write nothing.")
@click.option("--stdin-filename", default="-", help="Name to show for `-` (stdin).")
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
@details_option
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
    settings: Settings,
    diff: bool,
    stdin_filename: str,
    quiet: bool,
    interactive: bool,
    resume: bool,
    report: str | None,
    changed_since: str | None,
    show_details: bool,
    commit: bool,
    branch: str,
    allow_dirty: bool,
) -> int:
    """Rewrite PATHS in place with the fixes (`-`: read stdin, write the result to stdout).

    With no PATHS, the current folder (as `check`).
    """
    if paths == ("-",):
        return _apply_stdin(settings, stdin_filename, diff=diff, details=show_details)
    if "-" in paths:
        raise click.UsageError("`-` (stdin) cannot be combined with other paths")
    require_existing(paths)
    targets = list(paths) or (["."] if changed_since is None else [])
    if changed_since is not None:
        targets = restrict_to_changed(changed_since, targets)
    if not targets:
        echo_err("devfix: no files to fix.")
        return EXIT_CLEAN
    if interactive or resume:  # interactive review: devfix.cli.review, devfix.review
        if diff:
            raise click.UsageError("--interactive and --diff cannot be combined")
        if commit:
            raise click.UsageError("--interactive and --commit cannot be combined")
        from devfix.cli.review import run_review

        return run_review(targets, settings, resume=resume)
    if commit:
        if diff:
            raise click.UsageError("--commit and --diff cannot be combined")
        return _apply_and_commit(
            targets, settings, branch, allow_dirty, quiet, report, details=show_details
        )
    tally = Tally(settings)
    results: list[FileResult] = []
    progress = progress_printer()
    state = RunRecord(settings.cache_dir) if not diff and settings.cache_dir else None
    roots_named: set[str] = set()
    try:
        for result in fix_paths(
            targets, settings, write=not diff, want_diff=diff, progress=progress
        ):
            if state is not None:
                state.done(result)
            results.append(result)
            tally.add(result)
            if result.status is FileStatus.FAILED or (not quiet and result.findings):
                progress(0, 0)
            _echo_result(result, settings, quiet=quiet, written=not diff, details=show_details)
            if diff and result.diff:
                click.echo(result.diff, nl=False)
                _name_diff_root(result.path, roots_named)
    except KeyboardInterrupt:
        progress(0, 0)
        where = f"; finished files are listed in {state.path}" if state is not None else ""
        echo_err(
            f"devfix: interrupted after {tally.files} file{'s' * (tally.files != 1)}{where}. "
            "No file is half-written."
        )
        if state is not None:
            state.finish(interrupted=True)
        return EXIT_INTERRUPTED
    progress(0, 0)
    if state is not None:
        state.finish(interrupted=False)
    return _close(
        targets,
        results,
        tally,
        settings,
        quiet=quiet,
        report=report,
        dry_run=diff,
        details=show_details,
    )


def _echo_result(
    result: FileResult, settings: Settings, *, quiet: bool, written: bool, details: bool
) -> None:
    """The file's error line, or a line per finding (fixed ones marked)."""
    if result.status is FileStatus.FAILED:
        echo_err(failure_line(result))
        return
    if quiet:
        return
    for finding, fixed in result.outcomes():
        echo_err(
            finding_line(
                result.path, finding, settings, fixed=fixed, written=written, details=details
            )
        )


def _close(
    targets: Iterable[str],
    results: list[FileResult],
    tally: Tally,
    settings: Settings,
    *,
    quiet: bool,
    report: str | None,
    dry_run: bool,
    details: bool,
) -> int:
    """The report file, the per-rule table, the summary line; the exit code."""
    say_empty_folders(targets, results)
    if not quiet and not details and shortened((f for r in results for f in r.findings), settings):
        echo_err(DETAILS_HINT)
    if report is not None:
        write_report(report, results, settings)
    table = summary_table(results, settings, fixes=True)
    if table and not quiet and tally.files > 1:
        echo_err(table)
    echo_err(tally.apply_summary(dry_run=dry_run))
    return tally.apply_exit_code(dry_run=dry_run)


def _apply_and_commit(
    targets: list[str],
    settings: Settings,
    branch: str,
    allow_dirty: bool,
    quiet: bool,
    report: str | None,
    *,
    details: bool,
) -> int:
    """`apply --commit`: the output and exit code of `apply`, and one commit per rule."""
    try:
        toplevel(targets[0])
        rolled_back = roll_back_stopped_run(targets)
    except GitError as error:
        echo_err(f"devfix: error: {error}")
        return EXIT_FAILED
    if rolled_back is not None:
        echo_err(rolled_back)
    failed = False
    committed = False
    planned: list[FileResult] = []
    try:
        planned = plan(targets, settings)
        if any(result.status is FileStatus.CHANGED for result in planned):
            failed = commit_per_rule(
                targets, settings, planned, branch=branch, allow_dirty=allow_dirty, say=echo_err
            )
            committed = True
        else:
            echo_err("devfix: nothing to fix; no branch created.")
    except GitError as error:
        echo_err(f"devfix: error: {error}")
        failed = True
    except KeyboardInterrupt:
        echo_err(f"devfix: interrupted; {UNDONE}; run the same command again to start afresh")
        return EXIT_INTERRUPTED
    tally = Tally(settings)
    for result in planned:
        tally.add(result)
        _echo_result(result, settings, quiet=quiet, written=committed, details=details)
    code = _close(
        targets,
        planned,
        tally,
        settings,
        quiet=quiet,
        report=report,
        dry_run=not committed,
        details=details,
    )
    return EXIT_FAILED if failed else code


def _name_diff_root(path: str, named: set[str]) -> None:
    """Say once per work tree where a diff of a file outside the working folder applies."""
    root = diff_root(path)
    if root is not None and root not in named:
        named.add(root)
        echo_err(
            f"devfix: the diff names files outside this folder relative to {root}: "
            f"run `git apply` there"
        )


def _apply_stdin(settings: Settings, name: str, *, diff: bool, details: bool) -> int:
    """Fix stdin: its fixed text on stdout (with `diff`, a unified diff of it, which `git apply`
    takes when `name` is the file's path in the repository). The exit codes are those of files."""
    data = sys.stdin.buffer.read()
    # The file's own folder decides its line length and Python version, where `name` is one.
    path = name if name != "-" and os.path.isfile(name) else "-"
    try:
        document = decode(data, name)
        result = fix_source(document.text, settings, path=path)
    except (InputError, InternalError) as error:
        echo_err(f"{shown(name)}: error: {error}")
        if not diff:
            sys.stdout.buffer.write(data)
        return EXIT_FAILED
    if diff:
        label = "stdin" if name == "-" else name
        sys.stdout.write(unified_diff(document.text, result.output, label))
    else:
        sys.stdout.buffer.write(document.with_text(result.output).encode())
    outcome = FileResult(
        name,
        FileStatus.CHANGED if result.changed else FileStatus.UNCHANGED,
        findings=result.applied + result.remaining,
        applied=result.applied,
        remaining=result.remaining,
    )
    tally = Tally(settings)
    tally.add(outcome)
    _echo_result(outcome, settings, quiet=False, written=not diff, details=details)
    echo_err(tally.apply_summary(dry_run=diff))
    return tally.apply_exit_code(dry_run=diff)
