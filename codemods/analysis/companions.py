"""Companions: objects that live beside the model and do not follow `model.to(device)`. Metric
modules (torchmetrics), auxiliary copies of the model (EMA, teacher), random-number generators
and the default device their permutations are drawn on, and the AMP objects (autocast,
GradScaler) whose device type must be the script's.

Each question is answered from what the code states; when the answer cannot be written where
it is needed, it carries the reason and the passes report instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.devices import (
    Device,
)
from devfix.codemods.analysis.flow.training import is_main_guard
from devfix.codemods.analysis.modules import methods, self_attribute
from devfix.codemods.analysis.moves import DeviceMove, cuda_type, free_names, string_device
from devfix.codemods.analysis.names import (
    argument,
    argument_of,
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
    root_name,
    statement_call,
    string_value,
)
from devfix.codemods.analysis.scopes import all_params, param_names, target_names
from devfix.codemods.analysis.torch_names import (
    ADOPTING_LOAD_EMAS,
    AUTOCASTS,
    DEEP_COPY,
    DEFAULT_DEVICE_SETTERS,
    DEPRECATED_CUDA_AMP,
    FOREACH_UPDATES,
    GENERATORS,
    GRAD_SCALER_DEFAULTS,
    IN_PLACE_UPDATES,
    METRIC_UPDATE_METHODS,
    METRICS_PACKAGE,
    MODULE_TENSOR_METHODS,
)
from devfix.context import FileContext

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

_MOVES = ("to", "cuda")


@dataclass(frozen=True)
class DefaultDevice:
    """The device `torch.set_default_device(...)` / `set_default_tensor_type(...)` sends new
    tensors to, as seen at some node."""

    setter: cst.Call
    #: Source text of the device (`device`); for a literal or a default that differs by
    #: branch, `torch.get_default_device()`; for a CUDA default tensor type, which that
    #: function does not read, `torch.empty(0).device`.
    expression: str
    #: The setters run under an `if` (or disagree): the default depends on the run.
    conditional: bool = False
    #: Set by `torch.set_default_tensor_type(...)` (which `torch.get_default_device()` ignores).
    tensor_type: bool = False


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
class HeldMetric:
    """A torchmetrics metric kept by a plain object (no `nn.Module`, so nothing moves it) and
    never moved by its class: `value` enters the collection `holder` (`add`) or is updated
    with the method's input `device` comes from (`update`); `device` is where it must go."""

    node: cst.Call
    holder: str
    value: cst.BaseExpression
    device: str
    kind: str  # "add" | "update"


@dataclass(frozen=True)
class MetricFeed:
    """A metric fed tensors on `device` by `use`; `move`: the move to write where it is built,
    None with a `reason` when it cannot be written (empty: nothing says where the device is)."""

    device: Device
    use: cst.Call
    move: DeviceMove | None
    reason: str = ""


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


@dataclass(frozen=True)
class AmpDevice:
    """The device type the AMP objects at some node must use."""

    #: Source text of the device type (`device.type`, `device_type`,
    #: `torch.device(device).type`), or None when the script's device is always CUDA.
    expression: str | None
    #: The device it comes from (for messages).
    device: str = ""
    #: The device is fixed to CUDA by the script (a literal, `.cuda()`): only the deprecated
    #: spelling is wrong.
    cuda_only: bool = False


#: `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`: the old API's positional order.
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
#: Where `enabled` sits among the positional arguments of each GradScaler spelling.
_SCALER_ENABLED_INDEX = {"deprecated": 4, "generic": 5}


@dataclass(frozen=True)
class AmpCall:
    """An autocast or GradScaler call hard-coded to CUDA, read from its arguments."""

    scaler: bool
    #: `torch.cuda.amp.*`: deprecated, and CUDA by its name.
    deprecated: bool
    #: The argument that names the device type (`"cuda"`); None for the deprecated spellings
    #: and `torch.amp.GradScaler()` (CUDA by default).
    device: cst.Arg | None
    #: The value of `enabled`, if given where a fix can read it.
    enabled: cst.BaseExpression | None
    #: A GradScaler that gets `enabled` by position, and the autocast of the old API with more
    #: positional arguments than it takes: a fix cannot follow them.
    by_position: bool


class Companions(Analysis):
    """Metric objects, model copies, generators and AMP objects of one file."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._setters: list[cst.Call] | None = None

    # -- shared ------------------------------------------------------------------------------

    def _calls(self) -> Iterator[cst.Call]:
        yield from self.context.of_type(self.context.module, cst.Call)

    def _before(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        return self.context.order(first)[0] < self.context.order(second)[0]

    def _conditional(self, node: cst.CSTNode) -> bool:
        """`node` runs under an `if`/`try`/loop of its function (or of the module)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
                return False
            if is_main_guard(ancestor):
                continue  # the script's own code, run whenever it runs
            if isinstance(ancestor, (cst.If, cst.Else, cst.IfExp, cst.Try, cst.ExceptHandler)):
                return True
        return False

    # -- metrics -------------------------------------------------------------------------------

    def metric_class(self, call: cst.Call) -> str | None:
        """The qualified name of the torchmetrics class `call` builds, else None."""
        if dotted_name(call.func) is None:
            return None
        qualified = self.names.qualified_name(call.func)
        if qualified is None or not qualified.startswith(METRICS_PACKAGE + "."):
            return None
        parts = qualified.split(".")
        if not parts[-1][:1].isupper() or "functional" in parts or "utilities" in parts:
            return None
        return qualified

    def metric_inside_metric(self, call: cst.Call) -> bool:
        """`MetricCollection([Accuracy(), ...])`, `ClasswiseWrapper(Accuracy())`: the outer
        object holds (and moves) this one."""
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, cst.Call) and ancestor is not call:
                if self.metric_class(ancestor) is not None:
                    return True
                if dotted_name(ancestor.func) is not None:
                    return True  # handed to something else that may keep and move it
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def held_metrics(self) -> list[HeldMetric]:
        """Metrics that plain objects keep in an attribute and never move (framework code
        that holds the user's metrics): metrics added to a `MetricCollection` attribute
        (`self.metrics.add_metrics(m)`) of a class that keeps its device in `self.device`, and
        metrics of an attribute list narrowed to torchmetrics (`for m in self.metrics: if
        isinstance(m, torchmetrics.Metric): m.update(preds, target)`) updated with a tensor
        the method is given."""
        found: list[HeldMetric] = []
        for classdef in self.scopes.find(self.context.module, cst.ClassDef):
            if not self._plain_class(classdef, 0):
                continue
            functions = methods(classdef)
            calls = [c for f in functions for c in self.scopes.find(f, cst.Call)]
            moved = {
                dotted_name(c.func.value)
                for c in calls
                if isinstance(c.func, cst.Attribute) and c.func.attr.value in ("to", "cuda")
            }
            assigned: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = []
            for function in functions:
                for node in self.scopes.find(function, (cst.Assign, cst.AnnAssign)):
                    if isinstance(node, cst.Assign):
                        assigned.extend((t.target, node.value) for t in node.targets)
                    elif isinstance(node, cst.AnnAssign):
                        assigned.append((node.target, node.value))
            collections = {
                code_of(target)
                for target, value in assigned
                if self_attribute(target) is not None
                and isinstance(value, cst.Call)
                and self.metric_class(value) is not None
            }
            has_device = any(code_of(target) == "self.device" for target, _ in assigned)
            for call in calls:
                func = call.func
                if not isinstance(func, cst.Attribute) or not call.args:
                    continue
                holder = code_of(func.value)
                added = call.args[0].value
                if (
                    func.attr.value == "add_metrics"
                    and holder in collections
                    and holder not in moved
                    and has_device
                    and not (isinstance(added, cst.Call) and self.facts.moves.move_of(added))
                ):
                    found.append(HeldMetric(call, holder, added, "self.device", "add"))
                elif func.attr.value in METRIC_UPDATE_METHODS and isinstance(func.value, cst.Name):
                    held = self._narrowed_metric(call, func.value.value, moved)
                    if held is not None:
                        found.append(held)
        return found

    def _plain_class(self, classdef: cst.ClassDef, depth: int) -> bool:
        """No base but `object` or plain classes of this file: not an `nn.Module`."""
        if depth > 5 or self.facts.modules.class_info(classdef).is_module:
            return False
        for base in classdef.bases:
            if not isinstance(base.value, cst.Name):
                return False
            if base.value.value == "object":
                continue
            local = next(
                (
                    c
                    for c in self.scopes.find(self.context.module, cst.ClassDef)
                    if c.name.value == base.value.value
                ),
                None,
            )
            if local is None or not self._plain_class(local, depth + 1):
                return False
        return True

    def _narrowed_metric(
        self, call: cst.Call, name: str, moved: set[str | None]
    ) -> HeldMetric | None:
        """`name.update(preds, ...)` in `for name in self.<attr>:` under `isinstance(name,
        <torchmetrics class>)`, `preds` a parameter of the method."""
        loop = next((a for a in self.context.ancestors(call) if isinstance(a, cst.For)), None)
        if (
            loop is None
            or not isinstance(loop.target, cst.Name)
            or loop.target.value != name
            or self_attribute(loop.iter) is None
            or name in moved
        ):
            return None
        narrowed = False
        below: cst.CSTNode = call
        for ancestor in self.context.ancestors(call):
            test = ancestor.test if isinstance(ancestor, cst.If) else None
            if (
                isinstance(test, cst.Call)
                and below is cst.ensure_type(ancestor, cst.If).body
                and self.names.qualified_name(test.func) in ("builtins.isinstance", "isinstance")
                and len(test.args) == 2
                and code_of(test.args[0].value) == name
                and (self.names.qualified_name(test.args[1].value) or "").startswith(
                    METRICS_PACKAGE + "."
                )
            ):
                narrowed = True
            below = ancestor
        first = call.args[0].value
        function = self.scopes.enclosing_function(call)
        if (
            not narrowed
            or not isinstance(first, cst.Name)
            or function is None
            or first.value not in param_names(function)
        ):
            return None
        metric = cst.ensure_type(call.func, cst.Attribute).value
        return HeldMetric(call, code_of(loop.iter), metric, f"{first.value}.device", "update")

    def metric_uses(self, name: str, after: cst.CSTNode) -> list[cst.Call]:
        """`name.update(...)`, `name(...)`, `name.forward(...)` in the scope that binds `name`
        (at `after`), after `after`."""
        scope = self.scopes.enclosing_scope(after)
        uses: list[cst.Call] = []
        for node in self.scopes.statements(scope):
            if not isinstance(node, cst.Call) or not self._before(after, node):
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in METRIC_UPDATE_METHODS:
                func = func.value
            if dotted_name(func) == name:
                uses.append(node)
        return uses

    def metric_escapes(self, name: str, after: cst.CSTNode) -> bool:
        """`name` is moved later (`name.to(d)`, `name = name.cuda()`), handed to a call as an
        argument (which may move it), or stored somewhere else (`self.m = name`)."""
        for node in self.scopes.names_after(self.scopes.enclosing_scope(after), name, after):
            parent = self.context.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                if parent.attr.value in (*_MOVES, "cpu", "set_dtype", "_apply", "apply"):
                    return True
                continue
            if isinstance(parent, cst.Call) and parent.func is node:
                continue
            if isinstance(parent, cst.AssignTarget):
                continue
            return True  # an argument, an element, the value of another assignment
        return False

    def metric_input_device(self, use: cst.Call) -> Device | None:
        """The device the tensors given to a metric provably live on (not the CPU)."""
        for arg in use.args:
            if arg.keyword is not None and arg.keyword.value not in ("preds", "target", "value"):
                continue
            placed = self.facts.devices.placed(arg.value, use)
            if placed is not None:
                return placed
        return None

    def metric_feed(self, name: str, built: cst.Call) -> MetricFeed | None:
        """How metric `name`, built by `built`, is fed tensors on a device: the device and the
        first use that feeds it from there, and the move to write where it is built (or why
        there is none). None when no use feeds it tensors on a device, or when any use feeds it
        CPU tensors (then the CPU is where the metric belongs)."""
        found: tuple[Device, cst.Call] | None = None
        for use in self.metric_uses(name, built):
            if self.metric_input_on_cpu(use):
                return None
            placed = self.metric_input_device(use)
            if placed is not None and found is None:
                found = (placed, use)
        if found is None:
            return None
        device, use = found
        move = self.facts.devices.device_move_at(device, use)
        if not isinstance(move, DeviceMove):
            return MetricFeed(device, use, None, move or "")
        if move.method == "to" and move.expression is not None:
            text = code_of(move.expression)
            if not self.facts.moves.visible_at(text, built):
                return MetricFeed(
                    device,
                    use,
                    None,
                    f"`{text}` is not known where the metric is built, so move it with "
                    f"`.to({text})` once the device is known",
                )
        return MetricFeed(device, use, move)

    def metric_bound(self, call: cst.Call) -> cst.BaseAssignTargetExpression | None:
        """The target a torchmetrics metric built by `call` is bound to (`acc = Accuracy()`,
        `self.acc = ...`): a single target, the metric neither moved nor used inline
        (`Accuracy(...).to(device)`) nor part of another metric."""
        if self.metric_class(call) is None or self.metric_inside_metric(call):
            return None
        parent = self.context.parent(call)
        if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
            return parent.targets[0].target
        return None

    def metric_input_on_cpu(self, use: cst.Call) -> bool:
        return any(
            arg.keyword is None and self.facts.devices.on_cpu(arg.value, use) for arg in use.args
        )

    # -- the default device ----------------------------------------------------------------------

    def _default_setters(self) -> list[cst.Call]:
        if self._setters is None:
            self._setters = [
                call
                for call in self._calls()
                if call_tail(call.func) in ("set_default_device", "set_default_tensor_type")
                and self.names.qualified_name(call.func) in DEFAULT_DEVICE_SETTERS
            ]
        return self._setters

    def default_device(self, at: cst.CSTNode) -> DefaultDevice | None:
        """The accelerator new tensors are created on at `at`, set by a call earlier in `at`'s
        function or anywhere in the module's own code; None when it stays the CPU."""
        setters = self._default_setters()
        if not setters:
            return None
        function = self.scopes.enclosing_function(at)
        relevant: list[cst.Call] = []
        for setter in setters:
            owner = self.scopes.enclosing_function(setter)
            if owner is None and function is not None:
                relevant.append(setter)  # module set-up runs before the functions it calls
            elif owner is function and self._before(setter, at):
                relevant.append(setter)
        if not relevant:
            return None
        devices = [self._set_device(setter) for setter in relevant]
        accelerators = [d for d in devices if d is not None and d != '"cpu"']
        if not accelerators:
            return None
        last = relevant[-1]
        conditional = len(set(devices)) > 1 or any(self._conditional(s) for s in relevant)
        device = accelerators[-1]
        torch = self.names.torch_alias() or "torch"
        if any(call_tail(setter.func) == "set_default_tensor_type" for setter in relevant):
            # `torch.get_default_device()` does not read the default tensor type: after
            # `set_default_tensor_type("torch.cuda.FloatTensor")` it answers "cpu". A new empty
            # tensor is created where the type says, on every PyTorch version (and, unlike a
            # "cuda" literal, on the GPU `torch.cuda.set_device` selected).
            return DefaultDevice(last, f"{torch}.empty(0).device", conditional, tensor_type=True)
        if conditional or string_device(_parsed(device)) is not None:
            # A literal ("cuda") names whichever GPU is current, and the portable-device rewrite
            # would change it: the default device itself is what the permutation is drawn on.
            return DefaultDevice(last, f"{torch}.get_default_device()", conditional)
        return DefaultDevice(last, device, False)

    def _set_device(self, setter: cst.Call) -> str | None:
        """What one setter sets: a device's source text, '"cpu"', or None (unknown)."""
        value = setter.args[0].value if setter.args else None
        if value is None:
            return None
        if call_tail(setter.func) == "set_default_tensor_type":
            text = code_of(value)
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                text = value.evaluated_value
            return '"cuda"' if ".cuda." in f".{text}" or text.startswith("cuda.") else '"cpu"'
        literal = string_device(value)
        if literal is not None:
            return '"cpu"' if literal.startswith(("cpu", "meta")) else code_of(value)
        kind = self.facts.moves.device_kind(value, self.scopes.enclosing_function(setter))
        if kind == "cpu":
            return '"cpu"'
        return code_of(value) if kind is not None else None

    # -- generators -----------------------------------------------------------------------------

    def generator_call(self, expr: cst.BaseExpression, at: cst.CSTNode) -> cst.Call | None:
        """The `torch.Generator(...)` call `expr` is (also seeded in place:
        `torch.Generator().manual_seed(0)`), or a plain name was last bound to."""
        while (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "manual_seed"
        ):
            expr = expr.func.value
        if isinstance(expr, cst.Call):
            if dotted_name(expr.func) is not None and (
                self.names.qualified_name(expr.func) in GENERATORS
            ):
                return expr
            return None
        if isinstance(expr, cst.Name):
            value = self.scopes.latest_binding(expr.value, at)
            if isinstance(value, cst.Call):
                return self.generator_call(value, value)
        return None

    def generator_kind(self, generator: cst.Call) -> str | None:
        """ "cpu", "accelerator", "device" (chosen at run time) or None, for a
        `torch.Generator(...)` call."""
        device = argument(generator, "device")
        if device is None:
            return "cpu"
        return self.facts.moves.device_kind(device, self.scopes.enclosing_function(generator))

    def generator_uses(self, generator: cst.Call) -> list[cst.Call] | None:
        """The calls that receive the generator bound by `g = torch.Generator(...)` (as
        `generator=g` or a positional argument); None when it escapes elsewhere or is not
        bound to a plain name."""
        outer: cst.CSTNode = generator
        while True:  # `torch.Generator().manual_seed(0)` is the generator too
            parent = self.context.parent(outer)
            grand = self.context.parent(parent) if parent is not None else None
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value == "manual_seed"
                and isinstance(grand, cst.Call)
            ):
                outer = grand
            else:
                break
        name = self.scopes.assigned_name(outer)
        if name is None:
            parent = self.context.parent(outer)
            call = self.context.parent(parent) if isinstance(parent, cst.Arg) else None
            return [call] if isinstance(call, cst.Call) else None
        scope = self.scopes.enclosing_scope(generator)
        uses: list[cst.Call] = []
        for node in self.scopes.names_after(scope, name, outer):
            parent = self.context.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                continue  # `g.manual_seed(0)`, `g.device`
            if isinstance(parent, cst.AssignTarget):
                return None  # rebound: another generator from here on
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call):
                    uses.append(call)
                    continue
            return None
        return uses

    # -- model copies (EMA, teacher) --------------------------------------------------------------

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

    def ema_restores(self) -> list[EmaRestore]:
        """Restores of adopting EMA helpers (`ADOPTING_LOAD_EMAS`) that leave the EMA where the
        loaded state is: in a function apart from the move (an `accelerate` load hook) or after
        it, with no move of the EMA following in the load's own function."""
        found: list[EmaRestore] = []
        for call in self._calls():
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
                self._moves_name(inner, name) and self._before(call, inner)
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
                    and self._before(inner, node)
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
                and node.func.attr.value in _MOVES
                and dotted_name(node.func.value) == name
                and self._before(at, node)
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

    # -- AMP -----------------------------------------------------------------------------------

    def amp_device(self, at: cst.CSTNode) -> AmpDevice | None:
        """The device type the AMP objects at `at` must use: a device-type variable the
        script keeps, else the type of the device the script moves its model and data to;
        None when the script names no device."""
        typed = self._device_type_variable(at)
        if typed is not None:
            return AmpDevice(typed, typed)
        devices = self.facts.moves.moved_devices(at)
        names = [d for d in devices if not d.startswith(".")]
        literal_cuda = [
            d
            for d in devices
            if d.startswith(".cuda(")
            or (string_device(_parsed(d)) or "").startswith("cuda")
            or self._cuda_device_call(d)
        ]
        candidates = [d for d in names if d not in literal_cuda]
        if not candidates:
            candidates = [
                n for n in self.facts.moves.device_names(at) if not self._cuda_only_name(n, at)
            ]
            if not candidates:
                function = self.scopes.enclosing_function(at)
                if function is not None:
                    candidates = [
                        p
                        for p in param_names(function)
                        if self.facts.moves.device_kind(cst.Name(p), function) == "device"
                    ]
        candidates = [c for c in candidates if not self._cuda_only_name(c, at)]
        if len(set(candidates)) == 1:
            device = candidates[0]
            if not self.facts.moves.visible_at(device, at):
                return None
            return AmpDevice(self.device_type_of(device, at), device)
        if not candidates and (literal_cuda or self._all_cuda_names(at)):
            return AmpDevice(None, "cuda", cuda_only=True)
        return None

    def _cuda_device_call(self, text: str) -> bool:
        parsed = _parsed(text)
        return (
            isinstance(parsed, cst.Call)
            and self.names.qualified_name(parsed.func) == "torch.device"
            and bool(parsed.args)
            and (string_device(parsed.args[0].value) or "").startswith("cuda")
        )

    def _cuda_only_name(self, name: str, at: cst.CSTNode, depth: int = 0) -> bool:
        """Every binding of `name` is a CUDA device (`"cuda"`, `f"cuda:{rank}"`,
        `torch.device("cuda", rank)`), or, for a parameter, every caller passes one: the
        script runs on CUDA only."""
        if "." in name:
            return False
        scopes = [self.scopes.enclosing_scope(at), self.context.module]
        values = [v for scope in scopes for v in self.scopes.simple_assignments(scope, name)]
        if not values:
            function = self.scopes.enclosing_function(at)
            return function is not None and self._callers_pass_cuda(function, name, depth)
        return all(self._cuda_value(v) for v in values)

    def _callers_pass_cuda(self, function: cst.FunctionDef, param: str, depth: int) -> bool:
        names = param_names(function)
        if param not in names or depth > 3:
            return False
        sites = self.facts.flow.call_sites(function)
        if not sites:
            return False
        for call, _caller in sites:
            value = argument(call, param, names.index(param))
            if any(arg.star for arg in call.args) or not isinstance(value, cst.Name):
                return False
            if not self._cuda_only_name(value.value, call, depth + 1):
                return False
        return True

    def _all_cuda_names(self, at: cst.CSTNode) -> bool:
        names = self.facts.moves.device_names(at)
        return bool(names) and all(self._cuda_only_name(n, at) for n in names)

    def _cuda_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.SimpleString):
            return (string_device(value) or "").startswith("cuda")
        if isinstance(value, cst.FormattedString):
            text = "".join(p.value for p in value.parts if isinstance(p, cst.FormattedStringText))
            return text.startswith("cuda")
        if isinstance(value, cst.Call) and self.names.qualified_name(value.func) == "torch.device":
            return bool(value.args) and self._cuda_value(value.args[0].value)
        return False

    def device_type_of(self, device: str, at: cst.CSTNode) -> str:
        """How to write the type of the device `device` at `at`: `device.type` for a
        `torch.device`, `torch.device(device).type` for a string or a value of unknown kind."""
        if self.is_torch_device(device, at):
            return f"{device}.type"
        torch = self.names.torch_alias() or "torch"
        return f"{torch}.device({device}).type"

    def is_torch_device(self, device: str, at: cst.CSTNode) -> bool:
        """`device` holds a `torch.device`: bound from `torch.device(...)` (or the portable
        helper), or the file reads its `.type` / `.index`."""
        if "." not in device:
            scopes = [self.scopes.enclosing_scope(at), self.context.module]
            values = [v for s in scopes for v in self.scopes.simple_assignments(s, device)]
            if values and all(self._torch_device_value(v) for v in values):
                return True
            if values and any(
                isinstance(v, (cst.SimpleString, cst.FormattedString, cst.IfExp)) for v in values
            ):
                return False
        for node in self.context.subtree(self.context.module):
            if (
                isinstance(node, cst.Attribute)
                and node.attr.value in ("type", "index")
                and dotted_name(node.value) == device
            ):
                return True
        return False

    def _torch_device_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value == "select_device":
                return True
            return self.names.qualified_name(value.func) == "torch.device"
        return False

    def _device_type_variable(self, at: cst.CSTNode) -> str | None:
        """A name bound before `at` to the script's device type: `device_type = device.type`,
        `torch.device(device).type`, or a hand-made `"cuda" if ... else "cpu"` (which the pass
        fixes where it is bound)."""
        scopes = [self.scopes.enclosing_scope(at)]
        if scopes[0] is not self.context.module:
            scopes.append(self.context.module)
        for scope in scopes:
            for node in self.scopes.statements(scope):
                if not (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                ):
                    continue
                if scope is scopes[0] and not self._before(node, at):
                    continue
                if self.is_device_type_value(node.value):
                    name = node.targets[0].target.value
                    if self.scopes.visible_name(name, at):
                        return name
        return None

    def is_device_type_value(self, value: cst.BaseExpression) -> bool:
        """`x.type` of a device, `torch.device(x).type`, or `"cuda" if ... else "cpu"`."""
        if isinstance(value, cst.Attribute) and value.attr.value == "type":
            inner = value.value
            name = dotted_name(inner)
            if name is not None and "dev" in name.rsplit(".", 1)[-1].lower():
                return True
            return (
                isinstance(inner, cst.Call)
                and self.names.qualified_name(inner.func) == "torch.device"
            )
        return self.hand_made_device_type(value) is not None

    def hand_made_device_type(self, value: cst.BaseExpression) -> str | None:
        """`"cuda" if "cuda" in device else "cpu"` (and `device.startswith("cuda")`,
        `device == "cuda"`, `device.type == "cuda"`): a device type that knows only CUDA and
        the CPU. Returns the device it is computed from."""
        if not isinstance(value, cst.IfExp):
            return None
        branches = {string_value(value.body), string_value(value.orelse)}
        if branches != {"cuda", "cpu"}:
            return None
        for node in self.context.subtree(value.test):
            name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            if name is None or name in ("torch", "self"):
                continue
            tail = name.rsplit(".", 1)[-1].lower()
            if name.endswith(".type"):
                name = name[: -len(".type")]
                tail = name.rsplit(".", 1)[-1].lower()
            if "dev" in tail or tail in ("gpu", "accelerator"):
                parent = self.context.parent(node)
                if (
                    isinstance(parent, cst.Attribute)
                    and parent.value is node
                    and (parent.attr.value not in ("type", "startswith"))
                ):
                    continue
                return name
        return None

    def cuda_amp_call(self, node: cst.Call) -> AmpCall | None:
        """`torch.autocast("cuda")`, `torch.cuda.amp.autocast()`, `torch.amp.GradScaler()`, ...:
        an AMP object hard-coded to CUDA; None for another device type, a CPU autocast, and
        `torch.autocast(*args)`, whose device type is not in sight (it has no default)."""
        qualified = self.names.qualified_name(node.func)
        if qualified in GRAD_SCALER_DEFAULTS:
            scaler = True
        elif qualified in AUTOCASTS and AUTOCASTS[qualified] != "cpu":
            scaler = False
        else:
            return None
        deprecated = qualified in DEPRECATED_CUDA_AMP
        device = None if deprecated else argument_of(node, "device" if scaler else "device_type")
        if device is None and not (deprecated or scaler):
            return None
        if device is not None and not cuda_type(device.value):
            return None
        positional = len([arg for arg in node.args if arg.keyword is None])
        if scaler:
            enabled_index = _SCALER_ENABLED_INDEX["deprecated" if deprecated else "generic"]
            by_position = positional > enabled_index and not keyword_argument(node, "enabled")
        else:
            by_position = deprecated and positional > len(AUTOCAST_POSITIONAL)
        # The deprecated autocast takes `enabled` first; the others by keyword only.
        enabled = argument(node, "enabled", 0 if deprecated and not scaler else len(node.args))
        return AmpCall(scaler, deprecated, device, enabled, by_position)

    def amp_device_for(
        self, node: cst.Call, enabled: cst.BaseExpression | None
    ) -> AmpDevice | None:
        """`amp_device` for an AMP object; CUDA only (the deprecation alone) when the object is
        already enabled on CUDA alone (`enabled=` mentions a device type) or runs under a CUDA
        check."""
        amp = self.amp_device(node)
        if amp is None:
            return None
        if not amp.cuda_only and (
            (enabled is not None and _mentions_device_type(self.context, enabled))
            or self.facts.flow.guarded_by_cuda_check(node)
            or self.under_cuda_test(node)
        ):
            return AmpDevice(None, "cuda", cuda_only=True)
        return amp

    def in_training_code(self, node: cst.CSTNode) -> bool:
        """Neither model code (the methods of a module, where AMP blocks are part of the model)
        nor a data pipeline (a Dataset, a collate function)."""
        if self.facts.modules.in_model_method(node):
            return False
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, cst.ClassDef)
                and self.facts.modules.class_info(ancestor).is_dataset
            ):
                return False
        return not self.facts.flow.in_data_pipeline(node)

    def under_cuda_test(self, node: cst.CSTNode) -> bool:
        """`if device.type == "cuda":` / `... if device_type == "cuda" else ...` around `node`
        (in its function): it runs on CUDA only."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, (cst.If, cst.IfExp))
                and current is ancestor.body
                and _holds_only_on_cuda(self.context, ancestor.test)
            ):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            current = ancestor
        return False

    def only_cuda_or_cpu(self, device: str, at: cst.CSTNode) -> bool:
        """Every value the device name `device` holds at `at` is CUDA or the CPU, as written
        (`"cuda" if torch.cuda.is_available() else "cpu"`, `torch.device("cuda:0")`): a device
        type that knows only those two is then exactly `torch.device(device).type`."""
        values = self.scopes.assigned_values(device, at) if "." not in device else []
        if not values or self._rebinds_globals():
            return False
        return all(self._cuda_or_cpu(value, 0) for value in values)

    def _rebinds_globals(self) -> bool:
        """`exec(open("configurator.py").read())` (nanoGPT) or `globals().update(...)`: any
        module-level name may hold what a configuration file or the command line says."""
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.Call) and self.names.qualified_name(node.func) in (
                "exec",
                "builtins.exec",
                "globals",
                "builtins.globals",
            ):
                return True
        return False

    def _cuda_or_cpu(self, value: cst.BaseExpression, depth: int) -> bool:
        if depth > 3:
            return False
        if isinstance(value, cst.IfExp):
            return self._cuda_or_cpu(value.body, depth + 1) and self._cuda_or_cpu(
                value.orelse, depth + 1
            )
        if (
            isinstance(value, cst.Call)
            and self.names.qualified_name(value.func) in ("torch.device", "builtins.str", "str")
            and len(value.args) == 1
        ):
            return self._cuda_or_cpu(value.args[0].value, depth + 1)
        device = string_device(value)
        return device is not None and device.split(":", 1)[0] in ("cuda", "cpu")

    def amp_uses_hand_made_type(self, node: cst.IfExp) -> bool:
        """The hand-made device type (`hand_made_device_type`) reaches an autocast or a
        GradScaler (directly, or through the name it is bound to) that may run off CUDA: one
        behind `if device_type == "cuda"` is CUDA-only on purpose, and the other devices' type
        does not matter to it."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and self._amp_off_cuda(call)
        name = self.scopes.assigned_name(node)
        if name is None:
            return False
        for inner in self.context.subtree(self.context.module):
            if not (isinstance(inner, cst.Name) and inner.value == name):
                continue
            parent = self.context.parent(inner)
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and self._amp_off_cuda(call):
                    return True
            elif self._chooses_amp(inner):
                return True
        return False

    def _chooses_amp(self, use: cst.Name) -> bool:
        """`nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()`: the device
        type decides whether an AMP object is used at all."""
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, (cst.IfExp, cst.If)) and current is ancestor.test:
                return any(
                    isinstance(call, cst.Call) and self._amp_off_cuda(call)
                    for branch in (ancestor.body, ancestor.orelse)
                    if branch is not None
                    for call in self.context.subtree(branch)
                )
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            current = ancestor
        return False

    def _amp_off_cuda(self, call: cst.Call) -> bool:
        return (
            call_tail(call.func) in ("autocast", "GradScaler")
            and not self.under_cuda_test(call)
            and not self.facts.flow.guarded_by_cuda_check(call)
        )


def _holds_only_on_cuda(context: FileContext, test: cst.BaseExpression) -> bool:
    """A test that holds only on CUDA: `x == "cuda"`, `"cuda" in x`, `is_available()` (not
    a negated one: `x != "cuda"` holds everywhere else)."""
    for inner in context.subtree(test):
        if isinstance(inner, (cst.NotEqual, cst.NotIn, cst.IsNot, cst.Not)):
            return False
        if isinstance(inner, cst.SimpleString) and (string_device(inner) or "").startswith("cuda"):
            return True
        if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
            "is_available",
            "is_cuda",
        ):
            return True
    return False


def _mentions_device_type(context: FileContext, value: cst.BaseExpression) -> bool:
    for inner in context.subtree(value):
        if isinstance(inner, cst.SimpleString) and string_device(inner) is not None:
            return True
        if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
            "is_available",
            "type",
            "device_type",
            "is_cuda",
        ):
            return True
    return False


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


def _parsed(text: str) -> cst.BaseExpression:
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return cst.Name("_")


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
