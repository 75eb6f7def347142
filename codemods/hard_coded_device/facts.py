"""The script's device: the CUDA device a training script hard-codes, the variable that holds
its device, and where such a choice is the script's own (not model code, not a data pipeline).

Literal shapes (`torch.device("cuda", 1)`, `f"cuda:{gpu}"`) are read here; the names that hold
a device come from `moves`, the program's shape (trains, several GPUs, a notebook) from `flow`.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.moves import cuda_string, string_device


class ScriptDevice(Analysis):
    """Where a script picks its device, and the variable it keeps it in."""

    def in_script_code(self, node: cst.CSTNode) -> bool:
        """`node` is the script's own code in a program that trains or uses several GPUs: not a
        notebook, not model code (a module's methods, a function of tensors), not a Dataset's
        method or a data pipeline."""
        flow = self.facts.flow
        if flow.is_notebook() or not (flow.runs_on_several_gpus() or flow.trains()):
            return False
        code = self.facts.modules
        function = code.enclosing_function(node)
        if function is not None and function.is_model_code:
            return False
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = code.function_info(ancestor)
                if info.owner is not None and (info.owner.is_module or info.owner.is_dataset):
                    return False
            if isinstance(ancestor, cst.ClassDef) and code.class_info(ancestor).is_module:
                return False
        return not flow.in_data_pipeline(node)

    def assignment_of(self, value: cst.CSTNode) -> cst.Assign | None:
        """`name = <value>`: the assignment of `value` to a single plain name."""
        parent = self.context.parent(value)
        if self.scopes.assigned_name(value) is None or not isinstance(parent, cst.Assign):
            return None
        return parent

    def variable(self, node: cst.CSTNode) -> str | None:
        """A name in scope at `node` holding the script's device: a `torch.device(...)` or
        helper call (not one naming the CPU or MPS), a conditional that may pick CUDA, or a
        CUDA string in a `dev...` name that is not compared as a string (a hard-coded device
        that a fix turns into `select_device()`). Not the name `node` itself is assigned to."""
        own = self.scopes.assigned_name(node)
        for name in self.facts.moves.device_names(node):
            if name == own:
                continue
            value = self.scopes.latest_binding(name, node)
            if value is None:
                values = self.scopes.simple_assignments(self.context.module, name)
                value = values[0] if values else None
            if value is None:
                continue
            if isinstance(value, cst.Call) and not _names_other_device(value):
                return name
            if isinstance(value, cst.IfExp) and any(
                cuda_string(n)
                for n in self.context.subtree(value)
                if isinstance(n, cst.SimpleString)
            ):
                return name
            if (
                cuda_string(value)
                and "dev" in name.lower()
                and not self.facts.moves.compared_as_string(name)
            ):
                return name
        return None

    def chosen_by_hand(self, assign: cst.Assign | None) -> str | None:
        """Why the script's hard-coded CUDA device is its own choice, which a portable device
        would undo (said as the reason of a finding): it places work on several GPUs, or the
        device string it assigns (`assign`) is compared as a string."""
        indices = self.facts.flow.gpus_used()
        if len(indices) > 1:
            shown = ", ".join(f"cuda:{i}" for i in sorted(indices))
            return (
                f"the script places work on several GPUs on purpose ({shown}); choose its "
                "devices by hand"
            )
        if assign is not None and cuda_string(assign.value):
            name = assign.targets[0].target
            assert isinstance(name, cst.Name)
            if self.facts.moves.compared_as_string(name.value):
                return f"`{name.value}` is compared as a string; a `torch.device` would not match"
        return None


def literal_cuda_device(call: cst.Call) -> bool:
    """The arguments of `torch.device("cuda:0")`, `torch.device("cuda")`,
    `torch.device("cuda", 1)`: a literal CUDA device."""
    if not call.args or any(arg.star for arg in call.args):
        return False
    first = call.args[0]
    if first.keyword is not None and first.keyword.value != "type":
        return False
    if not cuda_string(first.value):
        return False
    return all(isinstance(arg.value, cst.Integer) for arg in call.args[1:])


def cuda_fstring(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`f"cuda:{expr}"` -> `expr`."""
    if not isinstance(node, cst.FormattedString) or len(node.parts) != 2:
        return None
    text, expression = node.parts
    if (
        isinstance(text, cst.FormattedStringText)
        and text.value == "cuda:"
        and isinstance(expression, cst.FormattedStringExpression)
        and expression.format_spec is None
        and expression.conversion is None
    ):
        return expression.expression
    return None


def _names_other_device(call: cst.Call) -> bool:
    """`torch.device("cpu")`, `torch.device("mps")`: not the script's accelerator."""
    first = call.args[0].value if call.args else None
    value = string_device(first) if first is not None else None
    return value is not None and not value.startswith("cuda")
