"""What ``devfix verify`` prints after the traceback of a device error.

The diagnosis names the user's line that raised (and, from Python's own traceback positions,
the failing expression within it), the devices involved and, for each device, the tensor that
was on it: its shape and the line of the user's code that put it there (its provenance, see
:mod:`devfix.vgpu.provenance`), then the devfix finding at that line, or, when no rule covers
it, a suggested edit marked as not a devfix rule. One of them is the *root* that
``devfix verify --fix`` repairs first.

Then the devfix findings *tied to the failing line*, ranked on the names the failing
expression and line use:

1. a finding on the failing line, or whose line assigns a name the failing expression uses
   (``self.scale = torch.sqrt(...)`` for ``self.tok_embedding(src) * self.scale``);
2. else a finding that mentions a name of the failing line, or sits in a function the line
   calls (``self.encode(x)`` → ``def encode``);
3. else the findings of the enclosing function, marked as not tied to the line.

The command that fixes them is named only when one of them has a fix. Paths print normalised
and relative to the current folder. :func:`diagnose_exception` gives the same facts as data
(``devfix verify --format json`` and ``--fix`` read them).
"""

from __future__ import annotations

import ast
import json
import linecache
import os
import re
import sysconfig
import traceback
from dataclasses import dataclass, field
from typing import Any

from devfix.vgpu import provenance
from devfix.vgpu.placement import Suggestion, dotted, statement_at, suggest
from devfix.vgpu.placement import describe as describe_site
from devfix.vgpu.provenance import ATTRIBUTE, BATCH, BUFFER, STATE, Operand, Site, shown_path

#: site kinds whose value was decided at their parent site (a buffer's factory, a batch's
#: collate function, a restored state's ``torch.load``)
VALUE_KINDS = (BUFFER, ATTRIBUTE, BATCH, STATE)

#: texts by which a device-mismatch error is recognised
MISMATCH_MARKERS = (
    "Expected all tensors to be on the same device",
    "to be on the same device",
    "tensors are not at the same device",
    "should be the same or input should be a MKLDNN tensor",
    "module must have its parameters and buffers on device",
    "indices should be either on cpu or on the same device",
    "Expected tensor for argument",
    "Trying to pass too many CPU scalars",
    "device type for generator but found",
    "device type tensor to numpy",
)

#: the error of `.numpy()` on a tensor on a GPU
NUMPY_MARKER = "device type tensor to numpy"

#: set by `devfix verify` for a notebook: {"ipynb": notebook path, "py": the code it runs}
NOTEBOOK_ENV = "DEVFIX_VERIFY_NOTEBOOK"

_DEVICE_RE = re.compile(r"\b(cuda:\d+|cpu|cuda)\b")
_FILE_RE = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass(frozen=True)
class UserFrame:
    path: str
    line: int
    source: str
    #: the failing expression's span (Python's traceback positions), when known
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None


def is_device_mismatch(message: str) -> bool:
    return any(m in message for m in MISMATCH_MARKERS)


def mismatch_line(text: str) -> str | None:
    """The last line of ``text`` that reports a device mismatch."""
    found = None
    for ln in text.splitlines():
        if is_device_mismatch(ln):
            found = ln
    return found


def devices_in(line: str) -> list[str]:
    """Devices named in an error line, in order of first appearance."""
    out: list[str] = []
    body = line.split("(when checking argument", 1)[0]
    for m in _DEVICE_RE.finditer(body):
        d = m.group(1)
        if d not in out:
            out.append(d)
    if "torch.cuda." in line and "torch.FloatTensor" in line:  # conv type form
        out = ["cpu", "cuda"]
    return out


def _library_roots() -> list[str]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(os.path.realpath(p))
    roots.add(os.path.realpath(os.path.dirname(os.path.dirname(__file__))))  # devfix itself
    return sorted(roots)


def is_user_file(path: str) -> bool:
    if not path or path.startswith("<"):
        return False
    rp = os.path.realpath(path)
    if "site-packages" in rp.split(os.sep) or "dist-packages" in rp.split(os.sep):
        return False
    return not any(rp == r or rp.startswith(r + os.sep) for r in _library_roots())


def innermost_user_frame(exc: BaseException) -> UserFrame | None:
    """Innermost frame in the user's files: from the text of a wrapped traceback
    (DataParallel's ``Original Traceback``) if any, else from the exception's own."""
    wrapped = [(m.group(1), int(m.group(2))) for m in _FILE_RE.finditer(str(exc))]
    if any(is_user_file(p) for p, _ in wrapped):
        for path, line in reversed(wrapped):
            if is_user_file(path):
                return UserFrame(path, line, linecache.getline(path, line).strip())
        return None
    for f in reversed(traceback.extract_tb(exc.__traceback__)):
        if is_user_file(f.filename):
            line = f.lineno or 0
            return UserFrame(
                f.filename,
                line,
                linecache.getline(f.filename, line).strip(),
                f.colno,
                f.end_lineno,
                f.end_colno,
            )
    return None


# --------------------------------------------------------------------------------------------
# Names used by code, and the findings tied to them.


def names_used(node: ast.AST) -> set[str]:
    """Every name and attribute chain ``node`` reads (``self`` alone is no name of interest)."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute)):
            name = dotted(sub)
            if name is not None and name != "self":
                found.add(name)
    return found


def _assigned(stmt: ast.stmt) -> set[str]:
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        # self.register_buffer("scale", ...) / setattr(self, "scale", ...) assign by name
        call = stmt.value
        first = call.args[0] if call.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            owner = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
            if owner is not None:
                return {f"{owner}.{first.value}"}
    out: set[str] = set()
    for t in targets:
        for sub in ast.walk(t):
            name = dotted(sub) if isinstance(sub, (ast.Name, ast.Attribute)) else None
            if name is not None and name != "self":
                out.add(name)
    return out


class SourceIndex:
    """Statements by line, function spans and names of one parsed file."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.tree: ast.Module | None
        try:
            self.tree = ast.parse(source)
        except SyntaxError:
            self.tree = None
        self.statements: dict[int, ast.stmt] = {}
        self.functions: list[tuple[str, int, int]] = []
        if self.tree is None:
            return
        for node in ast.walk(self.tree):
            if isinstance(node, ast.stmt) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                end = node.end_lineno or node.lineno
                for line in range(node.lineno, end + 1):
                    known = self.statements.get(line)
                    if known is None or _span(known) > _span(node):  # the innermost statement
                        self.statements[line] = node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                self.functions.append((node.name, start, node.end_lineno or node.lineno))

    def enclosing_function(self, line: int) -> tuple[str, int, int] | None:
        best: tuple[str, int, int] | None = None
        for fn in self.functions:
            if fn[1] <= line <= fn[2] and (best is None or fn[1] >= best[1]):
                best = fn
        return best

    def expression_names(self, frame: UserFrame) -> set[str]:
        """Names of the failing expression (its span), else of the failing statement."""
        stmt = self.statements.get(frame.line)
        if stmt is None:
            return set()
        if frame.col is not None and frame.end_col is not None:
            end_line = frame.end_line or frame.line
            inside = [
                node
                for node in ast.walk(stmt)
                if isinstance(node, ast.expr)
                and (node.lineno, node.col_offset) >= (frame.line, frame.col)
                and (node.end_lineno or 0, node.end_col_offset or 0) <= (end_line, frame.end_col)
            ]
            if inside:
                found: set[str] = set()
                for node in inside:
                    found |= names_used(node)
                return found
        return names_used(stmt)

    def line_names(self, line: int) -> set[str]:
        stmt = self.statements.get(line)
        return names_used(stmt) if stmt is not None else set()

    def assigned_at(self, line: int) -> set[str]:
        stmt = self.statements.get(line)
        return _assigned(stmt) if stmt is not None else set()

    def callees(self, line: int) -> list[tuple[str, int, int]]:
        """Functions of this file that the statement at ``line`` calls (by their last name)."""
        stmt = self.statements.get(line)
        if stmt is None:
            return []
        called = {
            name.rsplit(".", 1)[-1]
            for node in ast.walk(stmt)
            if isinstance(node, ast.Call) and (name := dotted(node.func)) is not None
        }
        return [fn for fn in self.functions if fn[0] in called]


def _span(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno


def rank_findings(
    findings: list[Any], index: SourceIndex, frame: UserFrame
) -> tuple[list[Any], str]:
    """The findings tied to the failing line, best tier first, and how they are tied."""
    expr_names = index.expression_names(frame)
    line_names = index.line_names(frame.line) | expr_names
    tied = [f for f in findings if f.line == frame.line or index.assigned_at(f.line) & expr_names]
    if tied:
        return tied, "tied to the failing expression"
    callees = index.callees(frame.line)
    near = [
        f
        for f in findings
        if (index.assigned_at(f.line) | index.line_names(f.line)) & line_names
        or any(start <= f.line <= end for _, start, end in callees)
    ]
    if near:
        return near, "tied to the names in the failing line and its callees"
    fn = index.enclosing_function(frame.line)
    if fn is not None:
        inner = [f for f in findings if fn[1] <= f.line <= fn[2]]
        if inner:
            return inner, f"none tied to the failing line; in function {fn[0]}()"
    return [], ""


def fix_command(findings: list[Any], path: str) -> str | None:
    """The devfix command that applies these findings' fixes, or None when none has a fix."""
    fixable = [f for f in findings if getattr(f, "has_fix", False)]
    if not fixable:
        return None
    unsafe = any(getattr(f.applicability, "value", f.applicability) == "unsafe" for f in fixable)
    return f"devfix apply {'--unsafe-fixes ' if unsafe else ''}{path}"


# --------------------------------------------------------------------------------------------
# Notebooks: `devfix verify nb.ipynb` runs the notebook's code; locations go back to cells.


def _notebook_for(path: str) -> Any:
    """The Notebook whose code runs as ``path`` under `devfix verify`, else None."""
    spec = os.environ.get(NOTEBOOK_ENV)
    if not spec:
        return None
    try:
        info = json.loads(spec)
        if os.path.realpath(info["py"]) != os.path.realpath(path):
            return None
        from devfix.notebooks import Notebook

        with open(info["ipynb"], encoding="utf-8") as f:
            return Notebook(f.read(), info["ipynb"])
    except Exception:
        return None


def _where(path: str, line: int, notebook: Any) -> str:
    if notebook is not None:
        cell, in_cell = notebook.locate(line)
        return f"{shown_path(notebook.path)}:cell {cell}:{in_cell}"
    return f"{shown_path(path)}:{line}"


def findings_text(frame: UserFrame, found: list[Placement] | None = None) -> str | None:
    """The devfix findings tied to the failing line, or None if the static engine is
    unavailable. ``found`` are the failing op's operands (:func:`placements`): when they name
    the root cause, the ``to fix:`` command is printed only when a finding with a fix covers
    the root's line."""
    try:
        from devfix.engine import check_source  # type: ignore[import-not-found,unused-ignore]
    except Exception:
        return None
    path = frame.path
    notebook = _notebook_for(path)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        findings: list[Any] = list(check_source(source, path))
    except Exception as e:
        return f"  (devfix could not check {shown_path(path)}: {e})\n"
    shown = shown_path(notebook.path if notebook is not None else path)
    if not findings:
        return f"  devfix findings: none in {shown}\n"
    chosen, why = rank_findings(findings, SourceIndex(source), frame)
    if not chosen:
        return f"  devfix findings: none tied to the failing line in {shown}\n"
    lines = [f"  devfix findings ({why}):"]
    for f in sorted(chosen, key=lambda f: (f.line, f.col)):
        fix = f" [fix: {f.fix_title}]" if getattr(f, "has_fix", False) else " [no fix]"
        lines.append(f"    {_where(path, f.line, notebook)}:{f.col}: {f.code} {f.message}{fix}")
    command = root_fix_command(found, chosen, frame) if found else fix_command(chosen, shown)
    if command is not None:
        lines.append(f"  to fix: {command}")
    return "\n".join(lines) + "\n"


def root_fix_command(found: list[Placement], tied: list[Any], frame: UserFrame) -> str | None:
    """The command that fixes the root cause, or None when no finding with a fix covers it:
    the findings at the root operand's provenance line; with no root placed (`.numpy()` of a
    GPU tensor, whose fix is at the failing line), the tied findings on the failing line."""
    root = next((p for p in found if p.root), None)
    if root is not None and root.operand.site is not None:
        path = root.operand.site.path
        fixable = [f for f in root.findings if getattr(f, "has_fix", False)]
        if fixable:
            path = path_of(fixable[0], path)
        notebook = _notebook_for(path)
        return fix_command(root.findings, shown_path(notebook.path if notebook else path))
    on_line = [f for f in tied if f.line == frame.line]
    notebook = _notebook_for(frame.path)
    return fix_command(on_line, shown_path(notebook.path if notebook else frame.path))


# --------------------------------------------------------------------------------------------
# Provenance: for each device involved, the tensor on it and the line that put it there.


@dataclass
class Placement:
    """One operand of the failing op, where its placement was decided, and what fixes it."""

    operand: Operand
    #: the site's location as printed (``model.py:40``), or None when it is not known
    where: str | None
    #: what the site did, in words (``was created at model.py:40 by torch.arange(...)``)
    description: str
    #: the devfix findings on the site's statement (any rule)
    findings: list[Any] = field(default_factory=list)
    suggestion: Suggestion | None = None
    #: the operand ``devfix verify --fix`` repairs first
    root: bool = False
    #: for an uncovered root: the fix the run's evidence gives (:mod:`devfix.vgpu.synthesis`),
    #: shown instead of the suggestion
    runtime: Any = None

    def lines(self) -> list[str]:
        op = self.operand
        shape = "[" + ", ".join(str(n) for n in op.shape) + "]"
        head = f"  the {op.device} tensor `{op.label}` (shape {shape})"
        mark = "  (root cause)" if self.root else ""
        out = [f"{head} {self.description}{mark}"]
        site = op.site
        parent = site.parent if site is not None else None
        if parent is not None and site is not None and site.kind in VALUE_KINDS:
            where = _where(parent.path, parent.line, _notebook_for(parent.path))
            out.append(f"      its value {describe_site(parent, op.device, where)}")
        own = {id(f) for f in findings_at(site)} if site is not None else set()
        for f in self.findings:
            fix = f"fixes it: {f.fix_title}" if f.has_fix else "flags it (no automatic fix)"
            at = ""
            if site is not None and id(f) not in own:  # elsewhere on the provenance chain
                path = path_of(f, site.path)
                at = f" at {_where(path, f.line, _notebook_for(path))}"
            out.append(f"    -> {f.code}{at} {fix}  [{f.message}]")
        if self.runtime is not None:
            fix = self.runtime
            uncovered = "" if self.findings else "no devfix rule covers this line; "
            out.append(
                f"    -> {uncovered}fix from the run "
                f"(`devfix verify --fix` applies it) at {fix.path}:{fix.line}: {fix.summary}"
            )
            out.extend(f"         {text}" for text in _added_lines(fix.code, fix.proposed))
        elif not self.findings and self.suggestion is not None:
            out.append(
                "    -> no devfix rule covers this line; suggested edit (not a devfix rule): "
                f"{self.suggestion.description}:"
            )
            out.append(f"         {self.suggestion.text}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            **self.operand.to_json(),
            "placed_at": self.where,
            "description": self.description,
            "root": self.root,
            "findings": [
                _finding_json(f, path_of(f, self.operand.site.path)) for f in self.findings
            ]
            if self.operand.site is not None
            else [],
            "suggestion": self.suggestion.to_json() if self.suggestion is not None else None,
        }


def _finding_json(f: Any, path: str) -> dict[str, Any]:
    return {
        "code": f.code,
        "message": f.message,
        "path": shown_path(path),
        "line": f.line,
        "col": f.col,
        "fix": f.fix_title if f.has_fix else None,
        "applicability": getattr(f.applicability, "value", str(f.applicability)),
    }


_FINDINGS: dict[str, list[Any]] = {}


def findings_in(path: str) -> list[Any]:
    """The devfix findings of one file (any rule), [] when it cannot be checked."""
    found = _FINDINGS.get(path)
    if found is None:
        try:
            from devfix.engine import check_source  # type: ignore[import-not-found,unused-ignore]

            with open(path, encoding="utf-8") as f:
                found = list(check_source(f.read(), path))
        except Exception:
            found = []
        _FINDINGS[path] = found
    return found


def findings_at(site: Site) -> list[Any]:
    """The findings whose line lies in the statement at the site's line."""
    return findings_in_statement(site.path, site.line)


def findings_in_statement(path: str, line: int) -> list[Any]:
    """The findings of ``path`` whose line lies in the statement at ``line``."""
    stmt = statement_at(path, line)
    first = stmt.node.lineno if stmt.node is not None else line
    last = (stmt.node.end_lineno or first) if stmt.node is not None else line
    return [f for f in findings_in(path) if first <= f.line <= last]


@dataclass(frozen=True)
class ChainFinding:
    """A finding of another statement on a root's provenance chain, with its file."""

    path: str
    finding: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.finding, name)


def path_of(finding: Any, default: str) -> str:
    return finding.path if isinstance(finding, ChainFinding) else default


def chain_lines(site: Site) -> list[tuple[str, int]]:
    """The statements a root's placement went through, nearest first: its site, the line that
    built the optimizer a restored state belongs to, and for a value kept in a buffer, an
    attribute, a batch or an optimizer's state, the site that made the value."""
    out = [(site.path, site.line)]
    if site.owner is not None:
        out.append((site.owner.path, site.owner.line))
    if site.kind in VALUE_KINDS and site.parent is not None:
        out.append((site.parent.path, site.parent.line))
    return out


def findings_on_chain(site: Site) -> list[Any]:
    """The findings on the statements of :func:`chain_lines`, the site's own first: a static
    finding on the chain (the optimizer a checkpoint's state was restored into) names the root
    cause better than the last line the runtime saw (the ``torch.load``)."""
    found: list[Any] = []
    seen: set[tuple[str, str, int]] = set()
    for path, line in chain_lines(site):
        for f in findings_in_statement(path, line):
            key = (os.path.realpath(path), f.code, f.line)
            if key in seen:
                continue
            seen.add(key)
            found.append(f if path == site.path else ChainFinding(path, f))
    return found


def _root_index(message_line: str, operands: tuple[Operand, ...]) -> int:
    """Which operand the fix should move: the one the error names (``index is on cpu``,
    ``but got mask on cpu and self on cuda:0``), else the one on the second device named
    (``found at least two devices, cuda:0 and cpu!``)."""
    if "indices should be either on cpu" in message_line:
        for i, op in enumerate(operands):
            if op.label.startswith("indices"):
                return i
    named = re.search(r"got (\w+) (?:is )?on ", message_line)
    if named is not None:
        for i, op in enumerate(operands):
            if op.label == named.group(1):
                return i
    devs = devices_in(message_line)
    if len(devs) >= 2:
        for i, op in enumerate(operands):
            if op.device == devs[1] or (devs[1] == "cuda" and op.device.startswith("cuda")):
                return i
    for i, op in enumerate(operands):
        if op.device == "cpu":
            return i
    return 0


def _local_operands(exc: BaseException | None, devices: list[str]) -> tuple[Operand, ...]:
    """For an error the runtime did not raise itself (torch's own checks, such as an RNN's
    hidden state): the first tensor on each device named, among the locals of the innermost
    user frame (by variable name, tuples and lists looked into)."""
    if exc is None:
        return ()
    frame = None
    tb = exc.__traceback__
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frame = tb.tb_frame
        tb = tb.tb_next
    if frame is None:
        return ()
    import torch

    found: dict[str, Operand] = {}
    where = frame.f_code.co_name
    for name, value in list(frame.f_locals.items()):
        items = value if isinstance(value, (tuple, list)) else (value,)
        for k, item in enumerate(items[:16]):
            if not isinstance(item, torch.Tensor):
                continue
            device = str(item.device)
            if device in devices and device not in found:
                label = name if item is value else f"{name}[{k}]"
                found[device] = provenance.describe(label, item, where)
    return tuple(found[d] for d in devices if d in found)


def placements(message: str, exc: BaseException | None = None) -> list[Placement]:
    """For each device of the recorded failure whose text is ``message``: the first operand on
    it (one the error names first), where it was placed, and the findings at that line. For an
    error the runtime did not raise, the tensors on those devices among the failing frame's
    locals."""
    if not provenance.enabled():
        return []
    line = mismatch_line(message)
    operands = provenance.failure_for(message)
    if not operands and line is not None:
        operands = _local_operands(exc, devices_in(line))
    if not operands or line is None:
        return []
    root = _root_index(line, operands)
    chosen: dict[str, int] = {}
    for i, op in enumerate(operands):
        if i == root or (op.device not in chosen and op.device != operands[root].device):
            chosen.setdefault(op.device, i)
    chosen[operands[root].device] = root
    numpy = NUMPY_MARKER in line
    if numpy:
        root = -1  # the fix is at the failing `.numpy()`, not where the tensor was placed
    out: list[Placement] = []
    if numpy:
        chosen = {operands[0].device: 0}
    for i in sorted(chosen.values()):
        op = operands[i]
        site = op.site
        other = next((o.device for o in operands if o.device != op.device), "cpu")
        if site is None:
            out.append(
                Placement(
                    op,
                    None,
                    "was placed where devfix cannot see (the runtime or torch itself)",
                    root=i == root,
                )
            )
            continue
        where = _where(site.path, site.line, _notebook_for(site.path))
        found = findings_on_chain(site) if i == root else findings_at(site)
        suggestion = None
        if not found and i == root:
            suggestion = suggest(site, op.device, f'"{other}"', numpy=numpy)
        out.append(
            Placement(
                op,
                where,
                describe_site(site, op.device, where),
                found,
                suggestion,
                root=i == root,
            )
        )
    return out


def _devices(line: str, found: list[Placement]) -> list[str]:
    """The devices of the recorded operands when there are (the error text can name a device
    in words, ``on cpu or on the same device``), else those the error names."""
    named = devices_in(line)
    recorded = [p.operand.device for p in found]
    return recorded if len(recorded) >= 2 and set(recorded) != set(named) else named


def _add_runtime_fix(exc: BaseException, found: list[Placement]) -> None:
    """Give an uncovered root the fix the run's evidence makes, if it makes one."""
    root = next((p for p in found if p.root), None)
    if root is None or any(getattr(f, "has_fix", False) for f in root.findings):
        return  # a finding with a fix is the root cause (verify --fix applies it)
    try:
        from devfix.vgpu import evidence
        from devfix.vgpu.synthesis import RuntimeFix, synthesise

        diagnosis = {
            "operands": [p.to_json() for p in found],
            "evidence": evidence.collect(exc, [(p.operand, p.root) for p in found]),
        }
        made = synthesise(diagnosis)
    except Exception:  # the diagnosis is an aid: it must never hide the script's error
        return
    if isinstance(made, RuntimeFix):
        root.runtime = made


def _added_lines(before: str, after: str) -> list[str]:
    """The lines ``after`` has that ``before`` has not, stripped (at most three)."""
    import difflib

    added = [
        line[1:].strip()
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line.startswith("+") and not line.startswith("+++")
    ]
    return added[:3]


def report(message: str, frame: UserFrame | None, exc: BaseException | None = None) -> str:
    line = mismatch_line(message)
    if line is None:
        return ""
    out = ["", "devfix verify: the script died of a device mismatch"]
    if frame is not None:
        out.append(f"  at {_where(frame.path, frame.line, _notebook_for(frame.path))}")
        out.append(f"    {frame.source}")
    found = placements(message, exc)
    if exc is not None:
        _add_runtime_fix(exc, found)
    devs = _devices(line, found)
    if devs:
        out.append("  devices involved: " + ", ".join(devs))
    for placement in found:
        out.extend(placement.lines())
    if NUMPY_MARKER in line:
        out.append(
            "  `.numpy()` needs a CPU tensor: the fix is at the failing line (`.detach().cpu()`)"
        )
    text = "\n".join(out) + "\n"
    if frame is not None:
        ft = findings_text(frame, found)
        if ft:
            text += ft
    return text


def report_for_exception(exc: BaseException, script: str) -> str:
    msg = str(exc)
    if not is_device_mismatch(msg):
        return ""
    return report(msg, innermost_user_frame(exc), exc)


def diagnose_exception(exc: BaseException) -> dict[str, Any] | None:
    """The facts :func:`report_for_exception` prints, as JSON-ready data (None when the
    exception is no device error)."""
    msg = str(exc)
    line = mismatch_line(msg)
    if line is None:
        return None
    frame = innermost_user_frame(exc)
    raised_at = None
    tied: list[dict[str, Any]] = []
    if frame is not None:
        raised_at = {
            "path": shown_path(frame.path),
            "line": frame.line,
            "source": frame.source,
        }
        tied = [_finding_json(f, frame.path) for f in tied_findings(frame)]
    found = placements(msg, exc)
    from devfix.vgpu import evidence

    return {
        "error": line.strip(),
        "raised_at": raised_at,
        "devices": _devices(line, found),
        "operands": [p.to_json() for p in found],
        "findings": tied,
        "evidence": evidence.collect(exc, [(p.operand, p.root) for p in found]),
    }


def tied_findings(frame: UserFrame) -> list[Any]:
    """The findings :func:`findings_text` prints for the failing line."""
    try:
        with open(frame.path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return []
    chosen, _ = rank_findings(findings_in(frame.path), SourceIndex(source), frame)
    return chosen
