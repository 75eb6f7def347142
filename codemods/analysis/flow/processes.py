"""Process and GPU topology: whether the script runs as one process of several, on one device
or a model placed over several, which GPUs it names, in a notebook's cells, how its device
selection falls back, and the default device new tensors are created on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.calls import CallSites, is_name
from devfix.codemods.analysis.moves import string_device
from devfix.codemods.analysis.names import (
    call_tail,
    code_of,
    is_main_guard,
    keyword_argument,
    parsed_expression,
)
from devfix.codemods.analysis.torch_names import (
    DEFAULT_DEVICE_SETTERS,
    DISTRIBUTED_MARKERS,
    FUNCTIONAL_DATA_PARALLEL,
    PLACEMENT_NAMES,
    PLACEMENT_WORDS,
)
from devfix.notebooks import is_notebook

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


_MARKER_TAILS = frozenset(name.rsplit(".", 1)[1] for name in DISTRIBUTED_MARKERS)
#: The comment that opens each code cell of a notebook in the module devfix analyses.
_CELL_MARKER = "# ~~devfix-cell~~ "

#: torch's enum of backend names (`dist.Backend.NCCL`).
_BACKEND_ENUMS = frozenset(
    {"torch.distributed.Backend", "torch.distributed.distributed_c10d.Backend"}
)
#: The calls that create a process group, and so name its backend.
_GROUP_CALLS = frozenset({"torch.distributed.init_process_group", "torch.distributed.new_group"})


@dataclass(frozen=True)
class DefaultDevice:
    """The device `torch.set_default_device(...)` / `set_default_tensor_type(...)` sends new
    tensors to, as seen at some node."""

    setter: cst.Call
    #: Source text of the device (`device`); for a literal or a default that differs by
    #: branch, `torch.get_default_device()`; for a CUDA default tensor type, which that
    #: function does not read, `torch.empty(0).device`.
    expression: str
    #: The setters run under an `if` (or disagree): the default depends on the run.
    conditional: bool = False
    #: Set by `torch.set_default_tensor_type(...)` (which `torch.get_default_device()` ignores).
    tensor_type: bool = False


class ProcessTopology(CallSites):
    """What the file shows of its processes, its GPUs, how its device is chosen and where new
    tensors are created."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._distributed: str | None = None
        self._multi_device: bool | None = None
        self._default_setter_calls: list[cst.Call] | None = None
        self._group_calls: list[tuple[cst.Call, str]] | None = None

    def distributed_evidence(self) -> str | None:
        """What makes the script one process of several, in a word ("Trainer", "accelerate",
        "DistributedDataParallel", "torchrun"); None when nothing does."""
        if self._distributed is not None:
            return self._distributed or None
        found: str | None = None
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.SimpleString):
                if node.evaluated_value in ("LOCAL_RANK", "RANK"):
                    found = found or "torchrun"
                continue
            if not isinstance(node, (cst.Name, cst.Attribute)):
                continue
            tail = node.attr.value if isinstance(node, cst.Attribute) else node.value
            if not (tail.endswith("Trainer") or tail in _MARKER_TAILS):
                continue
            name = self.names.qualified_name(node)
            if name is None:
                continue
            root, _, last = name.rpartition(".")
            if last.endswith("Trainer") and root.split(".")[0] in ("transformers", "trl"):
                found = "Trainer"
                break
            if name.startswith("accelerate."):
                found = "accelerate"
                break
            if name in DISTRIBUTED_MARKERS:
                found = found or "DistributedDataParallel"
        self._distributed = found or ""
        return found

    def is_distributed(self) -> bool:
        """The script runs as one of several processes (torchrun, DDP, accelerate, `Trainer`)."""
        return self.distributed_evidence() is not None

    def _process_groups(self) -> list[tuple[cst.Call, str]]:
        """The file's `init_process_group` / `new_group` calls, each with its backend."""
        if self._group_calls is None:
            self._group_calls = [
                (call, backend)
                for call in self.context.of_type(self.context.module, cst.Call)
                if (backend := self.group_backend(call)) is not None
            ]
        return self._group_calls

    def process_group_backends(self) -> set[str]:
        """The backends the file's `init_process_group` / `new_group` calls name: see
        :meth:`group_backend`."""
        return {backend for _, backend in self._process_groups()}

    def collective_backends(self, collective: cst.Call) -> set[str] | None:
        """The backends a collective's group can have: those of the `new_group` calls its
        `group=` names, else any the file's groups have (:meth:`process_group_backends`);
        None for a group made where this file cannot see (a parameter, an attribute)."""
        group = keyword_argument(collective, "group")
        if group is None or is_name(group.value, "None"):
            return self.process_group_backends()
        if isinstance(group.value, cst.Name):
            calls = self.scopes.computing_calls(group.value.value, collective)
            backends = {self.group_backend(call) for call in calls}
            if calls and None not in backends:
                return {backend for backend in backends if backend is not None}
        return None

    def requires_nccl(self) -> bool:
        """An `init_process_group` naming NCCL alone runs on every path of its function (or
        of the module): the script cannot run without CUDA."""
        return any(
            call_tail(call.func) == "init_process_group"
            and "nccl" in backend
            and "gloo" not in backend
            and self.scopes.on_every_path(call, lambda _statement: False)
            for call, backend in self._process_groups()
        )

    def group_backend(self, call: cst.Call) -> str | None:
        """The backend an `init_process_group` / `new_group` call names (`"nccl"`, `"gloo"`,
        `"cpu:gloo,cuda:nccl"`), lower-case; "?" for one not written as a string
        (`backend=args.dist_backend`), "" for a call that names none (torch's default since
        2.6: NCCL alone on a machine with CUDA); None for another call."""
        tail = call_tail(call.func)
        if tail not in ("init_process_group", "new_group"):
            return None
        if self.names.qualified_name(call.func) not in _GROUP_CALLS:
            return None
        backend = keyword_argument(call, "backend")
        positional = [arg for arg in call.args if arg.keyword is None]
        if backend is None and tail == "init_process_group" and positional:
            backend = positional[0]
        if backend is None:
            return ""
        if isinstance(backend.value, cst.SimpleString) and isinstance(
            backend.value.evaluated_value, str
        ):
            return backend.value.evaluated_value.lower()
        named = self.names.qualified_name(backend.value) or ""
        if named.rsplit(".", 1)[0] in _BACKEND_ENUMS:
            return named.rsplit(".", 1)[1].lower()  # `dist.Backend.GLOO`
        return "?"

    def is_notebook(self) -> bool:
        """The file is a Jupyter notebook (its code cells joined into one module)."""
        return is_notebook(self.context.path) or _CELL_MARKER in self.context.text

    def sets_current_device(self) -> bool:
        """The script calls `torch.cuda.set_device(...)` (bare `"cuda"` is then its GPU)."""
        return any(
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "set_device"
            and self.names.qualified_name(call.func) == "torch.cuda.set_device"
            for call in self.context.subtree(self.context.module)
        )

    def _default_setters(self) -> list[cst.Call]:
        if self._default_setter_calls is None:
            self._default_setter_calls = [
                call
                for call in self.context.of_type(self.context.module, cst.Call)
                if call_tail(call.func) in ("set_default_device", "set_default_tensor_type")
                and self.names.qualified_name(call.func) in DEFAULT_DEVICE_SETTERS
            ]
        return self._default_setter_calls

    def default_device(self, at: cst.CSTNode) -> DefaultDevice | None:
        """The accelerator new tensors are created on at `at`, set by a call earlier in `at`'s
        function or anywhere in the module's own code; None when it stays the CPU."""
        setters = self._default_setters()
        if not setters:
            return None
        function = self.scopes.enclosing_function(at)
        relevant: list[cst.Call] = []
        for setter in setters:
            owner = self.scopes.enclosing_function(setter)
            if owner is None and function is not None:
                relevant.append(setter)  # module set-up runs before the functions it calls
            elif owner is function and self.scopes.starts_before(setter, at):
                relevant.append(setter)
        if not relevant:
            return None
        devices = [self._device_set_by(setter) for setter in relevant]
        accelerators = [d for d in devices if d is not None and d != '"cpu"']
        if not accelerators:
            return None
        last = relevant[-1]
        conditional = len(set(devices)) > 1 or any(self._runs_conditionally(s) for s in relevant)
        device = accelerators[-1]
        torch = self.names.torch_alias() or "torch"
        if any(call_tail(setter.func) == "set_default_tensor_type" for setter in relevant):
            # `torch.get_default_device()` does not read the default tensor type: after
            # `set_default_tensor_type("torch.cuda.FloatTensor")` it answers "cpu". A new empty
            # tensor is created where the type says, on every PyTorch version (and, unlike a
            # "cuda" literal, on the GPU `torch.cuda.set_device` selected).
            return DefaultDevice(last, f"{torch}.empty(0).device", conditional, tensor_type=True)
        if conditional or string_device(parsed_expression(device)) is not None:
            # A literal ("cuda") names whichever GPU is current, and the portable-device rewrite
            # would change it: the default device itself is what the permutation is drawn on.
            return DefaultDevice(last, f"{torch}.get_default_device()", conditional)
        return DefaultDevice(last, device, False)

    def _device_set_by(self, setter: cst.Call) -> str | None:
        """What one setter sets: a device's source text, '"cpu"', or None (unknown)."""
        value = setter.args[0].value if setter.args else None
        if value is None:
            return None
        if call_tail(setter.func) == "set_default_tensor_type":
            text = code_of(value)
            if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                text = value.evaluated_value
            return '"cuda"' if ".cuda." in f".{text}" or text.startswith("cuda.") else '"cpu"'
        literal = string_device(value)
        if literal is not None:
            return '"cpu"' if literal.startswith(("cpu", "meta")) else code_of(value)
        kind = self.facts.moves.device_kind(value, self.scopes.enclosing_function(setter))
        if kind == "cpu":
            return '"cpu"'
        return code_of(value) if kind is not None else None

    def _runs_conditionally(self, node: cst.CSTNode) -> bool:
        """`node` runs under an `if`/`try`/loop of its function (or of the module)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
                return False
            if is_main_guard(ancestor):
                continue  # the script's own code, run whenever it runs
            if isinstance(ancestor, (cst.If, cst.Else, cst.IfExp, cst.Try, cst.ExceptHandler)):
                return True
        return False

    def guarded_by_cuda_check(self, node: cst.CSTNode) -> bool:
        """`node` runs only when `torch.cuda.is_available()` / `device_count()` says so."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, (cst.If, cst.IfExp))
                and current is ancestor.body
                and self._mentions_cuda_check(ancestor.test)
            ):
                return True
            if isinstance(ancestor, cst.BooleanOperation) and self._mentions_cuda_check(
                ancestor.left
            ):
                return True
            current = ancestor
        return False

    def runs_without_cuda(self, node: cst.CSTNode) -> bool:
        """`node` runs only when a CUDA check says no: the `else` of `if torch.cuda.is_available()`
        (or of a flag bound to it), the body of `if not use_cuda`, either way in an `if`
        statement or a conditional expression."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.IfExp)):
                negated = isinstance(ancestor.test, cst.UnaryOperation) and isinstance(
                    ancestor.test.operator, cst.Not
                )
                test = ancestor.test.expression if negated else ancestor.test  # type: ignore[attr-defined]
                if _is_plain_check(test) and self._mentions_cuda_check(test):
                    in_body = current is ancestor.body
                    in_else = current is ancestor.orelse
                    if (negated and in_body) or (not negated and in_else):
                        return True
            current = ancestor
        return False

    def _mentions_cuda_check(self, test: cst.CSTNode, depth: int = 0) -> bool:
        for inner in self.context.subtree(test):
            if isinstance(inner, (cst.Attribute, cst.Name)) and call_tail(inner) in (
                "is_available",
                "device_count",
            ):
                name = self.names.qualified_name_through_star(inner)
                if name in ("torch.cuda.is_available", "torch.cuda.device_count"):
                    return True
            elif isinstance(inner, cst.Name) and depth == 0:
                # `is_cuda = torch.cuda.is_available()` ... `if is_cuda:`
                values = self.scopes.assigned_values(inner.value, inner)
                if values and all(self._mentions_cuda_check(v, depth + 1) for v in values):
                    return True
        return False

    def runs_on_several_gpus(self) -> bool:
        """One process of several (torchrun, DDP, accelerate, `Trainer`) or `nn.DataParallel`."""
        if self.is_distributed():
            return True
        if "DataParallel" not in self.context.text and "data_parallel" not in self.context.text:
            return False
        return any(
            isinstance(node, (cst.Name, cst.Attribute))
            and call_tail(node) in ("DataParallel", "data_parallel")
            and self.names.qualified_name_through_star(node)
            in (
                "torch.nn.DataParallel",
                "torch.nn.parallel.DataParallel",
                *FUNCTIONAL_DATA_PARALLEL,
            )
            for node in self.context.subtree(self.context.module)
        )

    def places_over_devices(self) -> bool:
        """Whether the file shows a model placed over several devices: `device_map`,
        `dispatch_model`, `hf_device_map`, `parallelize`, `device_count()`, a GPU other than
        `cuda:0`, or a Hugging Face `PreTrainedModel` subclass."""
        if self._multi_device is None and not any(
            word in self.context.text for word in PLACEMENT_WORDS
        ):
            self._multi_device = False
        if self._multi_device is None:
            self._multi_device = any(
                self._placement_evidence(node)
                for node in self.context.of_type(
                    self.context.module, (cst.Name, cst.SimpleString, cst.ClassDef)
                )
            )
        return self._multi_device

    def _placement_evidence(self, node: cst.CSTNode) -> bool:
        """`device_map=...`, `dispatch_model`, `"cuda:1"`, `torch.cuda.device_count()`, or a
        Hugging Face `PreTrainedModel` subclass (which may be loaded with `device_map`)."""
        if isinstance(node, cst.Name):
            return node.value in PLACEMENT_NAMES
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return (
                isinstance(value, str) and value.startswith("cuda:") and value[5:] not in ("", "0")
            )
        if isinstance(node, cst.ClassDef):
            bases = [
                b.value for b in node.bases if self.facts.modules.is_pretrained_model_base(b.value)
            ]
            # transformers refuses `device_map="auto"` for a model without `_no_split_modules`
            # ("does not support `device_map`"): a family base of transformers has it; a class
            # of this file on `PreTrainedModel` itself must declare it.
            return any(
                not self.facts.modules.is_generic_pretrained_base(base) for base in bases
            ) or (bool(bases) and self.facts.modules.declares_no_split_modules(node))
        return False


def _is_plain_check(test: cst.BaseExpression) -> bool:
    """A test that is the check itself (`use_cuda`, `torch.cuda.is_available()`), not one
    combined with something else, whose negation would say nothing."""
    return isinstance(test, (cst.Name, cst.Attribute, cst.Call))
