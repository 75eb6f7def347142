"""DF105: a submodule moved to the input's device inside `forward`."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import move_to
from devfix.codemods.analysis.names import code_of, dotted_name, is_constant
from devfix.types import Applicability, Edit

_MOVES = frozenset({"to", "cuda"})


class ModuleMovedInForward(DevicePass):
    """Submodule moved to another device inside `forward` before it is called.

    ## What it does
    Finds `self.head.to(x.device)(x)`, `self.head.to(device=x.device)(x)` and
    `self.head.cuda()(x)` in the methods of an `nn.Module` (other than `__init__`), and reports
    the statement forms `self.head.to(x.device)` / `self.head = self.head.to(x.device)` in
    `forward` (in other methods they are set-up code that places the model).

    ## Why is this bad?
    `Module.to()` moves the submodule's parameters in place, at every call. Under naive model
    parallelism (a model sharded with `device_map` / `dispatch_model`, or split by hand) this
    drags the head off the GPU it was placed on: weights shared with another layer (a tied
    embedding / LM head) move with it, and the next call of that layer fails with `Expected all
    tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!`; the
    optimizer state created for the old device no longer matches; and the output comes back on
    the input's GPU, so labels and the rest of the model disagree with it (seed: a sharded T5
    encoder with a classification head, `self.classifier.to(pooled.device)(pooled)`).

    ## Example
    ```python
    class Classifier(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.classifier = nn.Linear(hidden, 1)

        def forward(self, pooled):
            return self.classifier.to(pooled.device)(pooled)
    ```

    ## Use instead
    ```python
    class Classifier(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.classifier = nn.Linear(hidden, 1)

        def forward(self, pooled):
            return self.classifier(pooled.to(self.classifier.weight.device))
    ```
    The input goes to the submodule's parameter device instead, read from a parameter that the
    layer always has (`weight` of `nn.Linear`/`Conv*`/`Embedding`, `weight_ih_l0` of RNNs, ...).
    Every positional argument is moved (`self.rnn(x.to(d), h.to(d))`). When the submodule is not
    a known layer (a custom block, a `Sequential`), its parameter device cannot be named without
    `next(module.parameters())` (empty on DataParallel replicas), so the finding is reported
    without a fix. A move that also casts (`.to(x.device, torch.float16)`, `.to(x)`) is reported
    only.

    ## Fix safety
    Unsafe: the output is now on the submodule's device instead of the input's, so code after
    the call that combines it with tensors on the input's device needs them moved as well
    (DF106 does this for labels); on a single device nothing changes.

    ## References
    - PyTorch docs, `torch.nn.Module.to` ("This method modifies the module in-place").
    - Hugging Face accelerate docs, Big Model Inference (`dispatch_model`, device maps).
    """

    CODE = "DF105"
    NAME = "module-moved-in-forward"
    MESSAGE = "submodule moved to the input's device inside `forward`"
    FIX_TITLE = "Move the input to the submodule's parameter device instead"
    APPLICABILITY = Applicability.UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _MOVES):
            return
        if not (isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name)):
            return
        parent = self.context.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            self._inline(parent, node)
        elif isinstance(parent, cst.Expr) or (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and dotted_name(parent.targets[0].target) == dotted_name(func.value)
        ):
            self._statement(node)

    def _inline(self, call: cst.Call, move: cst.Call) -> None:
        found = self.facts.modules.submodule_moved(move)
        if found is None:
            return
        self_var, attr, _method, classdef = found
        assert isinstance(move.func, cst.Attribute)
        shown = f"{self_var}.{attr}.{move.func.attr.value}(...)"
        if self.facts.moves.only_casts(move):
            return  # `.to(torch.float16)`: a dtype cast, no device move
        problem = self.facts.moves.casts_besides_moving(move)
        if problem is not None:
            self.report(
                call,
                message=(
                    f"`{shown}` moves a submodule at every call; {problem}, so it is not rewritten"
                ),
            )
            return
        dispatched = self.facts.modules.dispatched_in_init(classdef, f"{self_var}.{attr}")
        if dispatched is not None:
            self.report(
                call,
                message=(
                    f"`{shown}` moves a submodule at every call, but `{dispatched}` placed "
                    f"`{self_var}.{attr}` in `__init__`, a part of a model spread over devices: "
                    "moving its input instead would change the device its output (and a loss "
                    "made from it) lands on, which a `Trainer` checks, so it is not rewritten"
                ),
            )
            return
        device = self.facts.modules.layer_parameter_device(classdef, attr, self_var)
        if device is None:
            self.report(
                call,
                message=(
                    f"`{shown}` moves a submodule at every call; move the input to the submodule's "
                    f"device instead (`{self_var}.{attr}` is not a known layer, so its parameter "
                    "device cannot be named)"
                ),
            )
            return
        if any(arg.star for arg in call.args):
            self.report(
                call,
                message=(
                    f"`{shown}` moves a submodule at every call; move the inputs to `{device}` "
                    "instead (the call unpacks `*args`/`**kwargs`, so it is not rewritten)"
                ),
            )
            return
        device_node = cst.parse_expression(device)
        args: list[cst.Arg] = []
        moved = 0
        for arg in call.args:
            if (
                arg.keyword is None
                and not is_constant(arg.value)
                and not _already_on(arg.value, device)
            ):
                args.append(arg.with_changes(value=move_to(arg.value, device_node)))
                moved += 1
            else:
                args.append(arg)
        if moved == 0:
            return
        replacement = call.with_changes(func=move.func.value, args=args)
        self.report(
            call,
            message=(
                f"`{shown}` moves the submodule's weights at every call (off the device it was "
                f"placed on); move the input to `{device}` instead"
            ),
            fix_title=f"Call `{self_var}.{attr}` on inputs moved to `{device}`",
            edits=[Edit(call, replacement)],
        )

    def _statement(self, move: cst.Call) -> None:
        found = self.facts.modules.submodule_moved(move)
        if found is None:
            return
        self_var, attr, _method, _classdef = found
        assert isinstance(move.func, cst.Attribute)
        if _method.name.value != "forward" or self.facts.moves.only_casts(move):
            return  # placing submodules in a set-up method is what it is for
        self.report(
            move,
            message=(
                f"`{self_var}.{attr}.{move.func.attr.value}(...)` moves a submodule inside "
                f"`{_method.name.value}` at every call; leave it where the model was placed and "
                f"move its inputs to its device"
            ),
        )


def _already_on(node: cst.BaseExpression, device: str) -> bool:
    """`x.to(self.head.weight.device)` already."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "to"
        and len(node.args) == 1
        and code_of(node.args[0].value) == device
    )
