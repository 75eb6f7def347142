"""DF205's facts: the torchmetrics metrics of a file. Which calls build one, where a metric is
bound, used and fed tensors from, whether it escapes to code that may move it, and the metrics
plain objects keep (framework code holding the user's metrics), which nothing moves.

A metric is an `nn.Module` of its own: it does not follow `model.to(device)` unless the model
registers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.devices import Device
from devfix.codemods.analysis.flow.calls import MOVES
from devfix.codemods.analysis.modules import methods, self_attribute
from devfix.codemods.analysis.moves import DeviceMove
from devfix.codemods.analysis.names import code_of, dotted_name
from devfix.codemods.analysis.scopes import param_names
from devfix.codemods.analysis.torch_names import METRIC_UPDATE_METHODS, METRICS_PACKAGE


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


class Metrics(Analysis):
    """The torchmetrics metrics of one file: where they are built, used and fed from."""

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
            if not isinstance(node, cst.Call) or not self.scopes.starts_before(after, node):
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
                if parent.attr.value in (*MOVES, "cpu", "set_dtype", "_apply", "apply"):
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
