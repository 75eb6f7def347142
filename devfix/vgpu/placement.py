"""Reading a provenance site back in the user's source: what the line did, and an edit that
would have put the tensor on the other operand's device.

A :class:`~devfix.vgpu.provenance.Site` names a file, a line and what happened there (an op
created or moved a tensor, ``torch.load`` loaded it, an attribute or buffer was set, a
DataLoader handed out a batch). This module finds the call on that line that did it
(``torch.arange(...)``, ``model.to(device)``), says it in words, and writes the suggested edit
shown when no devfix rule covers the line. Nothing here imports torch.
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass
from typing import Any

from devfix.vgpu.provenance import (
    ATTRIBUTE,
    BATCH,
    BUFFER,
    CREATED,
    LOADED,
    MOVED,
    STATE,
    Site,
    shown_path,
)

#: names of calls that build a tensor where ``device=`` (or the default device) decides
FACTORIES = frozenset(
    (
        "tensor",
        "as_tensor",
        "asarray",
        "from_numpy",
        "frombuffer",
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "range",
        "linspace",
        "logspace",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
        "normal",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "tril_indices",
        "triu_indices",
        "bartlett_window",
        "hann_window",
        "hamming_window",
        "blackman_window",
        "kaiser_window",
        "scalar_tensor",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "new_tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "BFloat16Tensor",
        "LongTensor",
        "IntTensor",
        "ShortTensor",
        "ByteTensor",
        "CharTensor",
        "BoolTensor",
        "Tensor",
    )
)
_MOVES = frozenset(("to", "cuda", "cpu", "type"))


def dotted(node: ast.AST) -> str | None:
    """``self.scale`` for an attribute chain on a name, ``x`` for a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def call_name(call: ast.Call) -> str:
    """``torch.arange`` for a call on a dotted name, ``.to`` for a method of an expression."""
    name = dotted(call.func)
    if name is not None:
        return name
    if isinstance(call.func, ast.Attribute):
        return "." + call.func.attr
    return "(...)"


def _last(call: ast.Call) -> str:
    return call_name(call).rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Statement:
    """The statement at a line of a file, parsed, with the file's text."""

    path: str
    line: int
    node: ast.stmt | None
    source: str

    def text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ""

    def calls(self) -> list[ast.Call]:
        if self.node is None:
            return []
        found = [n for n in ast.walk(self.node) if isinstance(n, ast.Call)]
        return sorted(found, key=lambda c: (c.lineno, c.col_offset))

    @property
    def first_line(self) -> str:
        return linecache.getline(self.path, self.line).strip()


_STATEMENTS: dict[tuple[str, int], Statement] = {}


def statement_at(path: str, line: int) -> Statement:
    """The innermost statement covering ``line`` of ``path`` (None node if it cannot be read)."""
    key = (path, line)
    found = _STATEMENTS.get(key)
    if found is not None:
        return found
    source = "".join(linecache.getlines(path))
    node: ast.stmt | None = None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        for candidate in ast.walk(tree):
            if not isinstance(candidate, ast.stmt):
                continue
            definition = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            if isinstance(candidate, definition) and candidate.lineno != line:
                continue  # a definition covers its body's lines: only its own line counts
            end = candidate.end_lineno or candidate.lineno
            innermost = node is None or (end - candidate.lineno) < (
                (node.end_lineno or node.lineno) - node.lineno
            )
            if candidate.lineno <= line <= end and innermost:
                node = candidate
    found = _STATEMENTS[key] = Statement(path, line, node, source)
    return found


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def site_call(site: Site) -> tuple[Statement, ast.Call | None]:
    """The call on the site's line that did what the site records, if one can be told."""
    stmt = statement_at(site.path, site.line)
    calls = [c for c in stmt.calls() if c.lineno <= site.line <= (c.end_lineno or c.lineno)]
    calls = calls or stmt.calls()
    if not calls:
        return stmt, None
    op = site.op.split("::", 1)[-1].split(".", 1)[0]
    via_class = (site.via or "").split(".", 1)[0]
    if site.kind == MOVED:
        moves = [c for c in calls if _last(c) in _MOVES]
        return stmt, (moves[0] if moves else calls[0])
    if site.kind == LOADED:
        loads = [c for c in calls if _last(c) == "load"]
        return stmt, (loads[0] if loads else calls[0])
    if site.kind == STATE:
        restores = [c for c in calls if _last(c) == "load_state_dict"]
        return stmt, (restores[0] if restores else None)
    if site.kind in (ATTRIBUTE, BUFFER, BATCH):
        buffers = [c for c in calls if _last(c) == "register_buffer"]
        return stmt, (buffers[0] if buffers else None)
    for pick in (
        [c for c in calls if _last(c) == op],
        [c for c in calls if via_class and _last(c) == via_class],
        [c for c in calls if _last(c) in FACTORIES],
    ):
        if pick:
            return stmt, pick[0]
    return stmt, calls[0]


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 5] + "...)"


def call_text(stmt: Statement, call: ast.Call) -> str:
    """``torch.arange(...)`` — the call with its arguments elided."""
    name = call_name(call)
    if name.startswith("."):
        receiver = stmt.text(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        return _short(f"{receiver}{name}({_args_text(stmt, call)})")
    return f"{name}(...)"


def _args_text(stmt: Statement, call: ast.Call) -> str:
    parts = [stmt.text(a) for a in call.args] + [stmt.text(k) for k in call.keywords]
    return ", ".join(parts)


def without_device(call: ast.Call | None) -> bool:
    """A tensor factory that leaves the device to the default (the CPU)."""
    if call is None or _last(call) not in FACTORIES:
        return False
    if _keyword(call, "device") is not None:
        return False
    if _last(call).startswith("new_") or _last(call).endswith("_like"):
        return False  # these follow their tensor's device
    return not any(k.arg is None for k in call.keywords)  # `**kwargs` may hold a device


def describe(site: Site, device: str, where: str) -> str:
    """What the site did, in words: ``was created at model.py:40 by torch.arange(...) without
    device=`` (``where`` is the site's location as the report shows it)."""
    stmt, call = site_call(site)
    by = f" by {call_text(stmt, call)}" if call is not None else ""
    if site.kind == CREATED:
        if site.via and site.via.endswith(".__init__") and call is not None:
            by = f" by {call_text(stmt, call)} (module construction)"
        missing = " without device=" if device == "cpu" and without_device(call) else ""
        return f"was created at {where}{by}{missing}"
    if site.kind == MOVED:
        if site.via and site.via.startswith(("DataParallel.", "replicate", "Broadcast")):
            return f"was moved to {device} at {where} by nn.DataParallel ({site.via})"
        return f"was moved to {device} at {where}{by}"
    if site.kind == LOADED:
        missing = ""
        if call is not None and _keyword(call, "map_location") is None and len(call.args) < 2:
            missing = " without map_location="
        return f"was loaded onto {device} at {where}{by}{missing}"
    if site.kind == ATTRIBUTE:
        name = site.op.split(".", 1)[-1]
        return (
            f"is the plain tensor attribute `{name}` set at {where} "
            "(Module.to() and DataParallel move parameters and buffers, not plain attributes)"
        )
    if site.kind == BUFFER:
        name = site.op.split(".", 1)[-1]
        return f"is the buffer `{name}` registered at {where}"
    if site.kind == BATCH:
        return f"is a DataLoader batch read at {where} and never moved"
    if site.kind == STATE:
        owner = site.owner
        built = ""
        if owner is not None:
            built = f" (the optimizer built at {shown_path(owner.path)}:{owner.line})"
        return f"was restored into an optimizer's state at {where}{by}{built}"
    return f"was placed at {where}"


# --------------------------------------------------------------------------------------------
# Suggested edits (not devfix rules) for sites no rule covers.


@dataclass(frozen=True)
class Suggestion:
    """An edit a person can make; not a devfix rule, never applied by devfix."""

    path: str
    line: int
    #: the line as it would read after the edit (one line; longer statements are elided)
    text: str
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": shown_path(self.path),
            "line": self.line,
            "text": self.text,
            "description": self.description,
            "rule": None,
        }


def _replace_span(stmt: Statement, node: ast.AST, new: str) -> str | None:
    """The statement's first line with ``node`` (on that line) replaced by ``new``."""
    line = linecache.getline(stmt.path, stmt.line).rstrip("\n")
    lineno = getattr(node, "lineno", None)
    end_lineno = getattr(node, "end_lineno", None)
    col = getattr(node, "col_offset", None)
    end_col = getattr(node, "end_col_offset", None)
    if lineno != stmt.line or end_lineno != stmt.line or col is None or end_col is None:
        return None
    raw = line.encode()
    return (raw[:col] + new.encode() + raw[end_col:]).decode(errors="replace").strip()


def _with_keyword(stmt: Statement, call: ast.Call, keyword: str, value: str) -> str | None:
    text = stmt.text(call)
    if not text.endswith(")"):
        return None
    existing = _keyword(call, keyword)
    if existing is not None:
        new = stmt.text(call).replace(stmt.text(existing), f"{keyword}={value}", 1)
    else:
        inner = text[:-1].rstrip()
        sep = "" if inner.endswith("(") else ", "
        new = f"{inner}{sep}{keyword}={value})"
    return _replace_span(stmt, call, new)


def suggest(site: Site, device: str, other: str, *, numpy: bool = False) -> Suggestion | None:
    """An edit at the site that would put the tensor on ``other``'s device (``other`` is how
    the other operand can be named there, e.g. ``src.device`` or ``"cuda:0"``)."""
    stmt, call = site_call(site)
    line = stmt.first_line
    if (
        numpy
        and call is not None
        and _last(call) == "numpy"
        and isinstance(call.func, ast.Attribute)
    ):
        receiver = stmt.text(call.func.value)
        new = _replace_span(stmt, call, f"{receiver}.detach().cpu().numpy()")
        if new:
            return Suggestion(site.path, site.line, new, "copy the tensor to the CPU first")
        return None
    if site.kind == CREATED and call is not None and _last(call) in FACTORIES:
        new = _with_keyword(stmt, call, "device", other)
        if new:
            return Suggestion(
                site.path, site.line, new, f"create it on the other operand's device ({other})"
            )
    if site.kind == MOVED and call is not None and _last(call) in ("to", "cuda"):
        receiver = stmt.text(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        new = _replace_span(stmt, call, f"{receiver}.to({other})")
        if new:
            return Suggestion(
                site.path, site.line, new, f"move it to the other operand's device ({other})"
            )
    if site.kind == LOADED and call is not None:
        new = _with_keyword(stmt, call, "map_location", other)
        if new:
            return Suggestion(
                site.path, site.line, new, f"load it onto the other operand's device ({other})"
            )
    if site.kind == ATTRIBUTE and isinstance(stmt.node, ast.Assign) and len(stmt.node.targets) == 1:
        target = stmt.node.targets[0]
        if isinstance(target, ast.Attribute):
            owner = stmt.text(target.value)
            value = stmt.text(stmt.node.value)
            return Suggestion(
                site.path,
                site.line,
                _short(f'{owner}.register_buffer("{target.attr}", {value})', 100),
                "register it as a buffer, so that Module.to() moves it",
            )
    if site.kind == BATCH and isinstance(stmt.node, (ast.For, ast.AsyncFor)):
        names = [stmt.text(t) for t in _targets(stmt.node.target)]
        if names:
            moved = ", ".join(f"{n}.to({other})" for n in names)
            return Suggestion(
                site.path,
                site.line,
                f"{', '.join(names)} = {moved}",
                f"move the batch at the top of the loop body (line {site.line + 1})",
            )
    if site.kind == STATE and line:
        return Suggestion(
            site.path,
            site.line,
            line,
            "restore the optimizer after the model is moved to its device "
            "(load_state_dict casts the state to the parameters' device when it runs)",
        )
    if line:
        return Suggestion(
            site.path,
            site.line,
            line,
            f"move the tensor made here to the other operand's device with .to({other})",
        )
    return None


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        out: list[ast.AST] = []
        for elt in node.elts:
            out.extend(_targets(elt))
        return out
    if isinstance(node, ast.Name):
        return [node]
    return []
