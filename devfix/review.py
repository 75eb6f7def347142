"""Interactive review of fixes (`devfix apply -i`): everything except the terminal.

The flow follows Fixit's review protocol (the engine proposes one violation at a time and is
told yes or no), extended with what a `git add -p` user expects: whole-file and whole-rule
answers, editing, undo, quitting, and answers that persist between sessions.

1. :func:`analyse_paths` analyses every file, in parallel, into :class:`FileAnalysis` values
   (plain data: one :class:`Proposal` per finding, with the unified diff of that fix alone).
2. :class:`ReviewSession` walks the proposals: :meth:`ReviewSession.current` is the one to show,
   :meth:`ReviewSession.answer` takes a key (``y n a d A u``), :meth:`ReviewSession.edited` takes
   the user's edit of a proposal, :meth:`ReviewSession.undo` takes back the last answer.
3. :func:`write_reviewed` writes each file once, atomically, with exactly the accepted fixes.

A proposal is known by a key that does not depend on line numbers: the file, the rule, the
text of the lines the finding covers (stripped), its message (which names the proposed
device) and, for identical twins, their order. Rejected keys are kept in a state file
(:class:`ReviewState`) so that `--resume` does not ask about them again.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import libcst as cst

from devfix import sources
from devfix.cache import ensure_cache_folder
from devfix.edits import apply_findings
from devfix.errors import InputError, InternalError
from devfix.fix_loop import (
    Accept,
    LineMap,
    analyse_source,
    fix_source,
    in_file_style,
    same_finding,
)
from devfix.report import plural
from devfix.settings import OptionsLike, Settings
from devfix.source_file import SourceFile, open_source, source_from_document
from devfix.types import Applicability, FileResult, FileStatus, Finding

#: The file answers are kept in, inside devfix's state folder (`.devfix_cache/`).
STATE_FILE_NAME = "review.json"
STATE_VERSION = 1
#: Lines of context around each fix's diff.
CONTEXT_LINES = 3
#: Rounds of applying accepted fixes that overlap each other.
MAX_APPLY_ROUNDS = 5


class Answer(str, enum.Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    SEEN = "seen"  #: a display-only finding that was shown
    EDITED = "edited"  #: accepted, and already part of the user's edit of the file


@dataclass(frozen=True)
class Proposal:
    """One item of the review: a finding, with the diff of its fix alone (none if display-only)."""

    path: str
    key: str
    code: str
    name: str
    message: str
    fix_title: str
    applicability: Applicability
    line: int
    col: int
    cell: int | None
    diff: str

    @property
    def fixable(self) -> bool:
        return bool(self.diff) and self.applicability is not Applicability.DISPLAY_ONLY

    @property
    def location(self) -> str:
        where = f"{self.path}:cell {self.cell}" if self.cell is not None else self.path
        return f"{where}:{self.line}:{self.col}"


@dataclass(frozen=True)
class FileAnalysis:
    """What the analysis made of one file; plain data, so it crosses process boundaries."""

    path: str
    #: The file's text as read (what must still be on disk when it is written).
    original: str
    #: The Python code the proposals are computed on (a notebook's code cells as one module).
    code: str
    proposals: tuple[Proposal, ...] = ()
    error: str = ""
    internal_error: bool = False

    @property
    def failed(self) -> bool:
        return bool(self.error)


def _display_path(path: str) -> str:
    return os.path.relpath(os.path.abspath(path)).replace(os.sep, "/")


def proposal_keys(path: str, code: str, findings: Sequence[Finding]) -> list[str]:
    """Keys for `findings` (in `code` of file `path`) that survive edits elsewhere in the file."""
    lines = code.splitlines()
    seen: dict[str, int] = {}
    keys: list[str] = []
    for finding in findings:
        covered = lines[finding.line - 1 : finding.end_line]
        snippet = "\n".join(line.strip() for line in covered)
        base = "\0".join((_display_path(path), finding.code, snippet, finding.message))
        twin = seen.get(base, 0)
        seen[base] = twin + 1
        keys.append(hashlib.sha256(f"{base}\0{twin}".encode()).hexdigest()[:24])
    return keys


def _proposals(
    path: str, code: str, settings: Settings, source: SourceFile
) -> tuple[Proposal, ...]:
    module, findings = analyse_source(code, settings, path=path)
    if module is None:
        return ()
    keys = proposal_keys(path, code, findings)
    shown_path = _display_path(path)
    out: list[Proposal] = []
    for finding, key in zip(findings, keys):
        diff = ""
        if finding.has_fix:
            rewritten, applied = apply_findings(module, [finding])
            if applied and rewritten.code != code:
                # The diff shown is the one "apply" writes, long lines wrapped as in the file.
                written = in_file_style(path, code, module, rewritten)
                diff = source.review_diff(code, written, shown_path, CONTEXT_LINES)
        located = source.locate(finding, code)
        out.append(
            Proposal(
                path=path,
                key=key,
                code=finding.code,
                name=finding.name,
                message=finding.message,
                fix_title=finding.fix_title,
                applicability=finding.applicability,
                line=located.line,
                col=located.col,
                cell=located.cell,
                diff=diff,
            )
        )
    return tuple(out)


def analyse_file(path: str, options: OptionsLike) -> FileAnalysis:
    """Every finding of one file as a proposal; errors become a failed analysis."""
    settings = Settings.resolve(options)
    try:
        source = open_source(path)
        code = source.code
        proposals = _proposals(path, code, settings, source)
        return FileAnalysis(path, source.document.text, code, proposals)
    except InputError as error:
        return FileAnalysis(path, "", "", error=str(error))
    except InternalError as error:
        return FileAnalysis(path, "", "", error=str(error), internal_error=True)
    except Exception as error:  # a pass crashed: report it, keep going
        return FileAnalysis(
            path, "", "", error=f"{type(error).__name__}: {error}", internal_error=True
        )


def _analyse_job(job: tuple[str, Settings]) -> FileAnalysis:
    return analyse_file(*job)


def analyse_paths(paths: Sequence[str], options: OptionsLike) -> Iterator[FileAnalysis]:
    """:func:`analyse_file` on every source file under `paths`, in parallel processes."""
    settings = Settings.resolve(options)
    files: list[str] = []
    excludes = sources.Excludes(settings.exclude, settings.extend_exclude, settings.root)
    for entry in sources.discover(paths, excludes):
        if isinstance(entry, FileResult):
            yield FileAnalysis(entry.path, "", "", error=entry.reason)
        else:
            files.append(entry)
    jobs = settings.workers
    work = [(path, settings) for path in files]
    if jobs <= 1 or len(files) < 4:
        yield from map(_analyse_job, work)
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
        yield from pool.map(_analyse_job, work)


# -- applying accepted proposals --------------------------------------------------------------


#: Where a finding is and what it says: enough to find it again in another run's findings.
Spot = tuple[int, int, int, int, str, str]


def spot(finding: Finding) -> Spot:
    return (
        finding.line,
        finding.col,
        finding.end_line,
        finding.end_col,
        finding.code,
        finding.message,
    )


def _accepting(spots: set[tuple[int, int, int, int, str, str]]) -> Accept:
    return lambda finding: spot(finding) in spots


def apply_keys(
    code: str, keys: Iterable[str], settings: Settings, path: str
) -> tuple[str, set[str]]:
    """`code` with the fixes whose proposal keys are in `keys`; also the keys applied.

    Each round applies the wanted fixes that do not overlap (one engine round, nothing else).
    A wanted fix that overlapped one applied before it is followed onto the new code (by rule,
    message and position, as the fix loop follows findings) and applied in the next round; its
    key may no longer be computable there (identical twins are numbered by what is left).
    """
    wanted = set(keys)
    _module, findings = analyse_source(code, settings, path=path)
    pending = {
        key: finding
        for finding, key in zip(findings, proposal_keys(path, code, findings))
        if key in wanted
    }
    done: set[str] = set()
    for _round in range(MAX_APPLY_ROUNDS):
        if not pending:
            break
        spots = {spot(finding): key for key, finding in pending.items()}
        result = fix_source(code, settings, path=path, accept=_accepting(set(spots)))
        applied = {spots[spot(f)] for f in result.applied if spot(f) in spots}
        if not applied:
            break
        done |= applied
        left = {key: finding for key, finding in pending.items() if key not in applied}
        pending = {}
        if left:
            _module, fresh = analyse_source(result.output, settings, path=path)
            moved = LineMap(code, result.output)
            for key, finding in left.items():
                match = same_finding(
                    finding, [f for f in fresh if f not in pending.values()], moved
                )
                if match is None:
                    done.add(key)  # an accepted fix made it go away
                else:
                    pending[key] = match
        code = result.output
    return code, done


# -- the session ----------------------------------------------------------------------------


@dataclass
class _FileState:
    analysis: FileAnalysis
    code: str
    items: list[Proposal]
    answers: dict[str, Answer] = field(default_factory=dict)
    edited: bool = False
    #: Answers given in an earlier session (--resume): skipped, never undone.
    earlier: set[str] = field(default_factory=set)

    def snapshot(self) -> tuple[str, list[Proposal], dict[str, Answer], bool]:
        return self.code, list(self.items), dict(self.answers), self.edited


@dataclass
class _Action:
    """One keystroke's worth of answers, so that `u` can take it back whole."""

    cursor: tuple[int, int]
    changes: list[tuple[int, str, Answer | None]] = field(default_factory=list)
    rule: str | None = None
    snapshot: tuple[int, tuple[str, list[Proposal], dict[str, Answer], bool]] | None = None
    notice_only: bool = False


class ReviewSession:
    """The walk over every proposal, one at a time, in file order then position order."""

    def __init__(
        self,
        analyses: Iterable[FileAnalysis],
        options: OptionsLike,
        *,
        rejected_before: Iterable[str] = (),
    ) -> None:
        self.settings = Settings.resolve(options)
        rejected = set(rejected_before)
        self.files: list[_FileState] = []
        for analysis in analyses:
            if analysis.failed:
                continue
            state = _FileState(analysis, analysis.code, list(analysis.proposals))
            for item in state.items:
                if item.fixable and item.key in rejected:
                    state.answers[item.key] = Answer.REJECT
                    state.earlier.add(item.key)
            self.files.append(state)
        self.history: list[_Action] = []
        self.auto_rules: set[str] = set()
        self.quit = False
        self._cursor = (0, 0)

    # -- where we are

    def _advance(self) -> None:
        file_index, item_index = self._cursor
        while file_index < len(self.files):
            state = self.files[file_index]
            while item_index < len(state.items):
                if state.items[item_index].key not in state.answers:
                    self._cursor = (file_index, item_index)
                    return
                item_index += 1
            file_index, item_index = file_index + 1, 0
        self._cursor = (file_index, 0)

    def current(self) -> Proposal | None:
        """The proposal to show next, or None when the review is over."""
        if self.quit:
            return None
        self._advance()
        file_index, item_index = self._cursor
        if file_index >= len(self.files):
            return None
        return self.files[file_index].items[item_index]

    def progress(self) -> tuple[int, int]:
        """(number of the current fixable proposal, how many fixable proposals there are)."""
        number = total = 0
        for file_index, state in enumerate(self.files):
            for item_index, item in enumerate(state.items):
                if not item.fixable or item.key in state.earlier:
                    continue
                total += 1
                if (file_index, item_index) <= self._cursor:
                    number += 1
        return number, total

    @property
    def skipped_earlier(self) -> int:
        return sum(len(state.earlier) for state in self.files)

    # -- answers

    def acknowledge(self) -> None:
        """Mark the current display-only proposal as shown."""
        item = self.current()
        assert item is not None and not item.fixable
        file_index, _ = self._cursor
        state = self.files[file_index]
        action = _Action(self._cursor, notice_only=True)
        action.changes.append((file_index, item.key, state.answers.get(item.key)))
        state.answers[item.key] = Answer.SEEN
        self.history.append(action)

    def answer(self, key: str) -> None:
        """Apply one of the keys `y n a d A q` to the current proposal."""
        if key == "q":
            self.quit = True
            return
        item = self.current()
        assert item is not None and item.fixable
        file_index, item_index = self._cursor
        action = _Action(self._cursor)
        if key in ("y", "n"):
            self._set(action, file_index, item.key, Answer.ACCEPT if key == "y" else Answer.REJECT)
        elif key in ("a", "d"):
            verdict = Answer.ACCEPT if key == "a" else Answer.REJECT
            state = self.files[file_index]
            for other in state.items[item_index:]:
                if other.fixable and other.key not in state.answers:
                    self._set(action, file_index, other.key, verdict)
        elif key == "A":
            action.rule = item.code if item.code not in self.auto_rules else None
            self.auto_rules.add(item.code)
            for index in range(file_index, len(self.files)):
                state = self.files[index]
                start = item_index if index == file_index else 0
                for other in state.items[start:]:
                    if other.fixable and other.code == item.code and other.key not in state.answers:
                        self._set(action, index, other.key, Answer.ACCEPT)
        else:
            raise ValueError(f"not an answer key: {key!r}")
        self.history.append(action)

    def _set(self, action: _Action, file_index: int, key: str, verdict: Answer) -> None:
        state = self.files[file_index]
        action.changes.append((file_index, key, state.answers.get(key)))
        state.answers[key] = verdict

    def can_undo(self) -> bool:
        return any(not action.notice_only for action in self.history)

    def undo(self) -> Proposal | None:
        """Take back the last answer (and the notices shown after it); the proposal it was for."""
        while self.history:
            action = self.history.pop()
            for file_index, key, previous in reversed(action.changes):
                answers = self.files[file_index].answers
                if previous is None:
                    answers.pop(key, None)
                else:
                    answers[key] = previous
            if action.rule is not None:
                self.auto_rules.discard(action.rule)
            if action.snapshot is not None:
                file_index, (code, items, answers, edited) = action.snapshot
                state = self.files[file_index]
                state.code, state.items, state.answers, state.edited = code, items, answers, edited
            self._cursor = action.cursor
            if not action.notice_only:
                return self.current()
        return None

    # -- editing

    def proposed_text(self) -> str:
        """The current file's code with the fixes accepted so far plus the current one."""
        item = self.current()
        assert item is not None
        state = self.files[self._cursor[0]]
        keys = {k for k, v in state.answers.items() if v is Answer.ACCEPT} | {item.key}
        code, _ = apply_keys(state.code, keys, self.settings, state.analysis.path)
        return code

    def edited(self, text: str) -> None:
        """Take the user's edit of :meth:`proposed_text` as the answer to the current proposal.

        The file's accepted fixes so far are part of the edit; the file's later proposals are
        computed again on the edited code. Raises InputError if the edit does not parse.
        """
        item = self.current()
        assert item is not None
        file_index, item_index = self._cursor
        state = self.files[file_index]
        path = state.analysis.path
        source = _source_of(state.analysis)
        try:
            cst.parse_module(text)
        except cst.ParserSyntaxError as error:
            raise InputError(
                f"the edited code does not parse (line {error.raw_line}): "
                f"{error.message.splitlines()[0]}"
            ) from None
        try:
            source.render(text)
        except InternalError as error:
            raise InputError(f"the edit broke the notebook's cell markers ({error})") from None
        action = _Action(self._cursor, snapshot=(file_index, state.snapshot()))
        fresh = list(_proposals(path, text, self.settings, source))
        fresh_keys = {new.key for new in fresh}
        # What was accepted before (and this fix) is part of the edited code now.
        answers: dict[str, Answer] = {
            key: Answer.EDITED if verdict is Answer.ACCEPT else verdict
            for key, verdict in state.answers.items()
        }
        answers[item.key] = Answer.EDITED
        for new in fresh:
            if new.fixable and new.key not in answers and new.code in self.auto_rules:
                answers[new.key] = Answer.ACCEPT
        kept = [old for old in state.items[:item_index] if old.key not in fresh_keys]
        if item.key not in fresh_keys:
            kept.append(item)
        state.code, state.edited = text, True
        state.items = kept + fresh
        state.answers = answers
        self._cursor = (file_index, 0)  # the file's items were renumbered
        self.history.append(action)

    # -- results

    def plans(self) -> Iterator[tuple[FileAnalysis, str, set[str], bool]]:
        """(analysis, code to start from, keys to apply, edited) for every file."""
        for state in self.files:
            accepted = {
                key
                for key, verdict in state.answers.items()
                if verdict is Answer.ACCEPT and _in(state.items, key) and key not in state.earlier
            }
            yield state.analysis, state.code, accepted, state.edited

    def counts(self) -> dict[str, int]:
        """Accepted, rejected, unanswered (fixable) and display-only proposals."""
        tally = {"accepted": 0, "rejected": 0, "unanswered": 0, "display_only": 0}
        for state in self.files:
            for item in state.items:
                verdict = state.answers.get(item.key)
                if not item.fixable:
                    tally["display_only"] += 1
                elif item.key in state.earlier:
                    continue
                elif verdict in (Answer.ACCEPT, Answer.EDITED):
                    tally["accepted"] += 1
                elif verdict is Answer.REJECT:
                    tally["rejected"] += 1
                else:
                    tally["unanswered"] += 1
        return tally

    def state_entries(self) -> dict[str, dict[str, object]]:
        """What the state file records: every answer given (rejections matter for --resume)."""
        entries: dict[str, dict[str, object]] = {}
        for state in self.files:
            for item in state.items:
                verdict = state.answers.get(item.key)
                if verdict in (Answer.ACCEPT, Answer.EDITED, Answer.REJECT) and item.fixable:
                    entries[item.key] = {
                        "answer": "rejected" if verdict is Answer.REJECT else "accepted",
                        "path": _display_path(item.path),
                        "code": item.code,
                        "location": item.location,
                    }
        return entries


def _in(items: Iterable[Proposal], key: str) -> bool:
    return any(item.key == key for item in items)


def _not_applied(session: ReviewSession, path: str, keys: set[str]) -> str:
    """Which accepted fixes could not be applied, and why (empty: none)."""
    if not keys:
        return ""
    items = [item for state in session.files for item in state.items if item.key in keys]
    where = ", ".join(f"{item.location} {item.code}" for item in items) or path
    return (
        f"{plural(len(keys), 'accepted fix')} not applied ({where}): it overlaps an accepted fix "
        "that changed the same code; run `devfix apply -i` again to review it on the new code"
    )


def _source_of(analysis: FileAnalysis) -> SourceFile:
    """The analysed file as read (its text on disk must still be `analysis.original`)."""
    document = sources.Document(analysis.path, analysis.original, "utf-8")
    return source_from_document(document, check=False)


def write_reviewed(session: ReviewSession) -> list[FileResult]:
    """Write every file that has accepted fixes (or an edit), once, atomically.

    A file that changed on disk since it was analysed is not written (FAILED).
    """
    results: list[FileResult] = []
    for analysis, code, keys, edited in session.plans():
        path = analysis.path
        if not keys and not edited:
            results.append(FileResult(path, FileStatus.UNCHANGED))
            continue
        try:
            new_code, applied = apply_keys(code, keys, session.settings, path)
            output = _source_of(analysis).render(new_code)
            document = sources.read(path)
            if document.text != analysis.original:
                raise InputError("changed on disk during the review; not written")
            if output != analysis.original:
                sources.write_atomic(path, document.with_text(output))
        except InputError as error:
            results.append(FileResult(path, FileStatus.FAILED, reason=str(error)))
            continue
        except InternalError as error:
            results.append(
                FileResult(path, FileStatus.FAILED, reason=str(error), internal_error=True)
            )
            continue
        reason = _not_applied(session, path, keys - applied)
        status = FileStatus.CHANGED if output != analysis.original else FileStatus.UNCHANGED
        results.append(FileResult(path, status, reason=reason))
    return results


# -- the state file ---------------------------------------------------------------------------


@dataclass
class ReviewState:
    """The answers of earlier sessions, by proposal key."""

    path: str
    entries: dict[str, dict[str, object]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str) -> ReviewState:
        """The saved answers; a missing file is an empty state, a broken one an InputError."""
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: cannot read the review state ({error})") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise InputError(f"{path}: not a devfix review state (version {STATE_VERSION})")
        answers = data.get("answers")
        if not isinstance(answers, dict):
            raise InputError(f"{path}: not a devfix review state (no answers)")
        return cls(path, {str(k): dict(v) for k, v in answers.items() if isinstance(v, dict)})

    def rejected(self) -> set[str]:
        return {key for key, entry in self.entries.items() if entry.get("answer") == "rejected"}

    def save(self, session_entries: dict[str, dict[str, object]], keys: Iterable[str]) -> None:
        """Merge this session's answers (for `keys`, its proposals) and write atomically."""
        merged = {k: v for k, v in self.entries.items() if k not in set(keys)}
        merged.update(session_entries)
        payload = json.dumps({"version": STATE_VERSION, "answers": merged}, indent=1) + "\n"
        directory = os.path.dirname(os.path.abspath(self.path))
        ensure_cache_folder(directory)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".review.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(payload)
            os.chmod(temporary, 0o644)
            os.replace(temporary, self.path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


def session_keys(session: ReviewSession) -> set[str]:
    """Every proposal key of the session (earlier answers for them are superseded)."""
    return {item.key for state in session.files for item in state.items}


__all__ = [
    "Answer",
    "FileAnalysis",
    "Proposal",
    "ReviewSession",
    "ReviewState",
    "analyse_file",
    "analyse_paths",
    "apply_keys",
    "proposal_keys",
    "session_keys",
    "write_reviewed",
]
