"""DF204: a training or evaluation loop feeds CPU batches to a model moved to a device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import move_to, statement_before
from devfix.codemods.analysis.flow.loops import LoopPlan
from devfix.codemods.analysis.handed_models import HandedModels
from devfix.codemods.analysis.names import code_of
from devfix.context import FileContext
from devfix.types import Applicability, Edit

#: Words of the files whose loops may draw batches: loaders, iterator classes.
_BATCH_WORDS = ("DataLoader", "loader", "__next__", "__iter__")


class BatchNotMovedToDevice(DevicePass):
    """Batch from a DataLoader passed to a model on a device without being moved there.

    ## What it does
    Finds `for` loops over a `torch.utils.data.DataLoader` (directly, through `enumerate(...)` or
    `tqdm(...)`, through a name such as `pbar = tqdm(enumerate(loader))`, or through a function
    parameter whose every caller passes a DataLoader or that is annotated as one), or over an
    iterator class of the file (`__iter__`/`__next__`) that makes its batches with torch on the
    CPU and moves nothing (`return torch.LongTensor(rows), torch.tensor(labels)`), or over what a
    call of a library the file only imports returns (`train_loader, valid_loader =
    processer.data_processer()`: nothing in the file says what it yields, and a batch already on the
    device is not copied by the move), that pass batch tensors to a model the script moved with
    `.to(device)` or `.cuda()` (or that meet the model's output, as targets do in
    `criterion(model(x), y)`), without moving them. The fix moves them at the head of the loop body,
    in the batch's own shape: `x, y = x.to(device), y.to(device)` for unpacked batches (also after a
    leading `inputs, labels = data`), `batch = {k: v.to(device) for k, v in batch.items()}` for dict
    batches (`model(**batch)`, `batch["input_ids"]`), `batch = [t.to(device) for t in batch]` for
    batches read as `batch[0]`, `batch = batch.to(device)` for a single tensor; an unpacked name
    used as a dict (`features, targets = batch` with `model(**features)`) gets its own line with
    the comprehension. A loader rebound to a progress bar around itself (`loader =
    tqdm(loader)` under `if verbose:`) is still that loader. In a LightningModule, a batch
    drawn by hand (`batch = next(iter(self.trainer.val_dataloaders))` in `on_train_start`) and
    handed to the module (`self.compute_metrics(batch)`) gets `batch =
    self.transfer_batch_to_device(batch, self.device, 0)` before that use: the trainer moves
    only the batches it hands the steps. A function that nothing in the file calls, handed a
    model by its caller and building its DataLoader itself (a library's `def evaluate(model,
    dataset)`), moves the batches it feeds that model (its output used) to
    `next(model.parameters()).device` where it shows the model is a module (`model.eval()`,
    `.train()`, `.parameters()`, annotated `nn.Module`), and is reported without a fix where
    it does not: the caller chooses the device, and only a module has parameters to read it
    from. A module that moves itself (`self.cuda()` in `build()`, `self.to(device)` in
    `__init__`) and runs itself on what one of its own methods is handed (`def predict(self,
    X): return self(X[0].unsqueeze(0))`) moves that input to `next(self.parameters()).device`
    when it is a tensor, and reports it without a fix when it may not be one. A function
    handed a model the file moved (`predict(X, model)` after `model.to(device)`) that feeds it
    a tensor made on the CPU (`model(torch.tensor(X))`) makes it on that device.

    ## Why is this bad?
    A DataLoader yields CPU tensors. The model's weights are on the GPU, so its first layer
    fails with `RuntimeError: Expected all tensors to be on the same device, but found at
    least two devices, cuda:0 and cpu!` (or `Input type (torch.FloatTensor) and weight type
    (torch.cuda.FloatTensor) should be the same`). Targets left on the CPU fail the same way in
    the loss.

    ## Example
    ```python
    model = Net().to(device)
    for x, y in train_loader:
        loss = criterion(model(x), y)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```
    The device is the one the model was moved to, written as it can be read inside the loop: the
    same variable, a parameter of the training function that every caller fills with it, or the
    `self.<attr>` that holds it in a trainer class. Where the model's move is out of sight (a
    trainer class handed the model), a loop that moves some of its batch itself, all to one
    device (`x = x.to(opts.gpu)`, or where it calls the model: `self.model(x.to(self.device))`),
    shows that device for the names that meet the model's output. A `.cuda()` model gets
    `.cuda()` batches. Names that never reach the model (indices, file names) are left alone,
    and so are names the loop already moves itself or hands to a helper (`to_device(batch)`),
    batches the loader's `collate_fn` or dataset class already moved (DF201 says whether they
    should), and values that must stay on the CPU: the lengths a model packs with
    `pack_padded_sequence` (directly or in its `forward`), `.numpy()` receivers; a dict batch
    with such a key is moved by a comprehension that leaves that key where it is.

    ## Fix safety
    Unsafe: the fix assumes every moved batch element is a tensor (or has `.to`); a collate
    function that returns lists of strings in a dict batch would make the comprehension fail.
    When the model's device cannot be written inside the loop, or the batch's shape is unclear,
    the finding has no fix and says why. Hugging Face `Trainer`, Lightning and
    `accelerator.prepare`d loaders move batches themselves; a loader rebound from
    `accelerator.prepare(...)` is not a DataLoader call and is not touched; nor is what a
    library call returns when it is handed a DataLoader or a device (a wrapper that may move
    the batches), or what an in-place move such as PyG's `batch.to(device)` already placed.

    ## References
    - PyTorch tutorial "Training a Classifier", section "Training on GPU".
    - PyTorch docs, "CUDA semantics" and `torch.utils.data` ("Memory Pinning").
    """

    CODE = "DF204"
    NAME = "batch-not-moved-to-device"
    MESSAGE = "batch from a DataLoader reaches a model on a device without being moved there"
    FIX_TITLE = "Move the batch to the model's device at the head of the loop"
    APPLICABILITY = Applicability.UNSAFE
    TRIGGER_WORDS = (*_BATCH_WORDS, ".cuda(", ".to(")

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self._hooked: set[int] = set()

    def visit_For(self, node: cst.For) -> None:
        if not isinstance(node.iter, (cst.Name, cst.Attribute, cst.Call)):
            return
        if not self.facts.names.mentions(_BATCH_WORDS):
            return
        plan = self.facts.flow.loop_plan(node)
        if plan is not None:
            self._report(node.target, plan, "at the head of the loop")

    def visit_Call(self, node: cst.Call) -> None:
        run, called = self.facts.modules.inputs_run_unmoved(node), code_of(node.func)
        for value, tensor in run.inputs if run is not None else ():
            line, device = (run.line, run.device) if run is not None else (0, node)
            what = f"`{code_of(value)}` reaches `{called}(...)` unmoved, but the module moves "
            what += f"itself to a device (line {line})"
            if not tensor:
                self.report(value, message=f"{what}; no fix: it may not be a tensor")
            else:
                self._move_there(value, what, move_to(value, device), code_of(device))
        for move, factory in self.facts.own(HandedModels).made_for_placed_model(node):
            what = f"`{code_of(factory)}` is made on the CPU and fed to `{called}`, which this "
            what += f"file moves to `{move.code}` before handing it over"
            self._move_there(factory, what, move.apply(factory), move.code)

    def _move_there(self, node: cst.CSTNode, what: str, new: cst.CSTNode, device: str) -> None:
        self.report(
            node,
            message=f"{what}: move it there",
            fix_title=f"Move it to `{device}`",
            edits=[Edit(node, new)],
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        # `inputs, target = next(iter(valid_loader))`: one batch taken by hand.
        if not (isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name)):
            return
        if node.value.func.value != "next" or not self.facts.names.mentions(_BATCH_WORDS):
            return
        plan = self.facts.flow.next_batch_plan(node)
        if plan is not None:
            self._report(node, plan, "after it")
            return
        drawn = self.facts.flow.hand_drawn_lightning_batch(node)
        if drawn is not None and id(drawn[1]) not in self._hooked:
            self._hooked.add(id(drawn[1]))  # one move before the use, for every branch
            name, use = drawn
            move = f"{name} = self.transfer_batch_to_device({name}, self.device, 0)"
            self.report(
                node,
                message=f"batch `{name}` is drawn by hand in a Lightning hook and handed to the "
                f"module (line {self.facts.scopes.line_of(use)}) on the CPU: the trainer moves "
                "only its own loops' batches",
                fix_title=f"Add `{move}` before it is used",
                edits=[statement_before(use, move)],
            )

    def _report(self, node: cst.CSTNode, plan: LoopPlan, where_added: str) -> None:
        if not plan.unmoved:
            return
        if plan.loaders and all(self.facts.flow.moves_in_its_pipeline(c) for c in plan.loaders):
            return  # the collate function or the dataset moved them already
        names = ", ".join(f"`{n}`" for n in plan.unmoved)
        if plan.move is not None:
            where = plan.move.describe()
        elif plan.helper:
            where = f"the device `{plan.helper}` moves batches to"
        else:
            where = "a device"
        base = f"batch {names} reaches `{plan.model}` (on {where}) without being moved"
        batch = plan.unmoved[0] if plan.unmoved else "batch"
        left = [*plan.kept.items(), *((f'{batch}["{k}"]', r) for k, r in plan.cpu_keys.items())]
        if left:
            base += "; " + "; ".join(f"`{value}` stays on the CPU: {why}" for value, why in left)
        if plan.edit is None:
            self.report(node, message=f"{base}; no fix: {plan.reason}")
            return
        self.report(
            node,
            message=base,
            fix_title=f"Add `{plan.statement_code}` {where_added}",
            edits=[plan.edit],
        )
