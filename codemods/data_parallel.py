"""DF401: `nn.DataParallel` training scripts, converted to DDP under torchrun."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._ddp_rewrite import (
    MAIN_BLOCK,
    RewritePlan,
    Rewriter,
    parse_statements,
)
from devfix.codemods._edits import append_keyword, call_tail, keyword_argument
from devfix.codemods._tree import walk
from devfix.context import FileContext, children_view
from devfix.types import Applicability, Edit, ImportSpec

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_ALREADY_DISTRIBUTED = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.init_process_group",
    }
)
_SPAWN = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "torch.multiprocessing.spawn.spawn",
    }
)
_IRREGULAR_TAILS = frozenset(
    {"DistributedDataParallel", "init_process_group", "spawn", "start_processes"}
)
_GPU_COUNT_NAMES = frozenset({"n_gpu", "n_gpus", "ngpu", "ngpus", "num_gpus", "gpu_count"})
_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)

#: Names the conversion introduces, and the import each must resolve to when already bound.
_IMPORTED = {
    "os": ("os", ImportSpec("os")),
    "dist": ("torch.distributed", ImportSpec("torch.distributed", alias="dist")),
    "DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel",
        ImportSpec("torch.nn.parallel", "DistributedDataParallel"),
    ),
    "DistributedSampler": (
        "torch.utils.data.distributed.DistributedSampler",
        ImportSpec("torch.utils.data.distributed", "DistributedSampler"),
    ),
    "consume_prefix_in_state_dict_if_present": (
        "torch.nn.modules.utils.consume_prefix_in_state_dict_if_present",
        ImportSpec("torch.nn.modules.utils", "consume_prefix_in_state_dict_if_present"),
    ),
}
_SETUP_NAMES = ("local_rank", "rank", "world_size", "distributed")
_LOADED = "loaded_state"
_RANK0 = "rank == 0"
_RANK0_ANYWHERE = "not dist.is_initialized() or dist.get_rank() == 0"
_CUDA_INDEX = re.compile(r"^cuda:(\d+)$")
_N = TypeVar("_N", bound=cst.CSTNode)


class _Decline(Exception):
    """The script is too irregular to convert safely; the message says why."""


class DataParallelTraining(DevicePass):
    """`nn.DataParallel` training script that should run as DistributedDataParallel under torchrun.

    ## What it does
    Finds a training script that wraps its model in `nn.DataParallel` (any spelling:
    `nn.DataParallel`, `torch.nn.parallel.DataParallel`, `from torch.nn import DataParallel as
    DP`) and converts it to one process per device with `DistributedDataParallel` and a
    `DistributedSampler`, launched with `torchrun --standalone --nproc_per_node=N script.py`.
    The converted script still runs as a single process with plain `python script.py`.

    ## Why is this bad?
    `DataParallel` runs one Python thread per GPU and copies the model to `cuda:1`, `cuda:2`, ...
    on every forward. Every tensor the model makes on a fixed device (a global `device`,
    `"cuda:0"`, a plain tensor attribute) then meets activations on another GPU and fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`. PyTorch recommends `DistributedDataParallel` instead: each
    process owns exactly one device, so `"cuda"` always means the right one, and it is faster.

    ## Example
    ```python
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    model = Net().to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model, device_ids=[0, 1])
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        for x, y in loader:
            ...
        print(epoch, loss.item())
        torch.save(model.state_dict(), "model.pt")
    ```

    ## Use instead
    ```python
    # devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs> train.py` ...
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if __name__ == "__main__":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        rank = int(os.environ.get("RANK", "0"))
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        if distributed:
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        sampler = DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0
        )
        loader = DataLoader(dataset, batch_size=64 // world_size, sampler=sampler)
        model = Net().to(device)
        if distributed:
            if torch.cuda.is_available():
                model = model.to(torch.device("cuda", local_rank))
                model = DistributedDataParallel(
                    model, device_ids=[local_rank], output_device=local_rank
                )
            else:
                model = DistributedDataParallel(model)
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for x, y in loader:
                ...
            if rank == 0:
                print(epoch, loss.item())
                torch.save(
                    (model.module if isinstance(model, DistributedDataParallel) else model)
                    .state_dict(),
                    "model.pt",
                )
        if distributed:
            dist.barrier()  # all work done before teardown (avoids a gloo abort at exit)
            dist.destroy_process_group()
    ```
    In detail: `torch.cuda.set_device(local_rank)` comes before the process group and before any
    CUDA tensor; the backend is `nccl` on CUDA and `gloo` on CPU; the model is moved to the
    process's device and wrapped (with `device_ids` only on CUDA); `DataParallel`, its
    `device_ids=[0, 1]`, the `if torch.cuda.device_count() > 1:` guard and the DataParallel idiom
    `if n_gpu > 1: loss = loss.mean()` are removed; an optimizer built before the wrap moves after
    it. Every training `DataLoader` (one iterated in a loop that calls `.backward()`) gets a
    `DistributedSampler` with the loader's former `shuffle`, the same seed on every rank, and
    `sampler.set_epoch(epoch)` at the start of each epoch. DataParallel's `batch_size` was the
    global batch, so each process takes `batch_size // world_size` (a comment says what happens
    when it does not divide). Checkpoints are written on rank 0 only, from the unwrapped module
    (no `module.` prefix), followed by `dist.barrier()` when the script reads them back;
    `load_state_dict` strips the `module.` prefix of DataParallel-era checkpoints. `print`,
    `logging` and `torch.save` run on rank 0 only. Evaluation loaders are left whole: every
    process evaluates the full evaluation set, so metrics, early stopping and "save the best
    model" decisions agree on every rank and no collective can hang. Hard-coded `"cuda:0"` and
    `.cuda(0)` become `"cuda"` / `.cuda()` (after `set_device` that is the process's own GPU).
    A flat script moves under `if __name__ == "__main__":` and ends with
    `dist.destroy_process_group()`; the top of the file gets the launch command.

    Not converted (reported without a fix, with the reason): `DataParallel` inside a class or a
    function the file never calls (library code), several wrapped models, scripts that already
    use `mp.spawn`, `init_process_group` or `DistributedDataParallel`, Hugging Face `Trainer`
    scripts (the Trainer runs DDP itself under torchrun), a wrap under a condition other than a
    GPU-count guard, training data not read through a `DataLoader`, a hard-coded GPU other than
    0, and names the conversion needs (`rank`, `world_size`, `dist`, ...) already used for
    something else.

    ## Fix safety
    Unsafe: the script must now be launched with `torchrun`, per-process quantities change
    (training losses printed by rank 0 are its local batch's, `len(train_loader)` is per process,
    BatchNorm normalises each process's batch), and `DistributedSampler` pads the data set so
    every process gets the same number of samples. With a mean-reduced loss, a global batch
    divisible by the number of processes and no randomness that differs per process (dropout,
    augmentation), the converted script trains to the same weights as the original.

    ## References
    - PyTorch tutorials, "Multi GPU training with DDP" and "Getting Started with Distributed Data
      Parallel"; `torchrun` documentation ("Important Notices").
    - `torch.nn.parallel.DistributedDataParallel` and
      `torch.utils.data.distributed.DistributedSampler` docstrings (`set_epoch`, `seed`,
      padding); distributed docs, "Which backend to use?".
    - pytorch/pytorch#3805 (the `module.` prefix), #53979 (evaluation through the wrapper).
    """

    CODE = "DF401"
    NAME = "data-parallel"
    MESSAGE = "`nn.DataParallel` training; use DistributedDataParallel under torchrun"
    FIX_TITLE = "Convert to DistributedDataParallel + DistributedSampler (launch with torchrun)"
    APPLICABILITY = Applicability.UNSAFE
    TRIGGER_WORDS = ("DataParallel",)

    def __init__(self, context: FileContext, *, keep_per_process_batch: bool = False) -> None:
        super().__init__(context)
        #: Keep `batch_size` as the per-process batch (the global batch grows with the processes).
        self.keep_per_process_batch = keep_per_process_batch

    def visit_Module(self, node: cst.Module) -> bool:
        calls = self._data_parallel_calls(node)
        if not calls:
            return False
        converter = _Converter(self, node, calls)
        try:
            module, imports = converter.convert()
        except _Decline as reason:
            self.report(
                calls[0],
                message=f"`nn.DataParallel` is not converted to DistributedDataParallel: {reason}",
            )
            return False
        self.report(calls[0], edits=[Edit(node, module)], imports=imports)
        return False

    def _data_parallel_calls(self, module: cst.Module) -> list[cst.Call]:
        names = {"DataParallel"}
        for alias in _walk(module, cst.ImportAlias):
            if alias.asname is not None and call_tail(alias.name) == "DataParallel":
                target = alias.asname.name
                if isinstance(target, cst.Name):
                    names.add(target.value)
        return [
            call
            for call in _walk(module, cst.Call)
            if call_tail(call.func) in names and self.qualified_name(call.func) in DATA_PARALLEL
        ]


# -- analysis ------------------------------------------------------------------------------


@dataclass
class _Loader:
    statement: cst.SimpleStatementLine
    name: str
    call: cst.Call
    epoch_loops: list[cst.For]


class _Converter:
    def __init__(self, checker: DataParallelTraining, module: cst.Module, calls: list[cst.Call]):
        self.checker = checker
        self.context = checker.context
        self.module = module
        self.calls = calls
        self.plan = RewritePlan()
        self.imports: dict[str, ImportSpec] = {}
        self.torch = "torch"
        self.bound = _bound_names(module)

    # -- driver ----------------------------------------------------------------------------

    def convert(self) -> tuple[cst.Module, list[ImportSpec]]:
        self._check_irregular()
        self._read_wrap(self.calls[0])
        self._find_run_scope()
        self._check_names()
        self._plan_setup()
        self._plan_wrap()
        self._plan_loaders()
        self._plan_optimizer()
        self._plan_checkpoints()
        self._plan_logging()
        self._plan_loss_mean()
        self._plan_device_literals()
        self.need("os")
        self.need("dist")
        self.need("DistributedDataParallel")
        rewritten = self.module.visit(Rewriter(self.plan))
        assert isinstance(rewritten, cst.Module)
        return rewritten, list(self.imports.values())

    def need(self, name: str) -> None:
        self.imports.setdefault(name, _IMPORTED[name][1])

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def qualified(self, node: cst.CSTNode) -> str | None:
        return self.checker.qualified_name(node)

    def line(self, node: cst.CSTNode) -> int:
        return self.context.position(node).start.line

    # -- irregular scripts -----------------------------------------------------------------

    def _check_irregular(self) -> None:
        if len(self.calls) > 1:
            raise _Decline(
                f"{len(self.calls)} models are wrapped; convert a script with several "
                "DataParallel models by hand"
            )
        names: list[cst.Name | cst.Attribute] = [*_walk(self.module, cst.Name)]
        names += _walk(self.module, cst.Attribute)
        for node in names:
            tail = call_tail(node)
            if tail is None or not (tail in _IRREGULAR_TAILS or tail.endswith("Trainer")):
                continue
            qualified = self.qualified(node)
            if qualified is None:
                continue
            if qualified in _SPAWN:
                raise _Decline("the script already starts its processes with `mp.spawn`")
            if qualified in _ALREADY_DISTRIBUTED:
                raise _Decline("the script already uses torch.distributed")
            if qualified.split(".")[0] in ("transformers", "trl") and tail.endswith("Trainer"):
                raise _Decline(
                    "a Hugging Face Trainer runs DistributedDataParallel itself when the script "
                    "is launched with torchrun or accelerate; change the launch, not the code"
                )

    # -- the wrap --------------------------------------------------------------------------

    def _read_wrap(self, call: cst.Call) -> None:
        self.dp_call = call
        ancestors = self.context.ancestors(call)
        for ancestor in ancestors:
            if isinstance(ancestor, cst.ClassDef):
                raise _Decline(
                    "DataParallel is applied inside a class (library code); convert the "
                    "training script that uses it"
                )
            if isinstance(ancestor, (cst.Lambda, cst.For, cst.While, cst.With, cst.Try)):
                raise _Decline("DataParallel is applied inside a loop, `with` or `try` block")
        statement = next((a for a in ancestors if isinstance(a, cst.SimpleStatementLine)), None)
        if statement is None:
            raise _Decline("DataParallel is applied outside a statement of its own")
        small = statement.body[0] if len(statement.body) == 1 else None
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
        ):
            raise _Decline("the DataParallel model is not assigned to a plain name")
        self.target = small.targets[0].target.value
        # `DP(m)` or `DP(m).to(device)` / `.cuda()`: the chain keeps everything but the wrapper.
        inner = _wrapped_argument(call)
        if inner is None:
            raise _Decline("the DataParallel call has no model argument")
        for arg in call.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "dim" and not (
                isinstance(arg.value, cst.Integer) and arg.value.value == "0"
            ):
                raise _Decline("DataParallel splits along `dim` other than 0")
        if not _chain_holds(small.value, call):
            raise _Decline("the DataParallel call is part of a larger expression")
        self.inner_names = {self.target}
        if isinstance(inner, cst.Name):
            self.inner_names.add(inner.value)
        self.plan.unwrap_calls.add(id(call))
        self.wrap_statement = statement
        unit: cst.BaseStatement = statement
        block = self.context.parent(statement)
        owner = _owner_of(self.context, block)
        if isinstance(owner, cst.If) and not _is_main_guard(owner):
            if owner.orelse is not None or not self._is_gpu_guard(owner.test):
                raise _Decline(
                    "DataParallel is applied under a condition other than a GPU-count guard"
                )
            assert isinstance(block, cst.IndentedBlock)
            for other in block.body:
                if other is not statement and not self._is_log_statement(other):
                    raise _Decline("the GPU-count guard around DataParallel does more than wrap")
            unit = owner
            block = self.context.parent(owner)
            owner = _owner_of(self.context, block)
        self.unit = unit
        self.unit_block = block
        self.unit_owner = owner

    def _is_gpu_guard(self, test: cst.BaseExpression) -> bool:
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return False
        target = test.comparisons[0]
        value = target.comparator
        if not isinstance(value, cst.Integer):
            return False
        limit = (isinstance(target.operator, cst.GreaterThan) and value.value == "1") or (
            isinstance(target.operator, cst.GreaterThanEqual) and value.value == "2"
        )
        left = test.left
        if isinstance(left, cst.Call):
            counts = self.qualified(left.func) == "torch.cuda.device_count"
        else:
            counts = call_tail(left) in _GPU_COUNT_NAMES
        return limit and counts

    # -- where the run happens -------------------------------------------------------------

    def _find_run_scope(self) -> None:
        body: list[cst.BaseStatement] = list(self.module.body)
        guard = next((s for s in body if isinstance(s, cst.If) and _is_main_guard(s)), None)
        owner = self.unit_owner
        self.function: cst.FunctionDef | None = None
        if isinstance(owner, cst.Module):
            if guard is not None:
                raise _Decline(
                    "DataParallel is applied at module level next to an `if __name__ == "
                    '"__main__":` block; move the training into one place first'
                )
            start = self._run_start(body, body.index(self.unit))
            self.plan.main_from = start
            self.run_statements: list[cst.BaseStatement] = body[start:]
            self.run_block_key = MAIN_BLOCK
        elif isinstance(owner, cst.If) and owner is guard:
            self.run_statements = [owner]
            self.run_block_key = id(owner.body)
        elif isinstance(owner, cst.FunctionDef) and self.context.parent(owner) is self.module:
            self.function = owner
            self._check_called(owner, body, guard)
            self.run_statements = [owner]
            self.run_block_key = id(owner.body)
            returns = [r for r in _walk(owner.body, cst.Return, skip_defs=True)]
            last = owner.body.body[-1] if isinstance(owner.body, cst.IndentedBlock) else None
            early = [
                r
                for r in returns
                if not (isinstance(last, cst.SimpleStatementLine) and r in last.body)
            ]
            if early:
                raise _Decline(
                    f"`{owner.name.value}` returns early; `destroy_process_group` has no single "
                    "place at its end"
                )
        else:
            raise _Decline("DataParallel is applied in a nested function or block")

    def _check_called(
        self, function: cst.FunctionDef, body: list[cst.BaseStatement], guard: cst.If | None
    ) -> None:
        name = function.name.value
        callers = [
            s
            for s in body
            if not isinstance(s, (cst.FunctionDef, cst.ClassDef)) and _calls_name(s, name)
        ]
        # One call step: `main()` calling `train()`.
        if not callers:
            for other in body:
                if (
                    isinstance(other, cst.FunctionDef)
                    and other is not function
                    and _calls_name(other, name)
                ):
                    callers += [
                        s
                        for s in body
                        if not isinstance(s, (cst.FunctionDef, cst.ClassDef))
                        and _calls_name(s, other.name.value)
                    ]
        if not callers:
            raise _Decline(
                f"DataParallel is applied in `{name}`, which this file never runs (library "
                "code); convert the script that launches it"
            )
        if guard is None:
            self.plan.main_from = self._run_start(body, body.index(callers[0]))

    def _run_start(self, body: list[cst.BaseStatement], limit: int) -> int:
        """Where the module's statements start moving under `if __name__ == "__main__":`.

        Classes and functions (and the statements between them) stay at module level when
        nothing among those statements touches a device or data; the training that follows the
        last of them moves.
        """
        first = self._first_executable(body)
        if first is None or first > limit:
            raise _Decline("cannot tell where the script's training starts")
        last_definition = max(
            (
                i
                for i, s in enumerate(body[:limit])
                if isinstance(s, (cst.FunctionDef, cst.ClassDef))
            ),
            default=-1,
        )
        start = max(first, last_definition + 1)
        for statement in body[first:start]:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            if self._touches_training(statement):
                return first
        return start

    def _touches_training(self, statement: cst.BaseStatement) -> bool:
        for call in _walk(statement, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("cuda", "to"):
                return True
            if keyword_argument(call, "device") is not None:
                return True
            qualified = self.qualified(call.func) or ""
            if qualified in DATA_LOADERS or qualified.startswith("torch.optim"):
                return True
        return False

    def _first_executable(self, body: list[cst.BaseStatement]) -> int | None:
        for index, statement in enumerate(body):
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(statement, cst.SimpleStatementLine) and all(
                self._is_definition(small) for small in statement.body
            ):
                continue
            return index
        return None

    def _is_definition(self, small: cst.BaseSmallStatement) -> bool:
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            return True
        if isinstance(small, cst.Expr) and isinstance(
            small.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            return True
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            for call in _walk(small.value, cst.Call):
                if self.qualified(call.func) not in ("torch.device", "torch.cuda.is_available"):
                    return False
            return True
        return False

    def in_run(self, node: cst.CSTNode) -> bool:
        """Inside the statements that run the training, outside any other function."""
        for ancestor in [node, *self.context.ancestors(node)]:
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return ancestor is self.function
            if any(ancestor is s for s in self.run_statements):
                return self.function is None
        return False

    def in_helper(self, node: cst.CSTNode) -> bool:
        """Inside a module-level function other than the one that runs the training."""
        function = None
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
        return (
            function is not None
            and function is not self.function
            and self.context.parent(function) in (self.module, *self.run_statements)
        )

    # -- names -----------------------------------------------------------------------------

    def _check_names(self) -> None:
        for name in (*_SETUP_NAMES, _LOADED):
            if name in self.bound:
                raise _Decline(f"the script already uses the name `{name}`")
        imports = _module_imports(self.module)
        for name, (qualified, _spec) in _IMPORTED.items():
            if name in self.bound and imports.get(name) != qualified:
                raise _Decline(f"the script already uses the name `{name}` for something else")
        torch_names = [local for local, q in imports.items() if q == "torch"]
        if torch_names:
            self.torch = torch_names[0]
        elif "torch" in self.bound:
            raise _Decline("the name `torch` is used for something else")
        else:
            self.imports["torch"] = ImportSpec("torch")

    def t(self, code: str) -> str:
        """A template with `torch.` spelled as the script spells it."""
        return code.replace("torch.", f"{self.torch}.")

    # -- setup, wrap, teardown -------------------------------------------------------------

    def _plan_setup(self) -> None:
        setup = self.t(
            "# devfix DF401: one process per device. torchrun sets LOCAL_RANK, RANK and "
            "WORLD_SIZE;\n"
            "# without them (plain `python`) this runs as one process, without a process group.\n"
            'local_rank = int(os.environ.get("LOCAL_RANK", "0"))\n'
            'rank = int(os.environ.get("RANK", "0"))\n'
            'world_size = int(os.environ.get("WORLD_SIZE", "1"))\n'
            'distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ\n'
            "if torch.cuda.is_available():\n"
            "    torch.cuda.set_device(local_rank)"
            "  # before the process group and any CUDA tensor\n"
            "if distributed:\n"
            '    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")\n'
        )
        teardown = "if distributed:\n    dist.barrier()\n    dist.destroy_process_group()\n"
        self.plan.block_prepend[self.run_block_key] = parse_statements(setup)
        self.plan.spaced.add(self.run_block_key)
        self.plan.block_append[self.run_block_key] = parse_statements(teardown)
        name = os.path.basename(self.context.path)
        script = name if name.endswith(".py") else "train.py"
        self.plan.header_comment = (
            f"# devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs> {script}`"
            f" (`python {script}` runs one process)"
        )

    def _plan_wrap(self) -> None:
        t = self.target
        statements: list[cst.BaseStatement] = []
        assign = self.wrap_statement.body[0]
        assert isinstance(assign, cst.Assign)
        new_value = _replace_node(assign.value, self.dp_call, _wrapped_argument(self.dp_call))
        if not (isinstance(new_value, cst.Name) and new_value.value == t):
            # The original statement: the rewriter drops the wrapper call from it.
            statements.append(self.wrap_statement.with_changes(leading_lines=[]))
        statements += parse_statements(
            self.t(
                "if distributed:"
                "  # devfix DF401: one replica per process; DDP averages the gradients\n"
                "    if torch.cuda.is_available():\n"
                f'        {t} = {t}.to(torch.device("cuda", local_rank))\n'
                f"        {t} = DistributedDataParallel("
                f"{t}, device_ids=[local_rank], output_device=local_rank)\n"
                "    else:\n"
                f"        {t} = DistributedDataParallel({t})\n"
            )
        )
        self.wrap_replacement = statements
        plan = self.plan.statement(self.unit)
        plan.replace = statements

    # -- data ------------------------------------------------------------------------------

    def _plan_loaders(self) -> None:
        loaders: list[_Loader] = []
        for call in _walk(self.module, cst.Call):
            if (
                call_tail(call.func) != "DataLoader"
                and self.qualified(call.func) not in DATA_LOADERS
            ):
                continue
            if self.qualified(call.func) not in DATA_LOADERS or not self.in_run(call):
                continue
            statement = self.context.parent(self.context.parent(call) or call)
            parent_assign = self.context.parent(call)
            name = None
            if (
                isinstance(parent_assign, cst.Assign)
                and len(parent_assign.targets) == 1
                and isinstance(parent_assign.targets[0].target, cst.Name)
                and isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
            ):
                name = parent_assign.targets[0].target.value
            if name is None:
                if self._feeds_training(call):
                    raise _Decline("a training DataLoader is not assigned to a plain name")
                continue
            assert isinstance(statement, cst.SimpleStatementLine)
            uses = self._training_uses(name)
            if uses is not None:
                loaders.append(_Loader(statement, name, call, uses))
        if not loaders:
            raise _Decline(
                "no DataLoader feeding the training loop (a loop that calls `.backward()`) was "
                "found where the model is wrapped"
            )
        self.need("DistributedSampler")
        for loader in loaders:
            self._convert_loader(loader)

    def _feeds_training(self, call: cst.Call) -> bool:
        for ancestor in self.context.ancestors(call):
            if isinstance(ancestor, cst.For) and _has_backward(ancestor.body, self.module):
                return True
        return False

    def _training_uses(self, name: str) -> list[cst.For] | None:
        """The epoch loops around the training uses of loader `name`; None if it never trains."""
        epochs: list[cst.For] = []
        training = False
        for node in _walk(self.module, cst.Name):
            if node.value != name or not self.in_run(node):
                continue
            loop = None
            for ancestor in self.context.ancestors(node):
                if isinstance(ancestor, cst.For) and _contains(ancestor.iter, node):
                    loop = ancestor
                    break
            if loop is not None and _has_backward(loop.body, self.module):
                training = True
                outer = self._enclosing_for(loop)
            elif loop is None and self._passed_to_trainer(node):
                training = True
                outer = self._enclosing_for(node)
            else:
                continue
            if outer is not None and outer not in epochs:
                epochs.append(outer)
        return epochs if training else None

    def _enclosing_for(self, node: cst.CSTNode) -> cst.For | None:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if isinstance(ancestor, cst.For) and ancestor is not node:
                return ancestor
        return None

    def _passed_to_trainer(self, node: cst.Name) -> bool:
        """`train(model, loader, ...)` where `train` is a function of this file that trains."""
        arg = self.context.parent(node)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
            return False
        for statement in self.module.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == call.func.value:
                return _has_backward(statement.body, self.module)
        return False

    def _convert_loader(self, loader: _Loader) -> None:
        call = loader.call
        dataset_arg = next((a for a in call.args if a.keyword is None), None) or keyword_argument(
            call, "dataset"
        )
        if dataset_arg is None or any(a.star for a in call.args):
            raise _Decline(f"cannot read the dataset of DataLoader `{loader.name}`")
        for keyword in ("sampler", "batch_sampler"):
            if keyword_argument(call, keyword) is not None:
                raise _Decline(f"DataLoader `{loader.name}` already has a `{keyword}`")
        sampler = f"{loader.name}_sampler"
        for suffix in ("loader", "iterator", "iter", "dl"):
            if loader.name.lower().endswith(suffix) and len(loader.name) > len(suffix):
                sampler = loader.name[: -len(suffix)] + "sampler"
                break
        if loader.name.lower() in ("loader", "dl", "iterator"):
            sampler = "sampler"
        if sampler in self.bound:
            raise _Decline(f"the script already uses the name `{sampler}`")
        self.bound.add(sampler)
        before: list[cst.BaseStatement] = []
        dataset = dataset_arg.value
        if not isinstance(dataset, (cst.Name, cst.Attribute)):
            hoisted = (
                sampler[: -len("sampler")] + "dataset"
                if sampler.endswith("sampler")
                else f"{sampler}_dataset"
            )
            if hoisted in self.bound or hoisted == sampler:
                raise _Decline(f"the script already uses the name `{hoisted}`")
            self.bound.add(hoisted)
            before += parse_statements(f"{hoisted} = {self.code(dataset)}\n")
            dataset = cst.Name(hoisted)
        shuffle_arg = keyword_argument(call, "shuffle")
        positional = [a for a in call.args if a.keyword is None]
        if shuffle_arg is None and len(positional) >= 3:
            shuffle_arg = positional[2]
        shuffle = self.code(shuffle_arg.value) if shuffle_arg is not None else "False"
        batch_arg = keyword_argument(call, "batch_size")
        if batch_arg is None and len(positional) >= 2:
            batch_arg = positional[1]
        args: list[cst.Arg] = []
        for arg in call.args:
            if arg is shuffle_arg:
                continue
            if arg is dataset_arg:
                arg = arg.with_changes(value=dataset)
            if arg is batch_arg and not self.checker.keep_per_process_batch:
                value = arg.value
                if not isinstance(
                    value, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)
                ):
                    value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                arg = arg.with_changes(
                    value=cst.BinaryOperation(
                        left=value,
                        operator=cst.FloorDivide(),
                        right=cst.Name("world_size"),
                    )
                )
            args.append(arg)
        if args:
            last = args[-1]
            if shuffle_arg is call.args[-1] and shuffle_arg.comma is not cst.MaybeSentinel.DEFAULT:
                args[-1] = last.with_changes(comma=shuffle_arg.comma)
            elif last.comma is not cst.MaybeSentinel.DEFAULT and not any(
                a.comma is not cst.MaybeSentinel.DEFAULT for a in call.args[-1:]
            ):
                args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new_call = append_keyword(call.with_changes(args=args), "sampler", cst.Name(sampler))
        self.plan.expressions[id(call)] = new_call
        batch = self.code(batch_arg.value) if batch_arg is not None else "1"
        if self.checker.keep_per_process_batch:
            comment = (
                "# devfix DF401: `batch_size` stays per process, so the global batch is "
                f"{batch} * world_size.\n"
            )
        else:
            comment = (
                f"# devfix DF401: DataParallel's batch of {batch} was global; each of the "
                "world_size\n"
                f"# processes now takes {batch} // world_size of it (when that does not divide, "
                "the\n"
                "# global batch is smaller). Each process reads its own shard of the data set.\n"
            )
        before = parse_statements(
            comment
            + "".join(self.code(s) for s in before)
            + f"{sampler} = DistributedSampler({self.code(dataset)}, num_replicas=world_size, "
            + f"rank=rank, shuffle={shuffle}, seed=0)\n"
        )
        self.plan.statement(loader.statement).before += before
        for loop in loader.epoch_loops:
            if not isinstance(loop.target, cst.Name) or not isinstance(
                loop.body, cst.IndentedBlock
            ):
                raise _Decline("cannot place `sampler.set_epoch` in the epoch loop")
            self.plan.block_prepend.setdefault(id(loop.body), []).extend(
                parse_statements(
                    f"{sampler}.set_epoch({loop.target.value})"
                    "  # devfix DF401: a new shuffle every epoch\n"
                )
            )

    # -- optimizer -------------------------------------------------------------------------

    def _plan_optimizer(self) -> None:
        block = self.unit_block
        body = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
        if self.unit not in body:
            return
        index = body.index(self.unit)
        moved: list[cst.BaseStatement] = []
        for position, statement in enumerate(body[:index]):
            name = self._optimizer_name(statement)
            if name is None:
                continue
            if any(_mentions(other, name) for other in body[position + 1 : index + 1]):
                continue
            self.plan.statement(statement).remove = True
            moved.append(statement)
        if moved:
            self.plan.statement(self.unit).after += moved

    def _optimizer_name(self, statement: cst.BaseStatement) -> str | None:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.Call)
        ):
            return None
        qualified = self.qualified(small.value.func) or ""
        if qualified.startswith("torch.optim.") and ".lr_scheduler" not in qualified:
            return small.targets[0].target.value
        return None

    # -- checkpoints -----------------------------------------------------------------------

    def _unwrapped(self) -> cst.BaseExpression:
        t = self.target
        return cst.parse_expression(
            f"({t}.module if isinstance({t}, DistributedDataParallel) else {t})"
        )

    def _refers_to_target(self, name: cst.Name) -> bool:
        if name.value != self.target:
            return False
        if self.in_run(name):
            wrapped_at = self.context.position(self.unit).end.line
            return self.line(name) > wrapped_at
        if self.function is None and self.in_helper(name):
            scope = self.context.scope(name)
            return scope is not None and self.target not in scope.assignments
        return False

    def _plan_checkpoints(self) -> None:
        loads_after: list[int] = []
        for call in _walk(self.module, cst.Call):
            if (
                call_tail(call.func) == "load"
                and self.in_run(call)
                and self.qualified(call.func) == "torch.load"
            ):
                loads_after.append(self.line(call))
        for node in _walk(self.module, cst.Attribute):
            if not isinstance(node.value, cst.Name):
                continue
            attr = node.attr.value
            if attr == "module" and self._refers_to_target(node.value):
                parent = self.context.parent(node)
                if not isinstance(parent, cst.AssignTarget):
                    self.plan.expressions[id(node)] = self._unwrapped()
            elif attr in ("state_dict", "load_state_dict") and self._refers_to_target(node.value):
                self.plan.expressions[id(node.value)] = self._unwrapped()
        for statement in _walk(self.module, cst.SimpleStatementLine):
            found = _statement_call(statement)
            if found is None:
                continue
            call = found
            run = self.in_run(statement)
            if call_tail(call.func) == "save" and self.qualified(call.func) == "torch.save":
                if run:
                    self.plan.statement(statement).gate = _RANK0
                    if any(line > self.line(statement) for line in loads_after):
                        self.plan.statement(statement).after += parse_statements(
                            "if distributed:\n"
                            "    dist.barrier()"
                            "  # devfix DF401: the other processes read this file\n"
                        )
                elif self.in_helper(statement):
                    self.plan.statement(statement).gate = _RANK0_ANYWHERE
            elif (
                run
                and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "load_state_dict"
                and isinstance(call.func.value, cst.Name)
                and call.func.value.value in self.inner_names
                and call.args
                and call.args[0].keyword is None
            ):
                self._plan_strip(statement, call)

    def _plan_strip(self, statement: cst.SimpleStatementLine, call: cst.Call) -> None:
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        receiver_code = (
            self.code(self._unwrapped())
            if id(receiver) in self.plan.expressions
            else self.code(receiver)
        )
        rest = "".join(
            ", " + self.code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in call.args[1:]
        )
        self.need("consume_prefix_in_state_dict_if_present")
        plan = self.plan.statement(statement)
        replacement = parse_statements(
            f"{_LOADED} = {self.code(call.args[0].value)}\n"
            f'if any(key.startswith("module.") for key in {_LOADED}):'
            "  # devfix DF401: saved by DataParallel\n"
            f'    consume_prefix_in_state_dict_if_present({_LOADED}, "module.")\n'
            f"{receiver_code}.load_state_dict({_LOADED}{rest})\n"
        )
        last = replacement[-1]
        assert isinstance(last, cst.SimpleStatementLine)
        replacement[-1] = last.with_changes(trailing_whitespace=statement.trailing_whitespace)
        plan.replace = replacement

    # -- logging ---------------------------------------------------------------------------

    def _is_log_statement(self, statement: cst.BaseStatement) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        call = _statement_call(statement)
        if call is None:
            return False
        qualified = self.qualified(call.func) or ""
        if qualified in ("builtins.print", "print") or (
            qualified.startswith("logging.") and call_tail(call.func) in _LOG_METHODS
        ):
            return True
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _LOG_METHODS
            and isinstance(call.func.value, cst.Name)
        ):
            return call.func.value.value in self._loggers()
        return False

    def _loggers(self) -> set[str]:
        cached = getattr(self, "_logger_names", None)
        if cached is None:
            cached = set()
            for assign in _walk(self.module, cst.Assign):
                if (
                    isinstance(assign.value, cst.Call)
                    and self.qualified(assign.value.func) == "logging.getLogger"
                ):
                    for target in assign.targets:
                        if isinstance(target.target, cst.Name):
                            cached.add(target.target.value)
            self._logger_names: set[str] = cached
        return cached

    def _plan_logging(self) -> None:
        for statement in _walk(self.module, cst.SimpleStatementLine):
            if id(statement) in self.plan.statements or not self._is_log_statement(statement):
                continue
            if self.in_run(statement):
                self.plan.statement(statement).gate = _RANK0
            elif self.in_helper(statement):
                self.plan.statement(statement).gate = _RANK0_ANYWHERE

    # -- DataParallel leftovers ------------------------------------------------------------

    def _plan_loss_mean(self) -> None:
        for node in _walk(self.module, cst.If):
            if node.orelse is not None or not self._is_gpu_guard(node.test):
                continue
            if not isinstance(node.body, cst.IndentedBlock) or node is self.unit:
                continue
            if node.body.body and all(_is_self_mean(s) for s in node.body.body):
                self.plan.statement(node).remove = True

    def _plan_device_literals(self) -> None:
        for string in _walk(self.module, cst.SimpleString):
            value = string.evaluated_value
            match = _CUDA_INDEX.match(value) if isinstance(value, str) else None
            if match is None or self._in_log_call(string):
                continue
            if match.group(1) != "0":
                raise _Decline(f"the script hard-codes GPU `{match.group(0)}`")
            quote = string.quote
            prefix = string.prefix
            self.plan.expressions[id(string)] = string.with_changes(
                value=f"{prefix}{quote}cuda{quote}"
            )
        for call in _walk(self.module, cst.Call):
            if (
                call_tail(call.func) == "set_device"
                and self.qualified(call.func) == "torch.cuda.set_device"
            ):
                raise _Decline("the script already selects its GPU with `torch.cuda.set_device`")
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "cuda"
                and len(call.args) == 1
                and call.args[0].keyword is None
                and isinstance(call.args[0].value, cst.Integer)
            ):
                if call.args[0].value.value != "0":
                    raise _Decline(f"the script hard-codes GPU {call.args[0].value.value}")
                self.plan.expressions[id(call)] = call.with_changes(args=[])

    def _in_log_call(self, node: cst.CSTNode) -> bool:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return self._is_log_statement(ancestor)
        return False


# -- helpers -------------------------------------------------------------------------------


def _walk(root: cst.CSTNode, kind: type[_N], *, skip_defs: bool = False) -> Iterator[_N]:
    """Every node of type `kind` under `root` (with `skip_defs`, not inside nested defs)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            yield node
        if (
            skip_defs
            and node is not root
            and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
        ):
            continue
        stack.extend(reversed(children_view(node)))


def _owner_of(context: FileContext, block: cst.CSTNode | None) -> cst.CSTNode | None:
    if isinstance(block, cst.Module) or block is None:
        return block
    return context.parent(block)


def _wrapped_argument(call: cst.Call) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if positional:
        return positional[0].value
    keyword = keyword_argument(call, "module")
    return keyword.value if keyword is not None else None


def _chain_holds(value: cst.BaseExpression, call: cst.Call) -> bool:
    """`value` is `call` or `call.to(...)` / `call.cuda()` chains on it."""
    while value is not call:
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("to", "cuda", "cpu", "float", "half", "double")
        ):
            value = value.func.value
        else:
            return False
    return True


def _replace_node(
    root: cst.BaseExpression, old: cst.CSTNode, new: cst.BaseExpression | None
) -> cst.BaseExpression:
    assert new is not None
    if root is old:
        return new
    replacement: cst.BaseExpression = new

    class _Swap(cst.CSTTransformer):
        def on_leave(  # type: ignore[override]
            self, original_node: cst.CSTNode, updated_node: cst.CSTNode
        ) -> cst.CSTNode:
            return replacement if original_node is old else updated_node

    result = root.visit(_Swap())
    assert isinstance(result, cst.BaseExpression)
    return result


def _is_main_guard(node: cst.If) -> bool:
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    parts = [test.left, test.comparisons[0].comparator]
    names = [p for p in parts if isinstance(p, cst.Name) and p.value == "__name__"]
    strings = [
        p for p in parts if isinstance(p, cst.SimpleString) and p.evaluated_value == "__main__"
    ]
    return bool(names and strings) and isinstance(test.comparisons[0].operator, cst.Equal)


def _calls_name(root: cst.CSTNode, name: str) -> bool:
    return any(
        isinstance(call.func, cst.Name) and call.func.value == name
        for call in _walk(root, cst.Call)
    )


def _has_backward(root: cst.CSTNode, module: cst.Module, depth: int = 0) -> bool:
    for call in _walk(root, cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
            return True
        if depth == 0 and isinstance(call.func, cst.Name):
            for statement in module.body:
                if (
                    isinstance(statement, cst.FunctionDef)
                    and statement.name.value == call.func.value
                    and _has_backward(statement.body, module, depth + 1)
                ):
                    return True
    return False


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(candidate is node for candidate in _walk(root, type(node)))


def _mentions(root: cst.CSTNode, name: str) -> bool:
    return any(n.value == name for n in _walk(root, cst.Name))


def _statement_call(statement: cst.SimpleStatementLine) -> cst.Call | None:
    if len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return small.value
    return None


def _is_self_mean(statement: cst.BaseStatement) -> bool:
    """`loss = loss.mean()`: the DataParallel idiom for per-replica losses."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    value = small.value
    return (
        isinstance(target, cst.Name)
        and isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "mean"
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == target.value
    )


def _bound_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for node in walk(module):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)):
            names.add(node.name.value)
        elif isinstance(
            node,
            (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr),
        ):
            names |= _target_names(node.target)
        elif isinstance(node, cst.AsName):
            names |= _target_names(node.name)
        elif isinstance(node, cst.ImportAlias) and node.asname is None:
            names.add(cst.Module([]).code_for_node(node.name).split(".")[0])
        elif isinstance(node, cst.Global):
            names |= {n.name.value for n in node.names}
    return names


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in target.elements:
            found |= _target_names(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()


def _module_imports(module: cst.Module) -> dict[str, str]:
    """Local name -> qualified name for the module-level imports."""
    found: dict[str, str] = {}
    code = cst.Module([]).code_for_node
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = code(alias.name)
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        found[alias.asname.name.value] = dotted
                    else:
                        top = dotted.split(".")[0]
                        found[top] = top
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
            ):
                if isinstance(small.names, cst.ImportStar):
                    continue
                base = code(small.module)
                for alias in small.names:
                    local = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(local, cst.Name):
                        found[local.value] = f"{base}.{code(alias.name)}"
    return found
