"""DF205: a torchmetrics metric left on the CPU while the tensors it measures are on a device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import move_to, statement_before
from devfix.codemods.analysis.modules import self_attribute
from devfix.codemods.analysis.moves import DeviceMove
from devfix.codemods.analysis.names import code_of
from devfix.codemods.metric_not_on_device.facts import HeldMetric, Metrics
from devfix.types import Applicability, Edit


class MetricNotOnDevice(DevicePass):
    """torchmetrics metric left on the CPU while its inputs are on a device.

    ## What it does
    Finds torchmetrics metrics (any class of the `torchmetrics` package: `Accuracy`,
    `F1Score`, `MeanMetric`, `MetricCollection`, ...) that a script or function builds and
    never moves, and then updates (`metric.update(preds, target)`, `metric(preds, target)`)
    with tensors on a device: the output of a model the script moved, a batch it moved, a
    tensor created with `device=`. The fix moves the metric where it is built,
    `Accuracy(...).to(device)`, to the device of those tensors (the model's device as the
    script wrote it). A metric built inside a loop or in a LightningModule's
    `training_step`/`validation_step` is fixed the same way (with `self.device` in a
    LightningModule), and the message says that it also starts over at every step.
    Metrics held by a `MetricCollection`, assigned to a module in `__init__` (registered, so
    `model.to(device)` and Lightning move them), moved later, or handed to other code are
    left alone; so are metrics fed CPU tensors (`torch.tensor(list_of_floats)`).

    Framework code that keeps the user's metrics in a plain object (a class that is not an
    `nn.Module`, so nothing moves them with the model) and never moves them is fixed where the
    metrics meet a device: a metric added to a `MetricCollection` attribute of a class that
    keeps its device in `self.device` is moved as it is added
    (`self.metrics.add_metrics(m.to(self.device))`), and a metric of an attribute list narrowed
    to torchmetrics (`for m in self.metrics: if isinstance(m, torchmetrics.Metric):`) is moved
    to the device of the tensor the method is given before it is updated
    (`m.to(preds.device)`). A class whose base comes from another file may be a module and is
    left alone.

    ## Why is this bad?
    A metric is an `nn.Module` whose states (`tp`, `total`, ...) are created on the CPU. It is
    not part of the model, so `model.to(device)` does not move it, and the first update with
    CUDA tensors fails: `RuntimeError: Encountered different devices in metric calculation
    (see stacktrace for details). This could be due to the metric class not being on the same
    device as input.` (caused by `Expected all tensors to be on the same device, but found at
    least two devices, cuda:0 and cpu!`). Built inside a step, it also forgets everything it
    accumulated at the next step.

    ## Example
    ```python
    model = Net().to(device)
    accuracy = MulticlassAccuracy(num_classes=10)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        accuracy.update(model(x), y)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    accuracy = MulticlassAccuracy(num_classes=10).to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        accuracy.update(model(x), y)
    ```

    ## Fix safety
    Safe: the metric moves to the device its inputs provably live on, which is what
    torchmetrics requires; what it computes does not change. Unsafe for metrics kept by a plain
    object: `self.device` is taken to be where the class runs its model, and the first argument
    of an update to be a tensor. A metric built in a step still
    starts over at every step after the fix: register it in `__init__` to accumulate over an
    epoch. When the device is not known where the metric is built (bound later, or a model
    moved in another function), the finding has no fix.

    ## References
    - Lightning-AI/torchmetrics#608, #1047 (maintainer: move the metric to the device), #340
      (a metric built in `validation_step`).
    """

    CODE = "DF205"
    NAME = "metric-not-on-device"
    MESSAGE = "a torchmetrics metric stays on the CPU while the tensors it measures are on a device"
    FIX_TITLE = "Move the metric to its inputs' device"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("torchmetrics",)

    def visit_Module(self, node: cst.Module) -> bool:
        for held in self.facts.own(Metrics).held_metrics():
            self._held(held)
        return True

    def _held(self, held: HeldMetric) -> None:
        """Metrics a plain object keeps: nothing moves them with the model."""
        classdef = self.facts.modules.enclosing_class(held.node)
        owner = f"`{classdef.name.value}`" if classdef is not None else "its class"
        problem = (
            f"the torchmetrics metrics in `{held.holder}` are kept by {owner}, which is not an "
            "`nn.Module`, so nothing moves them with the model: they stay on the CPU while "
            "their inputs are on the model's device"
        )
        if held.kind == "add":
            moved = move_to(held.value, cst.parse_expression(held.device))
            edit, shown, after = Edit(held.value, moved), code_of(moved), "as it is added"
        else:
            expression = self.context.parent(held.node)
            statement = self.context.parent(expression) if expression is not None else None
            if not isinstance(statement, cst.SimpleStatementLine):
                self.report(held.node, message=f"{problem}; move the metric to `{held.device}`")
                return
            shown = f"{code_of(held.value)}.to({held.device})"
            after = "before the update (a no-op once it is there)"
            edit = statement_before(statement, shown)
        self.report(
            held.node,
            message=f"{problem}; move each metric with `{shown}` {after}",
            fix_title=f"Move the metric with `{shown}`",
            edits=[edit],
            applicability=Applicability.UNSAFE,
        )

    def visit_Call(self, node: cst.Call) -> None:
        target = self.facts.own(Metrics).metric_bound(node)
        shown = f"`{code_of(node.func)}(...)`"
        if isinstance(target, cst.Name):
            self._named(node, target.value, shown)
        elif target is not None and self_attribute(target) is not None:
            self._attribute(node, code_of(target), shown)

    # -- `metric = Accuracy(...)` in a script or function ---------------------------------------

    def _named(self, node: cst.Call, name: str, shown: str) -> None:
        metrics = self.facts.own(Metrics)
        if metrics.metric_escapes(name, node):
            return
        step = self.facts.modules.step_hook(node)
        if step is not None and step[1].has_device_property:
            # Inside a LightningModule step: the module's device is `self.device`.
            if metrics.metric_uses(name, node):
                self._to_self_device(
                    node,
                    f"the metric `{name}` ({shown}) is built in `{step[0]}`: it starts on the "
                    "CPU while the LightningModule runs on its device, and starts over at every "
                    "step",
                )
            return
        feed = metrics.metric_feed(name, node)
        if feed is None:
            return
        line = self.facts.scopes.line_of(feed.use)
        problem = (
            f"the metric `{name}` ({shown}) stays on the CPU, but line {line} feeds it tensors "
            f"on a device ({feed.device.evidence})"
        )
        if self.facts.scopes.in_loop(node):
            problem += "; it is also built anew on every iteration, so it forgets what it measured"
        if feed.move is None:
            self.report(node, message=f"{problem}; {feed.reason or 'move it to their device'}")
            return
        replacement, shown = feed.move.applied(node)
        self.report(
            node,
            message=f"{problem}; move it with `{shown}`",
            fix_title=f"Move the metric with `{shown}`",
            edits=[Edit(node, replacement)],
        )

    # -- `self.metric = Accuracy(...)` ------------------------------------------------------------

    def _attribute(self, node: cst.Call, target: str, shown: str) -> None:
        """Registered in `__init__` of a module: moved with it. In a step of a LightningModule:
        built per step on the CPU."""
        step = self.facts.modules.step_hook(node)
        if step is None or not step[1].is_module:
            return
        problem = (
            f"`{target}` ({shown}) is built in `{step[0]}`, after the model was moved: it "
            "stays on the CPU and starts over at every step"
        )
        if step[1].has_device_property:
            self._to_self_device(node, problem, ", where the module registers and moves it")
            return
        self.report(node, message=f"{problem}; build it once in `__init__`")

    def _to_self_device(self, node: cst.Call, problem: str, where: str = "") -> None:
        move = DeviceMove("to", cst.parse_expression("self.device"))
        self.report(
            node,
            message=f"{problem}; move it with `.to(self.device)` (better: build it once in "
            f"`__init__`{where})",
            fix_title="Move the metric with `.to(self.device)`",
            edits=[Edit(node, move.apply(node))],
        )
