"""``devfix explain``: a pasted traceback, read against the source tree, without running it.

From a log (a terminal's, a CI job's, a notebook's) and the user's source tree, with no GPU
and no script to run:

1. the traceback to explain (:mod:`devfix.explain.logs`): the last one that ends in a device
   error, with the frames of the tracebacks that wrap it (DataParallel's replicas, chains);
2. what the error says: PyTorch's "found at least two devices, cuda:1 and cuda:0!", the
   per-argument "got index is on cpu, different from other tensors on cuda:0 (when checking
   argument ... in method wrapper_CUDA__index_select)", and the other device errors;
3. the user's frame: the last frame whose file is in the source tree
   (:mod:`devfix.explain.tree`); when the failing frame is in a library, which library, and
   whether the user's call hands it operands on mixed placements;
4. the operands at the user's line (and at its callers' lines, when a parameter carries the
   tensor in) and where each got its device, from devfix's static device inference
   (:mod:`devfix.explain.operands`);
5. the devfix findings that cover those lines (on the line, where an operand got its device,
   on a caller's line; else the findings tied to the line's names as ``devfix verify`` ranks
   them), each with its fix as a diff.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devfix.explain.logs import Frame, Log, Mismatch, Traceback, mismatch, parse
from devfix.explain.operands import LineOperands, Operand
from devfix.explain.tree import Place, SourceTree, library_of
from devfix.types import Applicability, Finding

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True)
class FrameInfo:
    """A frame of the traceback and where it is."""

    frame: Frame
    #: where it is in the source tree (None: not the user's code)
    place: Place | None
    #: the library it is in (``torch``), ``python`` for the standard library
    library: str | None

    def where(self) -> str:
        if self.place is not None:
            return _place_text(self.place)
        return f"{self.frame.path}:{self.frame.line}"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": _shown(self.place.path) if self.place is not None else self.frame.path,
            "line": self.place.line if self.place is not None else self.frame.line,
            "cell": self.place.cell if self.place is not None else None,
            "cell_line": self.place.cell_line if self.place is not None else None,
            "log_path": self.frame.path,
            "log_line": self.frame.line,
            "function": self.frame.function,
            "code": self.frame.code,
            "library": self.library,
        }


@dataclass(frozen=True)
class Covering:
    """A devfix finding that covers a line of the explanation, and its fix."""

    finding: Finding
    path: str
    #: the finding's location as printed (``train.py:12:5``, ``nb.ipynb:cell 2:3:5``)
    where: str
    #: why it covers the error (``on your line``, ``where `inputs` got its device``)
    why: str
    #: the fix alone, as a unified diff (None: the finding has no fix)
    diff: str | None

    @property
    def fixable(self) -> bool:
        return self.diff is not None

    def command(self) -> str:
        unsafe = self.finding.applicability is Applicability.UNSAFE
        return (
            f"devfix apply --select {self.finding.code} "
            f"{'--unsafe-fixes ' if unsafe else ''}{_shown(self.path)}"
        )

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {
            "code": f.code,
            "name": f.name,
            "message": f.message,
            "path": _shown(self.path),
            "line": f.line,
            "col": f.col,
            "where": self.where,
            "why": self.why,
            "fix": f.fix_title if self.fixable else None,
            "applicability": f.applicability.value,
            "diff": self.diff,
            "command": self.command() if self.fixable else None,
        }


@dataclass
class Call:
    """A user frame of the call chain: the frame, and the operands its line reads."""

    info: FrameInfo
    operands: list[Operand] = field(default_factory=list)


@dataclass
class Explanation:
    """Everything ``devfix explain`` prints, as data."""

    error: str | None
    mismatch: Mismatch | None = None
    #: the log held a traceback (else only the error line, if any, is known)
    traceback: bool = True
    #: the user's frames, innermost first (the first is *the* user's frame)
    calls: list[Call] = field(default_factory=list)
    #: the frame that raised, when it is not the user's
    failing: FrameInfo | None = None
    #: the library the user's innermost call went into, when the error was raised in one
    library: str | None = None
    #: whether the user's call passes operands on mixed placements (None: cannot tell)
    mixed: bool | None = None
    findings: list[Covering] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def frame(self) -> Call | None:
        return self.calls[0] if self.calls else None

    def fix(self) -> Covering | None:
        """The first covering finding that has a fix: the rule that fixes the error."""
        return next((c for c in self.findings if c.fixable), None)

    def to_json(self) -> dict[str, Any]:
        m = self.mismatch
        fix = self.fix()
        return {
            "error": self.error,
            "device_error": m is not None,
            "form": m.form if m is not None else None,
            "devices": list(m.devices) if m is not None else [],
            "argument": (
                {"name": m.argument, "device": m.argument_device, "others": m.others_device}
                if m is not None and m.argument is not None
                else None
            ),
            "op": m.op if m is not None else None,
            "frame": self.frame.info.to_json() if self.frame is not None else None,
            "operands": [o.to_json() for o in self.frame.operands] if self.frame else [],
            "callers": [
                {**c.info.to_json(), "operands": [o.to_json() for o in c.operands]}
                for c in self.calls[1:]
            ],
            "failing_frame": self.failing.to_json() if self.failing is not None else None,
            "library": self.library,
            "mixed_placements": self.mixed,
            "findings": [c.to_json() for c in self.findings],
            "fix": fix.to_json() if fix is not None else None,
            "notes": self.notes,
        }


def explain(text: str, root: str = ".") -> Explanation:
    """Explain the traceback in ``text`` against the source tree at ``root``."""
    log = parse(text)
    chosen = log.chosen()
    if chosen is None:
        loose = log.loose_errors[-1] if log.loose_errors else None
        out = Explanation(loose, mismatch(loose) if loose else None, traceback=False)
        out.notes.append("the log holds no Python traceback: no frame to read")
        return out
    return _explain(log, chosen, SourceTree(root))


def _explain(log: Log, chosen: Traceback, tree: SourceTree) -> Explanation:
    out = Explanation(chosen.error, mismatch(chosen.message))
    frames = log.frames_for(chosen)
    infos = [FrameInfo(f, tree.locate(f), library_of(f.path)) for f in frames]
    users = [i for i in infos if i.place is not None]
    if not users:
        out.notes.append(
            f"no frame of the traceback is in the source tree {_shown(str(tree.root))} "
            "(run devfix explain in your project's folder, or pass --root)"
        )
        return out
    innermost = users[-1]
    if infos and infos[-1].place is None:
        out.failing = infos[-1]
        after = infos[infos.index(innermost) + 1 :]
        out.library = next((i.library for i in after if i.library not in (None, "python")), None)
        if out.library is None:
            out.library = infos[-1].library or "code outside the source tree"
    analyses: dict[str, LineOperands | None] = {}
    for info in reversed(users):
        assert info.place is not None
        lines = _analysis(info.place.path, analyses, out.notes)
        call = Call(info)
        if lines is not None:
            call.operands = lines.operands(info.place.line)
        out.calls.append(call)
    if out.library is not None and out.frame is not None:
        out.mixed = _mixed(out.frame.operands)
    out.findings = _covering(out, analyses)
    return out


def _analysis(
    path: str, cache: dict[str, LineOperands | None], notes: list[str]
) -> LineOperands | None:
    if path not in cache:
        try:
            cache[path] = LineOperands(_code(path), path)
        except Exception as error:  # a file that does not parse: still explain the rest
            notes.append(f"devfix could not read {_shown(path)}: {error}")
            cache[path] = None
    return cache[path]


def _code(path: str) -> str:
    from devfix.source_file import open_source

    return open_source(path).code


def _mixed(operands: list[Operand]) -> bool | None:
    """Whether the operands sit on different placements (the CPU and a device, or two devices
    named differently); None when too few are known."""
    known = [o for o in operands if o.placement != "unknown"]
    if any(o.placement == "cpu" for o in known) and any(o.placement == "device" for o in known):
        return True
    named = {o.device_expression for o in known if o.device_expression}
    literal = {n for n in named if n.strip("'\"").startswith(("cuda", "cpu"))}
    if len(literal) > 1:
        return True
    return False if len(known) == len(operands) and known else None


# --------------------------------------------------------------------------------------------
# The findings that cover the explanation's lines.


def _covering(out: Explanation, analyses: dict[str, LineOperands | None]) -> list[Covering]:
    """The findings on the user's line, where its operands got their devices, on its callers'
    lines and where theirs did, in that order; else the ones ``devfix verify`` ties to the
    line's names."""
    wanted: list[tuple[str, tuple[int, int], str]] = []
    further: list[tuple[str, tuple[int, int], str]] = []
    for depth, call in enumerate(out.calls):
        place = call.info.place
        assert place is not None
        lines = analyses.get(place.path)
        span = lines.statement_span(place.line) if lines is not None else None
        wanted.append(
            (
                place.path,
                span or (place.line, place.line),
                "on your line" if depth == 0 else "on a calling line",
            )
        )
        if lines is None:
            continue
        for operand in sorted(call.operands, key=lambda o: _suspicion(o, out.mismatch)):
            if operand.origin_line is None:
                continue
            why = f"where `{operand.text}` got its device"
            wanted.append((place.path, _span(lines, operand.origin_line), why))
            for line in operand.other_lines:
                further.append((place.path, _span(lines, line), why))
            hops = [operand.origin_line, *lines.sources(operand.origin_line)]
            for line in hops[1:]:
                further.append((place.path, _span(lines, line), why))
            if any(lines.feeds_batches(line) for line in hops):
                why = f"in the data pipeline `{operand.text}` comes from"
                further.extend((place.path, span, why) for span in lines.pipeline_spans())
    wanted.extend(further)
    found: list[Covering] = []
    seen: set[tuple[str, str, int]] = set()
    checked: dict[str, list[Finding]] = {}
    for path, (first, last), why in wanted:
        for finding in _findings(path, checked, out.notes):
            key = (path, finding.code, finding.line)
            if first <= finding.line <= last and key not in seen:
                seen.add(key)
                found.append(_cover(path, finding, why))
    if found or out.frame is None:
        return found
    place = out.frame.info.place
    assert place is not None
    from devfix.vgpu.diagnose import SourceIndex, UserFrame, rank_findings

    findings = _findings(place.path, checked, out.notes)
    frame = UserFrame(place.path, place.line, out.frame.info.frame.code)
    chosen, why = rank_findings(findings, SourceIndex(_code(place.path)), frame)
    return [_cover(place.path, f, why) for f in chosen]


def _span(lines: LineOperands, line: int) -> tuple[int, int]:
    return lines.statement_span(line) or (line, line)


def _suspicion(operand: Operand, said: Mismatch | None) -> int:
    """Operands on the placement the error names as the odd one first (``index is on cpu``:
    the CPU operands), then the other known ones, the unknown last."""
    odd = said.argument_device if said is not None else None
    if odd is not None and (operand.placement == "cpu") == (odd == "cpu"):
        return 0
    return 1 if operand.placement != "unknown" else 2


def _findings(path: str, cache: dict[str, list[Finding]], notes: list[str]) -> list[Finding]:
    if path not in cache:
        from devfix.fix_loop import check_source

        try:
            cache[path] = list(check_source(_code(path), path))
        except Exception as error:
            notes.append(f"devfix could not check {_shown(path)}: {error}")
            cache[path] = []
    return cache[path]


def _cover(path: str, finding: Finding, why: str) -> Covering:
    return Covering(finding, path, _finding_where(path, finding), why, _diff(path, finding))


def _diff(path: str, finding: Finding) -> str | None:
    """The fix of this finding alone, as a diff of the file (a notebook: of its cells)."""
    if not finding.has_fix:
        return None
    from devfix.fix_loop import fix_source
    from devfix.source_file import open_source

    try:
        source = open_source(path)
        result = fix_source(
            source.code,
            path=path,
            accept=lambda f: f.code == finding.code and f.line == finding.line,
        )
    except Exception:
        return None
    if result.output == source.code:
        return None
    return source.review_diff(source.code, result.output, _shown(path))


def _finding_where(path: str, finding: Finding) -> str:
    if path.endswith(".ipynb"):
        from devfix.notebooks import Notebook

        try:
            with open(path, encoding="utf-8") as f:
                cell, line = Notebook(f.read(), path).locate(finding.line)
            return f"{_shown(path)}:cell {cell}:{line}:{finding.col}"
        except Exception:
            pass
    return f"{_shown(path)}:{finding.line}:{finding.col}"


def _place_text(place: Place) -> str:
    if place.cell is not None:
        return f"{_shown(place.path)}:cell {place.cell}:{place.cell_line}"
    return f"{_shown(place.path)}:{place.line}"


def _shown(path: str) -> str:
    from devfix.vgpu.provenance import shown_path

    return shown_path(path)


# --------------------------------------------------------------------------------------------
# Text.


def render(explanation: Explanation) -> str:
    """The explanation as ``devfix explain`` prints it."""
    e = explanation
    out = [f"devfix explain: {e.error}" if e.error else "devfix explain: no error found"]
    m = e.mismatch
    if m is not None:
        if m.devices:
            out.append("  devices: " + ", ".join(m.devices))
        if m.argument is not None and m.argument_device is not None:
            op = f"`{m.op}`" if m.op else "the failing op"
            others = f", its other tensors on {m.others_device}" if m.others_device else ""
            out.append(f"  {op}'s argument `{m.argument}` is on {m.argument_device}{others}")
        elif m.op:
            out.append(f"  the failing op: `{m.op}`")
    elif e.error:
        out.append("  (not a device-mismatch error: the frame and findings below still apply)")
    if e.failing is not None:
        frame = e.failing.frame
        inside = f"{_library_path(frame.path)}:{frame.line}" + (
            f", in {frame.function}" if frame.function else ""
        )
        out.append(f"  raised inside {e.library} ({inside}), called from your code")
    for depth, call in enumerate(e.calls):
        frame = call.info.frame
        head = "your frame" if depth == 0 else "called from"
        function = f", in {frame.function}" if frame.function else ""
        out.append(f"  {head}: {call.info.where()}{function}")
        code = call.info.frame.code or _source_line(call.info)
        if code:
            out.append(f"      {code}")
        if depth == 0 and e.library is not None:
            out.append(f"  {_mixed_text(e.library, e.mixed, call.operands)}")
        for operand in call.operands:
            if depth == 0 or operand.placement != "unknown" or operand.parameter:
                out.append(f"    {_operand_text(operand)}")
    for note in e.notes:
        out.append(f"  note: {note}")
    if e.frame is not None:
        if e.findings:
            out.append("  devfix findings that cover it:")
            for c in e.findings:
                f = c.finding
                fix = f"fix: {f.fix_title} ({f.applicability.value})" if c.fixable else "no fix"
                out.append(f"    {c.where}: {f.code} {f.message} [{fix}]  ({c.why})")
            chosen = e.fix()
            if chosen is not None and chosen.diff:
                out.append("")
                out.append(chosen.diff.rstrip("\n"))
                out.append("")
                out.append(f"  to fix: {chosen.command()}")
        else:
            out.append("  no devfix finding covers these lines")
    return "\n".join(out) + "\n"


def _library_path(path: str) -> str:
    """A library file's path from its package on (``torch/nn/functional.py``)."""
    for marker in ("site-packages/", "dist-packages/", "site-packages\\", "dist-packages\\"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return path


def _source_line(info: FrameInfo) -> str:
    if info.place is None:
        return ""
    try:
        lines = _code(info.place.path).splitlines()
    except Exception:
        return ""
    line = info.place.line
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _mixed_text(library: str, mixed: bool | None, operands: list[Operand]) -> str:
    if mixed:
        cpu = [f"`{o.text}`" for o in operands if o.placement == "cpu"]
        placed = [f"`{o.text}`" for o in operands if o.placement == "device"]
        return (
            f"your call passes {library} operands on mixed placements: "
            f"{', '.join(cpu) or 'none'} on the CPU, {', '.join(placed) or 'none'} on a device"
        )
    if mixed is False:
        return (
            f"your call passes {library} operands on one placement: the mismatch is in what "
            "they hold or build (a module's state, a tensor made inside)"
        )
    return f"devfix cannot tell whether your call passes {library} operands on mixed placements"


def _operand_text(o: Operand) -> str:
    kind = "layer " if o.called else ""
    if o.placement == "cpu":
        where = "on the CPU"
    elif o.placement == "device":
        where = f"on {o.device_expression}" if o.device_expression else "on a device"
    else:
        where = "device unknown"
    origin = f"; from line {o.origin_line}: {o.origin}" if o.origin_line else ""
    return f"{kind}`{o.text}`: {where} ({o.evidence}){origin}"
