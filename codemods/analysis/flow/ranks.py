"""Process ranks: which values are a process's global rank (`dist.get_rank()`, the `RANK`
variable a launcher sets) and which its GPU on this machine (`LOCAL_RANK`,
`rank % torch.cuda.device_count()`, `torch.cuda.current_device()`).

On one machine the two are equal, so code that indexes GPUs by the global rank works until
the job spans a second node, where rank 8 of 16 names a GPU the machine does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import libcst as cst

from devfix.codemods.analysis.flow.calls import CallSites
from devfix.codemods.analysis.modules import method
from devfix.codemods.analysis.names import call_tail, code_of, dotted_name, is_constant, is_number

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

RankKind = Literal["global", "local"]

_ENVIRONMENT_READS = frozenset({"os.environ.get", "os.getenv"})
#: DeepSpeed's `deepspeed.comm` mirrors `torch.distributed` (`from deepspeed import comm as dist`).
_GLOBAL_RANK_CALLS = frozenset({"torch.distributed.get_rank", "deepspeed.comm.get_rank"})
_LOCAL_RANK_CALLS = frozenset(
    {
        "torch.cuda.current_device",
        "torch.distributed.get_node_local_rank",
        "deepspeed.comm.get_local_rank",
    }
)
#: Fields of a configuration or trainer object that name a rank by kind.
#: What launchers set for a process's rank in the whole launch (torchrun, Slurm's `srun`,
#: Open MPI's and MPICH's `mpirun`) and on its machine.
_GLOBAL_RANK_VARIABLES = frozenset({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"})
_LOCAL_RANK_VARIABLES = frozenset(
    {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}
)
_RANK_FIELDS: dict[str, RankKind] = {"global_rank": "global", "local_rank": "local"}
_SPAWN_CALLS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


@dataclass(frozen=True)
class Rank:
    """What a value is, and the expression that makes it so (`dist.get_rank()`,
    `os.environ["RANK"]`), for messages."""

    kind: RankKind
    origin: cst.BaseExpression


class ProcessRanks(CallSites):
    """Global and local ranks of one file."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._spawns: list[cst.Call] | None = None

    def rank_of(self, value: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> Rank | None:
        """Whether `value`, read at `at`, is the process's global rank or its local GPU
        index; None when it is neither or not known. A name counts when every value it is
        assigned before `at` is of the same kind."""
        if (
            isinstance(value, cst.Call)
            and call_tail(value.func) == "int"
            and value.args
            and self.names.qualified_name(value.func) in (None, "builtins.int", "int")
        ):
            return self._environment_rank(value.args[0].value) or self.rank_of(
                value.args[0].value, at, depth
            )
        if isinstance(value, cst.Call):
            name = self.names.qualified_name(value.func)
            if name in _GLOBAL_RANK_CALLS and not value.args:
                return Rank("global", value)
            if name in _LOCAL_RANK_CALLS:
                return Rank("local", value)
            callee = self._callee(value) if depth < 3 else None
            if callee is not None:
                # `rank = get_rank()`, a helper of this file that reads the launcher's rank.
                returned = [
                    exit_.value
                    for exit_ in self.scopes.find(callee.body, cst.Return, own_scope=True)
                    if exit_.value is not None
                ]
                return self._same_kind(returned, depth) if returned else None
            return None
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo):
            right = value.right
            if (
                isinstance(right, cst.Call)
                and self.names.qualified_name(right.func) == "torch.cuda.device_count"
            ):
                return Rank("local", value)
            return None
        if isinstance(value, cst.IfExp):
            return self._same_kind([value.body, value.orelse], depth)
        if isinstance(value, cst.Attribute) and value.attr.value in _RANK_FIELDS:
            # `self.global_rank`, `args.local_rank`: a launcher's configuration names its ranks.
            return Rank(_RANK_FIELDS[value.attr.value], value)
        if isinstance(value, cst.Attribute) and depth < 3:
            written = self._field_assigned_before(value, at)
            return self._same_kind(written, depth) if written else None
        if isinstance(value, cst.Name) and depth < 3:
            spawned = self._spawn_index(value, at)
            if spawned is not None:
                return spawned
            unpacked = self._unpacked_from_call(value, at)
            if unpacked is not None:
                return self._same_kind(unpacked, depth)
            return self._same_kind(self.scopes.assigned_before(value.value, at), depth)
        return None

    def _unpacked_from_call(
        self, name: cst.Name, at: cst.CSTNode
    ) -> list[cst.BaseExpression] | None:
        """`world_size, rank = self.dist_info()` (a method of the class, or a function of this
        file, returning `world_size, rank`): the values its returns put where `name` is
        unpacked (or the element of a tuple unpacked in place); None when `name` is not
        unpacked from such a call."""
        binding = self.scopes.binding_before(name.value, at)
        if binding is None or binding[0] != "unpack" or binding[1] is None:
            return None
        call = binding[1]
        statement = self.context.parent(call)
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        index = next(
            (
                i
                for i, element in enumerate(target.elements)
                if isinstance(element.value, cst.Name) and element.value.value == name.value
            ),
            None,
        )
        if index is None:
            return None
        if isinstance(call, (cst.Tuple, cst.List)):  # `world, me = size(), dist.get_rank()`
            return [call.elements[index].value] if index < len(call.elements) else None
        callee = self._callee(call) if isinstance(call, cst.Call) else None
        if callee is None:
            return None
        returned: list[cst.BaseExpression] = []
        for exit_ in self.scopes.find(callee.body, cst.Return, own_scope=True):
            value = exit_.value
            if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) <= index:
                return None
            returned.append(value.elements[index].value)
        return returned or None

    def _callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The method of the enclosing class (`self.m()`) or the function of this file
        (`m()`) that `call` calls."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.scopes.module_functions().get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            function = self.scopes.enclosing_function(call)
            classdef = self.scopes.class_of(function) if function is not None else None
            if classdef is not None and func.value.value == "self":
                return method(classdef, func.attr.value)
        return None

    def _same_kind(self, values: list[cst.BaseExpression], depth: int) -> Rank | None:
        """The kind every value is, constants aside (`0`, `-1`, `"cpu"`: a one-process
        fallback, where a rank of 0 is both and -1 is none); None when one is of no kind or
        they disagree."""
        ranks = [
            self.rank_of(v, v, depth + 1) for v in values if not is_constant(v) and not is_number(v)
        ]
        kinds = {rank.kind if rank is not None else None for rank in ranks}
        if len(kinds) == 1 and None not in kinds:
            return ranks[-1]
        return None

    def _environment_rank(self, read: cst.BaseExpression) -> Rank | None:
        """`os.environ["RANK"]`, `os.environ.get("LOCAL_RANK", 0)`, `os.getenv("RANK")`."""
        key: cst.BaseExpression | None = None
        if isinstance(read, cst.Subscript) and len(read.slice) == 1:
            index = read.slice[0].slice
            if (
                isinstance(index, cst.Index)
                and self.names.qualified_name(read.value) == "os.environ"
            ):
                key = index.value
        elif (
            isinstance(read, cst.Call)
            and read.args
            and self.names.qualified_name(read.func) in _ENVIRONMENT_READS
        ):
            key = read.args[0].value
        if not isinstance(key, cst.SimpleString):
            return None
        variable = key.evaluated_value
        if variable in _GLOBAL_RANK_VARIABLES:
            return Rank("global", read)
        if variable in _LOCAL_RANK_VARIABLES:
            return Rank("local", read)
        return None

    def negative_fallback(
        self, value: cst.BaseExpression, at: cst.CSTNode
    ) -> cst.BaseExpression | None:
        """`rank = -1`, a binding of the rank name `value` on the path without a launcher
        (where `set_device(-1)` selects nothing), or None."""
        if not isinstance(value, cst.Name):
            return None
        return next(
            (
                bound
                for bound in self.scopes.assigned_before(value.value, at)
                if isinstance(bound, cst.UnaryOperation) and is_number(bound)
            ),
            None,
        )

    def global_rank_index(self, value: cst.BaseExpression, at: cst.CSTNode) -> Rank | None:
        """`value` used as a GPU index at `at` is the global rank of a launch that can span
        machines: read from `RANK` (torchrun, Slurm wrappers), or `dist.get_rank()` in a
        script that `torch.multiprocessing.spawn` does not start (there the rank is whatever
        the script hands `init_process_group`, usually the spawn index)."""
        rank = self.rank_of(value, at)
        if rank is None or rank.kind != "global":
            return None
        if isinstance(rank.origin, cst.Call) and self._spawns_processes():
            return None
        return rank

    def scaled_global_rank(
        self, value: cst.BaseExpression, at: cst.CSTNode
    ) -> cst.BaseExpression | None:
        """`rank * stages` used as a GPU index (the first GPU of a process's pipeline
        stages): the operand that is the global rank."""
        if not (
            isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)
        ):
            return None
        return next(
            (o for o in (value.left, value.right) if self.global_rank_index(o, at) is not None),
            None,
        )

    def run_time_device_module(self, selector: cst.Call) -> str | None:
        """`getattr(torch, device.type).set_device(i)`: the code of the device module of the
        run's own device type, whose `device_count()` bounds `i`."""
        func = selector.func
        module = func.value if isinstance(func, cst.Attribute) else None
        if (
            isinstance(module, cst.Call)
            and isinstance(module.func, cst.Name)
            and module.func.value == "getattr"
            and module.args
            and self.names.qualified_name(module.args[0].value) == "torch"
        ):
            return code_of(module)
        return None

    def local_rank_name(
        self, at: cst.CSTNode, rank: cst.BaseExpression | None = None
    ) -> str | None:
        """A name bound before `at`, visible there, that holds the process's GPU on this
        machine (`local_rank = int(os.environ["LOCAL_RANK"])`, `device = rank %
        torch.cuda.device_count()`); one with "local" in its name first. A name bound beside
        each binding of the `rank` name it replaces (both under `if args.distributed:`) is
        visible wherever that rank is."""
        beside = rank.value if isinstance(rank, cst.Name) else None
        function = self.scopes.enclosing_function(at)
        candidates = set(self.scopes.names_bound(self.context.module))
        if function is not None:
            candidates |= self.scopes.names_bound(function)
        # What a name holds is a table look-up; whether it is visible at `at` walks the
        # function's paths, so that is asked only of the local ranks.
        found = [
            name
            for name in sorted(candidates, key=lambda n: ("local" not in n, n))
            if (found_rank := self.rank_of(cst.Name(name), at)) is not None
            and found_rank.kind == "local"
            and (
                self.scopes.visible_name(name, at)
                or (beside is not None and self.scopes.bound_beside(name, beside, at))
            )
        ]
        return found[0] if found else None

    def _spawn_calls(self) -> list[cst.Call]:
        if self._spawns is None:
            self._spawns = (
                [
                    call
                    for call in self.context.of_type(self.context.module, cst.Call)
                    if call_tail(call.func) in ("spawn", "start_processes")
                    and self.names.qualified_name(call.func) in _SPAWN_CALLS
                ]
                if "spawn" in self.context.text
                else []
            )
        return self._spawns

    def _spawns_processes(self) -> bool:
        return bool(self._spawn_calls())

    def _spawn_index(self, name: cst.Name, at: cst.CSTNode) -> Rank | None:
        """`def main_worker(gpu, ...)` run by `mp.spawn(main_worker, nprocs=...)`: its first
        parameter is the process's index on this machine, the GPU it drives."""
        function = self.scopes.enclosing_function(at)
        if function is None:
            return None
        params = (*function.params.posonly_params, *function.params.params)
        if not params or params[0].name.value != name.value:
            return None
        table, _ = self.scopes.lookup(name.value, function)
        if any(b.kind != "param" for b in table.bindings.get(name.value, [])):
            return None
        for call in self._spawn_calls():
            target = call.args[0].value if call.args else None
            if isinstance(target, cst.Name) and (
                self.scopes.module_functions().get(target.value) is function
            ):
                return Rank("local", call)
        return None

    def _field_assigned_before(
        self, field: cst.Attribute, at: cst.CSTNode
    ) -> list[cst.BaseExpression]:
        """`args.gpu = gpu` earlier in the function that reads `args.gpu` at `at`."""
        function = self.scopes.enclosing_function(at)
        written = dotted_name(field)
        if function is None or written is None:
            return []
        return [
            statement.value
            for statement in self.scopes.statements(function)
            if isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Attribute)
            and dotted_name(statement.targets[0].target) == written
            and self.scopes.starts_before(statement, at)
        ]


def shown(rank: Rank) -> str:
    """The rank's origin as a message shows it."""
    return code_of(rank.origin)
