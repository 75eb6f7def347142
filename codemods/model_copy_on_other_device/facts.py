"""DF306's facts: auxiliary copies of a model (EMA, teacher) and where they live. The in-place
updates of a copy's tensors from the model's, where each module is placed at an update (moved,
still on the CPU where it was built or copied), how the copy was made, and the EMA helpers whose
restore or event handler leaves the copy on another device than the model.

A copy is a module of its own: `model.to(device)` does not move it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.calls import MOVES
from devfix.codemods.analysis.modules import methods, self_attribute
from devfix.codemods.analysis.moves import DeviceMove, free_names
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    root_name,
    statement_call,
)
from devfix.codemods.analysis.scopes import all_params, param_names, target_names
from devfix.codemods.analysis.torch_names import (
    ADOPTING_LOAD_EMAS,
    DEEP_COPY,
    FOREACH_UPDATES,
    IN_PLACE_UPDATES,
    MODULE_TENSOR_METHODS,
)


@dataclass(frozen=True)
class Placement:
    """Where a module (a model or its copy) lives at some point of the script: moved to a
    device (`move`), still on the CPU where it was built (`on_cpu`), or `reason` why the
    device cannot be written where it is needed."""

    on_cpu: bool = False
    move: DeviceMove | None = None
    reason: str = ""
    #: How the module came to be (for messages): "copied from `model`", "built with `Net()`".
    evidence: str = ""


@dataclass(frozen=True)
class InitMove:
    """`self.<holder>.to(self.device)` in the `__init__` of a module whose `device` is its
    parameters' (a LightningModule, a Hugging Face model): the CPU while it is built. `uses`:
    the first statement of each other method that calls a method of the holder."""

    holder: str
    move: cst.Call
    uses: tuple[cst.SimpleStatementLine, ...]


@dataclass(frozen=True)
class EmaUpdate:
    """An in-place update of a copy's tensor from the model's: `ema_p.lerp_(p, w)` inside
    `for ema_p, p in zip(ema.parameters(), model.parameters())`, or
    `torch._foreach_lerp_(ema_params, model_params, w)`."""

    node: cst.CSTNode
    #: The module whose tensors are updated (`ema`, `self.module`) and the one they follow.
    copy: str
    model: str
    #: The name that carries the model's tensor into the update (`p`), when one does.
    source: cst.Name | None
    #: The copy's tensor being updated (`ema_p`), for `p.to(ema_p.device)`.
    target: str | None
    foreach: bool = False


@dataclass(frozen=True)
class EmaRestore:
    """`ema.load_state_dict(...)` of an EMA helper that adopts the loaded tensors, with no
    move of `ema` after it: it runs after (or apart from, in a hook) the `move` that put the
    EMA on the model's device, whose device is readable at the load."""

    load: cst.Call
    name: str
    move: cst.Call
    statement: cst.SimpleStatementLine
    #: The move's device and the EMA's name can be read at the load.
    visible: bool


@dataclass(frozen=True)
class EventMove:
    """An event handler moves a model copy to the model's device only when training starts
    (`if event == Event.FIT_START: self.ema.move_params_to_device(state.model)`), and a branch
    for an event that can come first (`EVAL_START`, `PREDICT_START`: evaluating before
    fitting, after a restore) uses the copy without that `move`."""

    move: cst.SimpleStatementLine
    holder: str
    branch: cst.If
    event: str


#: Lifecycle events that start training, and those that can come without it.
_FIT_START_EVENTS = frozenset({"FIT_START", "TRAIN_START"})
_OTHER_START_EVENTS = frozenset({"EVAL_START", "PREDICT_START", "VALIDATION_START", "TEST_START"})


class ModelCopies(Analysis):
    """The model copies of one file: their updates from the model, where each lives, and the
    restores and event handlers that move one apart from the model."""

    def ema_updates(self, scope: cst.CSTNode) -> list[EmaUpdate]:
        """In-place updates of one module's tensors from another's in `scope` (a function, or
        the module's own code)."""
        found: list[EmaUpdate] = []
        pairs = self._zipped_tensors(scope)
        lists = self._tensor_lists(scope)
        if not pairs and not lists:
            return found  # no loop over two modules' tensors and no `_foreach_` over them
        for node in self.scopes.statements(scope):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                # `e.data = e.data * d + p.data * (1 - d)`: arithmetic across the two.
                target = node.targets[0].target
                receiver = (
                    _update_receiver(target)
                    if isinstance(target, cst.Subscript)
                    or (isinstance(target, cst.Attribute) and target.attr.value == "data")
                    else None
                )
                if receiver in pairs and receiver in {n.value for n in free_names(node.value)}:
                    update = self._update(node, receiver, [node.value], pairs)
                    if update is not None:
                        found.append(update)
                continue
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and (
                func.attr.value == "copy_"
                or (func.attr.value in IN_PLACE_UPDATES and func.attr.value.endswith("_"))
            ):
                receiver = _update_receiver(func.value)
                if receiver is None or receiver not in pairs:
                    continue
                values = [arg.value for arg in node.args]
                if func.attr.value == "copy_" and receiver not in {
                    n.value for v in values for n in free_names(v)
                }:
                    continue  # a plain copy works across devices
                update = self._update(node, receiver, values, pairs)
                if update is not None:
                    found.append(update)
            elif self._foreach_update(func) and len(node.args) >= 2:
                first = lists.get(code_of(node.args[0].value))
                second = lists.get(code_of(node.args[1].value))
                if first is not None and second is not None and first != second:
                    found.append(EmaUpdate(node, first, second, None, None, True))
        return found

    def _foreach_update(self, func: cst.BaseExpression) -> bool:
        """`torch._foreach_lerp_` and its kin (`FOREACH_UPDATES`); the spelling is checked
        first, since resolving names can cost a scope analysis of the whole file."""
        return (
            (call_tail(func) or "").startswith("_foreach_")
            and dotted_name(func) is not None
            and self.names.qualified_name(func) in FOREACH_UPDATES
        )

    def init_moves(self, classdef: cst.ClassDef) -> list[InitMove]:
        """Objects that are no module (an EMA of the parameters, a buffer of statistics) which
        `__init__` moves to `self.device`, where that property reads the parameters' device:
        while the module is built it is the CPU, and the trainer that places the module later
        moves only its parameters, buffers and submodules."""
        info = self.facts.modules.class_info(classdef)
        init = next((m for m in methods(classdef) if m.name.value == "__init__"), None)
        if not info.has_device_property or init is None:
            return []
        found: list[InitMove] = []
        for call in self.scopes.find(init.body, cst.Call, own_scope=True):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and call.args):
                continue
            holder = self_attribute(func.value)
            if (
                holder is None
                or holder in info.layers
                or code_of(call.args[0].value) != "self.device"
            ):
                continue
            built = [
                value
                for _, _, value in self.facts.modules.assignments_to(classdef, holder)
                if value is not None
            ]
            if len(built) != 1 or not self._holds_no_module(built[0]):
                continue
            uses = tuple(
                statement
                for method in methods(classdef)
                if method is not init and (statement := self._first_use(method, holder)) is not None
            )
            if uses:
                found.append(InitMove(holder, call, uses))
        return found

    def _holds_no_module(self, value: cst.BaseExpression) -> bool:
        """Built by a call that is neither a module nor a tensor (DF103 registers tensors)."""
        if not isinstance(value, cst.Call) or self.facts.modules.is_module_expression(value):
            return False
        qualified = self.names.qualified_name(value.func) or ""
        # torch, timm and torchmetrics build modules (a metric is one): the trainer moves those.
        return not qualified.startswith(("torch.", "timm.", "torchmetrics.")) and bool(
            dotted_name(value.func)
        )

    def _first_use(self, method: cst.FunctionDef, holder: str) -> cst.SimpleStatementLine | None:
        """The statement of `method` that first calls a method of `self.<holder>`."""
        for call in self.scopes.find(method.body, cst.Call, own_scope=True):
            func = call.func
            if isinstance(func, cst.Attribute) and self_attribute(func.value) == holder:
                if func.attr.value == "to":
                    return None  # the method places it itself
                for ancestor in self.context.ancestors(call):
                    if isinstance(ancestor, cst.SimpleStatementLine):
                        return ancestor
        return None

    def ema_restores(self) -> list[EmaRestore]:
        """Restores of adopting EMA helpers (`ADOPTING_LOAD_EMAS`) that leave the EMA where the
        loaded state is: in a function apart from the move (an `accelerate` load hook) or after
        it, with no move of the EMA following in the load's own function."""
        found: list[EmaRestore] = []
        for call in self.context.of_type(self.context.module, cst.Call):
            func = call.func
            if not (
                isinstance(func, cst.Attribute)
                and func.attr.value == "load_state_dict"
                and isinstance(func.value, cst.Name)
            ):
                continue
            expr = self.context.parent(call)
            statement = self.context.parent(expr) if isinstance(expr, cst.Expr) else None
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                continue
            name = func.value.value
            owner = self._adopting_ema_scope(name, call)
            if owner is None:
                continue
            moves = [
                inner
                for inner in self.scopes.find(owner, cst.Call, own_scope=True)
                if self._moves_name(inner, name)
            ]
            if not moves:
                continue
            move = moves[-1]
            scope = self.scopes.enclosing_scope(call)
            if any(
                self._moves_name(inner, name) and self.scopes.starts_before(call, inner)
                for inner in self.scopes.find(scope, cst.Call)
            ):
                continue  # moved again after the load
            # In a nested hook the closure reads the outer names when it runs.
            at: cst.CSTNode = call
            for ancestor in self.context.ancestors(call):
                if isinstance(ancestor, cst.FunctionDef) and ancestor is not owner:
                    at = ancestor
                if ancestor is owner:
                    break
            # `name` itself needs no check: the restore reads it just before the move again.
            visible = all(self.facts.moves.visible_at(code_of(arg.value), at) for arg in move.args)
            found.append(EmaRestore(call, name, move, statement, visible))
        return found

    def start_event_moves(self) -> list[EventMove]:
        """Copies an event handler moves to the model's device at `FIT_START` only, used by a
        branch for an event that can come first (see :class:`EventMove`)."""
        found: list[EventMove] = []
        for function in self.scopes.find(self.context.module, cst.FunctionDef):
            branches = list(self.scopes.find(function, cst.If, own_scope=True))
            moves: list[tuple[cst.SimpleStatementLine, str]] = []
            for branch in branches:
                if not self._start_events(branch.test) & _FIT_START_EVENTS:
                    continue
                body = branch.body
                for statement in body.body if isinstance(body, cst.IndentedBlock) else ():
                    call = statement_call(statement)
                    holder = (
                        dotted_name(call.func.value)
                        if call is not None and isinstance(call.func, cst.Attribute)
                        else None
                    )
                    if (
                        call is not None
                        and isinstance(statement, cst.SimpleStatementLine)
                        and holder is not None
                        and holder.startswith("self.")
                        and _moves_to_a_device(cst.ensure_type(call.func, cst.Attribute))
                    ):
                        moves.append((statement, holder))
            for statement, holder in moves:
                for branch in branches:
                    events = self._start_events(branch.test)
                    if events & _FIT_START_EVENTS or not events & _OTHER_START_EVENTS:
                        continue
                    if code_of(statement.body[0]) in code_of(branch.body):
                        continue
                    if self._uses_attribute(branch.body, holder, function):
                        event = sorted(events & _OTHER_START_EVENTS)[0]
                        found.append(EventMove(statement, holder, branch, event))
        return found

    def _start_events(self, test: cst.BaseExpression) -> set[str]:
        """`FIT_START` for `event == Event.FIT_START` or `event in [Event.FIT_START, ...]`."""
        return {
            node.attr.value
            for node in self.scopes.find(test, cst.Attribute)
            if node.attr.value.endswith("_START")
        }

    def _uses_attribute(self, body: cst.CSTNode, holder: str, function: cst.FunctionDef) -> bool:
        """`body` reads `holder` (`self.ema`), or calls a method of the class that does."""
        if any(dotted_name(n) == holder for n in self.scopes.find(body, cst.Attribute)):
            return True
        classdef = self.facts.modules.enclosing_class(function)
        if classdef is None:
            return False
        for call in self.scopes.find(body, cst.Call):
            called = self_attribute(call.func)
            member = next((m for m in methods(classdef) if m.name.value == called), None)
            if member is not None and any(
                dotted_name(n) == holder for n in self.scopes.find(member, cst.Attribute)
            ):
                return True
        return False

    def _moves_name(self, call: cst.Call, name: str) -> bool:
        return (
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value == name
            and self.facts.moves.move_of(call) is not None
        )

    def _adopting_ema_scope(self, name: str, at: cst.CSTNode) -> cst.CSTNode | None:
        """The function (or the module) around `at` that binds `name` to an adopting EMA helper
        (`EMAModel(unet.parameters())`, `EMAModel.from_pretrained(...)`)."""
        scopes = [a for a in self.context.ancestors(at) if isinstance(a, cst.FunctionDef)]
        for scope in [*scopes, self.context.module]:
            for node in self.scopes.statements(scope):
                if not (
                    isinstance(node, cst.Assign)
                    and isinstance(node.value, cst.Call)
                    and name in {n.value for t in node.targets for n in target_names(t.target)}
                ):
                    continue
                func = node.value.func
                if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
                    func = func.value
                if self.names.qualified_name(func) in ADOPTING_LOAD_EMAS:
                    return scope
        return None

    def _update(
        self,
        node: cst.CSTNode,
        receiver: str,
        values: list[cst.BaseExpression],
        pairs: dict[str, tuple[str, int]],
    ) -> EmaUpdate | None:
        copy, side = pairs[receiver]
        for value in values:
            for name in free_names(value):
                other = pairs.get(name.value)
                if other is not None and other[0] != copy and other[1] != side:
                    if self._rebound_in_loop(name.value, node):
                        return None  # `model_v = model_v.to(...)` first: not the raw tensor
                    return EmaUpdate(node, copy, other[0], name, receiver)
        return None

    def _rebound_in_loop(self, name: str, node: cst.CSTNode) -> bool:
        """`name` (a loop target) is assigned again in the loop before `node`."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.For) and name in {
                n.value for n in target_names(ancestor.target)
            }:
                return any(
                    isinstance(inner, cst.AssignTarget)
                    and name in self.scopes.names_bound(inner)
                    and self.scopes.starts_before(inner, node)
                    for inner in self.context.subtree(ancestor.body)
                )
            if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
                return False
        return False

    def _zipped_tensors(self, scope: cst.CSTNode) -> dict[str, tuple[str, int]]:
        """Loop names bound to the tensors of a module: `for e, p in zip(ema.parameters(),
        model.parameters())` -> {"e": ("ema", 0), "p": ("model", 1)} (the zip position tells
        the two sides apart); `(n, e)` from `named_parameters()` gives `e`."""
        found: dict[str, tuple[str, int]] = {}
        loops = self.scopes.statements_of_type(scope, (cst.For, cst.CompFor))
        for node in cast("list[cst.For | cst.CompFor]", loops):
            iterable = node.iter
            if not (
                isinstance(iterable, cst.Call)
                and call_tail(iterable.func) == "zip"
                and isinstance(node.target, (cst.Tuple, cst.List))
                and len(node.target.elements) == len(iterable.args)
                and self.names.qualified_name(iterable.func) in ("zip", "builtins.zip")
            ):
                continue
            for index, (element, arg) in enumerate(zip(node.target.elements, iterable.args)):
                owner = self._tensor_source(arg.value, node)
                if owner is None:
                    continue
                name = _tensor_name(element.value)
                if name is not None:
                    found[name] = (owner, index)
        return found

    def _tensor_source(self, value: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """`model.parameters()`, `ema.state_dict().values()`, `list(model.buffers())`, or a
        name bound to one of them: the module's dotted name."""
        for _ in range(3):
            if isinstance(value, cst.Call) and dotted_name(value.func) in (
                "list",
                "tuple",
                "iter",
            ):
                if not value.args:
                    return None
                value = value.args[0].value
                continue
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                method = value.func.attr.value
                receiver = value.func.value
                if method in ("values", "items") and isinstance(receiver, cst.Call):
                    value = receiver
                    continue
                if method in MODULE_TENSOR_METHODS:
                    return dotted_name(receiver)
                return None
            if isinstance(value, cst.Name):
                bound = self.scopes.latest_binding(value.value, at)
                if bound is None:
                    return None
                value = bound
                continue
            return None
        return None

    def _tensor_lists(self, scope: cst.CSTNode) -> dict[str, str]:
        """Names (and inline expressions) holding a list of one module's tensors, for
        `torch._foreach_*`: `ema_params = list(ema.parameters())` -> {"ema_params": "ema"}."""
        found: dict[str, str] = {}
        for node in self.scopes.statements_of_type(scope, cst.Call):
            if self._foreach_update(node.func):
                for arg in node.args[:2]:
                    owner = self._tensor_source(arg.value, node)
                    if owner is not None:
                        found[code_of(arg.value)] = owner
        return found

    def module_placement(self, name: str, at: cst.CSTNode, depth: int = 0) -> Placement | None:
        """Where the module `name` lives at `at`: moved (flow's model moves), on the CPU (built
        by a constructor, or copied from a model that was still on the CPU), else None."""
        if depth > 4:
            return None
        try:
            expr = cst.parse_expression(name)
        except cst.ParserSyntaxError:
            return None
        moved = self.facts.flow.model_device(expr, at)
        if moved is not None:
            if moved.move is not None:
                return Placement(move=moved.move, evidence=f"`{name}` is moved")
            if moved.reason:
                return Placement(reason=moved.reason)
        if "." in name:
            return None
        function = self.scopes.enclosing_function(at)
        table, table_function = self.scopes.lookup(name, function)
        bindings = [
            b for b in table.bindings.get(name, []) if b.position < self.context.order(at)[0]
        ]
        if table_function is not function:
            bindings = table.bindings.get(name, [])
        if not bindings:
            return None
        last = bindings[-1]
        if last.kind == "param" and isinstance(table.node, cst.FunctionDef):
            return self._placement_from_callers(table.node, name, depth)
        if last.kind != "assign" or not isinstance(last.value, cst.Call):
            return None
        value = _strip_module_calls(last.value)
        if not isinstance(value, cst.Call) or dotted_name(value.func) is None:
            return None
        qualified = self.names.qualified_name(value.func)
        if qualified in DEEP_COPY and value.args:
            source = dotted_name(value.args[0].value)
            if source is None:
                return None
            original = self.module_placement(source, value, depth + 1)
            if original is None and self._moved_later(source, value):
                # Copied from a model that the script moves only afterwards: a fresh model
                # is on the CPU until then.
                original = Placement(on_cpu=True)
            if original is None:
                return None
            return Placement(
                on_cpu=original.on_cpu,
                move=original.move,
                reason=original.reason,
                evidence=f"copied from `{source}` "
                + ("while it was still on the CPU" if original.on_cpu else "after its move"),
            )
        if self.facts.modules.constructed_module(value) is not None:
            return Placement(on_cpu=True, evidence=f"built with `{code_of(value.func)}(...)`")
        return None

    def _moved_later(self, name: str, at: cst.CSTNode) -> bool:
        """`name` is moved after `at` in `at`'s scope, and was not loaded onto a device
        (`device=` / `device_map=` where it was made)."""
        scope = self.scopes.enclosing_scope(at)
        for value in self.scopes.simple_assignments(scope, name):
            if isinstance(value, cst.Call) and any(
                arg.keyword is not None and arg.keyword.value in ("device", "device_map")
                for arg in value.args
            ):
                return False
        for node in self.scopes.statements(scope):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in MOVES
                and dotted_name(node.func.value) == name
                and self.scopes.starts_before(at, node)
                and self.facts.moves.move_of(node) is not None
            ):
                return True
        return False

    def _placement_from_callers(
        self, function: cst.FunctionDef, param: str, depth: int
    ) -> Placement | None:
        sites = self.facts.flow.call_sites(function)
        if not sites:
            return None
        names = param_names(function)
        if param not in names:
            return None
        index = names.index(param)
        found: list[Placement] = []
        for call, _caller in sites:
            if any(arg.star for arg in call.args):
                return None
            value = argument(call, param, index)
            source = dotted_name(value) if value is not None else None
            if source is None:
                return None
            placement = self.module_placement(source, call, depth + 1)
            if placement is None:
                return None
            found.append(placement)
        if all(p.on_cpu for p in found):
            return found[0]
        return None

    def copy_creation(self, name: str, at: cst.CSTNode) -> cst.Call | None:
        """The call that made the copy `name` (`copy.deepcopy(model)`, `Net()`), following a
        function parameter to its one caller's argument."""
        function = self.scopes.enclosing_function(at)
        table, _ = self.scopes.lookup(name, function)
        bindings = table.bindings.get(name, [])
        if not bindings:
            return None
        last = bindings[-1]
        if last.kind == "param" and isinstance(table.node, cst.FunctionDef):
            sites = self.facts.flow.call_sites(table.node)
            names = param_names(table.node)
            if len(sites) != 1 or name not in names:
                return None
            call = sites[0][0]
            value = argument(call, name, names.index(name))
            source = dotted_name(value) if value is not None else None
            return self.copy_creation(source, call) if source is not None else None
        if last.kind != "assign" or not isinstance(last.value, cst.Call):
            return None
        return last.value

    def own_device_copy(self, attr: str, classdef: cst.ClassDef) -> cst.Call | None:
        """A class that copies a model into `self.<attr>` and moves the copy to a device of
        its own (`self.module.to(device=device)` in `__init__`, `device` a parameter): the
        move, else None."""
        init = next(
            (
                s
                for s in classdef.body.body
                if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
            ),
            None,
        )
        if init is None:
            return None
        params = {p.name.value for p in all_params(init.params)}
        copied = False
        move: cst.Call | None = None
        for node in self.scopes.statements(init):
            if isinstance(node, cst.Assign) and any(
                self_attribute(t.target) == attr for t in node.targets
            ):
                value = _strip_module_calls(node.value)
                if (
                    isinstance(value, cst.Call)
                    and dotted_name(value.func) is not None
                    and self.names.qualified_name(value.func) in DEEP_COPY
                ):
                    copied = True
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "to"
                and self_attribute(node.func.value) == attr
            ):
                device = argument(node, "device")
                if device is not None and root_name(device) in params | {"self"}:
                    move = node
        return move if copied else None


def _moves_to_a_device(func: cst.Attribute) -> bool:
    """`x.to(...)`, `x.cuda()`, `x.move_params_to_device(...)`, `x.to_device(...)`."""
    words = set(func.attr.value.lower().split("_"))
    return func.attr.value in ("to", "cuda") or "device" in words


def _strip_module_calls(value: cst.BaseExpression) -> cst.BaseExpression:
    """`deepcopy(model).eval().requires_grad_(False)` -> `deepcopy(model)`."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("eval", "train", "requires_grad_", "float", "half")
        and isinstance(value.func.value, cst.Call)
    ):
        value = value.func.value
    return value


def _update_receiver(node: cst.BaseExpression) -> str | None:
    """The tensor name an in-place update chain starts from: `e.mul_(d)` -> "e",
    `e.data` -> "e"."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if (isinstance(node, cst.Attribute) and node.attr.value == "data") or isinstance(
            node, cst.Subscript
        ):
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in IN_PLACE_UPDATES | {"detach", "copy_"}
        ):
            node = node.func.value
        else:
            return None


def _tensor_name(target: cst.BaseExpression) -> str | None:
    """The loop name that holds a tensor: `p`, or `p` in `(name, p)`."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
        last = target.elements[1].value
        return last.value if isinstance(last, cst.Name) else None
    return None
