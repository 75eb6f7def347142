"""`devfix apply -i`: show each proposed fix as a diff and read a one-key answer.

Only rendering and keys live here; the review itself is :mod:`devfix.review`.
"""

from __future__ import annotations

import os
import sys

import click

from devfix import review
from devfix.cache import CACHE_FOLDER
from devfix.errors import InputError
from devfix.report import EXIT_CLEAN, EXIT_FAILED, EXIT_FINDINGS, EXIT_INTERRUPTED, failure_line
from devfix.settings import Settings
from devfix.types import Applicability, FileStatus

PROMPT = "Apply this fix? [y,n,a,d,A,e,u,q,?] "
KEYS = "ynadAeuq?"

HELP = """\
y - apply this fix
n - do not apply this fix
a - apply this fix and all later fixes in this file
d - do not apply this fix nor any later fix in this file
A - apply this fix and every remaining fix of this rule, in every file
e - edit the file's proposed result for this fix in $EDITOR (your edit becomes the answer)
u - undo the previous answer
q - quit; the answers given so far are applied, the rest left as they are
? - print this help"""


def _color() -> bool | None:
    return False if os.environ.get("NO_COLOR") else None


def _echo(text: str = "", *, nl: bool = True) -> None:
    click.echo(text, nl=nl, color=_color())


def render_diff(diff: str) -> str:
    """The diff with git's colours: headers bold, hunks cyan, removals red, additions green."""
    out: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            out.append(click.style(line, bold=True))
        elif line.startswith("@@"):
            out.append(click.style(line, fg="cyan"))
        elif line.startswith("-"):
            out.append(click.style(line, fg="red"))
        elif line.startswith("+"):
            out.append(click.style(line, fg="green"))
        else:
            out.append(line)
    return "\n".join(out)


def show_proposal(item: review.Proposal, progress: tuple[int, int]) -> None:
    """The proposal's header, message and, for a fix, its diff (`devfix verify --fix -i` too)."""
    if item.fixable:
        number, total = progress
        counter = click.style(f"[{number}/{total}]", bold=True)
        if item.applicability is Applicability.UNSAFE:
            kind = click.style("UNSAFE fix: it may change what the program does", fg="yellow")
        else:
            kind = "safe fix"
    else:
        counter = click.style("[info]", bold=True)
        kind = click.style("display-only: not fixed automatically", fg="magenta")
    _echo()
    _echo(f"{counter} {click.style(item.location, bold=True)}  {item.code} {item.name}  ({kind})")
    _echo(item.message)
    if item.fixable:
        _echo(f"Fix: {item.fix_title}")
        _echo(render_diff(item.diff))


def read_key(prompt: str = PROMPT) -> str:
    """One key from the terminal after ``prompt`` (EOFError when stdin is closed)."""
    _echo(click.style(prompt, fg="blue", bold=True), nl=False)
    key = click.getchar()
    _echo(key if key.isprintable() else "")
    return key


def _edit(session: review.ReviewSession) -> bool:
    """Open the proposed result in $EDITOR; True if the edit was taken as the answer."""
    proposed = session.proposed_text()
    try:
        edited = click.edit(proposed, extension=".py", require_save=True)
    except click.ClickException as error:
        _echo(f"devfix: the editor failed ({error.format_message()}); back to the prompt.")
        return False
    if edited is None or edited == proposed:
        _echo("No edit was saved; back to the prompt (y takes the fix as shown).")
        return False
    try:
        session.edited(edited)
    except InputError as error:
        _echo(f"devfix: {error}; the edit was discarded.")
        return False
    return True


def _save(state: review.ReviewState, session: review.ReviewSession, warned: list[bool]) -> None:
    try:
        state.save(session.state_entries(), review.session_keys(session))
    except OSError as error:
        if not warned:
            warned.append(True)
            click.echo(f"devfix: warning: cannot save the review state: {error}", err=True)


def run_review(paths: list[str], settings: Settings, *, resume: bool) -> int:
    """The whole interactive session; returns the exit code."""
    if not sys.stdin.isatty():
        click.echo(
            "devfix: error: --interactive needs a terminal on stdin (it reads one key per "
            "answer); use `devfix apply --diff` to see the fixes without prompts.",
            err=True,
        )
        return EXIT_FAILED
    try:
        state = review.ReviewState.load(_state_file(settings))
    except InputError as error:
        if resume:
            click.echo(f"devfix: error: {error}", err=True)
            return EXIT_FAILED
        click.echo(f"devfix: warning: {error}; it will be replaced", err=True)
        state = review.ReviewState(_state_file(settings))
    try:
        session, failed = _analyse(paths, settings, state, resume)
        _loop(session, state, [])
    except KeyboardInterrupt:
        _echo()
        click.echo(
            "devfix: interrupted; nothing was written (the answers so far are saved for --resume).",
            err=True,
        )
        return EXIT_INTERRUPTED
    return _finish(session, failed)


def _state_file(settings: Settings) -> str:
    """The review answers live with devfix's other state, in `.devfix_cache/`."""
    folder = settings.cache_dir or os.path.join(settings.root, CACHE_FOLDER)
    return os.path.join(folder, review.STATE_FILE_NAME)


def _analyse(
    paths: list[str], settings: Settings, state: review.ReviewState, resume: bool
) -> tuple[review.ReviewSession, int]:
    analyses = list(review.analyse_paths(paths, settings))
    failed = 0
    for analysis in analyses:
        if analysis.failed:
            failed += 1
            click.echo(f"{analysis.path}: error: {analysis.error}", err=True)
    session = review.ReviewSession(
        analyses, settings, rejected_before=state.rejected() if resume else ()
    )
    _, total = session.progress()
    intro = f"devfix: {total} fix{'' if total == 1 else 'es'} to review"
    if session.skipped_earlier:
        intro += f" ({session.skipped_earlier} rejected in an earlier session, not asked again)"
    _echo(intro + ". Press ? for help.")
    return session, failed


def _loop(session: review.ReviewSession, state: review.ReviewState, warned: list[bool]) -> None:
    shown: object = None
    while True:
        item = session.current()
        if item is None:
            return
        if not item.fixable:
            show_proposal(item, session.progress())
            session.acknowledge()
            continue
        if shown is not item:
            show_proposal(item, session.progress())
            shown = item
        try:
            key = read_key()
        except EOFError:
            key = "q"
        if key == "?":
            _echo(HELP)
        elif key == "u":
            if not session.can_undo():
                _echo("Nothing to undo.")
            else:
                session.undo()
                shown = None
                _save(state, session, warned)
        elif key == "e":
            if _edit(session):
                _save(state, session, warned)
        elif key in ("y", "n", "a", "d", "A", "q"):
            session.answer(key)
            if key != "q":
                _save(state, session, warned)
        else:
            _echo(HELP)


def _finish(session: review.ReviewSession, failed: int) -> int:
    results = review.write_reviewed(session)
    changed = 0
    for result in results:
        if result.status is FileStatus.FAILED:
            failed += 1
            click.echo(failure_line(result), err=True)
        elif result.status is FileStatus.CHANGED:
            changed += 1
        if result.reason and result.status is not FileStatus.FAILED:
            click.echo(f"{result.path}: warning: {result.reason}", err=True)
    counts = session.counts()
    parts = [
        f"{counts['accepted']} fix{'' if counts['accepted'] == 1 else 'es'} accepted",
        f"{counts['rejected']} rejected",
    ]
    if counts["unanswered"]:
        parts.append(f"{counts['unanswered']} not answered")
    if session.skipped_earlier:
        parts.append(f"{session.skipped_earlier} rejected earlier")
    if counts["display_only"]:
        parts.append(f"{counts['display_only']} to fix by hand")
    parts.append(f"{changed} file{'' if changed == 1 else 's'} changed")
    if failed:
        parts.append(f"{failed} file{'' if failed == 1 else 's'} failed")
    click.echo("devfix: " + ", ".join(parts) + ".", err=True)
    if failed:
        return EXIT_FAILED
    left = (
        counts["rejected"] + counts["unanswered"] + counts["display_only"] + session.skipped_earlier
    )
    return EXIT_FINDINGS if left else EXIT_CLEAN
