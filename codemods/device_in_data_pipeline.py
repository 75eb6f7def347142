"""DF201: data preparation code that moves tensors to a GPU."""

from __future__ import annotations

import re

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import remove_argument, without_device
from devfix.codemods.analysis.flow import ScriptFlow
from devfix.codemods.analysis.flow.pipeline import DataFunction
from devfix.codemods.analysis.moves import DeviceMove
from devfix.codemods.analysis.names import code_of, dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import TENSOR_FACTORIES
from devfix.types import Applicability, Edit

#: A file the pass can flag mentions data preparation it can find: Dataset and DataLoader resolve
#: to `torch.*` names; callbacks are passed as one of `DATA_KEYWORDS` or to a method in
#: `MAPPING_METHODS`. Blanks and line continuations may stand between a dot and a method name.
_DATA_CONTEXT = re.compile(r"torch|collate_fn|data_collator|transform|\.[\s\\]*\b(?:map|filter)\b")
#: ... and a move it flags: `.to(...)`, `.cuda()`, or a `torch.*` factory's `device=`.
_MOVE = re.compile(r"torch|\.[\s\\]*\b(?:to|cuda)\b")


class DeviceInDataPipeline(DevicePass):
    """Tensors moved to a GPU inside data preparation.

    ## What it does
    Finds `.to("cuda:N")`, `.to(device)`, `.cuda()` and `device=<GPU>` tensor factories inside
    data preparation: the per-item methods of `torch.utils.data.Dataset` subclasses
    (`__getitem__`, `__iter__`, ...), functions and collator classes passed as
    `DataLoader(collate_fn=...)` or `Trainer(data_collator=...)`, functions passed to
    `datasets`' `.map(...)`/`.with_transform(...)`, module functions whose result becomes a
    Hugging Face `Trainer`'s `train_dataset=`/`eval_dataset=` (through names and comprehensions:
    `encoded = preprocess(texts)`; `rows = [... encoded ...]`), and module functions those call.
    The move is removed so the data stays on the CPU, and the loop that consumes the DataLoader
    is made to move each batch to the device the model was moved to (as DF204 does), unless it
    already does. With a Hugging Face `Trainer` (or Lightning's), which moves batches itself,
    the move is only removed.

    ## Why is this bad?
    DataLoader workers cannot use CUDA ("CUDA error: initialization error" with
    `num_workers > 0`), and a hard-coded GPU is wrong on every other GPU: under torchrun,
    accelerate or a multi-GPU `Trainer`, the model of rank 1 is on `cuda:1` while the data was
    put on `cuda:0`, giving `RuntimeError: Expected all tensors to be on the same device, but
    found at least two devices, cuda:1 and cuda:0!`. Batches belong on the CPU until the
    training loop moves them, ideally with `pin_memory=True` and `non_blocking=True`.

    ## Example
    ```python
    class Pairs(Dataset):
        def __getitem__(self, i):
            return self.x[i].to("cuda:0"), self.y[i].to("cuda:0")

    model = Net().to(device)
    for x, y in DataLoader(Pairs(), batch_size=32):
        loss = criterion(model(x), y)
    ```

    ## Use instead
    ```python
    class Pairs(Dataset):
        def __getitem__(self, i):
            return self.x[i], self.y[i]

    model = Net().to(device)
    for x, y in DataLoader(Pairs(), batch_size=32):
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```
    `.to(device, dtype)` keeps the dtype cast (`.to(dtype)`); `.to("cpu")` and `.cpu()` are
    deliberate and left alone.

    ## Fix safety
    Safe when only the move is removed (a `Trainer` moves the batches, or the loop already
    does); unsafe when the loop gets a new move (see DF204). When no loop that consumes the
    data can be found, or the device the model is on cannot be written in that loop, the
    finding has no fix and says why: removing the move alone would leave the batch on the CPU.
    A Dataset that loads everything onto the GPU in `__init__` is reported without a fix: that
    is deliberate when `num_workers=0`.

    ## References
    - pytorch/pytorch#40985, #17359, #13775 (CUDA in DataLoader workers and `collate_fn`).
    - PyTorch docs, `torch.utils.data` ("Multi-process data loading", "Memory Pinning").
    """

    CODE = "DF201"
    NAME = "device-in-data-pipeline"
    MESSAGE = "data preparation moves tensors to a GPU"
    FIX_TITLE = "Keep the data on the CPU and move the batch in the training loop"
    APPLICABILITY = Applicability.UNSAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("cuda", "device")

    @classmethod
    def wakes_on(cls, text: str) -> bool:
        # "device" alone wakes on every file about disks or sockets.
        return (
            super().wakes_on(text)
            and _DATA_CONTEXT.search(text) is not None
            and _MOVE.search(text) is not None
        )

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda"):
            kind = "move"
        elif keyword_argument(node, "device") is not None and dotted_name(node.func):
            kind = "factory"
        else:
            return
        entry = self.facts.flow.data_function_of(node)
        if entry is None:
            return
        flow = self.facts.flow
        function = entry.node if isinstance(entry.node, cst.FunctionDef) else None
        if kind == "move":
            move = flow.device_move(node, function)
            if move is None:
                return
            replacement = without_device(node)
            assert isinstance(node.func, cst.Attribute)
            shown = ", ".join(
                (f"{a.keyword.value}=" if a.keyword else "") + code_of(a.value) for a in node.args
            )
            what = f"`.{node.func.attr.value}({shown})`"
        else:
            if self.qualified_name(node.func) not in TENSOR_FACTORIES:
                return
            device = keyword_argument(node, "device")
            assert device is not None
            device_kind = self.facts.moves.device_kind(device.value, function)
            if device_kind not in ("accelerator", "device"):
                return
            move = DeviceMove("to", device.value, kind=device_kind)
            replacement = remove_argument(node, device)
            what = f"`device={code_of(device.value)}`"
        hazard = flow.data_move_hazard(entry, node, move)
        if hazard is None:
            return  # one process, no workers, the model's device: correct as written
        base = f"{entry.role} puts data on a GPU with {what} ({hazard.text})"
        if entry.preloads:
            self.report(
                node,
                message=(
                    f"{base} when the dataset is built; fine only with `num_workers=0`, "
                    "otherwise keep it on the CPU and move batches in the training loop"
                ),
            )
            return
        self._fix(node, replacement, base, entry, flow, move if hazard.right_device else None)

    def _fix(
        self,
        node: cst.Call,
        replacement: cst.BaseExpression,
        base: str,
        entry: DataFunction,
        flow: ScriptFlow,
        data_device: DeviceMove | None,
    ) -> None:
        removal = Edit(node, replacement)
        loops = flow.consuming_loops(entry)
        if not loops and flow.has_self_moving_trainer():
            self.report(
                node,
                message=f"{base}; the trainer moves batches to the model's device itself",
                fix_title="Remove the move; the trainer moves batches",
                edits=[removal],
                applicability=Applicability.SAFE,
            )
            return
        planned = flow.data_batch_moves(entry, loops, data_device)
        if isinstance(planned, str):
            self.report(node, message=f"{base}; no fix: {planned}")
            return
        edits = [removal, *planned[0]]
        statements = planned[1]
        if statements:
            title = "Keep the data on the CPU; add " + ", ".join(f"`{s}`" for s in statements)
            self.report(node, message=base, fix_title=title, edits=edits)
        else:
            self.report(
                node,
                message=f"{base}; the training loop already moves the batch",
                fix_title="Remove the move; the loop moves the batch",
                edits=edits,
                applicability=Applicability.SAFE,
            )
