"""What the script-level passes (DF301-DF305) know about training scripts.

Model code (`nn.Module` methods) belongs to DF101/DF102; these helpers answer questions about the
code *around* the model: which statement block a statement sits in, which names a statement reads
and binds, where the model is moved to a device, which names hold a device, and whether the script
runs as one process of a distributed job (torchrun, DDP, accelerate, `Trainer`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import call_tail
from devfix.codemods._model_code import ModelCode
from devfix.codemods._torch_names import DISTRIBUTED_MARKERS, TORCH_DTYPES
from devfix.codemods._tree import walk
from devfix.context import children_view

#: The helper DF304 inserts once per script; the other passes treat it as a device source.
SELECT_DEVICE = "select_device"

Body = Sequence[cst.BaseStatement]


def calls_in(root: cst.CSTNode) -> Iterator[cst.Call]:
    for node in walk(root):
        if isinstance(node, cst.Call):
            yield node


def root_name(node: cst.BaseExpression) -> str | None:
    """`model.module.parameters()` -> "model"; `x[0].y` -> "x"."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        else:
            return None


def names_read(root: cst.CSTNode) -> set[str]:
    """Names loaded anywhere under `root` (attribute names and keywords excluded)."""
    skip: set[int] = set()
    for node in walk(root):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
            skip.add(id(node.target))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            skip.add(id(node.name))
        elif isinstance(node, cst.AsName):
            for name in walk(node.name):
                skip.add(id(name))
    return {
        node.value for node in walk(root) if isinstance(node, cst.Name) and id(node) not in skip
    }


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def names_bound(root: cst.CSTNode) -> set[str]:
    """Names (re)bound anywhere under `root`: assignments, loops, `with ... as`, defs, imports."""
    bound: set[str] = set()
    for node in walk(root):
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)):
            bound.update(_target_names(node.target))
        elif isinstance(node, cst.AsName):
            bound.update(_target_names(node.name))
        elif isinstance(node, cst.NamedExpr):
            bound.update(_target_names(node.target))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            bound.add(node.name.value)
        elif isinstance(node, cst.ImportAlias) and node.asname is None:
            name = node.name
            while isinstance(name, cst.Attribute):
                name = name.value  # type: ignore[assignment]
            if isinstance(name, cst.Name):
                bound.add(name.value)
    return bound


@dataclass(frozen=True)
class Placement:
    """A statement as an element of the body that directly contains it."""

    owner: cst.CSTNode
    body: Body
    index: int

    @property
    def statement(self) -> cst.BaseStatement:
        return self.body[self.index]


def body_of(node: cst.CSTNode) -> Body | None:
    if isinstance(node, cst.Module):
        return node.body
    if isinstance(node, cst.IndentedBlock):
        return node.body
    return None


def placements(checker: DevicePass, node: cst.CSTNode) -> list[Placement]:
    """Every (body, index) that holds `node` or one of its ancestors, innermost first."""
    found: list[Placement] = []
    current: cst.CSTNode | None = node
    while current is not None:
        parent = checker.context.parent(current)
        if parent is None:
            break
        body = body_of(parent)
        if body is not None:
            for index, statement in enumerate(body):
                if statement is current:
                    found.append(Placement(parent, body, index))
                    break
        current = parent
    return found


def common_placement(
    checker: DevicePass, first: cst.CSTNode, second: cst.CSTNode
) -> tuple[Placement, Placement] | None:
    """The innermost body holding both nodes, as (placement of `first`, placement of `second`)."""
    second_places = {id(p.owner): p for p in placements(checker, second)}
    for place in placements(checker, first):
        other = second_places.get(id(place.owner))
        if other is not None:
            return place, other
    return None


def in_model_method(checker: DevicePass, node: cst.CSTNode) -> bool:
    """Inside a method of an `nn.Module` subclass (DF101/DF102 territory)."""
    code = ModelCode.of(checker)
    for ancestor in checker.context.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            info = code.function_info(ancestor)
            if info.owner is not None and info.owner.is_module:
                return True
    return False


_MAPPING_METHODS = frozenset({"map", "with_transform", "set_transform", "filter"})
_DATA_KEYWORDS = frozenset({"collate_fn", "data_collator", "transform", "target_transform"})


def data_callbacks(checker: DevicePass) -> frozenset[str]:
    """Names of functions handed to `ds.map(f)`, `DataLoader(collate_fn=f)`, `transform=f`."""
    cached = checker.context.shared.get("script_flow.data_callbacks")
    if isinstance(cached, frozenset):
        return cached
    names: set[str] = set()
    for call in calls_in(checker.context.module):
        mapping = isinstance(call.func, cst.Attribute) and call.func.attr.value in _MAPPING_METHODS
        for arg in call.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if isinstance(arg.value, cst.Name) and (
                keyword in _DATA_KEYWORDS or (mapping and keyword in (None, "function"))
            ):
                names.add(arg.value.value)
    result = frozenset(names)
    checker.context.shared["script_flow.data_callbacks"] = result
    return result


def in_data_pipeline(checker: DevicePass, node: cst.CSTNode) -> bool:
    """Inside a `Dataset` method, a collate function or a function handed to `ds.map(...)`
    (DF201 territory)."""
    code = ModelCode.of(checker)
    for ancestor in checker.context.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            info = code.function_info(ancestor)
            if info.owner is not None and info.owner.is_dataset:
                return True
            if "collate" in info.name.lower() or info.name in data_callbacks(checker):
                return True
    return False


def enclosing_scope(checker: DevicePass, node: cst.CSTNode) -> cst.CSTNode:
    """The innermost function around `node`, else the module."""
    for ancestor in checker.context.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return ancestor
    return checker.context.module


def scope_statements(scope: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes under `scope` that belong to it (nested functions and classes excluded)."""
    body = scope.body if isinstance(scope, (cst.FunctionDef, cst.Module)) else scope
    stack: list[cst.CSTNode] = list(reversed(body)) if isinstance(body, Sequence) else [body]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(children_view(node)))


def line_of(checker: DevicePass, node: cst.CSTNode) -> int:
    return checker.context.position(node).start.line


# -- distributed scripts -------------------------------------------------------------------------


def is_distributed(checker: DevicePass) -> bool:
    """The script runs as one of several processes (torchrun, DDP, accelerate, `Trainer`)."""
    cached = checker.context.shared.get("script_flow.distributed")
    if isinstance(cached, bool):
        return cached
    result = False
    for node in walk(checker.context.module):
        if isinstance(node, cst.SimpleString) and node.evaluated_value in ("LOCAL_RANK", "RANK"):
            result = True
            break
        if isinstance(node, (cst.Name, cst.Attribute)) and call_tail(node) in _MARKER_TAILS:
            name = checker.qualified_name(node)
            if name is not None and _is_marker(name):
                result = True
                break
    checker.context.shared["script_flow.distributed"] = result
    return result


_MARKER_TAILS = frozenset(name.rsplit(".", 1)[1] for name in DISTRIBUTED_MARKERS) | {
    "Trainer",
    "Seq2SeqTrainer",
    "SFTTrainer",
    "DPOTrainer",
}


def _is_marker(name: str) -> bool:
    if name in DISTRIBUTED_MARKERS:
        return True
    root, _, tail = name.rpartition(".")
    return tail.endswith("Trainer") and root.split(".")[0] in ("transformers", "trl")


# -- devices -------------------------------------------------------------------------------------


def is_dtype(checker: DevicePass, node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Name, cst.Attribute)):
        return checker.qualified_name(node) in TORCH_DTYPES
    return False


def string_device(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal naming a device type, e.g. "cuda:1"; else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str):
            kind = value.split(":", 1)[0]
            if kind in ("cuda", "cpu", "mps", "xpu", "meta"):
                return value
    return None


def device_valued(checker: DevicePass, value: cst.BaseExpression) -> bool:
    """`torch.device(...)`, `select_device()`, a device string, or a conditional of them."""
    if isinstance(value, cst.IfExp):
        return device_valued(checker, value.body) and device_valued(checker, value.orelse)
    if string_device(value) is not None:
        return True
    if isinstance(value, cst.Call):
        if isinstance(value.func, cst.Name) and value.func.value == SELECT_DEVICE:
            return True
        if call_tail(value.func) == "device":
            return checker.qualified_name(value.func) == "torch.device"
    return False


def device_names(checker: DevicePass, node: cst.CSTNode) -> list[str]:
    """Names holding a device that `node` can read: bound earlier in its own function, or at
    module level (earlier, or anywhere when `node` is in a function that does not rebind it)."""
    scope = enclosing_scope(checker, node)
    line = line_of(checker, node)
    found: list[str] = []
    local_bound: set[str] = set()
    if not isinstance(scope, cst.Module):
        for inner in scope_statements(scope):
            local_bound |= names_bound(inner) if isinstance(inner, cst.AssignTarget) else set()
        if isinstance(scope, cst.FunctionDef):
            local_bound |= {p.name.value for p in _all_params(scope.params)}
        for assign, name in _device_assignments(checker, scope):
            if line_of(checker, assign) < line and name not in found:
                found.append(name)
    for assign, name in _device_assignments(checker, checker.context.module):
        if name in found or name in local_bound:
            continue
        if isinstance(scope, cst.Module) and line_of(checker, assign) >= line:
            continue
        found.append(name)
    return found


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    extra = [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return [*params.posonly_params, *params.params, *params.kwonly_params, *extra]


def _device_assignments(
    checker: DevicePass, scope: cst.CSTNode
) -> Iterator[tuple[cst.Assign, str]]:
    for node in scope_statements(scope):
        if (
            isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and device_valued(checker, node.value)
        ):
            yield node, node.targets[0].target.value


@dataclass(frozen=True)
class ModelMove:
    """`model.to(device)` / `model = model.cuda()` etc.: the call, and the name moved."""

    call: cst.Call
    name: str

    @property
    def device_args(self) -> Sequence[cst.Arg]:
        return self.call.args


def move_of(checker: DevicePass, call: cst.Call) -> ModelMove | None:
    """`name.to(<device>)` or `name.cuda(...)` of a plain name; a dtype-only `.to` is no move."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return None
    method = func.attr.value
    if method == "cuda":
        return ModelMove(call, func.value.value)
    if method != "to":
        return None
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    keywords = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    target: cst.BaseExpression | None = None
    if "device" in keywords:
        target = keywords["device"].value
    elif positional:
        target = positional[0].value
    if target is None or is_dtype(checker, target):
        return None
    if isinstance(target, cst.SimpleString) and string_device(target) in ("cpu", "meta"):
        return None
    if isinstance(target, cst.Call) and checker.qualified_name(target.func) == "torch.device":
        first = target.args[0].value if target.args else None
        if isinstance(first, cst.SimpleString) and string_device(first) in ("cpu", "meta"):
            return None
    return ModelMove(call, func.value.value)


def model_moves(checker: DevicePass, scope: cst.CSTNode) -> list[ModelMove]:
    """Device moves of plain names in `scope`, in source order."""
    moves = []
    for node in scope_statements(scope):
        if isinstance(node, cst.Call):
            move = move_of(checker, node)
            if move is not None:
                moves.append(move)
    return moves


def torch_alias(checker: DevicePass) -> str | None:
    """The name `import torch [as t]` binds at module level, if any."""
    for statement in checker.context.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if isinstance(alias.name, cst.Name) and alias.name.value == "torch":
                        if alias.asname is None:
                            return "torch"
                        asname = alias.asname.name
                        if isinstance(asname, cst.Name):
                            return asname.value
    return None


def visible_name(checker: DevicePass, name: str, node: cst.CSTNode) -> bool:
    """`name` is bound where `node` can read it: a parameter or an earlier binding of the
    enclosing function, or a module-level binding (earlier, when `node` is at module level)."""
    scope = enclosing_scope(checker, node)
    line = line_of(checker, node)
    if isinstance(scope, cst.FunctionDef):
        if name in {p.name.value for p in _all_params(scope.params)}:
            return True
        local = [n for n in scope_statements(scope) if _binds(n, name)]
        if local:
            return any(line_of(checker, n) < line for n in local)
    for statement in scope_statements(checker.context.module):
        if _binds(statement, name) and (
            not isinstance(scope, cst.Module) or line_of(checker, statement) < line
        ):
            return True
    return False


def _binds(node: cst.CSTNode, name: str) -> bool:
    if isinstance(
        node,
        (
            cst.AssignTarget,
            cst.AnnAssign,
            cst.AugAssign,
            cst.For,
            cst.AsName,
            cst.NamedExpr,
            cst.Import,
            cst.ImportFrom,
            cst.FunctionDef,
            cst.ClassDef,
        ),
    ):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return node.name.value == name
        return name in names_bound(node)
    return False


def latest_binding(checker: DevicePass, name: str, node: cst.CSTNode) -> cst.BaseExpression | None:
    """The value of the last `name = value` before `node` in its function (else module level);
    None when there is none or when `name` is bound some other way (loop, parameter, ...)."""
    scope = enclosing_scope(checker, node)
    line = line_of(checker, node)
    scopes = [scope] if isinstance(scope, cst.Module) else [scope, checker.context.module]
    for current in scopes:
        if isinstance(current, cst.FunctionDef) and name in {
            p.name.value for p in _all_params(current.params)
        }:
            return None
        value: cst.BaseExpression | None = None
        seen = False
        for statement in scope_statements(current):
            if not _binds(statement, name) or isinstance(
                statement, (cst.FunctionDef, cst.ClassDef)
            ):
                continue
            if current is scope and line_of(checker, statement) >= line:
                continue
            seen = True
            parent = checker.context.parent(statement)
            if (
                isinstance(statement, cst.AssignTarget)
                and isinstance(statement.target, cst.Name)
                and isinstance(parent, cst.Assign)
            ):
                value = parent.value
            else:
                value = None
        if seen:
            return value
    return None


def device_moves(checker: DevicePass, node: cst.CSTNode) -> list[str]:
    """Distinct devices (as source text) that code in `node`'s function and at module level moves
    things to with `.to(<device>)` / `.cuda(...)`; a tensor's own `x.device` is not counted."""
    found: list[str] = []
    scope = enclosing_scope(checker, node)
    scopes = [scope] if isinstance(scope, cst.Module) else [scope, checker.context.module]
    for current in scopes:
        for inner in scope_statements(current):
            if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)):
                continue
            method = inner.func.attr.value
            if method == "cuda":
                text = checker.context.module.code_for_node(inner)
                text = "." + text[len(checker.context.module.code_for_node(inner.func.value)) + 1 :]
            elif method == "to":
                target = _to_target(checker, inner)
                if target is None:
                    continue
                text = checker.context.module.code_for_node(target)
            else:
                continue
            if text not in found:
                found.append(text)
    return found


def _to_target(checker: DevicePass, call: cst.Call) -> cst.BaseExpression | None:
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    keywords = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    target = (
        keywords["device"].value
        if "device" in keywords
        else (positional[0].value if positional else None)
    )
    if target is None or is_dtype(checker, target):
        return None
    if isinstance(target, cst.Attribute) and target.attr.value == "device":
        return None
    if isinstance(target, cst.SimpleString) and string_device(target) in ("cpu", "meta"):
        return None
    if not isinstance(target, (cst.Name, cst.Attribute, cst.SimpleString, cst.Call)):
        return None
    return target
