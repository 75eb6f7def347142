"""A device that model code chooses for itself in a local (`device = torch.device("cuda" if
torch.cuda.is_available() else "cpu")`), and the tensor whose device it should be instead."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.devices import Literal, Unknown
from devfix.codemods.analysis.modules import FunctionInfo
from devfix.codemods.analysis.names import argument_of, call_tail


@dataclass(frozen=True)
class LocalChoice:
    """The one binding of the local device, the device to bind it to instead, and why."""

    binding: cst.Assign
    expression: str
    evidence: str
    proof: bool


class LocalDeviceChoices(Analysis):
    """Locals of model code bound once to a fixed GPU choice, and what they should follow."""

    def choice(self, name: str, function: FunctionInfo) -> LocalChoice | None:
        """`name` is bound once in `function` to a CUDA literal or availability choice, and
        a tensor some move to it meets tells the device: that tensor's, judged from the first
        move that names one (in source order)."""
        binding = self._only_binding(name, function)
        if binding is None:
            return None
        devices = self.facts.devices
        if not isinstance(devices.fixed_outside(binding.value, function), Literal):
            return None
        for move in self._moves_to(name, function):
            needed = devices.needed_by(move, function)
            expression = needed.expression()
            if (
                expression is not None
                and not isinstance(needed, Unknown)
                and self._known_at(expression, binding, function)
            ):
                return LocalChoice(binding, expression, needed.evidence, needed.proof)
        return None

    def _known_at(self, expression: str, binding: cst.Assign, function: FunctionInfo) -> bool:
        """The name `expression` starts from is a parameter, or is bound before `binding`."""
        root = expression.split(".", 1)[0].split("(", 1)[0]
        if root in function.params or root == "self":
            return True
        position = self.context.order(binding)[0]
        return any(bound < position for bound in function.bindings.get(root, []))

    def _only_binding(self, name: str, function: FunctionInfo) -> cst.Assign | None:
        bindings = self.scopes.table(function.node).bindings.get(name, [])
        if len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        value = bindings[0].value
        assign = self.context.parent(value) if value is not None else None
        if not (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
        ):
            return None
        return assign

    def _moves_to(self, name: str, function: FunctionInfo) -> list[cst.Call]:
        """`x.to(name)` calls in `function`, in source order."""
        found: list[cst.Call] = []
        for call in self.scopes.find(function.node, cst.Call, own_scope=True):
            if call_tail(call.func) != "to":
                continue
            device = argument_of(call, "device")
            if (
                device is not None
                and isinstance(device.value, cst.Name)
                and device.value.value == name
            ):
                found.append(call)
        return found
