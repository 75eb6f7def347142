"""DF306: an EMA (or other auxiliary) copy of the model on another device than the model."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.modules import self_attribute
from devfix.codemods.analysis.moves import DeviceMove, string_device
from devfix.codemods.analysis.names import argument, call_tail, code_of, dotted_name
from devfix.codemods.analysis.torch_names import EMA_HELPERS, tails
from devfix.codemods.model_copy_on_other_device.facts import (
    EmaRestore,
    EmaUpdate,
    EventMove,
    InitMove,
    ModelCopies,
    Placement,
)
from devfix.types import Applicability, Edit

_HELPER_TAILS = tails(EMA_HELPERS)


class ModelCopyOnOtherDevice(DevicePass):
    """EMA or auxiliary model copy on another device than the model it follows.

    ## What it does
    Finds exponential-moving-average updates of a model copy from the model's tensors
    (`ema_p.mul_(d).add_(p, alpha=1 - d)`, `ema_p.lerp_(p, 1 - d)`,
    `ema_p.copy_(ema_p * d + p * (1 - d))`, `e.data = ...`, `torch._foreach_lerp_(...)` over
    `zip(ema.parameters(), model.parameters())` or `state_dict().values()`) where the two live on
    different devices:

    - a copy made with `copy.deepcopy(model)` (or a second instance, `Net()`, loaded from the
      model's state) **before** `model.to(device)`, in a script or in the function that calls
      the update: the copy is moved where it is made (`copy.deepcopy(model).to(device)`), or,
      when the device is chosen later, right after the model's move (`ema.to(device)`);
    - an EMA class that copies the model and moves the copy to a device of its own
      (`self.module.to(device=device)` in `__init__`): its per-tensor updates move the model's
      tensor to the copy's device (`ema_v.lerp_(model_v.to(ema_v.device), ...)`);
    - EMA helpers (`timm.utils.ModelEmaV2/V3`, `torch.optim.swa_utils.AveragedModel`) given
      `device="cpu"` for a model on an accelerator, whose copy is then called with the model's
      inputs: reported.

    - an EMA helper whose `load_state_dict` adopts the loaded tensors
      (`diffusers.training_utils.EMAModel`) restored after `ema.to(device)`, or in a load hook
      (`accelerator.register_load_state_pre_hook`) apart from it: the restored shadow weights
      are where the state was loaded (the CPU for `EMAModel.from_pretrained`), so the move is
      repeated right after the restore (`ema.to(accelerator.device)`); reported without a fix
      when that device cannot be read at the restore;
    - an event handler (an EMA algorithm or callback) that moves its copy to the model's
      device only at `FIT_START` (`self.ema.move_params_to_device(state.model)`) while a branch
      for `EVAL_START`/`PREDICT_START`, which can come first (evaluating before fitting, after
      a restore), uses the copy: the same move is added at the start of that branch.

    - an object that is no module (an EMA of the parameters such as `torch_ema`'s, running
      statistics) moved with `.to(self.device)` in the `__init__` of a module whose `device`
      property reads its parameters (a LightningModule, a Hugging Face model): there it is the
      CPU, and the trainer that places the module later moves only parameters, buffers and
      submodules; the same move is added before the first statement of each other method
      that calls a method of the object (`self.ema.to(self.device)` before `self.ema.update()`;
      the move is cheap once the object is there).

    Updates whose two sides the pass cannot place, dictionaries of shadow tensors, and
    `torch._foreach_*` updates inside an EMA class (which usually switches them off when the
    devices differ) are left alone.

    ## Why is this bad?
    `copy.deepcopy` copies the parameters where they are: a copy made before `model.to(device)`
    stays on the CPU, and `model.to` does not know about it. The first update mixes the two:
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!` (`torch._foreach_*` name the lists' devices instead). An EMA kept
    on the CPU on purpose must receive the model's tensors moved to it.

    ## Example
    ```python
    model = Net()
    ema = copy.deepcopy(model)
    model.to(device)
    ...
    for ema_p, p in zip(ema.parameters(), model.parameters()):
        ema_p.mul_(0.999).add_(p, alpha=0.001)
    ```

    ## Use instead
    ```python
    model = Net()
    ema = copy.deepcopy(model).to(device)
    model.to(device)
    ```

    ## Fix safety
    Safe: the copy moves to the device of the model it follows (`Module.to` keeps its
    parameters' identity and values), or the model's tensor is moved to the copy's device for
    the update, which is a no-op when they already share one; a restored EMA is moved again to
    the device the script moved it to, a no-op when the state was already there. Unsafe for
    the move repeated at another event: the method is taken to be a device move by its name
    (`to`, `cuda`, `..._device`). An EMA helper
    given another device is reported without a fix: keeping the average off the GPU may be
    deliberate, and its evaluation must then move the inputs.

    ## References
    - huggingface/pytorch-image-models#2127 (`lerp_(model_v.to(device=self.device))`);
      lucidrains/DALLE2-pytorch#87; dptech-corp/Uni-Core#42; huggingface/diffusers PR#2382.
    """

    CODE = "DF306"
    NAME = "model-copy-on-other-device"
    MESSAGE = "an EMA or auxiliary copy of the model is on another device than the model"
    FIX_TITLE = "Put the copy on the model's device"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = (
        "zip",
        "_foreach_",
        "ModelEma",
        "AveragedModel",
        "EMAModel",
        "_START",
        ".device",
    )
    REQUIRED_WORDS = ("torch",)

    def visit_Module(self, node: cst.Module) -> bool:
        scopes: list[cst.CSTNode] = [node]
        scopes.extend(self.context.of_type(node, cst.FunctionDef))
        reported: set[int] = set()
        for scope in scopes:
            for update in self.facts.own(ModelCopies).ema_updates(scope):
                self._check(update, reported)
        for call in self.context.of_type(node, cst.Call):
            if call_tail(call.func) in _HELPER_TAILS:
                self._helper(call)
        for restore in self.facts.own(ModelCopies).ema_restores():
            self._restore(restore)
        for event_move in self.facts.own(ModelCopies).start_event_moves():
            self._event_move(event_move)
        for classdef in self.context.of_type(node, cst.ClassDef):
            for init_move in self.facts.own(ModelCopies).init_moves(classdef):
                self._init_move(init_move)
        return False

    def _init_move(self, found: InitMove) -> None:
        shown = code_of(found.move)
        move = cst.parse_statement(f"{shown}\n", config=self.context.module.config_for_parsing)
        self.report(
            found.move,
            message=f"`{shown}` runs in `__init__`, where `self.device` is still the CPU: the "
            f"trainer that places the module later does not move `self.{found.holder}`, which "
            "is no module; move it where it is used",
            fix_title=f"Move it where it is used: `{shown}`",
            edits=[
                Edit(
                    use,
                    cst.FlattenSentinel(
                        [
                            move.with_changes(leading_lines=use.leading_lines),
                            use.with_changes(leading_lines=()),
                        ]
                    ),
                )
                for use in found.uses
            ],
        )

    def _event_move(self, found: EventMove) -> None:
        move = found.move.with_changes(leading_lines=())
        shown = code_of(move.body[0])
        line = self.facts.scopes.line_of(found.move)
        body = found.branch.body
        first = body.body[0] if isinstance(body, cst.IndentedBlock) and body.body else None
        self.report(
            found.branch.test,
            message=f"`{found.holder}` is moved to the model's device only when training starts "
            f"(line {line}), but `{found.event}` uses it too and can come first (evaluating "
            "before fitting, after a checkpoint was restored on the CPU): repeat the move there",
            fix_title=f"Move it at `{found.event}` too: `{shown}`",
            edits=[Edit(first, cst.FlattenSentinel([move, first]))] if first is not None else [],
            applicability=Applicability.UNSAFE,
        )

    def _restore(self, restore: EmaRestore) -> None:
        moved = code_of(restore.move)
        line = self.facts.scopes.line_of(restore.move)
        problem = (
            f"`{restore.name}.load_state_dict(...)` adopts the loaded tensors where they are (a "
            f"state from `from_pretrained` is on the CPU) and undoes `{moved}` (line {line}): "
            "the next update mixes devices; move it again after the restore"
        )
        if not restore.visible:
            self.report(restore.load, message=f"{problem} (its device is not known here)")
            return
        again = cst.parse_statement(moved + "\n", config=self.context.module.config_for_parsing)
        self.report(
            restore.load,
            message=problem,
            fix_title=f"Move it again: `{moved}`",
            edits=[Edit(restore.statement, cst.FlattenSentinel([restore.statement, again]))],
        )

    # -- updates -------------------------------------------------------------------------------

    def _check(self, update: EmaUpdate, reported: set[int]) -> None:
        if update.copy.startswith("self.") and "." not in update.model:
            self._own_device_class(update)
            return
        if "." in update.copy or "." in update.model:
            return
        copies = self.facts.own(ModelCopies)
        copy = copies.module_placement(update.copy, update.node)
        model = copies.module_placement(update.model, update.node)
        if copy is None or model is None:
            return
        if copy.on_cpu and (model.move is not None or model.reason):
            self._copy_on_cpu(update, copy, model, reported)

    def _copy_on_cpu(
        self, update: EmaUpdate, copy: Placement, model: Placement, reported: set[int]
    ) -> None:
        copies = self.facts.own(ModelCopies)
        creation = copies.copy_creation(update.copy, update.node)
        if creation is None or id(creation) in reported:
            return
        reported.add(id(creation))
        name = self.facts.scopes.assigned_name(self._outer_call(creation))
        found = self._model_move_statement(creation, update.model, model.move)
        move = model.move or (found[1] if found is not None else None)
        where = move.describe() if move is not None else "a device"
        problem = (
            f"the copy `{name or update.copy}` ({copy.evidence}) stays on the CPU while "
            f"`{update.model}` is moved to {where}: this update mixes the two devices"
        )
        if model.move is not None:
            if model.move.method != "to" or model.move.expression is None:
                self._fix_at_creation(creation, problem, model.move)
                return
            if self.facts.moves.visible_at(code_of(model.move.expression), creation):
                self._fix_at_creation(creation, problem, model.move)
                return
        if found is None or name is None or move is None:
            reason = model.reason or "the device is not known where the copy is made"
            self.report(update.node, message=f"{problem}; {reason}: move the copy with the model")
            return
        statement = found[0]
        moved = code_of(move.apply(cst.Name(name)))
        line = cst.parse_statement(moved + "\n", config=self.context.module.config_for_parsing)
        self.report(
            update.node,
            message=f"{problem}; move the copy with the model (`{moved}`)",
            fix_title=f"Move `{name}` with the model",
            edits=[Edit(statement, cst.FlattenSentinel([statement, line]))],
        )

    def _outer_call(self, creation: cst.Call) -> cst.CSTNode:
        """`copy.deepcopy(model)` inside `copy.deepcopy(model).eval()`: the whole value."""
        node: cst.CSTNode = creation
        while True:
            parent = self.context.parent(node)
            grand = self.context.parent(parent) if parent is not None else None
            if (
                isinstance(parent, cst.Attribute)
                and parent.value is node
                and isinstance(grand, cst.Call)
                and grand.func is parent
            ):
                node = grand
            else:
                return node

    def _fix_at_creation(self, creation: cst.Call, problem: str, move: DeviceMove) -> None:
        target = self._outer_call(creation)
        assert isinstance(target, cst.BaseExpression)
        replacement, shown = move.applied(target)
        self.report(
            creation,
            message=f"{problem}; make the copy on the model's device (`{shown}`)",
            fix_title=f"Move the copy where it is made: `{shown}`",
            edits=[Edit(target, replacement)],
        )

    def _model_move_statement(
        self, creation: cst.Call, model: str, move: DeviceMove | None
    ) -> tuple[cst.BaseStatement, DeviceMove] | None:
        """The simple statement after `creation` (in its block, or in a block nested there)
        that moves the model the copy was made from, and its move."""
        source = argument(creation, "x", 0) if creation.args else None
        names = {model}
        if source is not None and dotted_name(source) is not None:
            names.add(dotted_name(source) or model)
        scope = self.facts.scopes.enclosing_scope(creation)
        for node in self.facts.scopes.statements(scope):
            if not (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("to", "cuda")
                and dotted_name(node.func.value) in names
                and self.context.order(node)[0] > self.context.order(creation)[0]
            ):
                continue
            found = self.facts.moves.move_of(node)
            if found is None or (move is not None and found.code != move.code):
                continue
            pair = self.facts.scopes.common_placement(creation, node)
            if pair is None or pair[0].index >= pair[1].index:
                return None
            places = self.facts.scopes.placements(node)
            statement = places[0].statement if places else None
            if isinstance(statement, cst.SimpleStatementLine):
                return statement, found
            return None
        return None

    # -- an EMA class with a device of its own ---------------------------------------------------

    def _own_device_class(self, update: EmaUpdate) -> None:
        if update.foreach or update.source is None or update.target is None:
            return
        attr = update.copy[len("self.") :]
        if "." in attr:
            return
        classdef = self.facts.modules.enclosing_class(update.node)
        if classdef is None:
            return
        move = self.facts.own(ModelCopies).own_device_copy(attr, classdef)
        if move is None:
            return
        source = update.source
        parent = self.context.parent(source)
        if (
            isinstance(parent, cst.Attribute)
            and parent.value is source
            and parent.attr.value in ("to", "cuda", "cpu")
        ):
            return
        device = f"{update.target}.device"
        replacement = cst.parse_expression(f"{source.value}.to({device})")
        line = self.facts.scopes.line_of(move)
        self.report(
            update.node,
            message=f"`{update.copy}` is moved to a device of its own on line {line}, which may "
            f"differ from the model's: `{source.value}` must be moved to `{device}` for this "
            "in-place update",
            fix_title=f"Use `{source.value}.to({device})`",
            edits=[Edit(source, replacement)],
        )

    # -- EMA helpers ---------------------------------------------------------------------------

    def _helper(self, call: cst.Call) -> None:
        qualified = self.qualified_name(call.func)
        if qualified not in EMA_HELPERS:
            return
        device = argument(call, "device", 99)
        if device is None or string_device(device) != "cpu":
            return
        model = argument(call, "model", 0)
        model_name = dotted_name(model) if model is not None else None
        if model_name is None:
            return
        copies = self.facts.own(ModelCopies)
        placement = copies.module_placement(model_name, call)
        if placement is None or placement.move is None:
            return
        name = self.facts.scopes.assigned_name(call)
        if name is None:
            return
        scope = self.facts.scopes.enclosing_scope(call)
        for node in self.facts.scopes.statements(scope):
            if not isinstance(node, cst.Call) or dotted_name(node.func) not in (
                name,
                f"{name}.module",
            ):
                continue
            if not node.args:
                continue
            placed = self.facts.devices.placed(node.args[0].value, node)
            if placed is None:
                continue
            line = self.facts.scopes.line_of(node)
            self.report(
                call,
                message=f"`{code_of(call.func)}(..., device={code_of(device)})` keeps the "
                f"average on the CPU while `{model_name}` is moved to "
                f"{placement.move.describe()}, and line {line} calls it with tensors on the "
                "model's device: move those inputs to the CPU, or keep the average on the "
                "model's device",
            )
            return

    def _self_attr(self, node: cst.CSTNode) -> str | None:
        return self_attribute(node)
