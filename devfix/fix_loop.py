"""The per-file fix loop: run the selected passes on a text, apply their fixes, repeat.

:func:`check_source` only reports; :func:`fix_source` applies the fixes the settings allow (or
the ones a reviewer accepted) round after round until nothing changes, and says which findings
were fixed and which are left. Both are pure and may raise (:class:`InputError` for code that does
not parse, :class:`InternalError` when the fixes break the code or never settle).

One account of what happened feeds every output: each finding of the original text is followed
through the rounds (by rule, message and position, across the lines the rewrites move) and ends
either fixed (its own fix was applied, or another fix made it go away) or left. A finding that
first appears on rewritten code (a fix made it visible) is followed the same way. All of them are
located in the original text, where `check` reported them.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst

from devfix import compat, indentation, limits
from devfix.context import FileContext
from devfix.edits import apply_findings, drop_imports_made_unused
from devfix.errors import InputError, InternalError, MixedIndentation
from devfix.parsing import deep_recursion as _deep_recursion
from devfix.parsing import parse, with_deep_recursion
from devfix.positions import module_code
from devfix.settings import OptionsLike, Settings
from devfix.suppression import is_suppressed as _is_suppressed
from devfix.tree import visit_all
from devfix.types import Finding, Fixability, SourceResult
from devfix.wrapping import line_length_for, wrap_long_lines

if TYPE_CHECKING:
    from devfix.rule import Rule

#: Rounds of "run every pass, apply what it found"; ruff uses 100, devfix's passes converge in 2-3.
MAX_ROUNDS = 10

#: A reviewer's answer for one finding: True applies its fix.
Accept = Callable[[Finding], bool]


@with_deep_recursion
def check_source(text: str, path: str = "<string>", options: OptionsLike = None) -> list[Finding]:
    """The findings of every selected pass on `text`; nothing is applied."""
    settings = Settings.resolve(options)
    if not _mentions_trigger(text, settings):
        return []
    try:
        module = parse(text, path)
    except MixedIndentation:
        text = indentation.expanded(text)
        module = parse(text, path)
    return limits.mark_unfixable(module, text, _run_passes(module, text, path, settings))


def analyse_source(
    text: str, options: OptionsLike = None, *, path: str = "<string>"
) -> tuple[cst.Module | None, list[Finding]]:
    """The parsed module and the findings on it, for callers that apply findings one at a time
    with :func:`devfix.edits.apply_findings` (interactive review). No module when no trigger word
    occurs."""
    settings = Settings.resolve(options)
    if not _mentions_trigger(text, settings):
        return None, []
    module = parse(text, path)
    return module, _run_passes(module, text, path, settings)


@with_deep_recursion
def fix_source(
    text: str,
    options: OptionsLike = None,
    *,
    path: str = "<string>",
    accept: Accept | None = None,
) -> SourceResult:
    """Run the selected passes and apply their fixes until nothing changes.

    Without `accept`, the fixes the settings allow are applied, round after round. With it,
    exactly the findings it accepts are applied (unsafe ones too), in one round. Code indented
    with tabs and spaces mixed is fixed as its expanded copy and written back in its own
    indentation (:mod:`devfix.indentation`).

    Raises :class:`InputError` if `text` does not parse and :class:`InternalError` if the fixes
    produce code that does not parse or keep changing it.
    """
    try:
        return _fix_text(text, options, path=path, accept=accept)
    except MixedIndentation:
        spaced = indentation.expanded(text)
        result = _fix_text(spaced, options, path=path, accept=accept)
    output = text if result.output == spaced else indentation.restored(text, spaced, result.output)
    problem = compat.rewrite_problem(text, output, path) if output != text else None
    if problem is not None:
        codes = ", ".join(sorted({f.code for f in result.applied}))
        raise InternalError(f"fixes by {codes} produced code that {problem}")
    return replace(result, source=text, output=output)


def _fix_text(text: str, options: OptionsLike, *, path: str, accept: Accept | None) -> SourceResult:
    settings = Settings.resolve(options)
    if not _mentions_trigger(text, settings):
        return SourceResult(text, text, (), (), 0)
    module = parse(text, path)
    history = _History(text)
    current_text, current_module = text, module
    first_findings: list[Finding] | None = None
    for _round in range(MAX_ROUNDS):
        findings = _run_passes(current_module, current_text, path, settings)
        if first_findings is None:
            first_findings = findings
        history.found(findings)
        candidates = [f for f in history.open_findings() if _wanted(f, settings, accept)]
        if not candidates:
            break
        rewritten, applied = apply_findings(current_module, candidates)
        new_text = module_code(rewritten)
        if new_text == current_text:
            break
        try:
            current_module = cst.parse_module(new_text)
        except cst.ParserSyntaxError as error:
            codes = ", ".join(sorted({f.code for f in applied}))
            first_line = error.message.splitlines()[0]
            raise InternalError(
                f"fixes by {codes} produced code that does not parse ({first_line})"
            ) from None
        history.applied(applied, new_text)
        current_text = new_text
        if accept is not None:
            # A reviewed run applies exactly what was accepted: no second round of unasked fixes.
            history.found(_run_passes(current_module, current_text, path, settings))
            break
    else:
        codes = ", ".join(sorted(history.fixed_codes()))
        raise InternalError(f"fixes by {codes} did not converge after {MAX_ROUNDS} rounds")
    if current_text != text and module_code(module) != text:
        raise InputError(
            "libcst cannot reproduce this file byte for byte, so devfix will not rewrite it"
        )
    if current_text != text and (os.path.isfile(path) or path == "-"):
        # A file's rewrite (or stdin's, configured from the working folder) follows its own
        # style: imports the fixes left unused go, and new long lines are wrapped to its
        # configured line length. Text with no file behind it is left as the fixes made it.
        current_text = in_file_style(path, text, module, current_module)
    if current_text != text:
        problem = compat.rewrite_problem(text, current_text, path)
        if problem is not None:
            codes = ", ".join(sorted(history.fixed_codes()))
            raise InternalError(f"fixes by {codes} produced code that {problem}")
    fixed, left = history.outcome()
    hidden = sum(1 for f in left if settings.fixability(f) is Fixability.NEEDS_UNSAFE)
    if accept is not None:
        hidden = 0
    return SourceResult(text, current_text, tuple(first_findings or ()), fixed, hidden, left)


def apply_given(text: str, module: cst.Module, findings: Sequence[Finding], *, path: str) -> str:
    """`text` (parsed as `module`) with exactly these findings' edits, made outside the passes
    (`devfix verify --fix`'s fixes from a run), written as `fix_source` writes a fix: every
    group whole or the call fails, the result parsed again, in the file's style, and checked to
    compile with the running Python and the project's oldest one.

    Raises :class:`InputError` when libcst cannot reproduce `text` byte for byte and
    :class:`InternalError` when the edits conflict or break the code.
    """
    if module_code(module) != text:
        raise InputError(
            "libcst cannot reproduce this file byte for byte, so devfix will not rewrite it"
        )
    rewritten, applied = apply_findings(module, findings)
    if len(applied) != len(findings):
        raise InternalError("the edits overlap")
    new_text = module_code(rewritten)
    if new_text == text:
        return text
    codes = ", ".join(sorted({f.code for f in findings}))
    try:
        rewritten = cst.parse_module(new_text)
    except cst.ParserSyntaxError as error:
        first_line = error.message.splitlines()[0]
        raise InternalError(
            f"fixes by {codes} produced code that does not parse ({first_line})"
        ) from None
    if os.path.isfile(path):
        new_text = in_file_style(path, text, module, rewritten)
    problem = compat.rewrite_problem(text, new_text, path)
    if problem is not None:
        raise InternalError(f"fixes by {codes} produced code that {problem}")
    return new_text


def in_file_style(path: str, text: str, module: cst.Module, rewritten: cst.Module) -> str:
    """The code of `rewritten` (fixes applied to `module`, the parse of `text`) in the style of
    file `path`: imports the fixes left unused dropped, new long lines wrapped to its length."""
    tidied = drop_imports_made_unused(module, rewritten).code
    return wrap_long_lines(text, tidied, line_length_for(path))


def _wanted(finding: Finding, settings: Settings, accept: Accept | None) -> bool:
    if not finding.has_fix:
        return False
    if accept is not None:
        return accept(finding)
    return settings.writes(finding)


class LineMap:
    """Maps line numbers of one text to the lines of another it was rewritten into."""

    def __init__(self, before: str, after: str) -> None:
        matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines())
        self._blocks = matcher.get_opcodes()

    def __call__(self, line: int) -> int:
        index = line - 1
        for tag, start, end, new_start, new_end in self._blocks:
            if start <= index < end or (tag == "insert" and index == start):
                if tag == "equal":
                    return new_start + (index - start) + 1
                return new_start + min(index - start, max(new_end - new_start - 1, 0)) + 1
        return line


@dataclass
class _Track:
    """One finding followed through the rounds."""

    finding: Finding
    #: The index in _History.texts of the text `finding` is located in.
    text_index: int
    fixed: bool = False


class _History:
    """The findings of every round, matched up: what was fixed, what is left."""

    def __init__(self, text: str) -> None:
        self.texts = [text]
        self.open: list[_Track] = []
        self.closed: list[_Track] = []
        self._started = False

    def open_findings(self) -> list[Finding]:
        return [track.finding for track in self.open]

    def found(self, findings: Sequence[Finding]) -> None:
        """The findings of the passes on the newest text."""
        index = len(self.texts) - 1
        if not self._started:
            self._started = True
            self.open = [_Track(finding, index) for finding in findings]
            return
        moved = LineMap(self.texts[index - 1], self.texts[index])
        unmatched = list(findings)
        still_open: list[_Track] = []
        for track in self.open:
            match = same_finding(track.finding, unmatched, moved)
            if match is None:
                # Another fix made it go away (a batch moved by the fix of a data pipeline).
                track.fixed = True
                self.closed.append(track)
                continue
            unmatched.remove(match)
            track.finding, track.text_index = match, index
            still_open.append(track)
        still_open.extend(_Track(finding, index) for finding in unmatched)
        self.open = still_open

    def applied(self, findings: Sequence[Finding], new_text: str) -> None:
        """`findings` (open ones) were applied, giving `new_text`."""
        done = {id(finding) for finding in findings}
        for track in self.open:
            if id(track.finding) in done:
                track.fixed = True
                self.closed.append(track)
        self.open = [track for track in self.open if not track.fixed]
        self.texts.append(new_text)

    def fixed_codes(self) -> set[str]:
        return {track.finding.code for track in self.closed}

    def outcome(self) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
        """(fixed, left): every finding located in the original text, in file order."""
        maps: dict[int, LineMap] = {}

        def located(track: _Track) -> Finding:
            if track.text_index == 0:
                return track.finding
            back = maps.get(track.text_index)
            if back is None:
                back = maps[track.text_index] = LineMap(self.texts[track.text_index], self.texts[0])
            finding = track.finding
            return replace(finding, line=back(finding.line), end_line=back(finding.end_line))

        def order(finding: Finding) -> tuple[int, int, str]:
            return (finding.line, finding.col, finding.code)

        fixed = sorted((located(track) for track in self.closed), key=order)
        left = sorted((located(track) for track in self.open), key=order)
        return tuple(fixed), tuple(left)


def same_finding(finding: Finding, candidates: Sequence[Finding], moved: LineMap) -> Finding | None:
    """The finding among `candidates` (on rewritten code) that `finding` became, if any: the same
    rule with the same message, nearest to where the rewrite moved its line, or the same rule on
    that very line."""
    line = moved(finding.line)
    best: Finding | None = None
    best_key: tuple[int, int] | None = None
    for candidate in candidates:
        if candidate.code != finding.code:
            continue
        if candidate.message != finding.message and candidate.line != line:
            continue
        key = (abs(candidate.line - line), abs(candidate.col - finding.col))
        if best_key is None or key < best_key:
            best, best_key = candidate, key
    return best


def _run_passes(module: cst.Module, text: str, path: str, options: Settings) -> list[Finding]:
    context = FileContext(module, path, text)
    checkers = [
        pass_class(context, **options.pass_options.get(pass_class.CODE, {}))
        for pass_class in _woken_passes(text, options)
    ]
    try:
        with _deep_recursion():
            visit_all(module, checkers, context.tables)
    except RecursionError:
        # libcst nests e.g. implicitly concatenated strings: thousands of pieces exceed the stack.
        raise InputError("nested too deeply to analyse") from None
    findings = [finding for checker in checkers for finding in checker.findings]
    lines = text.splitlines()
    findings = [finding for finding in findings if not _is_suppressed(finding, lines)]
    findings.sort(key=lambda f: (f.line, f.col, f.code))
    return findings


def _mentions_trigger(text: str, settings: Settings) -> bool:
    return bool(_woken_passes(text, settings))


def _woken_passes(text: str, settings: Settings) -> list[type[Rule]]:
    searched = _SearchedText(text)
    return [cls for cls in settings.passes if cls.wakes_on(searched)]


class _SearchedText(str):
    """A file's text that remembers which words were looked for in it: most passes test for
    "torch", and on a file without it each test would scan the whole text again."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._found: dict[str, bool] = {}

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return super().__contains__(word)  # type: ignore[operator]
        found = self._found.get(word)
        if found is None:
            found = self._found[word] = super().__contains__(word)
        return found
