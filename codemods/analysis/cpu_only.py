"""Arguments that must stay on the CPU: moving what reaches them breaks code that works.

A rule that moves tensors to the model's device asks here first (DF204's batch moves, DF201's
through the same loop plans, DF202's whole-encoding moves, DF101's script tensors; DF106 moves
labels only inside the loss call, where nothing else sees the moved value). Its consumers:

- `pack_padded_sequence(input, lengths)`: `lengths` "must be on the CPU if provided as a
  tensor" (torch's docs; torch before 1.7 raises `'lengths' argument should be a 1D CPU int64
  tensor`, later versions copy them back to the host, a synchronisation for nothing);
- `WeightedRandomSampler(weights)` and `torch.multinomial` under a sampler draw with a CPU
  generator: CUDA weights fail with `Expected a 'cpu' device type for generator`;
- `x.numpy()` reads host memory: `can't convert cuda:0 device type tensor to numpy`.

A value reaches such an argument in the code at hand, or through a call of a model of this
file whose `forward` hands the matching parameter to one (`model(tokens, lengths)` with
`pack_padded_sequence(embedded, lengths)` in `Tagger.forward`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import forward_parameter_index
from devfix.codemods.analysis.moves import copies_to_host
from devfix.codemods.analysis.names import argument_of, call_tail, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CPU_SOURCES,
    SAME_DEVICE_METHODS,
    TENSOR_FUNCTIONS,
)

#: Callee (qualified) -> its CPU-only arguments: (position, keyword, why it must stay there).
CPU_ONLY_ARGUMENTS: dict[str, tuple[tuple[int, str, str], ...]] = {
    "torch.nn.utils.rnn.pack_padded_sequence": ((1, "lengths", "must be a CPU tensor"),),
    "torch.utils.data.WeightedRandomSampler": (
        (0, "weights", "are drawn from with a CPU generator"),
    ),
    "torch.utils.data.sampler.WeightedRandomSampler": (
        (0, "weights", "are drawn from with a CPU generator"),
    ),
}
#: Methods whose receiver must be on the CPU.
CPU_ONLY_METHODS = {"numpy": "reads host memory"}
#: Methods that keep a tensor where it is: what they are called on reaches the consumer
#: (and the casts of `_TENSOR_ONLY_METHODS`).
_SAME_TENSOR = frozenset({"view", "reshape", "flatten", "squeeze"})


#: Where a tensor is: in host memory, on a device, a tensor the code does not place, or an
#: input of a module's method that its caller (in another file) may hand as a device tensor.
Placement = Literal["host", "device", "tensor", "input"]
_MAX_DEPTH = 8
#: The placements that call for a copy to the host, the surer first.
_MOVABLE: tuple[Placement, ...] = ("device", "tensor")
#: Methods whose result lives on the host (or is no tensor at all).
_HOST_RESULTS = frozenset({"tolist", "numpy", "item"})
#: Comparisons as methods, which lists and NumPy arrays lack: the receiver is a tensor.
_TENSOR_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})
#: Methods of tensors that lists and NumPy arrays lack: an input they are called on is a tensor.
_TENSOR_ONLY_METHODS = frozenset({"long", "int", "short", "unsqueeze", "contiguous"})
#: Calls that return a tuple of tensors on their input's device (`values, order = x.sort()`).
_TUPLE_OF_TENSORS = frozenset({"sort", "topk", "max", "min", "median", "mode", "kthvalue"})


def _is_cpu_literal(node: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(node, cst.Call) and node.args:
        node = node.args[0].value
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cpu"


def _returns_tensors(value: cst.BaseExpression) -> bool:
    """`torch.sort(x)` / `x.sort()`: unpacking gives tensors."""
    return isinstance(value, cst.Call) and call_tail(value.func) in _TUPLE_OF_TENSORS


@dataclass(frozen=True)
class CpuOnlyUse:
    """A value (`expr`, in the code asked about) that must stay on the CPU, and why."""

    expr: cst.BaseExpression
    reason: str


class CpuOnlyArguments(Analysis):
    """Which values of a block must stay on the CPU."""

    def uses(self, root: cst.CSTNode, model_calls: list[cst.Call]) -> list[CpuOnlyUse]:
        """The values under `root` that reach a CPU-only argument, directly or through one of
        `model_calls` (calls of models whose class this file defines)."""
        found = list(self._direct_uses(root))
        for call in model_calls:
            found.extend(self._uses_through_model(call))
        return found

    def use_of(
        self, name: str | None, at: cst.BaseExpression, model_call: cst.Call
    ) -> CpuOnlyUse | None:
        """A CPU-only use, in the scope of `at`, of the value `at` itself or of (a part of) what
        `name` holds (`enc["length"]` handed to `pack_padded_sequence`): a move of that value
        would take the use along."""
        scope = self.scopes.enclosing_scope(at)
        for use in self.uses(scope, [model_call]):
            if use.expr is at:
                return use
            root = use.expr
            while isinstance(root, (cst.Subscript, cst.Attribute, cst.Call)):
                root = root.func if isinstance(root, cst.Call) else root.value
            if name is not None and isinstance(root, cst.Name) and root.value == name:
                return use
        return None

    def _direct_uses(self, root: cst.CSTNode) -> Iterator[CpuOnlyUse]:
        for node in self.scopes.nodes(root):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in CPU_ONLY_METHODS:
                if not node.args and not copies_to_host(node.func.value):
                    why = CPU_ONLY_METHODS[node.func.attr.value]
                    yield CpuOnlyUse(
                        node.func.value,
                        f"`.{node.func.attr.value}()` {why}, so it stays on the CPU",
                    )
                continue
            yield from self.arguments(node)

    def arguments(self, call: cst.Call) -> list[CpuOnlyUse]:
        """The arguments of `call` that torch needs on the CPU (`pack_padded_sequence`'s
        `lengths`, a sampler's `weights`)."""
        qualified = self.names.qualified_name(call.func)
        found: list[CpuOnlyUse] = []
        for position, keyword, why in CPU_ONLY_ARGUMENTS.get(qualified or "", ()):
            argument = argument_of(call, keyword, position)
            if argument is not None:
                short = (qualified or "").rsplit(".", 1)[-1]
                found.append(
                    CpuOnlyUse(argument.value, f"it feeds `{short}`'s `{keyword}`, which {why}")
                )
        return found

    def placement(self, value: cst.BaseExpression, depth: int = 0) -> Placement | None:
        """Where the tensor `value` is, as far as the code at hand shows: on the host (a CPU
        factory, `.cpu()`, `.tolist()`), on a device (`device=d`, `.to(d)`, `.cuda()`, a sort
        or a method of such a tensor), a tensor somewhere (an input judged a tensor, or one that
        every module of this file calling this `forward` hands a tensor), an input of a
        module's method that no call of this file hands anything and that may be a list
        ("input"), or None (not provably a tensor: a list, a number, an unknown call)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.BaseNumber)):
            return None
        if isinstance(value, cst.DictComp):  # `{k: v.to(device) for k, v in batch.items()}`
            return self.placement(value.value, depth + 1)
        if isinstance(value, (cst.Subscript, cst.UnaryOperation)):
            inner = value.value if isinstance(value, cst.Subscript) else value.expression
            return self.placement(inner, depth + 1)
        if isinstance(value, (cst.BinaryOperation, cst.Comparison)):
            operands = (
                [value.left, value.right]
                if isinstance(value, cst.BinaryOperation)
                else [value.left, *(c.comparator for c in value.comparisons)]
            )
            # An operand is part of the same value: nesting (`(n + 2 * p - k) / s + 1`) costs
            # no depth, which bounds the names and calls followed.
            found = {self.placement(operand, depth) for operand in operands} - {None}
            kinds: tuple[Placement, ...] = ("device", "tensor", "host", "input")
            return next((kind for kind in kinds if kind in found), None)
        if isinstance(value, cst.Call):
            return self._call_placement(value, depth)
        if isinstance(value, cst.Name):
            return self._name_placement(value, depth)
        return None

    def _call_placement(self, call: cst.Call, depth: int) -> Placement | None:
        if copies_to_host(call):
            return "host"
        func = call.func
        qualified = self.names.qualified_name(func)
        if qualified in CPU_SOURCES:
            device = keyword_argument(call, "device")
            if device is None:
                return "host"
            return "host" if _is_cpu_literal(device.value) else "device"
        if qualified in TENSOR_FUNCTIONS:
            first = argument_of(call, "input", 0)
            return self.placement(first.value, depth + 1) if first is not None else None
        if not isinstance(func, cst.Attribute):
            return None
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            returned = self._returned_by_own_method(call)
            if returned is not None:  # `self.get_seq_lens(lengths)`: what that method returns
                return self.placement(returned, depth + 1)
        method = func.attr.value
        if method in _HOST_RESULTS:
            return "host"
        if method == "cuda":
            return "device"
        if method == "to":
            target = argument_of(call, "device", 0)
            if target is None or self.names.is_dtype(target.value):
                return self.placement(func.value, depth + 1)
            return "host" if _is_cpu_literal(target.value) else "device"
        if method in _TENSOR_COMPARISONS:
            receiver = self.placement(func.value, depth + 1)
            return "tensor" if receiver == "input" else receiver
        if method in _TENSOR_ONLY_METHODS:
            receiver = self.placement(func.value, depth + 1)
            return "tensor" if receiver == "input" else receiver
        if method in _SAME_TENSOR or method in SAME_DEVICE_METHODS or method in _TUPLE_OF_TENSORS:
            return self.placement(func.value, depth + 1)
        return None

    def _returned_by_own_method(self, call: cst.Call) -> cst.BaseExpression | None:
        """The value of the one `return` of the method of the enclosing class that
        `self.<method>(...)` calls."""
        assert isinstance(call.func, cst.Attribute)
        owner = self.scopes.class_of(self.scopes.enclosing_function(call))
        methods = [
            member
            for member in (owner.body.body if owner is not None else ())
            if isinstance(member, cst.FunctionDef) and member.name.value == call.func.attr.value
        ]
        if len(methods) != 1:
            return None
        returns = [
            node for node in self.scopes.nodes(methods[0].body) if isinstance(node, cst.Return)
        ]
        if len(returns) != 1:
            return None
        return returns[0].value

    def _name_placement(self, name: cst.Name, depth: int) -> Placement | None:
        binding = self.scopes.binding_before(name.value, name, statement=True)
        if (
            binding is not None
            and binding[1] is not None
            and self.context.order(binding[1])[0] > self.context.order(name)[0]
        ):
            binding = None  # only bound later: what it holds here is the parameter
        function = self.facts.modules.enclosing_function(name)
        kind, value = binding if binding is not None else ("", None)
        if kind in ("assign", "unpack") and value is not None:
            if kind == "unpack" and not _returns_tensors(value):
                return None
            return self.placement(value, depth + 1)
        if function is None or (binding is not None and binding[0] != "param"):
            return None
        # What the file's own calls hand the parameter decides; only without any does the
        # function's use of it as a tensor (whose device its callers choose) count.
        handed = self.facts.modules.handed_by_callers(function.node, name.value)
        handed += self._handed_by_model_calls(function.node, name.value)
        if handed:
            places = {self.placement(value, depth + 1) for value in handed}
            return next((kind for kind in _MOVABLE if kind in places), None)
        if name.value in function.tensor_params:
            return "tensor"
        # A module's input that only the caller's file explains: a batch moved whole, or
        # DataParallel's scatter, hands it on a GPU if it is a tensor.
        owner = function.owner
        is_input = owner is not None and owner.is_module and name.value in function.params
        return "input" if is_input else None

    def _handed_by_model_calls(
        self, forward: cst.FunctionDef, parameter: str
    ) -> list[cst.BaseExpression]:
        """What the calls of this file that run `forward`'s model (`tagger(tokens, lengths)`)
        hand `parameter`."""
        index = forward_parameter_index(forward, parameter)
        if index is None:
            return []
        found: list[cst.BaseExpression] = []
        for call in self.scopes.find(self.context.module, cst.Call):
            target = self._forward_of(call)
            if target is None or target[1] is not forward or any(a.star for a in call.args):
                continue
            argument = argument_of(call, parameter, index)
            if argument is not None:
                found.append(argument.value)
        return found

    def _uses_through_model(self, call: cst.Call) -> Iterator[CpuOnlyUse]:
        found = self._forward_of(call)
        if found is None:
            return
        owner, forward = found
        parameters = [p.name.value for p in forward.params.params][1:]  # after `self`
        kept: dict[str, str] = {}
        for use in self._direct_uses(forward.body):
            peeled = _peeled(use.expr)
            if isinstance(peeled, cst.Name):
                kept[peeled.value] = use.reason
        for index, arg in enumerate(call.args):
            if arg.star:
                return
            name = arg.keyword.value if arg.keyword is not None else None
            if name is None and index < len(parameters):
                name = parameters[index]
            if name is not None and name in kept and not self.scopes.binds(forward.body, name):
                yield CpuOnlyUse(arg.value, f"{kept[name]} (in `{owner}.forward`)")

    def _forward_of(self, call: cst.Call) -> tuple[str, cst.FunctionDef] | None:
        """The `forward` of the model class this file defines that `call` calls, if known."""
        callee = call.func
        if isinstance(callee, cst.Attribute) and callee.attr.value == "forward":
            callee = callee.value
        if not isinstance(callee, cst.Name):
            return None
        classes = {
            self.facts.modules.constructed_module(value)
            for value in self.scopes.assigned_before(callee.value, call)
        }
        if not classes:
            # A parameter (`def predict(model, ...)`): what every caller passes.
            built = self.facts.flow.built_by(callee.value, call)
            if built is not None:
                classes = {self.facts.modules.constructed_module(built)}
        if len(classes) != 1 or None in classes:
            return None
        classdef = self.facts.modules.local_module_class(classes.pop())
        if classdef is None or not isinstance(classdef.body, cst.IndentedBlock):
            return None
        for statement in classdef.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "forward":
                return classdef.name.value, statement
        return None


def _peeled(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`lengths.long().view(-1)` -> `lengths`: the tensor the consumer receives; a move to the
    CPU on the way (`lengths.cpu()`, `.to("cpu")`) says the author wants it there too."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method not in _SAME_TENSOR | _TENSOR_ONLY_METHODS and not copies_to_host(expr):
            break
        expr = expr.func.value
    return expr
