"""DF310: a model moved to the CPU in place to save its state, in the middle of training."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.names import code_of, dotted_name
from devfix.codemods.model_moved_to_cpu_to_save.facts import SavedOnTheCpu
from devfix.types import Applicability, Edit


class ModelMovedToCpuToSave(DevicePass):
    """`model.cpu().state_dict()` inside a training loop: the model itself goes to the CPU.

    ## What it does
    Finds `model.cpu()` read for its state (`model.cpu().state_dict()`, typically inside
    `torch.save(...)`) where `model` is a model the code moved to a device, inside a loop that
    goes on running or training it (`model(x)`, `loss.backward()`, `optimizer.step()`) and
    never moves it back afterwards, and takes a CPU copy of the state instead: `{k: v.cpu()
    for k, v in model.state_dict().items()}`. The whole model pickled on the CPU
    (`torch.save(model.cpu(), path)`) is reported without a fix: a CPU copy of the module
    itself needs `copy.deepcopy`, which doubles its memory for a moment.

    ## Why is this bad?
    `nn.Module.cpu()` works in place: it moves every parameter and buffer of the model to the
    CPU and returns the model. Saved that way at the end of an epoch, the model stays on the
    CPU while the next epoch moves its batches to the GPU, and the first step fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!` (or "Input type (torch.cuda.FloatTensor) and weight type
    (torch.FloatTensor) should be the same"). The optimizer still holds the same parameter
    objects, now on the CPU, beside its state on the GPU.

    ## Example
    ```python
    model = Net().to(device)
    for epoch in range(epochs):
        train_one_epoch(model, loader, optimizer)
        torch.save(model.cpu().state_dict(), f"epoch-{epoch}.pt")
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    for epoch in range(epochs):
        train_one_epoch(model, loader, optimizer)
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, f"epoch-{epoch}.pt")
    ```
    The checkpoint holds the same CPU tensors under the same keys. A save after the last step
    (outside the loop), and one the loop undoes (`model.to(device)` after it), are left alone.

    ## Fix safety
    Unsafe: the model now stays on its device after the save, as the training steps after it
    need; code after the loop that relied on the model having been left on the CPU (running it
    on CPU tensors) would change.
    """

    CODE = "DF310"
    NAME = "model-moved-to-cpu-to-save"
    MESSAGE = "`.cpu()` moves the model itself to the CPU while it is still being trained"
    FIX_TITLE = "Save a CPU copy of the state and leave the model where it is"
    APPLICABILITY = Applicability.UNSAFE
    TRIGGER_WORDS = (".cpu(",)
    REQUIRED_WORDS = ("torch",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cpu" and not node.args):
            return
        model = dotted_name(func.value)
        if model is None or self.facts.flow.model_device(func.value, node) is None:
            return
        loop = self.facts.own(SavedOnTheCpu).training_loop(node, model)
        if loop is None:
            return
        line = self.facts.scopes.line_of(loop)
        moved = (
            f"`{model}.cpu()` moves `{model}` itself to the CPU, and the loop (line {line}) "
            "goes on running it"
        )
        state = self.context.parent(node)
        call = self.context.parent(state) if state is not None else None
        if (
            isinstance(state, cst.Attribute)
            and state.attr.value == "state_dict"
            and isinstance(call, cst.Call)
            and call.func is state
        ):
            copy = cst.parse_expression(
                f"{{k: v.cpu() for k, v in {code_of(func.value)}.state_dict("
                f"{', '.join(code_of(arg) for arg in call.args)}).items()}}"
            )
            self.report(
                call,
                message=f"{moved}; save a CPU copy of its state instead",
                edits=[Edit(call, copy.with_changes(lpar=call.lpar, rpar=call.rpar))],
            )
            return
        self.report(
            node,
            message=(
                f"{moved}; no fix: a CPU copy of the module needs `copy.deepcopy({model}).cpu()`,"
                " or move it back after the save"
            ),
        )
