"""``devfix verify --fix``: run the script, fix the root cause the run points at, run again.

Each round runs the script under the virtual GPUs (:func:`devfix.vgpu.launch.run_one_json`).
On a device error, the diagnosis names the *root* operand and the line that put it on its
device (its provenance); the devfix finding on that line, and only that one, is applied
(unsafe fixes only when allowed), and the script runs again. The loop ends when the script
runs, when the same error comes back from the same line, when no finding with a fix covers the
root's line (the provenance is printed, so a person knows where to look), when the script
fails of something else, or after ``max_rounds`` rounds. Each round prints its diff and a
one-line outcome; the script's own output is shown for the last run only.

Nothing is left written when the last run still fails, unless ``keep_partial``: every file the
rounds changed gets its original text back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devfix.vgpu.diagnose import shown_path
from devfix.vgpu.launch import run_one_json

Echo = Callable[[str, bool], None]


@dataclass(frozen=True)
class RoundFix:
    """The finding a round applies: its rule and where it is."""

    code: str
    path: str
    line: int
    applicability: str


def root_operand(diagnosis: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in diagnosis.get("operands", ()) if o.get("root")), None)


def chosen_fix(root: Mapping[str, Any], *, unsafe: bool) -> RoundFix | None:
    """The first finding at the root's provenance line whose fix may be applied."""
    site = root.get("site")
    if site is None:
        return None
    for finding in root.get("findings", ()):
        if finding.get("fix") is None:
            continue
        applicability = finding.get("applicability", "safe")
        if applicability == "safe" or (unsafe and applicability == "unsafe"):
            return RoundFix(finding["code"], site["path"], int(finding["line"]), applicability)
    return None


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
) -> int:
    """Run, fix, run again (see the module docstring); the last run's exit status."""
    originals: dict[str, str] = {}
    last: tuple[str, str | None, int | None] | None = None
    code = 1
    for number in range(1, max_rounds + 1):
        code, result = run_one_json(script, args, gpus=gpus, env=env, capture=True)
        head = f"devfix verify --fix: round {number}:"
        if code == 0:
            _show(result, echo)
            changed = ", ".join(sorted(shown_path(p) for p in originals)) or "nothing"
            echo(f"{head} the script runs (changed: {changed})", False)
            return 0
        diagnosis = result.get("diagnosis")
        if diagnosis is None:
            _show(result, echo)
            echo(f"{head} the script failed (exit {code}), not of a device error: stop", True)
            break
        root = root_operand(diagnosis)
        site = root.get("site") if root is not None else None
        key = (
            diagnosis.get("error", ""),
            site.get("path") if site else None,
            site.get("line") if site else None,
        )
        if key == last:
            _show(result, echo)
            echo(f"{head} the same device error repeats: stop", True)
            _print_provenance(root, echo)
            break
        last = key
        fix = chosen_fix(root, unsafe=unsafe) if root is not None else None
        if fix is None:
            _show(result, echo)
            why = "no root operand was recorded" if root is None else _uncovered(root, unsafe)
            echo(f"{head} {diagnosis.get('error', '')}", True)
            echo(f"  {why}: stop", True)
            _print_provenance(root, echo)
            break
        originals.setdefault(fix.path, _read(fix.path))
        diff = apply_one(fix)
        if diff is None:
            _show(result, echo)
            echo(
                f"{head} {fix.code} at {shown_path(fix.path)}:{fix.line} changed nothing: stop",
                True,
            )
            break
        echo(diff.rstrip("\n"), False)
        echo(
            f"{head} {diagnosis.get('error', '')[:100]} -> applied {fix.code} at "
            f"{shown_path(fix.path)}:{fix.line} ({fix.applicability})",
            False,
        )
    else:
        code, result = run_one_json(script, args, gpus=gpus, env=env, capture=True)
        _show(result, echo)
        if code == 0:
            echo(f"devfix verify --fix: the script runs after {max_rounds} rounds", False)
            return 0
        echo(f"devfix verify --fix: still failing after {max_rounds} rounds (--max-rounds)", True)
    if originals and not keep_partial:
        _restore(originals)
        names = ", ".join(sorted(shown_path(p) for p in originals))
        echo(
            f"devfix verify --fix: the script still fails; restored {names} "
            "(--keep-partial keeps the edits)",
            True,
        )
    return code or 1


def _show(result: Mapping[str, Any], echo: Echo) -> None:
    """The script's own output of a run."""
    if result.get("stdout"):
        echo(str(result["stdout"]).rstrip("\n"), False)
    if result.get("stderr"):
        echo(str(result["stderr"]).rstrip("\n"), True)


def _uncovered(root: Mapping[str, Any], unsafe: bool) -> str:
    findings = root.get("findings", ())
    if any(f.get("fix") is not None and f.get("applicability") == "unsafe" for f in findings):
        return "the finding at the root's line has an unsafe fix (allow it with --unsafe-fixes)"
    return "no devfix finding with a fix covers the root's line"


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
