"""DF107: a tensor that may be on a GPU handed to an argument torch reads on the CPU."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_chain
from devfix.codemods.analysis.cpu_only import CPU_ONLY_ARGUMENTS
from devfix.codemods.analysis.names import call_tail, code_of
from devfix.codemods.analysis.torch_names import tails
from devfix.types import Applicability, Edit

#: The callees' last names: the cheap check before a call's name is resolved.
_CONSUMERS = tails(CPU_ONLY_ARGUMENTS)


class CpuArgumentOnDevice(DevicePass):
    """Sequence lengths (or sampler weights) on a GPU, where torch needs them on the CPU.

    ## What it does
    Finds the `lengths` of `pack_padded_sequence(input, lengths)` (and the `weights` of
    `WeightedRandomSampler`) when they are a tensor that is, or may be, on a device: made with
    `device=` or moved with `.to(device)` / `.cuda()` (sorted, cast or indexed after that,
    or a field of a batch moved whole: `{k: v.to(device) for k, v in batch.items()}`), and
    appends `.cpu()` there. For an input of `forward`, what the file's own calls hand it
    decides (a parent module's `self.encoder(x, lengths)`, the script's `model(x, lengths)`):
    one that may be on a device is copied back, and where every call hands it a CPU value
    or a DataLoader's field, nothing is reported; where the file has no such call, an input
    the function uses as a tensor (or compares by a method only tensors have:
    `words.gt(0).sum(-1)`) is a latent hazard, copied back the same way, and any
    other input of a module's method is reported without a fix (it may be a list, which has
    no `.cpu()`; a tensor there is on the GPU once DataParallel scatters it). Lists and
    tensors the code makes on the CPU are left alone, and so is a value the code already
    brings back (`lengths.cpu()`, `.to("cpu")`, `.tolist()`).

    ## Why is this bad?
    Since PyTorch 1.7, `pack_padded_sequence` raises `RuntimeError: 'lengths' argument should
    be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor`: the lengths decide the packed
    layout on the host. Code that sorts its lengths on the GPU to permute the batch
    (`lengths, order = lengths.sort(descending=True)`), or a training loop that moves a whole
    batch to the device, lengths included, hands it CUDA lengths. A lengths input whose device
    the model does not choose is a latent hazard: the caller's batch move decides.

    ## Example
    ```python
    def forward(self, tokens, lengths):
        lengths, order = lengths.sort(descending=True)
        packed = pack_padded_sequence(self.embed(tokens[order]), lengths, batch_first=True)
    ```

    ## Use instead
    ```python
    def forward(self, tokens, lengths):
        lengths, order = lengths.sort(descending=True)
        packed = pack_padded_sequence(self.embed(tokens[order]), lengths.cpu(), batch_first=True)
    ```
    Only the argument is copied back: the device lengths stay where the rest of the code uses
    them (to permute or mask the batch).

    ## Fix safety
    Safe: `.cpu()` returns the tensor itself when it is on the CPU already, so nothing changes
    where the code worked; on a GPU it is the copy torch asks for. A value that is not
    provably a tensor (a list of lengths, the result of an unknown call) is not touched.

    ## References
    - PyTorch docs, `torch.nn.utils.rnn.pack_padded_sequence` ("lengths ... must be on the
      CPU if provided as a tensor"); pytorch/pytorch#43227.
    """

    CODE = "DF107"
    NAME = "cpu-argument-on-device"
    MESSAGE = "a tensor that may be on a GPU is passed where torch reads it on the CPU"
    FIX_TITLE = "Pass a CPU copy (`.cpu()`)"
    APPLICABILITY = Applicability.SAFE
    TRIGGER_WORDS = tuple(sorted(_CONSUMERS))

    def visit_Call(self, node: cst.Call) -> None:
        if call_tail(node.func) not in _CONSUMERS and not (
            isinstance(node.func, cst.Name)
            and node.func.value in self.facts.names.imported_aliases("torch")
        ):
            return
        for use in self.facts.cpu_only.arguments(node):
            placement = self.facts.cpu_only.placement(use.expr)
            shown = code_of(use.expr)
            if placement == "input":
                self.report(
                    use.expr,
                    message=f"`{shown}` is an input whose caller chooses its device (a batch "
                    "moved whole, or DataParallel's scatter, hands a tensor on the GPU), but "
                    f"{use.reason.removeprefix('it ')}; not fixed: it may be a list, which "
                    "has no `.cpu()`",
                    fix_title=f"Pass `{shown}.cpu()` if it is a tensor",
                )
                continue
            if placement not in ("device", "tensor"):
                continue
            where = (
                "is on a device"
                if placement == "device"
                else "is a tensor whose device the caller chooses (a batch moved whole puts it "
                "on the GPU)"
            )
            self.report(
                use.expr,
                message=f"`{shown}` {where}, but {use.reason.removeprefix('it ')}",
                fix_title=f"Pass `{shown}.cpu()`",
                edits=[Edit(use.expr, method_chain(use.expr, "cpu"))],
            )
