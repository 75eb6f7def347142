"""Fixes made from a run's own evidence, for a root cause no devfix rule covers.

The diagnosis of a device error names the root operand (the tensor on the wrong device), the
device its consumer needed and, from the frames of the user's code still alive when the error
was raised (:mod:`devfix.vgpu.evidence`), which names held what. This module reads that back
against the source and builds one edit, as libcst :class:`~devfix.types.Edit` s of a
:class:`~devfix.types.Finding` applied by the engine (:func:`devfix.fix_loop.apply_given`),
or declines with a one-line reason. The device is always *named* (a tensor's ``.device``, a
device variable, a module's parameter), never written as a literal. In order:

1. **At the model's call.** The error was raised in a module's code (``forward`` or what it
   calls) on a tensor made outside it, and the frame that called the model passes it in:
   ``model(x)`` becomes ``model(x.to(device))``, ``model(**inputs)`` (a dict of tensors)
   becomes ``model(**{k: v.to(device) for k, v in inputs.items()})``. The model code stays
   device-agnostic and every value of the batch moves at once.
2. **At the creation**, when the frame that made the tensor is still running and a name
   visible there (bound before that line and not after it) is an input of its function on the
   needed device, or a device variable: ``torch.ones(n, device=x.device)``; for a buffer or
   attribute registered from a name, ``nn.CrossEntropyLoss(weight=weights.to(device))``.
3. **At the use**, in the failing expression: the root's name gets
   ``.to(<other operand>.device)`` (``F.cross_entropy(logits, labels.to(logits.device))``),
   the other operand named by the frame's name for it (or a module's parameter that is it,
   ``self.embed.weight``), else another tensor or device on the needed device.
4. **At the creation** with any visible name on the needed device (a module's parameter).

A name is matched to a value by the run: the very object (or a tensor with the root's
provenance and device: a view of it); a name that occurs more than once in the expression, or
two names that both hold the root, are ambiguous and declined.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import libcst as cst

from devfix.vgpu.placement import FACTORIES

#: the code and name that fixes from the run carry where a rule's code would be
CODE = "runtime"
NAME = "fix-from-the-run"

#: (line, column, end line, end column): lines from 1, columns from 0, in characters
Span = tuple[int, int, int, int]


@dataclass(frozen=True)
class RuntimeFix:
    """An edit made from the run, ready to write."""

    path: str
    line: int
    col: int
    #: what the edit does, short (``.to(logits.device)``)
    summary: str
    #: why, from the run's evidence
    message: str
    #: the file's code now, and with the edit
    code: str
    proposed: str


@dataclass(frozen=True)
class Declined:
    """No edit: why, in one line."""

    reason: str


Outcome = Union[RuntimeFix, Declined, None]


def synthesise(diagnosis: Mapping[str, Any]) -> RuntimeFix | Declined:
    """The fix the run's evidence gives for the diagnosis's root, or why there is none."""
    evidence = diagnosis.get("evidence")
    root = next((o for o in diagnosis.get("operands", ()) if o.get("root")), None)
    if root is None:
        return Declined("the run recorded no root operand")
    if not evidence or not evidence.get("frames"):
        return Declined("the run kept no frame of your code to name the operands from")
    sources = _Sources()
    context = _Context(evidence, root, sources)
    reasons: list[str] = []
    for strategy in (
        context.at_the_call,
        lambda: context.at_the_creation(max_tier=1),
        context.at_the_use,
        lambda: context.at_the_creation(max_tier=3),
    ):
        try:
            outcome = strategy()
        except _Unreadable as error:
            outcome = Declined(str(error))
        if isinstance(outcome, RuntimeFix):
            return outcome
        if isinstance(outcome, Declined) and outcome.reason not in reasons:
            reasons.append(outcome.reason)
    return Declined("; ".join(reasons) or "the run gives no name for the needed device")


# --------------------------------------------------------------------------------------------
# The source, read with libcst (the edit) and ast (which names are bound where).


class _Unreadable(Exception):
    """The file cannot be read or parsed, or its rewrite cannot be written."""


class _File:
    def __init__(self, path: str) -> None:
        from devfix.errors import DevfixError
        from devfix.parsing import parse
        from devfix.positions import node_ranges
        from devfix.source_file import open_source
        from devfix.tree import build_tables

        self.path = path
        try:
            source = open_source(path)
            self.text = source.code
            self.module = parse(self.text, path)
            self.tree = ast.parse(self.text)
        except (OSError, DevfixError, SyntaxError, ValueError) as error:
            raise _Unreadable(f"{path} cannot be read back ({error})") from None
        if source.render(self.text) != source.document.text:
            raise _Unreadable(f"{path} is a notebook: --fix does not edit notebooks")
        self.ranges = node_ranges(self.module)
        self.tables = build_tables(self.module)
        self.lines = self.text.splitlines()

    def span(self, node: cst.CSTNode) -> Span:
        found = self.ranges[node]
        return (found.start.line, found.start.column, found.end.line, found.end.column)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.tables.parents.get(id(node))

    def of_type(self, kind: type[cst.CSTNode]) -> list[Any]:
        return self.tables.of_type(0, len(self.tables.nodes) - 1, kind)

    def inside(self, kind: type[cst.CSTNode], span: Span) -> list[Any]:
        """The nodes of ``kind`` within ``span``, in source order."""
        start, end = span[:2], span[2:]
        return [
            n for n in self.of_type(kind) if start <= self.span(n)[:2] and self.span(n)[2:] <= end
        ]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def statement_span(self, line: int) -> Span | None:
        """The innermost simple statement (or compound statement's header) covering ``line``."""
        best: Span | None = None
        kinds = (cst.SimpleStatementLine, cst.SimpleStatementSuite)
        for node in self.of_type(cst.SimpleStatementLine) + self.of_type(cst.SimpleStatementSuite):
            assert isinstance(node, kinds)
            span = self.span(node)
            shorter = best is None or span[2] - span[0] < best[2] - best[0]
            if span[0] <= line <= span[2] and shorter:
                best = span
        if best is not None:
            return best
        for stmt in ast.walk(self.tree):
            if isinstance(stmt, (ast.If, ast.While, ast.For, ast.With, ast.Return)) and (
                stmt.lineno == line
            ):
                return (line, 0, line, len(self.lines[line - 1]) if line <= len(self.lines) else 0)
        return None

    def is_load(self, name: cst.Name) -> bool:
        """A read of the variable (not a target, an attribute's name, a keyword, or a name in
        a nested scope), within its statement."""
        child: cst.CSTNode = name
        parent = self.parent(child)
        while parent is not None:
            if isinstance(parent, cst.Attribute) and parent.attr is child:
                return False
            if isinstance(parent, cst.Arg) and parent.keyword is child:
                return False
            if isinstance(parent, (cst.AssignTarget, cst.AsName, cst.Param, cst.ImportAlias)):
                return False
            if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is child:
                return False
            if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is child:
                return False
            if isinstance(parent, cst.NamedExpr) and parent.target is child:
                return False
            if isinstance(
                parent,
                (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp),
            ):
                return False
            if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return True
            child, parent = parent, self.parent(parent)
        return True

    def rewrite(self, edits: Sequence[tuple[cst.CSTNode, str]], summary: str, message: str) -> str:
        """The file's code with each node replaced by the expression's code, through the
        engine (:func:`devfix.fix_loop.apply_given`)."""
        from devfix.errors import DevfixError
        from devfix.fix_loop import apply_given
        from devfix.types import Applicability, Edit, Finding

        first = edits[0][0]
        line, col, end_line, end_col = self.span(first)
        finding = Finding(
            code=CODE,
            name=NAME,
            message=message,
            line=line,
            col=col + 1,
            end_line=end_line,
            end_col=end_col + 1,
            fix_title=summary,
            applicability=Applicability.UNSAFE,
            edits=tuple(Edit(node, cst.parse_expression(text)) for node, text in edits),
        )
        from devfix.suppression import is_suppressed

        if is_suppressed(finding, self.lines):
            raise _Unreadable(f"line {line} of {self.path} says `# devfix: ignore`")
        try:
            return apply_given(self.text, self.module, [finding], path=self.path)
        except (DevfixError, cst.ParserSyntaxError) as error:
            raise _Unreadable(f"the edit cannot be written ({error})") from None


class _Sources:
    def __init__(self) -> None:
        self._files: dict[str, _File] = {}

    def __call__(self, path: str) -> _File:
        found = self._files.get(path)
        if found is None:
            found = self._files[path] = _File(path)
        return found


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of a scope's own code (not of the functions, classes, lambdas and
    comprehensions inside it; their own names are bindings of this scope)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*_SCOPES, *_COMPREHENSIONS)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.extend(node.decorator_list)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)  # not this scope's own: never "visible"
    return []


class _Visibility:
    """Whether a name of the frame still holds, at the frame's line now, the value it had at
    ``line``: bound (a parameter, or a statement before ``line``) and never bound at or after
    it in the scope; a module-level name also never declared ``global`` in a function.

    Not ``strict`` (an edit at the frame's own line, whose names have their values now): bound
    before ``line`` at all, so that the name exists when the line first runs (a name the line
    itself assigns does not, the first time round a loop); names the line reads always do."""

    def __init__(
        self,
        file: _File,
        line: int,
        frame: Mapping[str, Any],
        *,
        strict: bool = True,
        read: Sequence[str] = (),
    ) -> None:
        self.line = line
        self.strict = strict
        self.read = set(read)
        scope: ast.AST = file.tree
        if frame.get("function") != "<module>":
            for node in ast.walk(file.tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    end = node.end_lineno or node.lineno
                    innermost = scope is file.tree or node.lineno > getattr(scope, "lineno", 0)
                    if node.lineno < line <= end and innermost:
                        scope = node
        self.function = scope is not file.tree
        self.params = set(frame.get("params", ())) if self.function else set()
        self.bindings: dict[str, list[int]] = {}
        for node in _scope_nodes(scope):
            for name in _bound_names(node):
                lineno = getattr(node, "lineno", line)
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    lineno = line  # rebound from elsewhere at any time
                self.bindings.setdefault(name, []).append(lineno)
        self.module_bindings: dict[str, list[int]] = {}
        self.declared_global: set[str] = set()
        for node in ast.walk(file.tree):
            if isinstance(node, ast.Global):
                self.declared_global.update(node.names)
        for node in _scope_nodes(file.tree):
            for name in _bound_names(node):
                self.module_bindings.setdefault(name, []).append(getattr(node, "lineno", 0))

    def __call__(self, name: str, described: Mapping[str, Any]) -> bool:
        if not self.strict:
            return self._bound_before(name, described)
        if described.get("global") and self.function:
            # read from the module: bound there once, and never from a function
            lines = self.module_bindings.get(name, [])
            return len(lines) == 1 and name not in self.declared_global
        lines = self.bindings.get(name, [])
        if not self.function and name in self.declared_global:
            return False
        if name in self.params:
            return not lines or all(b < self.line for b in lines)
        return bool(lines) and all(b < self.line for b in lines)

    def _bound_before(self, name: str, described: Mapping[str, Any]) -> bool:
        if name in self.read or name in self.params:
            return True
        if described.get("global") and self.function:
            return bool(self.module_bindings.get(name))
        return any(b < self.line for b in self.bindings.get(name, []))


# --------------------------------------------------------------------------------------------
# Naming the needed device from a frame.


@dataclass(frozen=True)
class _Device:
    tier: int
    expr: str
    #: the name it comes from, and what it is (for the message)
    name: str
    what: str


def _identifier_path(path: str) -> bool:
    return all(part.isidentifier() for part in path.split("."))


def device_names(
    frame: Mapping[str, Any],
    needed: str,
    *,
    used: Sequence[str] = (),
    visible: Callable[[str, Mapping[str, Any]], bool] | None = None,
    device_first: bool = False,
) -> list[_Device]:
    """Expressions of ``frame``'s names that evaluate to ``needed``, best first: the other
    operand's name where the expression uses it (``used``), a device variable or an input of
    the function on that device (tier 1); a module's parameter that is the other operand or
    another tensor on it (2); any module's parameter on it (3). With ``device_first``, a
    device variable comes before everything (a batch goes ``.to(device)``)."""
    params = set(frame.get("params", ()))
    found: list[_Device] = []
    for name, described in frame.get("names", {}).items():
        if visible is not None and not visible(name, described):
            continue
        kind = described.get("kind")
        if kind == "tensor" and described.get("device") == needed:
            other = described.get("holds") in ("other", "other-site")
            if other and name in used:
                found.append(_Device(1, f"{name}.device", name, "the other operand"))
            elif name in params:
                found.append(_Device(1, f"{name}.device", name, "an input of the function"))
            else:
                found.append(_Device(2, f"{name}.device", name, "a tensor"))
        elif kind == "device" and described.get("device") == needed:
            found.append(_Device(0 if device_first else 1, name, name, "the device variable"))
        elif kind == "module":
            holds = described.get("holds", {})
            path = holds.get("other") or holds.get("other-site")
            if path is not None and path.endswith(".bias"):
                # the same layer's weight, where it is on that device too, reads better
                weight = path[: -len("bias")] + "weight"
                path = weight if holds.get("other-site") == weight else path
            if path is not None and _identifier_path(path):
                tier = 1 if name in used and holds.get("other") else 2
                found.append(_Device(tier, f"{name}.{path}.device", name, "the other operand"))
                continue
            path = described.get("devices", {}).get(needed)
            if path is not None and _identifier_path(path):
                found.append(_Device(3, f"{name}.{path}.device", name, "a parameter"))
    order = {name: index for index, name in enumerate(used)}
    found.sort(key=lambda d: (d.tier, order.get(d.name, len(order)), d.name not in params))
    return found


# --------------------------------------------------------------------------------------------
# The strategies.


_ROOT_ROLES = {"root": 0, "root-site": 1}


def _frame_span(file: _File, frame: Mapping[str, Any]) -> Span | None:
    line = int(frame["line"])
    col, end_line, end_col = frame.get("col"), frame.get("end_line"), frame.get("end_col")
    if col is not None and end_line is not None and end_col is not None:
        return (line, int(col), int(end_line), int(end_col))
    return file.statement_span(line)


def _where(frame_or_site: Mapping[str, Any]) -> str:
    return f"{frame_or_site['path']}:{frame_or_site['line']}"


def _same_function(site: Mapping[str, Any], frame: Mapping[str, Any]) -> bool:
    return (
        site.get("path") == frame.get("path")
        and int(frame.get("first_line", 0)) <= int(site.get("line", 0))
        and int(site.get("line", 0)) <= int(frame.get("last_line", 0))
        and site.get("function") in (frame.get("qualname"), frame.get("function"))
    )


def _free_names(taken: str) -> tuple[str, str]:
    for pair in (("k", "v"), ("key", "value"), ("name", "tensor")):
        if not any(_mentions(taken, n) for n in pair):
            return pair
    return ("_key", "_value")


def _mentions(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        return True
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))


class _Context:
    def __init__(self, evidence: Mapping[str, Any], root: Mapping[str, Any], sources: _Sources):
        self.frames: list[Mapping[str, Any]] = list(evidence["frames"])
        self.needed = str(evidence["needed"])
        self.root_device = str(evidence.get("root_device", root.get("device")))
        self.root = root
        self.site: Mapping[str, Any] | None = root.get("site")
        self.sources = sources

    def _label(self) -> str:
        return f"the {self.root_device} tensor `{self.root.get('label')}`"

    # 1. at the model's call ---------------------------------------------------------------

    def at_the_call(self) -> Outcome:
        inside = [i for i, f in enumerate(self.frames) if f.get("module_method")]
        if not inside or self.site is None:
            return None
        outermost = max(inside)
        if self.site.get("kind") in ("buffer", "attribute", "state"):
            return None  # the model's own state: not an input
        if any(_same_function(self.site, f) for f in self.frames[: outermost + 1]):
            return None  # made in the model's own code
        if outermost + 1 >= len(self.frames):
            return Declined("the model is called from outside your code")
        caller = self.frames[outermost + 1]
        file = self.sources(caller["path"])
        span = _frame_span(file, caller)
        if span is None:
            return Declined(f"the call at {_where(caller)} cannot be found in the source")
        calls = [c for c in file.inside(cst.Call, span) if file.span(c) == span]
        if len(calls) != 1:
            return Declined(f"the call at {_where(caller)} cannot be told in the source")
        (call,) = calls
        names = caller.get("names", {})
        held: list[tuple[cst.Arg, Mapping[str, Any]]] = []
        for arg in call.args:
            if not isinstance(arg.value, cst.Name):
                continue
            described = names.get(arg.value.value)
            if described is None:
                continue
            as_dict = arg.star == "**" and described.get("kind") == "dict"
            as_tensor = (
                arg.star == ""
                and described.get("kind") == "tensor"
                and described.get("holds") in _ROOT_ROLES
            )
            if as_dict or as_tensor:
                held.append((arg, described))
        if not held:
            return Declined(f"no argument of the call at {_where(caller)} holds {self._label()}")
        if len(held) > 1:
            return Declined(f"several arguments of the call at {_where(caller)} hold the root")
        arg, described = held[0]
        assert isinstance(arg.value, cst.Name)
        holder = arg.value.value
        used = [n.value for n in file.inside(cst.Name, span) if file.is_load(n)]
        visible = _Visibility(file, _first_line(file, span), caller, strict=False, read=used)
        devices = device_names(caller, self.needed, used=used, visible=visible, device_first=True)
        if not devices:
            return Declined(
                f"no name at {_where(caller)} holds a tensor or device on {self.needed}"
            )
        device = devices[0]
        callee = file.code(call.func)
        if described.get("kind") == "dict":
            if not described.get("all_tensors") or not described.get("string_keys"):
                return Declined(
                    f"`{holder}` at {_where(caller)} holds values that are not tensors "
                    "(a value cannot be moved with .to())"
                )
            key, value = _free_names(f"{holder} + {device.expr}")
            text = f"{{{key}: {value}.to({device.expr}) for {key}, {value} in {holder}.items()}}"
            summary = f"each value of `{holder}` .to({device.expr})"
        else:
            text = f"{holder}.to({device.expr})"
            summary = f".to({device.expr})"
        message = (
            f"{self._label()} reaches `{callee}` at {_where(caller)} through `{holder}`; it is "
            f"moved there to {self.needed}, named by {device.what} `{device.name}` "
            "(a fix from the run, not a devfix rule)"
        )
        return self._fix(file, [(arg.value, text)], summary, message)

    # 2 and 4. at the creation -------------------------------------------------------------

    def at_the_creation(self, *, max_tier: int) -> Outcome:
        site = self.site
        if site is None or site.get("kind") not in ("created", "buffer", "attribute"):
            return None
        frame = next((f for f in self.frames if _same_function(site, f)), None)
        if frame is None:
            if max_tier == 1:
                return None
            return Declined(
                f"{site.get('function')}() at {_where(site)}, which made {self._label()}, is "
                "no longer running: the run cannot tell which of its names are on "
                f"{self.needed}"
            )
        file = self.sources(site["path"])
        line = int(site["line"])
        span = file.statement_span(line)
        if span is None:
            return Declined(f"the statement at {_where(site)} cannot be found in the source")
        visible = _Visibility(file, span[0], frame)
        devices = [
            d for d in device_names(frame, self.needed, visible=visible) if d.tier <= max_tier
        ]
        if not devices:
            if max_tier == 1:
                return None
            return Declined(
                f"no name visible at {_where(site)} holds a tensor or device on {self.needed}"
            )
        device = devices[0]
        factory = site.get("kind") == "created" or self._parent_here(span)
        if factory:
            return self._with_device(file, span, device)
        return self._moved_value(file, frame, span, device)

    def _parent_here(self, span: Span) -> bool:
        parent = self.site.get("parent") if self.site is not None else None
        return (
            parent is not None
            and parent.get("kind") == "created"
            and parent.get("path") == self.site.get("path")  # type: ignore[union-attr]
            and span[0] <= int(parent.get("line", 0)) <= span[2]
        )

    def _with_device(self, file: _File, span: Span, device: _Device) -> Outcome:
        assert self.site is not None
        site = self.site if self.site.get("kind") == "created" else self.site["parent"]
        op = str(site.get("op", "")).split("::", 1)[-1].split(".", 1)[0]
        line = int(site["line"])
        calls = [
            c
            for c in file.inside(cst.Call, span)
            if file.span(c)[0] <= line <= file.span(c)[2] and _last_name(c) in FACTORIES
        ]
        named = [c for c in calls if _last_name(c) == op]
        calls = named or calls
        if len(calls) != 1:
            what = "no tensor factory" if not calls else "several tensor factories"
            return Declined(f"{what} at {_where(site)} can be told as the one that made it")
        (call,) = calls
        if any(a.keyword is not None and a.keyword.value == "device" for a in call.args):
            return Declined(f"the factory at {_where(site)} names its device already")
        if any(a.star == "**" for a in call.args):
            return Declined(f"the factory at {_where(site)} may get its device from **kwargs")
        if _last_name(call).startswith("new_") or _last_name(call).endswith("_like"):
            return Declined(f"the factory at {_where(site)} follows its tensor's device")
        bare = call.with_changes(lpar=(), rpar=())
        code = file.code(bare)
        inner = code[: code.rindex(")")].rstrip()
        separator = "" if inner.endswith(("(", ",")) else ", "
        if inner.endswith(","):
            separator = " "
        text = f"{inner}{separator}device={device.expr})"
        if call.lpar:
            text = "(" * len(call.lpar) + text + ")" * len(call.rpar)
        summary = f"device={device.expr}"
        message = (
            f"{self._label()} is created at {_where(site)} without a device; it is created on "
            f"{self.needed}, named by {device.what} `{device.name}` "
            "(a fix from the run, not a devfix rule)"
        )
        return self._fix(file, [(call, text)], summary, message)

    def _moved_value(
        self, file: _File, frame: Mapping[str, Any], span: Span, device: _Device
    ) -> Outcome:
        assert self.site is not None
        names = frame.get("names", {})
        holders = [
            n
            for n in file.inside(cst.Name, span)
            if names.get(n.value, {}).get("kind") == "tensor"
            and names[n.value].get("holds") == "root"
            and file.is_load(n)
        ]
        if not holders:
            return Declined(f"no name at {_where(self.site)} holds {self._label()}")
        if len({n.value for n in holders}) > 1 or len(holders) > 1:
            return Declined(f"{self._label()} is named more than once at {_where(self.site)}")
        (holder,) = holders
        summary = f".to({device.expr})"
        message = (
            f"{self._label()} is kept at {_where(self.site)} from `{holder.value}`; it is "
            f"moved there to {self.needed}, named by {device.what} `{device.name}` "
            "(a fix from the run, not a devfix rule)"
        )
        return self._fix(file, [(holder, f"{holder.value}.to({device.expr})")], summary, message)

    # 3. at the use ------------------------------------------------------------------------

    def at_the_use(self) -> Outcome:
        frame = self.frames[0]
        file = self.sources(frame["path"])
        span = _frame_span(file, frame)
        if span is None:
            return Declined(f"the failing expression at {_where(frame)} cannot be found")
        names = frame.get("names", {})
        loads = [n for n in file.inside(cst.Name, span) if file.is_load(n)]
        holders = [
            n
            for n in loads
            if names.get(n.value, {}).get("kind") == "tensor"
            and names[n.value].get("holds") in _ROOT_ROLES
        ]
        if not holders:
            return Declined(
                f"no name in the failing expression at {_where(frame)} holds {self._label()}"
            )
        best = min(_ROOT_ROLES[names[n.value]["holds"]] for n in holders)
        holders = [n for n in holders if _ROOT_ROLES[names[n.value]["holds"]] == best]
        if len({n.value for n in holders}) > 1:
            listed = ", ".join(sorted(f"`{n}`" for n in {n.value for n in holders}))
            return Declined(f"{listed} at {_where(frame)} all hold {self._label()}: ambiguous")
        if len(holders) > 1:
            return Declined(
                f"`{holders[0].value}` occurs more than once in the failing expression at "
                f"{_where(frame)}: ambiguous"
            )
        (holder,) = holders
        used = [n.value for n in loads]
        visible = _Visibility(file, _first_line(file, span), frame, strict=False, read=used)
        devices = device_names(frame, self.needed, used=used, visible=visible)
        devices = [d for d in devices if d.name != holder.value]
        if not devices:
            return Declined(f"no name at {_where(frame)} holds a tensor or device on {self.needed}")
        device = devices[0]
        summary = f".to({device.expr})"
        message = (
            f"`{holder.value}` ({self.root_device}) meets {self.needed} in the failing "
            f"expression at {_where(frame)}; it is moved there, named by {device.what} "
            f"`{device.name}` (a fix from the run, not a devfix rule)"
        )
        return self._fix(file, [(holder, f"{holder.value}.to({device.expr})")], summary, message)

    # -------------------------------------------------------------------------------------

    def _fix(
        self,
        file: _File,
        edits: Sequence[tuple[cst.CSTNode, str]],
        summary: str,
        message: str,
    ) -> Outcome:
        proposed = file.rewrite(edits, summary, message)
        if proposed == file.text:
            return Declined(f"the edit at {file.path} changes nothing")
        line, col, _, _ = file.span(edits[0][0])
        return RuntimeFix(file.path, line, col + 1, summary, message, file.text, proposed)


def _first_line(file: _File, span: Span) -> int:
    """The first line of the statement holding ``span``."""
    statement = file.statement_span(span[0])
    return statement[0] if statement is not None else span[0]


def _last_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""
