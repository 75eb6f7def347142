"""Where a model loaded with a device map lives in a multi-process script: whether the script
runs as one process whatever it imports (a notebook), whether it declares the model split over
the GPUs of one process on purpose, and whether the model is moved after it is loaded.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import call_tail, dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import ACCELERATOR_CLASSES
from devfix.types import ImportSpec

#: Where the model classes that take `device_map` come from (TRL's value-head models pass it
#: on to transformers' `from_pretrained`).
_LIBRARIES = ("transformers.", "peft.", "trl.")


class ShardedModel(Analysis):
    """What a script says about one process per GPU and a model split over devices."""

    def library_model_class(self, model_class: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """A Hugging Face / PEFT / TRL model class, also one chosen into a local name
        (`model_class = AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM`)."""
        qualified = self.names.qualified_name(model_class)
        if qualified is not None and qualified.startswith(_LIBRARIES):
            return True
        if not isinstance(model_class, cst.Name):
            return False
        values = self.facts.scopes.assigned_values(model_class.value, at)
        choices = [
            choice
            for value in values
            for choice in ((value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,))
        ]
        return bool(choices) and all(
            (self.names.qualified_name(choice) or "").startswith(_LIBRARIES) for choice in choices
        )

    def self_contained_use(self, node: cst.Call) -> bool:
        """The load is in a function that neither trains nor hands a model back (`merge()`:
        load the base with `device_map="auto"`, merge the adapter, save): what it loads is
        used there and then, by one process's one copy, so a map over the GPUs is right."""
        function = self.facts.scopes.enclosing_function(node)
        if function is None:
            return False
        flow = self.facts.flow
        if flow.calls_backward(function.body):
            return False
        for inner in self.facts.scopes.nodes(function.body):
            if isinstance(inner, cst.Return) and inner.value is not None:
                return False
            if isinstance(inner, (cst.Yield, cst.Global, cst.Nonlocal)):
                return False
            if isinstance(inner, cst.Call) and (
                flow.builds_optimizer(inner)
                or (call_tail(inner.func) or "").endswith(("Trainer", "prepare", "train", "fit"))
            ):
                return False
            if isinstance(inner, cst.Assign) and any(
                not isinstance(target.target, cst.Name) for target in inner.targets
            ):
                return False  # `self.model = ...`: kept for later
        return True

    def one_process_reason(self) -> str | None:
        """Why the file runs as a single process whatever it imports, or None: a notebook is one
        kernel process (unless it starts workers with `notebook_launcher`)."""
        if not self.facts.flow.is_notebook():
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

    def moved_after(self, name: str, node: cst.CSTNode) -> bool:
        """`name.to(...)` / `name.cuda(...)` somewhere after `node`."""
        after = self.context.position(node).end.line
        for call in self.context.subtree(self.context.module):
            if (
                isinstance(call, cst.Call)
                and self.facts.moves.moved_name(call) == name
                and self.context.position(call).start.line > after
            ):
                return True
        return False

    def local_rank(self, node: cst.Call) -> tuple[str, list[ImportSpec]]:
        """This process's GPU as the script can write it where the model loads: an
        `Accelerator`'s `local_process_index` (what accelerate documents), the script's
        `local_rank`, else the `LOCAL_RANK` that torchrun and accelerate set."""
        accelerator = self._visible_accelerator(node)
        if accelerator is not None:
            return f"{accelerator}.local_process_index", []
        for candidate in ("local_rank", "LOCAL_RANK"):
            if self.scopes.visible_name(candidate, node):
                return candidate, []
        return 'int(os.environ.get("LOCAL_RANK", "0"))', [ImportSpec("os")]

    def _visible_accelerator(self, node: cst.Call) -> str | None:
        """A name bound only to `accelerate.Accelerator(...)` that `node` can read."""
        scopes = self.scopes
        function = scopes.enclosing_function(node)
        for scope in (function, self.context.module):
            if scope is None:
                continue
            for name, bindings in scopes.table(scope).bindings.items():
                if (
                    bindings
                    and all(
                        isinstance(b.value, cst.Call)
                        and self.names.qualified_name(b.value.func) in ACCELERATOR_CLASSES
                        for b in bindings
                    )
                    and scopes.visible_name(name, node)
                ):
                    return name
        return None


def spreading_risk(evidence: str) -> str:
    """What removing a spreading map (`"auto"`) risks, for the message of a script that trains
    with `evidence` (torchrun, accelerate, `Trainer`)."""
    risk = "; without it the model must fit on one GPU (use FSDP or DeepSpeed ZeRO-3 otherwise)"
    if evidence == "Trainer":
        risk += (
            "; `Trainer` treats a model spread over several GPUs as model-parallel (no "
            "DataParallel, one copy): started with plain `python`, the map may be on purpose"
        )
    return risk


def quantized_load(call: cst.Call) -> bool:
    """`from_pretrained(..., load_in_4bit=True)` / `load_in_8bit=` / `quantization_config=`."""
    return any(
        keyword_argument(call, name) is not None
        for name in ("load_in_4bit", "load_in_8bit", "quantization_config")
    )
