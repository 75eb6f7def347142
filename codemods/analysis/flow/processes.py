"""Process and GPU topology: whether the script runs as one process of several, on one device
or a model placed over several, which GPUs it names, in a notebook's cells, and how its device
selection falls back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.calls import CallSites
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    dotted_name,
    receiver_root,
)
from devfix.codemods.analysis.torch_names import (
    DISTRIBUTED_MARKERS,
    MODEL_WRAPPERS,
    PLACEMENT_NAMES,
    PLACEMENT_WORDS,
)
from devfix.notebooks import is_notebook

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


_MARKER_TAILS = frozenset(name.rsplit(".", 1)[1] for name in DISTRIBUTED_MARKERS)
#: The comment that opens each code cell of a notebook in the module devfix analyses.
_CELL_MARKER = "# ~~devfix-cell~~ "


class ProcessTopology(CallSites):
    """What the file shows of its processes, its GPUs and how its device is chosen."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._distributed: str | None = None
        self._multi_device: bool | None = None
        self._aligns_targets: bool | None = None
        self._one_device: bool | None = None

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

    def runs_on_one_device(self) -> bool:
        """The file is a script (or notebook) that runs on the one device it chooses itself:
        code outside classes moves things only to one device variable it binds
        (`device = torch.device(...)`; `model.to(device)`), and nothing spreads the work over
        several devices (DataParallel, DDP, torchrun, `Trainer`, device maps, `device_count()`,
        a GPU other than `cuda:0`). Model code of such a file that uses a device stored at
        construction uses that same device."""
        if self._one_device is None:
            self._one_device = self._one_device_script()
        return self._one_device

    def _one_device_script(self) -> bool:
        if self.is_distributed() or self.places_over_devices():
            return False
        chosen: set[str] = set()
        for node in self.context.subtree(self.context.module):
            if not isinstance(node, cst.Call):
                continue
            wrapper = self.names.qualified_name(node.func)
            if wrapper in MODEL_WRAPPERS and wrapper.endswith("DataParallel"):
                return False
            if self.facts.modules.enclosing_class(node) is not None:
                continue
            function_info = self.facts.modules.enclosing_function(node)
            if function_info is not None and function_info.is_model_code:
                continue  # model code: the moves under judgement, not the script's choice
            move = self.facts.moves.move_of(node)
            if move is None or move.kind is None:
                continue
            if move.method == "cuda" or move.expression is None:
                return False  # the current device, chosen elsewhere
            name = dotted_name(move.expression)
            if name is None or name.endswith(".device"):
                continue  # `x.to(y.device)`: follows a tensor
            function = function_info.node if function_info is not None else None
            root = name.split(".")[0]
            if function is not None and any(
                binding.kind == "param"
                for binding in self.scopes.table(function).bindings.get(root, [])
            ):
                continue  # a helper's parameter: its callers choose
            chosen.add(name)
        return len(chosen) == 1

    def is_distributed(self) -> bool:
        """The script runs as one of several processes (torchrun, DDP, accelerate, `Trainer`)."""
        return self.distributed_evidence() is not None

    def is_notebook(self) -> bool:
        """The file is a Jupyter notebook (its code cells joined into one module)."""
        return is_notebook(self.context.path) or _CELL_MARKER in self.context.text

    def same_cell(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Both nodes are in one code cell (always true outside a notebook)."""
        if not self.is_notebook():
            return True
        lines = self.context.text.splitlines()
        low, high = sorted((self.scopes.line_of(first), self.scopes.line_of(second)))
        return not any("~~devfix-cell" in line for line in lines[low:high])

    def one_process_reason(self) -> str | None:
        """Why the file runs as a single process whatever it imports, or None: a notebook is one
        kernel process (unless it starts workers with `notebook_launcher`)."""
        if not self.is_notebook():
            return None
        launches = any(
            isinstance(node, (cst.Name, cst.Attribute))
            and (call_tail(node) or "") == "notebook_launcher"
            and self.names.qualified_name(node) == "accelerate.notebook_launcher"
            for node in self.context.subtree(self.context.module)
        )
        return None if launches else "a notebook runs in one process"

    def declares_model_parallelism(self, model: str) -> cst.CSTNode | None:
        """`model.model_parallel = True` / `model.is_parallelizable = True`: the script states
        that `model` is split over the GPUs of one process on purpose (a `Trainer` then neither
        moves nor wraps it). The assignment, or None."""
        for node in self.context.subtree(self.context.module):
            if not isinstance(node, cst.Assign) or not (
                isinstance(node.value, cst.Name) and node.value.value == "True"
            ):
                continue
            for target in node.targets:
                if (
                    isinstance(target.target, cst.Attribute)
                    and target.target.attr.value in ("model_parallel", "is_parallelizable")
                    and dotted_name(target.target.value) == model
                ):
                    return node
        return None

    def sets_current_device(self) -> bool:
        """The script calls `torch.cuda.set_device(...)` (bare `"cuda"` is then its GPU)."""
        return any(
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "set_device"
            and self.names.qualified_name(call.func) == "torch.cuda.set_device"
            for call in self.context.subtree(self.context.module)
        )

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

    def gpus_used(self) -> set[int]:
        """GPU indices the file places work on: those it names (`"cuda:1"`, `.cuda(0)`), and
        0 for a bare `"cuda"` / `.cuda()` (the current device, GPU 0 unless the file calls
        `torch.cuda.set_device`)."""
        used = set(self.facts.moves.explicit_gpu_indices())
        if used and not self.sets_current_device() and self._uses_bare_cuda():
            used.add(0)
        return used

    def _uses_bare_cuda(self) -> bool:
        for node in self.context.of_type(self.context.module, (cst.SimpleString, cst.Call)):
            if isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda":
                holder = self.context.parent(node)
                if isinstance(holder, cst.Arg):
                    call = self.context.parent(holder)
                    if isinstance(call, cst.Call) and call_tail(call.func) in ("to", "device"):
                        return True
                elif isinstance(holder, (cst.IfExp, cst.Assign)):
                    return True
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "cuda"
                and not node.args
            ):
                return True
        return False

    def runs_on_several_gpus(self) -> bool:
        """One process of several (torchrun, DDP, accelerate, `Trainer`) or `nn.DataParallel`."""
        if self.is_distributed():
            return True
        if "DataParallel" not in self.context.text:
            return False
        return any(
            isinstance(node, (cst.Name, cst.Attribute))
            and call_tail(node) == "DataParallel"
            and self.names.qualified_name_through_star(node)
            in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel")
            for node in self.context.subtree(self.context.module)
        )

    def overridden_default(self, node: cst.CSTNode) -> bool:
        """`node` is a parameter's default value and every call of the function in the file
        passes that parameter (there is at least one call)."""
        param = self.context.parent(node)
        if not (isinstance(param, cst.Param) and param.default is node):
            return False
        function = next(
            (a for a in self.context.ancestors(param) if isinstance(a, cst.FunctionDef)), None
        )
        if function is None:
            return False
        name = param.name.value
        calls = [
            n
            for n in self.context.subtree(self.context.module)
            if isinstance(n, cst.Call) and call_tail(n.func) == function.name.value
        ]
        return bool(calls) and all(self._passes(call, function, name) for call in calls)

    def _passes(self, call: cst.Call, function: cst.FunctionDef, param: str) -> bool:
        if any(arg.star for arg in call.args):
            return True  # `**kwargs` may hold it; the caller chose
        if any(arg.keyword is not None and arg.keyword.value == param for arg in call.args):
            return True
        positional = [
            p.name.value for p in (*function.params.posonly_params, *function.params.params)
        ]
        if positional and positional[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
            positional = positional[1:]
        index = positional.index(param) if param in positional else -1
        return 0 <= index < len([a for a in call.args if a.keyword is None])

    def falls_back_in_else(self, assign: cst.Assign) -> bool:
        """`if use_gpu: device = <gpu>` / `else: device = <cpu>`: a selection with a fallback
        (the user's own switch), whichever branch `assign` is in."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return False
        name = assign.targets[0].target.value
        if_node: cst.If | None = None
        for ancestor in self.context.ancestors(assign):
            if isinstance(ancestor, cst.If):
                if_node = ancestor
                break
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return False
        if if_node is None:
            return False
        blocks: list[cst.CSTNode] = [if_node.body]
        orelse = if_node.orelse
        while isinstance(orelse, cst.If):
            blocks.append(orelse.body)
            orelse = orelse.orelse
        if orelse is None:
            return False
        blocks.append(orelse)
        kinds: set[str] = set()
        for block in blocks:
            for node in self.scopes.nodes(block):
                if (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value == name
                ):
                    kinds.add(self.facts.moves.device_kind(node.value, None) or "unknown")
        return "cpu" in kinds

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

    def aligns_targets_with_inputs(self) -> bool:
        """Whether a loss of the file gets its target moved to the device of its input
        (`labels = labels.to(logits.device)` before `loss_fct(logits, labels)`, or the move in
        the call): the author expects the two on different devices, as under a model split
        over GPUs (the placement itself may be chosen in another file)."""
        if self._aligns_targets is None:
            self._aligns_targets = ".device" in self.context.text and any(
                self._target_moved_to_input(node)
                for node in self.context.of_type(self.context.module, cst.Call)
            )
        return self._aligns_targets

    def _target_moved_to_input(self, call: cst.Call) -> bool:
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) < 2 or self.facts.modules.loss_kind(call) is None:
            return False
        source = receiver_root(positional[0])
        target = positional[1]
        if isinstance(target, cst.Name):
            bound = self.scopes.binding_before(target.value, call)
            target = bound[1] if bound is not None and bound[1] is not None else target
        return source is not None and any(
            isinstance(node, cst.Call)
            and call_tail(node.func) == "to"
            and isinstance(device := argument(node, "device"), cst.Attribute)
            and device.attr.value == "device"
            and receiver_root(device.value) == source
            for node in self.context.subtree(target)
        )

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
