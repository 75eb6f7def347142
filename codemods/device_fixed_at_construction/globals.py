"""Tensors made once, at import or as a plain object is built, that code taking tensors reads.

`BOX_OFFSETS = torch.tensor([...], device="cuda")` (or a CPU constant, `MEAN =
torch.tensor([0.485, 0.456, 0.406])`) is made once, on one device; a function of the model
that adds it to its input (`corners = index.unsqueeze(1) + BOX_OFFSETS`) then works on that
device only: another GPU, a replica under DataParallel, or a host without the GPU the import
named fails. A plain object (a loss, a sampler, not a module) that makes a tensor in its
`__init__` (`self.quantiles = torch.Tensor(levels)`) keeps it on the CPU the same way: no
`model.to()` ever moves it.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.calls import MOVES
from devfix.codemods.analysis.modules import FunctionInfo, methods, self_attribute
from devfix.codemods.analysis.moves import cuda_string
from devfix.codemods.analysis.names import dotted_name, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CPU_SOURCES,
    DATA_FACTORIES,
    SAME_DEVICE_METHODS,
    TENSOR_FACTORIES,
)


class ImportTimeTensors(Analysis):
    """Module-level tensors read by model code, and the tensor each one meets there."""

    def made_at_import(self, name: cst.Name, function: FunctionInfo) -> cst.Call | None:
        """The factory call that binds the global `name` reads, when `name` is bound once, at
        module level, to a torch factory and never in `function`."""
        if name.value in function.bindings or name.value in function.params:
            return None
        statements = self.scopes.module_bindings().get(name.value, [])
        if len(statements) != 1 or not isinstance(statements[0], cst.Assign):
            return None
        value = statements[0].value
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and (value.func.attr.value in SAME_DEVICE_METHODS or value.func.attr.value in MOVES)
            and isinstance(value.func.value, cst.Call)
        ):
            value = value.func.value
        if not isinstance(value, cst.Call):
            return None
        qualified = self.names.qualified_name(value.func)
        if qualified not in TENSOR_FACTORIES and qualified not in DATA_FACTORIES:
            return None
        return statements[0].value if isinstance(statements[0].value, cst.Call) else None

    def on_a_named_gpu(self, made: cst.Call) -> bool:
        """`device="cuda"` / `.cuda()` / `.to("cuda:0")` where the global is made."""
        call: cst.BaseExpression = made
        while isinstance(call, cst.Call):
            device = keyword_argument(call, "device")
            if device is not None and cuda_string(device.value):
                return True
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
                return True
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "to"
                and call.args
                and cuda_string(call.args[0].value)
            ):
                return True
            call = func.value if isinstance(func, cst.Attribute) else func
        return False

    def tensor_met(self, operand: cst.BaseExpression, function: FunctionInfo) -> str | None:
        """The local tensor `operand` is (`index.unsqueeze(1)` -> `index`): a tensor parameter
        of `function` (any input of a module's method), or a name it binds once from an
        expression that reads one."""
        while True:
            if isinstance(operand, cst.Call) and isinstance(operand.func, cst.Attribute):
                if operand.func.attr.value not in SAME_DEVICE_METHODS:
                    return None
                operand = operand.func.value
            elif isinstance(operand, cst.Subscript):
                operand = operand.value
            else:
                break
        name = dotted_name(operand)
        if name is None or "." in name:
            return None
        module_input = function.owner is not None and function.owner.is_module
        if name in function.tensor_params or (module_input and name in function.params):
            return name  # a module's inputs are tensors that arrive on the caller's device
        return name if self._computed_from_inputs(name, operand, function, 0) else None

    def _computed_from_inputs(
        self, name: str, at: cst.CSTNode, function: FunctionInfo, depth: int
    ) -> bool:
        """`name` is bound once from an expression that reads a tensor parameter, or a local
        bound so (`error = y_hat - y`, then `sq = torch.maximum(-error, ...)`)."""
        values = self.scopes.assigned_values(name, at)
        if len(values) != 1 or depth > 3:
            return False
        read = self.scopes.names_read(values[0])
        if read & set(function.tensor_params):
            return True
        return any(
            self._computed_from_inputs(other, values[0], function, depth + 1)
            for other in read - {name}
            if other in function.bindings
        )

    def made_at_construction(
        self, attribute: cst.Attribute, function: FunctionInfo
    ) -> cst.Call | None:
        """The factory call a plain object (not a module or a dataset) binds `self.<attr>` to
        in `__init__` without a device, when that is the attribute's one assignment in the
        class: `self.quantiles = torch.Tensor(levels)` in a loss object."""
        owner = function.owner
        attr = self_attribute(attribute)
        if owner is None or owner.is_module or owner.is_dataset or attr is None:
            return None
        assigned = [
            (assign, method)
            for method in methods(owner.node)
            for assign in self.context.of_type(method.body, (cst.Assign, cst.AugAssign))
            if any(self_attribute(target) == attr for target in _targets(assign))
        ]
        if not assigned:
            return None
        if any(
            method.name.value != "__init__" or not isinstance(assign, cst.Assign)
            for assign, method in assigned
        ):
            return None
        values = [assign.value for assign, _ in assigned if isinstance(assign, cst.Assign)]
        made = [value for value in values if isinstance(value, cst.Call)]
        if len(made) != len(values) or any(
            self.names.qualified_name(value.func) not in CPU_SOURCES
            or keyword_argument(value, "device") is not None
            or (value.args and _number(value.args[0].value))
            for value in made
        ):
            return None  # a 0-dim scalar (`torch.tensor(0.5)`) meets tensors on any device
        return made[0]


def _number(node: cst.BaseExpression) -> bool:
    """`3`, `0.5`, `-1.0`."""
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def _targets(assign: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(assign, cst.Assign):
        return [target.target for target in assign.targets]
    return [assign.target] if isinstance(assign, cst.AugAssign) else []
