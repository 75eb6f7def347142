"""``devfix verify --fix``: run the script, fix the root cause the run points at, run again.

Each round runs the script under the virtual GPUs (:func:`devfix.vgpu.launch.run_one_json`),
in a forked child of one warm server the repair starts at its first run
(:mod:`devfix.vgpu.warm`): torch and devfix's passes are imported once, not once a round, and
each run still gets a process of its own that has seen no earlier run. The script's stdin is
``/dev/null`` (the keys of ``-i`` go to the prompt).
On a device error, the diagnosis names the *root* operand and the line that put it on its
device (its provenance), with the devfix findings on the root's provenance chain: that line,
the line that built the optimizer a restored state belongs to, and for a value kept in a
buffer, an attribute, a batch or an optimizer's state, the line that made the value. A static
finding there is the root cause (it beats the last line the runtime saw); the first one with a
fix the flags allow, and only that one, is applied, and the script runs again. When a finding
there has an unsafe fix and ``unsafe`` is off, the repair stops and says so.

When no static finding covers the chain, the fix is made from the run
(:mod:`devfix.vgpu.synthesis`: ``labels.to(logits.device)`` at the use, ``device=x.device``
at the creation, each value of ``model(**inputs)`` moved at the model's call), through the
same engine, and marked ``runtime fix`` in the round line. Its level is unsafe (a judgement),
but the next run is its proof, so it is applied without ``unsafe``: it is kept only when that
run gets past the error it was made for (the same message from the same line and root site
means it did not), otherwise its file gets its text back and the repair stops.

The loop ends when the script runs, when the same error comes back from the same line, when
neither a finding nor the run gives a fix (the provenance is printed, and why no fix could be
made from the run, so a person knows where to look), when the script fails of something else
or runs past ``timeout`` seconds, or after ``max_rounds`` fixes. Each round prints its diff
and a one-line outcome; the script's own output is shown for the last run only.

Interactive (``ask``): each fix the round would apply is offered first (:class:`Offer`, with
the diff of that fix alone, computed by :mod:`devfix.review` as `devfix apply -i` computes
it), unsafe ones too, and a fix from the run as ``runtime``; the answer (:class:`Decision`)
applies it, applies the user's edit of it (which is the user's, and not put on trial), skips
it (the next finding on the root's chain is offered, if any) or stops the repair.

Nothing is left written when the last run still fails, unless ``keep_partial``: every file the
rounds changed gets its original text back.
"""

from __future__ import annotations

import enum
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devfix.vgpu.launch import run_one_json
from devfix.vgpu.provenance import shown_path
from devfix.vgpu.synthesis import RuntimeFix, synthesise
from devfix.vgpu.warm import WarmRunner

if TYPE_CHECKING:
    from devfix.review import Proposal
    from devfix.types import Applicability

Echo = Callable[[str, bool], None]


@dataclass(frozen=True)
class RoundFix:
    """The finding a round applies: its rule and where it is (a fix from the run has the code
    ``runtime`` and says what it does in ``summary``)."""

    code: str
    path: str
    line: int
    applicability: str
    summary: str = ""

    @property
    def from_the_run(self) -> bool:
        return self.code == RUNTIME


#: the code of a fix made from the run (:mod:`devfix.vgpu.synthesis`)
RUNTIME = "runtime"


def root_operand(diagnosis: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in diagnosis.get("operands", ()) if o.get("root")), None)


def candidate_fixes(root: Mapping[str, Any], *, unsafe: bool) -> list[RoundFix]:
    """The findings on the root's provenance chain whose fix may be applied, the root's own
    line first (one per rule and line: the fix of a rule on a line is applied whole)."""
    site = root.get("site")
    if site is None:
        return []
    from devfix.settings import Settings
    from devfix.types import Fixability

    settings = Settings(unsafe_fixes=unsafe)
    found: list[RoundFix] = []
    for finding in root.get("findings", ()):
        applicability = _applicability(finding)
        if settings.fixability_of(finding.get("fix") is not None, applicability) is (
            Fixability.FIXABLE
        ):
            path = finding.get("path") or site["path"]
            fix = RoundFix(finding["code"], path, int(finding["line"]), applicability.value)
            if all((f.code, f.line) != (fix.code, fix.line) for f in found):
                found.append(fix)
    return found


@dataclass(frozen=True)
class Offer:
    """A fix offered to the user in an interactive round."""

    #: The round's number, and the fix's number among the round's candidates (from 1).
    round: int
    number: int
    total: int
    fix: RoundFix
    #: The finding as `devfix apply -i` shows it: location, rule, message, the fix's diff.
    proposal: Proposal
    #: The file's code now, and with this fix applied (what "apply" writes).
    code: str
    proposed: str


class Answer(str, enum.Enum):
    APPLY = "apply"  #: write the fix (or the user's edit of it) and run again
    SKIP = "skip"  #: not this fix: offer the next one on the root's line, if any
    QUIT = "quit"  #: stop the repair here


@dataclass(frozen=True)
class Decision:
    answer: Answer
    #: With APPLY: the user's edit of :attr:`Offer.proposed`, written instead of it.
    edited: str | None = None


Ask = Callable[[Offer], Decision]


def offer_for(fix: RoundFix, round_number: int, number: int, total: int) -> Offer | None:
    """The fix as a review proposal with its own diff; None when it would change nothing.

    The diff shown is that of the code "apply" writes (:func:`devfix.review.apply_keys`, long
    lines wrapped as every fix's are), not the bare edit's, so that y writes what was shown.
    """
    import dataclasses

    from devfix import review
    from devfix.settings import Settings
    from devfix.source_file import open_source

    settings = Settings.resolve(None)
    analysis = review.analyse_file(fix.path, settings)
    if analysis.failed:
        return None
    for proposal in analysis.proposals:
        if proposal.code != fix.code or proposal.line != fix.line or not proposal.fixable:
            continue
        proposed, applied = review.apply_keys(analysis.code, {proposal.key}, settings, fix.path)
        if proposal.key in applied and proposed != analysis.code:
            diff = open_source(fix.path).review_diff(
                analysis.code, proposed, shown_path(fix.path), review.CONTEXT_LINES
            )
            shown = dataclasses.replace(proposal, path=shown_path(fix.path), diff=diff)
            return Offer(round_number, number, total, fix, shown, analysis.code, proposed)
    return None


def write_code(path: str, code: str) -> str:
    """Write ``code`` as the new text of ``path``; the diff."""
    from devfix import sources
    from devfix.source_file import open_source

    source = open_source(path)
    sources.write_atomic(path, source.document.with_text(source.render(code)))
    return source.diff(code)


def apply_one(fix: RoundFix) -> str | None:
    """Apply exactly this finding to its file; the diff, or None when nothing changed."""
    from devfix import sources
    from devfix.fix_loop import fix_source
    from devfix.source_file import open_source

    source = open_source(fix.path)
    result = fix_source(
        source.code,
        path=fix.path,
        accept=lambda f: f.code == fix.code and f.line == fix.line,
    )
    if result.output == source.code:
        return None
    sources.write_atomic(fix.path, source.document.with_text(source.render(result.output)))
    return source.diff(result.output)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _restore(originals: Mapping[str, str]) -> None:
    for path, text in originals.items():
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)


@dataclass
class _OnTrial:
    """A fix from the run, written, that the next run must prove."""

    fix: RoundFix
    #: the file's text before it
    before: str
    #: the error it was made for (:func:`_error_key`)
    key: tuple[Any, ...]


def _error_key(diagnosis: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two device errors the same one: the message, the line that raised it and
    the root's site."""
    root = root_operand(diagnosis)
    site = root.get("site") if root is not None else None
    raised = diagnosis.get("raised_at") or {}
    return (
        diagnosis.get("error", ""),
        raised.get("path"),
        raised.get("line"),
        site.get("path") if site else None,
        site.get("line") if site else None,
    )


def _failed_trial(trial: _OnTrial | None, code: int, diagnosis: Mapping[str, Any] | None) -> bool:
    """Whether a run after a fix from the run died of the error that fix was made for."""
    return (
        trial is not None
        and code != 0
        and diagnosis is not None
        and _error_key(diagnosis) == trial.key
    )


def repair(
    script: str,
    args: Sequence[str],
    *,
    gpus: int,
    env: Mapping[str, str],
    unsafe: bool,
    max_rounds: int,
    keep_partial: bool,
    echo: Echo,
    timeout: float | None = None,
    ask: Ask | None = None,
) -> int:
    """Run, fix, run again (see the module docstring); the last run's exit status."""
    originals: dict[str, str] = {}
    last: tuple[Any, ...] | None = None
    trial: _OnTrial | None = None
    code = 1
    # One server for every round, started by the first run; the server's environment is the
    # runs' (what torch reads at import, such as OMP_NUM_THREADS, comes from it).
    warm = WarmRunner(gpus, env, start=False)

    def run() -> tuple[int, dict[str, Any]]:
        # Keys go to the prompt, never to the script (which could also change the terminal's
        # mode): a warm child's stdin is /dev/null.
        return run_one_json(
            script,
            args,
            gpus=gpus,
            env=env,
            capture=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            warm=warm,
        )

    try:
        for number in range(1, max_rounds + 1):
            code, result = run()
            head = f"devfix verify --fix: round {number}:"
            diagnosis = result.get("diagnosis")
            if _failed_trial(trial, code, diagnosis):
                # The fix from the run did not get past the error it was made for.
                assert trial is not None and diagnosis is not None
                _show(result, echo)
                _restore({trial.fix.path: trial.before})
                echo(f"{head} {diagnosis.get('error', '')}", True)
                echo(
                    f"  the {_where(trial.fix)} did not get past this error; restored "
                    f"{shown_path(trial.fix.path)}: stop",
                    True,
                )
                _print_provenance(root_operand(diagnosis), echo)
                break
            trial = None
            if code == 0:
                _show(result, echo)
                changed = ", ".join(sorted(shown_path(p) for p in originals)) or "nothing"
                echo(f"{head} the script runs (changed: {changed})", False)
                return 0
            if result.get("timed_out"):
                _show(result, echo)
                echo(f"{head} the script ran past --timeout {timeout:g} s: stop", True)
                break
            if diagnosis is None:
                _show(result, echo)
                echo(f"{head} the script failed (exit {code}), not of a device error: stop", True)
                break
            root = root_operand(diagnosis)
            key = _error_key(diagnosis)
            if key == last:
                _show(result, echo)
                echo(f"{head} the same device error repeats: stop", True)
                _print_provenance(root, echo)
                break
            last = key
            # the whole error line: its device names come last ("... cuda:0 and cpu!")
            error = diagnosis.get("error", "")
            # Interactively, unsafe fixes are offered too (marked), as `devfix apply -i` does.
            fixes = candidate_fixes(root, unsafe=unsafe or ask is not None) if root else []
            runtime: RuntimeFix | None = None
            declined: str | None = None
            if not fixes and root is not None and not _gated(root, unsafe):
                # No static finding covers the root's provenance chain: make one from the run.
                made = synthesise(diagnosis)
                if isinstance(made, RuntimeFix):
                    runtime = made
                else:
                    declined = made.reason
            if not fixes and runtime is None:
                _show(result, echo)
                why = "no root operand was recorded" if root is None else _uncovered(root, unsafe)
                echo(f"{head} {error}", True)
                echo(f"  {why}: stop", True)
                if declined:
                    echo(f"  no fix from the run: {declined}", True)
                _print_provenance(root, echo)
                break
            if runtime is not None:
                fix = RoundFix(RUNTIME, runtime.path, runtime.line, "unsafe", runtime.summary)
                if ask is None:
                    before = _read(fix.path)
                    originals.setdefault(fix.path, before)
                    written = write_code(fix.path, runtime.proposed)
                    trial = _OnTrial(fix, before, key)
                    echo(written.rstrip("\n"), False)
                    echo(f"{head} {error} -> applied {_where(fix)} ({fix.summary})", False)
                    continue
                echo(f"{head} {error}", False)
                answer, stop = _ask_runtime(number, fix, runtime, ask, originals)
                if answer is not None:
                    if answer == fix.summary:
                        trial = _OnTrial(fix, runtime.code, key)
                    echo(f"{head} applied {_where(fix)} ({answer})", False)
                    continue
                _show(result, echo)
                echo(f"{head} {stop}: stop", True)
                _print_provenance(root, echo)
                break
            if ask is None:
                fix = fixes[0]
                originals.setdefault(fix.path, _read(fix.path))
                diff = apply_one(fix)
                if diff is None:
                    _show(result, echo)
                    echo(
                        f"{head} {fix.code} at {shown_path(fix.path)}:{fix.line} changed nothing: "
                        "stop",
                        True,
                    )
                    break
                echo(diff.rstrip("\n"), False)
                echo(f"{head} {error} -> applied {_where(fix)} ({fix.applicability})", False)
                continue
            echo(f"{head} {error}", False)
            taken, stop = _ask_round(number, fixes, ask, originals, echo)
            if taken is not None:
                echo(f"{head} applied {_where(taken[0])} ({taken[1]})", False)
                continue
            _show(result, echo)
            echo(f"{head} {stop}: stop", True)
            _print_provenance(root, echo)
            break
        else:
            code, result = run()
            diagnosis = result.get("diagnosis")
            if _failed_trial(trial, code, diagnosis):
                assert trial is not None
                _restore({trial.fix.path: trial.before})
                echo(
                    f"devfix verify --fix: the {_where(trial.fix)} did not get past the "
                    f"error; restored {shown_path(trial.fix.path)}",
                    True,
                )
            _show(result, echo)
            if code == 0:
                echo(f"devfix verify --fix: the script runs after {max_rounds} rounds", False)
                return 0
            if result.get("timed_out"):
                echo(f"devfix verify --fix: the last run ran past --timeout {timeout:g} s", True)
            echo(
                f"devfix verify --fix: still failing after {max_rounds} rounds (--max-rounds)", True
            )
    except BaseException:  # Ctrl-C at a prompt or during a run: leave no half-repair behind
        if originals and not keep_partial:
            _restore(originals)
        raise
    finally:
        warm.close()
    if originals and not keep_partial:
        _restore(originals)
        names = ", ".join(sorted(shown_path(p) for p in originals))
        echo(
            f"devfix verify --fix: the script still fails; restored {names} "
            "(--keep-partial keeps the edits)",
            True,
        )
    return code or 1


def _ask_runtime(
    number: int,
    fix: RoundFix,
    made: RuntimeFix,
    ask: Ask,
    originals: dict[str, str],
) -> tuple[str | None, str]:
    """Offer the fix from the run; how it was applied (its summary, or "edited"), or None and
    why the repair stops."""
    offer = runtime_offer(number, fix, made)
    decision = ask(offer)
    if decision.answer is Answer.QUIT:
        return None, "quit at the prompt"
    if decision.answer is Answer.SKIP:
        return None, "the fix from the run was skipped"
    originals.setdefault(fix.path, _read(fix.path))
    text = decision.edited if decision.edited is not None else made.proposed
    write_code(fix.path, text)
    return ("edited" if decision.edited is not None else fix.summary), ""


def runtime_offer(number: int, fix: RoundFix, made: RuntimeFix) -> Offer:
    """The fix from the run as a review proposal, with its diff (what "apply" writes)."""
    from devfix import review
    from devfix.source_file import open_source
    from devfix.types import Applicability
    from devfix.vgpu.synthesis import NAME

    diff = open_source(fix.path).review_diff(
        made.code, made.proposed, shown_path(fix.path), review.CONTEXT_LINES
    )
    proposal = review.Proposal(
        path=shown_path(fix.path),
        key=f"{RUNTIME}:{shown_path(fix.path)}:{made.line}:{made.summary}",
        code=RUNTIME,
        name=NAME,
        message=made.message,
        fix_title=made.summary,
        applicability=Applicability.UNSAFE,
        line=made.line,
        col=made.col,
        cell=None,
        diff=diff,
    )
    return Offer(number, 1, 1, fix, proposal, made.code, made.proposed)


def _where(fix: RoundFix) -> str:
    if fix.from_the_run:
        return f"runtime fix at {shown_path(fix.path)}:{fix.line}"
    return f"{fix.code} at {shown_path(fix.path)}:{fix.line}"


def _ask_round(
    number: int,
    fixes: Sequence[RoundFix],
    ask: Ask,
    originals: dict[str, str],
    echo: Echo,
) -> tuple[tuple[RoundFix, str] | None, str]:
    """Offer the round's fixes one by one; the fix applied (and how: its applicability, or
    "edited"), or None and why the repair stops."""
    offered = 0
    for index, fix in enumerate(fixes, 1):
        offer = offer_for(fix, number, index, len(fixes))
        if offer is None:
            echo(f"  {_where(fix)} would change nothing; not offered", False)
            continue
        offered += 1
        decision = ask(offer)
        if decision.answer is Answer.QUIT:
            return None, "quit at the prompt"
        if decision.answer is Answer.SKIP:
            continue
        originals.setdefault(fix.path, _read(fix.path))
        text = decision.edited if decision.edited is not None else offer.proposed
        write_code(fix.path, text)
        return (fix, "edited" if decision.edited is not None else fix.applicability), ""
    if not offered:
        return None, "no fix at the root's line changes the code"
    return None, "every fix at the root's line was skipped"


def _show(result: Mapping[str, Any], echo: Echo) -> None:
    """The script's own output of a run."""
    if result.get("stdout"):
        echo(str(result["stdout"]).rstrip("\n"), False)
    if result.get("stderr"):
        echo(str(result["stderr"]).rstrip("\n"), True)


def _applicability(finding: Mapping[str, Any]) -> Applicability:
    from devfix.types import Applicability

    try:
        return Applicability(finding.get("applicability", "safe"))
    except ValueError:
        return Applicability.DISPLAY_ONLY


def _uncovered(root: Mapping[str, Any], unsafe: bool) -> str:
    from devfix.settings import Settings
    from devfix.types import Fixability

    settings = Settings(unsafe_fixes=unsafe)
    site = root.get("site") or {}
    for f in root.get("findings", ()):
        if (
            settings.fixability_of(f.get("fix") is not None, _applicability(f))
            is not Fixability.NEEDS_UNSAFE
        ):
            continue
        path = f.get("path") or site.get("path")
        if (path, f.get("line")) == (site.get("path"), site.get("line")):
            return "the finding at the root's line has an unsafe fix (allow it with --unsafe-fixes)"
        return (
            f"the finding {f.get('code')} at {path}:{f.get('line')}, on the root's provenance "
            "chain, has an unsafe fix (allow it with --unsafe-fixes)"
        )
    return "no devfix finding with a fix covers the root's line"


def _gated(root: Mapping[str, Any], unsafe: bool) -> bool:
    """Whether a static finding on the root's chain has a fix that needs --unsafe-fixes: the
    static finding is the root cause, so no fix is made from the run instead."""
    from devfix.settings import Settings
    from devfix.types import Fixability

    settings = Settings(unsafe_fixes=unsafe)
    return any(
        settings.fixability_of(f.get("fix") is not None, _applicability(f))
        is Fixability.NEEDS_UNSAFE
        for f in root.get("findings", ())
    )


def _print_provenance(root: Mapping[str, Any] | None, echo: Echo) -> None:
    if root is None:
        return
    shape = "[" + ", ".join(str(n) for n in root.get("shape", ())) + "]"
    echo(
        f"  the {root.get('device')} tensor `{root.get('label')}` (shape {shape}) "
        f"{root.get('description', '')}",
        True,
    )
    suggestion = root.get("suggestion")
    if suggestion:
        echo(
            f"  suggested edit (not a devfix rule) at {suggestion['path']}:{suggestion['line']}: "
            f"{suggestion['text']}",
            True,
        )


def repairable(script: str) -> str | None:
    """Why ``script`` cannot be repaired in place, or None."""
    if script.endswith(".ipynb"):
        return "--fix does not edit notebooks; run `devfix apply` on the notebook instead"
    if not os.access(script, os.W_OK):
        return f"{shown_path(script)} is not writable"
    return None
