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

from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.calls import MOVES
from devfix.codemods.analysis.modules import FunctionInfo, method, methods, self_attribute
from devfix.codemods.analysis.moves import cuda_string
from devfix.codemods.analysis.names import dotted_name, is_number, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CPU_SOURCES,
    DATA_FACTORIES,
    DEVICE_KEEPING_METHODS,
    SAME_DEVICE_METHODS,
    TENSOR_FACTORIES,
)

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


class ImportTimeTensors(Analysis):
    """Module-level tensors read by model code, and the tensor each one meets there."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        #: (id of a class, attribute) -> the CPU tensor `__init__` binds it to, or None
        self._cpu_attributes: dict[tuple[int, str], cst.BaseExpression | None] = {}

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
    ) -> cst.BaseExpression | None:
        """The value a plain object (not a module or a dataset) binds `self.<attr>` to in
        `__init__`, when `__init__` is the only method that assigns it and every value is a
        CPU tensor: a factory without a device (`self.quantiles = torch.Tensor(levels)`), or
        computed by torch or arithmetic from such attributes (`self.alphas = 1. -
        self.betas`, `self.bar = torch.cumprod(self.alphas, 0)`)."""
        owner = function.owner
        attr = self_attribute(attribute)
        if owner is None or owner.is_module or owner.is_dataset or attr is None:
            return None
        return self._cpu_attribute(owner.node, attr, 0)

    def _cpu_attribute(
        self, classdef: cst.ClassDef, attr: str, depth: int
    ) -> cst.BaseExpression | None:
        # Asked for each operation and index that reads the attribute: scanned once per class.
        key = (id(classdef), attr)
        if key not in self._cpu_attributes:
            self._cpu_attributes[key] = self._scan_cpu_attribute(classdef, attr, depth)
        return self._cpu_attributes[key]

    def _scan_cpu_attribute(
        self, classdef: cst.ClassDef, attr: str, depth: int
    ) -> cst.BaseExpression | None:
        assigned = [
            (assign, setter)
            for setter in methods(classdef)
            for assign in self.context.of_type(setter.body, (cst.Assign, cst.AugAssign))
            if any(self_attribute(target) == attr for target in _targets(assign))
        ]
        if not assigned or depth > 4:
            return None
        values: list[cst.BaseExpression] = []
        for assign, setter in assigned:
            # Set in `__init__` only (each branch of a choice there), never moved later.
            if setter.name.value != "__init__" or not isinstance(assign, cst.Assign):
                return None
            if not self._cpu_value(assign.value, classdef, depth):
                return None
            values.append(assign.value)
        return values[0]

    def _cpu_value(self, value: cst.BaseExpression, classdef: cst.ClassDef, depth: int) -> bool:
        """`value`, computed in `__init__`, is a tensor on the CPU (not a 0-dim scalar:
        `torch.tensor(0.5)` meets tensors on any device)."""
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation)):
            operands = (
                [value.left, value.right]
                if isinstance(value, cst.BinaryOperation)
                else [value.expression]
            )
            tensors = [o for o in operands if not is_number(o)]
            return bool(tensors) and all(self._cpu_value(o, classdef, depth) for o in tensors)
        attr = self_attribute(value)
        if attr is not None:
            return self._cpu_attribute(classdef, attr, depth + 1) is not None
        if not isinstance(value, cst.Call) or keyword_argument(value, "device") is not None:
            return False
        qualified = self.names.qualified_name(value.func) or ""
        if isinstance(value.func, cst.Attribute) and not qualified.startswith("torch."):
            helper = method(classdef, self_attribute(value.func) or "")
            if helper is not None and depth < 4:
                # `self.keep = self.keep_table(rates)`: what its returns make.
                returns = self.scopes.find(helper.body, cst.Return, own_scope=True)
                return bool(returns) and all(
                    r.value is not None and self._cpu_value(r.value, classdef, depth + 1)
                    for r in returns
                )
            if value.func.attr.value in DEVICE_KEEPING_METHODS:
                # `torch.tensor(rows).float()`: where the tensor it is called on is.
                return self._cpu_value(value.func.value, classdef, depth)
        if qualified in CPU_SOURCES:
            return not (value.args and is_number(value.args[0].value))
        if qualified.startswith("torch.") and qualified not in TENSOR_FACTORIES:
            # `torch.cumprod(self.alphas, 0)`: on the device of the tensor it is given.
            first = value.args[0].value if value.args else None
            return first is not None and self._cpu_value(first, classdef, depth)
        return False


def _targets(assign: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(assign, cst.Assign):
        return [target.target for target in assign.targets]
    return [assign.target] if isinstance(assign, cst.AugAssign) else []
