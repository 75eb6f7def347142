"""DF309: a process's global rank used as the index of a GPU on its machine."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.flow.ranks import shown
from devfix.codemods.analysis.names import call_tail, code_of, keyword_argument, parsed_expression
from devfix.codemods.analysis.torch_names import DISTRIBUTED_DATA_PARALLEL
from devfix.types import Applicability, Edit

#: The device modules of torch and of its out-of-tree backends (`torch_npu`, `torch_mlu`,
#: `torch_musa` register `torch.npu`, `torch.mlu`, `torch.musa`), which select a device by
#: its index on this machine, like CUDA.
_BACKENDS = ("cuda", "xpu", "npu", "mlu", "musa", "hpu")
#: A selector's qualified name -> the module whose `device_count()` bounds its index.
_DEVICE_SELECTORS = {
    **{
        f"torch.{backend}.{call}": backend
        for backend in _BACKENDS
        for call in ("set_device", "device")
    },
    "torch.accelerator.set_device_index": "accelerator",
}


class GlobalRankAsDevice(DevicePass):
    """A process's global rank used as the index of a GPU on its machine.

    ## What it does
    Finds the global rank of a launch, `dist.get_rank()` or the `RANK` variable torchrun sets
    (`int(os.environ["RANK"])`; Slurm's `SLURM_PROCID`, `mpirun`'s `OMPI_COMM_WORLD_RANK` and
    `PMI_RANK` alike), or a name bound to either, also returned (or unpacked) from a function
    or method of this file that returns one: `world, rank = self.dist_info()`), or a
    configuration's `global_rank` field (`self.args.global_rank`), where a GPU of this
    machine is meant: `DistributedDataParallel(..., device_ids=[rank], output_device=rank)`,
    `torch.cuda.set_device(rank)` (and the same selector of another backend: `torch.xpu`,
    Ascend's `torch.npu`, `torch.mlu`, `torch.musa`, `torch.hpu`, or
    `torch.accelerator.set_device_index`), DeepSpeed's `get_accelerator().set_device(rank)`,
    `torch.cuda.device(rank)`, `torch.device("cuda", rank)`, `torch.device(rank)`,
    `f"cuda:{rank}"`, `"cuda:" + str(rank)`, `.to(rank)` and `.cuda(rank)`. The fix uses
    the process's local GPU index: a name the code already binds to it (`local_rank =
    int(os.environ["LOCAL_RANK"])` or `SLURM_LOCALID`, `device = rank %
    torch.cuda.device_count()`), else
    `rank % torch.cuda.device_count()` (that backend's, or `getattr(torch, dev.type)`'s). In
    `rank * stages` (pipeline stages) only a local rank name fixes it; else no fix.

    ## Why is this bad?
    On one machine the global rank and the GPU index are the same number, so the script
    works, until the job spans a second node. There rank 8 of a 2×8 launch asks for `cuda:8`
    on a machine with GPUs 0-7: `RuntimeError: CUDA error: invalid device ordinal`, or with
    `device_ids=[rank]` on a model moved to the right GPU, DistributedDataParallel's
    "device_ids and output_device arguments only work with single-device/multiple-device GPU
    modules". This is a latent hazard of every torchrun script that indexes GPUs by `RANK`.

    ## Example
    ```python
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = rank % torch.cuda.device_count()
    model = DDP(model.to(device), device_ids=[rank])
    ```

    ## Use instead
    ```python
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = rank % torch.cuda.device_count()
    model = DDP(model.to(device), device_ids=[device])
    ```

    ## Fix safety
    Safe: wherever the script worked, the global rank was a GPU of the machine, so it was below
    `torch.cuda.device_count()` and equal to the local rank (one node); the fix changes nothing
    there. Unsafe where a launch-less path binds the rank to a negative number (`rank = -1` in
    the `else` of `if "RANK" in os.environ:`): `set_device(-1)` selects nothing, and
    `-1 % torch.cuda.device_count()` is the last GPU. Left alone: `dist.get_rank()` in a script
    started by `torch.multiprocessing.spawn`, whose rank is what the script hands
    `init_process_group` (usually the spawn index, a GPU of the machine), and a rank the
    function receives as a parameter.

    ## References
    - PyTorch, "Getting Started with Distributed Data Parallel" (multi-node: `device_ids`
      is the local rank) and torchrun's environment variables (`LOCAL_RANK`, `RANK`).
    """

    CODE = "DF309"
    NAME = "global-rank-as-device"
    MESSAGE = "the global rank is used as a GPU index of this machine"
    FIX_TITLE = "Use the process's local GPU index"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("RANK", "get_rank", "global_rank", "SLURM_PROCID")

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail in ("to", "cuda") and isinstance(node.func, cst.Attribute):
            argument = node.args[0] if node.args and node.args[0].keyword is None else None
            argument = argument or keyword_argument(node, "device")
            if argument is not None:
                self._check_index(argument.value, node)
            return
        if tail == "str":
            return
        for keyword in ("device_ids", "output_device"):
            argument = keyword_argument(node, keyword)
            if argument is None:
                continue
            if self.qualified_name(node.func) not in DISTRIBUTED_DATA_PARALLEL:
                return
            value = argument.value
            if isinstance(value, (cst.List, cst.Tuple)):
                for element in value.elements:
                    self._check_index(element.value, node)
            else:
                self._check_index(value, node)
        if tail in ("set_device", "device", "set_device_index") and node.args:
            name = self.qualified_name(node.func) or ""
            if name in _DEVICE_SELECTORS:
                self._check_index(node.args[0].value, node, _DEVICE_SELECTORS[name])
            elif self._accelerator_selection(node):
                self._check_index(node.args[0].value, node)
            elif module := self.facts.flow.run_time_device_module(node):
                self._check_index(node.args[0].value, node, module)
            elif name == "torch.device" and len(node.args) == 2:
                self._check_index(node.args[1].value, node)
            elif name == "torch.device" and len(node.args) == 1:
                self._check_index(node.args[0].value, node)  # `torch.device(rank)`: a GPU index

    def _accelerator_selection(self, node: cst.Call) -> bool:
        """`get_accelerator().set_device(i)`: DeepSpeed's accelerator picks a GPU."""
        func = node.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "set_device"
            and isinstance(func.value, cst.Call)
            and self.qualified_name(func.value.func) == "deepspeed.accelerator.get_accelerator"
        )

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        parts = node.parts
        for before, part in zip(parts, parts[1:]):
            if (
                isinstance(before, cst.FormattedStringText)
                and before.value.endswith("cuda:")
                and isinstance(part, cst.FormattedStringExpression)
            ):
                self._check_index(part.expression, node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        right = node.right
        if (
            isinstance(node.operator, cst.Add)
            and isinstance(node.left, cst.SimpleString)
            and str(node.left.evaluated_value).endswith("cuda:")
            and isinstance(right, cst.Call)
            and call_tail(right.func) == "str"
            and right.args
        ):
            self._check_index(right.args[0].value, node)

    def _check_index(
        self, value: cst.BaseExpression, at: cst.CSTNode, backend: str = "cuda"
    ) -> None:
        """`value` names a device of `backend` on this machine (`torch.<backend>` or code)."""
        scaled = self.facts.flow.scaled_global_rank(value, at)
        value = scaled or value
        rank = self.facts.flow.global_rank_index(value, at)
        if rank is None:
            return
        local = self.facts.flow.local_rank_name(at, value)
        if local is None:
            torch, imports = self.facts.names.torch_spelling()
            module = backend if "(" in backend else f"{torch}.{backend}"
            replacement = f"{code_of(value)} % {module}.device_count()"
        else:
            replacement, imports = local, []
        code = code_of(value)
        origin = "" if shown(rank) == code else f" (`{shown(rank)}`)"
        sentinel = self.facts.flow.negative_fallback(value, at) if local is None else None
        caveat = (
            f"; its fallback `{code} = {code_of(sentinel)}` selects no GPU, and the modulo "
            "would make it the last one"
            if sentinel is not None
            else ""
        )
        if declined := scaled is not None and local is None:
            caveat = "; scaled to its first GPU, it needs the local rank (not a modulo)"
        self.report(
            value,
            message=f"`{code}` is the global rank{origin}: on a second node it names a GPU "
            f"this machine does not have{caveat}",
            fix_title=f"Use the local GPU index `{replacement}`",
            edits=[] if declined else [Edit(value, parsed_expression(replacement))],
            imports=imports,
            applicability=Applicability.UNSAFE if sentinel is not None else None,
        )
