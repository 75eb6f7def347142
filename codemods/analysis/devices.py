"""Device inference: the device an expression lives on, or must live on, as a small symbolic
value with its evidence (see shared/design/device-inference.md).

| value | meaning |
|---|---|
| `CPU` | created or moved to the CPU |
| `ParamsOf(m)` | the device of module `m`'s parameters (`self.emb` -> `self.emb.weight.device`) |
| `SameAs(x)` | the device of input or local `x` |
| `Named(d)` | a device held in a variable or attribute |
| `Literal("cuda:1")` | a hard-coded device |
| `Current` | CUDA's current device (bare `.cuda()`) |
| `OneOf(...)` | differs by branch |
| `Unknown` | nothing in scope tells |

Every value carries its evidence (a few words, for messages) and whether that evidence proves
it (`proof`) or is a judgement ("the first tensor argument"): passes make a fix safe on proof,
unsafe on judgement, and report without a fix on `Unknown`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import (
    FunctionInfo,
    is_tensor_type,
    method,
    names_a_device,
    self_attribute,
    takes_tensors,
)
from devfix.codemods.analysis.moves import (
    DeviceMove,
    copies_to_host,
    device_argument,
    gpu_index,
    is_move_call,
    string_device,
)
from devfix.codemods.analysis.names import (
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
    name_assignment,
    receiver_root,
)
from devfix.codemods.analysis.scopes import Binding, all_params, target_names
from devfix.codemods.analysis.torch_names import (
    CONCATENATIONS,
    CPU_SOURCES,
    DEVICE_KEEPING_METHODS,
    LAYER_PARAMETER,
    LEAVES_DEVICE_METHODS,
    LEGACY_CONSTRUCTORS,
    MODULE_ONLY_METHODS,
    MOVE_METHODS,
    NON_TENSOR_MEMBERS,
    RECURRENT_LAYERS,
    SAME_DEVICE_FUNCTIONS,
    SAME_DEVICE_METHODS,
    SHAPE_ARGUMENT_METHODS,
    TENSOR_FACTORIES,
)

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_MAX_FLOW_DEPTH = 6
_EXTRA_MOVE_DEPTH = 4
_MAX_PLACED_DEPTH = 8
_MAX_CPU_DEPTH = 6
#: How far a new tensor is followed to the operand on a device it meets, and how many uses of
#: each name it is assigned to are read.
_MAX_OPERAND_DEPTH = 6
_MAX_OPERAND_USES = 8

#: Tensor methods whose result keeps the tensor's device and its size (not a reduction to a
#: 0-dim scalar, which may meet a tensor on any device).
_CARRYING_METHODS = DEVICE_KEEPING_METHODS - {
    "argmax", "mean", "sum", "select", "T", "mT", "fill_", "requires_grad_",
}  # fmt: skip
#: Statements whose body may not run, or run more than once.
_BRANCHES = (cst.If, cst.Else, cst.For, cst.While, cst.Try, cst.ExceptHandler, cst.Match)
#: Methods that tensors have and NumPy arrays, lists and numbers do not.
_TENSOR_ONLY_METHODS = frozenset({"view", "unsqueeze"})
#: Tensor methods whose result has at least one dimension, whatever the receiver's.
_GIVES_DIMENSIONS = frozenset(
    {"unsqueeze", "view", "reshape", "repeat", "expand", "expand_as", "flatten", "unflatten"}
)
#: NumPy functions that return a scalar for the arguments usually passed to them.
_NUMPY_SCALARS = frozenset(
    {
        "sum", "mean", "max", "min", "prod", "std", "var", "median", "argmax", "argmin",
        "count_nonzero", "all", "any", "float32", "float64", "int64", "int32", "log", "exp",
        "sqrt", "power", "abs", "floor", "ceil", "round",
    }
)  # fmt: skip
#: Types an `isinstance` test names when the code takes a value for an array of data.
_ARRAY_TYPES = frozenset({"numpy.ndarray", "builtins.list", "builtins.tuple"})


@dataclass(frozen=True)
class Device:
    """A device value; subclasses are the lattice's members."""

    #: Why: "it meets `x`", "it is fed to `self.pos_embedding`".
    evidence: str = ""
    #: The evidence proves the value (a fix built on it is safe); False: a judgement.
    proof: bool = True

    def expression(self) -> str | None:
        """Source text that evaluates to this device where the evidence was found, if any."""
        return None


@dataclass(frozen=True)
class CPU(Device):
    def expression(self) -> str | None:
        return '"cpu"'


@dataclass(frozen=True)
class ParamsOf(Device):
    """The device of a module's parameters, read through a parameter it always has."""

    module: str = "self"
    parameter: str | None = None

    def expression(self) -> str | None:
        return f"{self.module}.{self.parameter}.device" if self.parameter else None


@dataclass(frozen=True)
class SameAs(Device):
    name: str = ""

    def expression(self) -> str | None:
        return f"{self.name}.device"


@dataclass(frozen=True)
class Named(Device):
    name: str = ""

    def expression(self) -> str | None:
        return self.name


@dataclass(frozen=True)
class Literal(Device):
    text: str = ""

    def expression(self) -> str | None:
        return repr(self.text)


@dataclass(frozen=True)
class Current(Device):
    pass


@dataclass(frozen=True)
class OneOf(Device):
    options: tuple[Device, ...] = ()


@dataclass(frozen=True)
class Unknown(Device):
    #: The value is only used as an index (a CPU index into a CUDA tensor is legal): no device
    #: is owed at all.
    as_index: bool = False
    #: The value meets a tensor the code copied to the host (`t.cpu()`): the CPU, where a
    #: factory makes it by default, is where it is needed.
    on_host: bool = False


#: The value only indexes other tensors: it may stay on the CPU.
AS_INDEX = Unknown("used as an index", proof=False, as_index=True)
NOTHING_TELLS = Unknown("no tensor or layer in scope tells", proof=False)
#: The value meets a host copy of a tensor: it is needed on the CPU.
ON_HOST = Unknown("it meets a tensor copied to the CPU", proof=True, on_host=True)
#: The value (or what it is rebound to) is moved with `.to()`/`.cuda()`/`.type_as()`.
MOVED_ON = Unknown("it is moved on", proof=False)


class DeviceInference(Analysis):
    """Answers "which device does this value live on / must it live on?" for one file."""

    # -- the device a new value must live on ----------------------------------------------------

    def deliberate_offload(self, anchor: cst.CSTNode, index: int | None) -> FunctionInfo | None:
        """The plain function of a training or multi-GPU script (model code only because it
        takes a tensor) that sends its own work to literal GPU `index` >= 1 (`.to("cuda:1")`,
        `.cuda(1)`): an offload beside the script's device, on purpose. Module methods, class
        code, notebooks and data pipelines are not."""
        if not index:
            return None
        flow = self.facts.flow
        if flow.is_notebook() or not (flow.runs_on_several_gpus() or flow.trains()):
            return None
        function = self.facts.modules.enclosing_function(anchor)
        if function is None or not function.is_model_code or function.owner is not None:
            return None
        if any(isinstance(a, cst.ClassDef) for a in self.context.ancestors(anchor)):
            return None
        if flow.in_data_pipeline(anchor):
            return None
        return function

    def needed_by(self, value: cst.BaseExpression, function: FunctionInfo) -> Device:
        """The device the tensor computed by `value` must live on, read from the code that
        consumes it, in this order of certainty: the tensor it meets in an operation, the layer
        it is fed to; then (judgements) a name it meets in arithmetic, the function's first
        tensor argument (or, without one, an input it meets in arithmetic), one of the module's
        layers."""
        line = self.scopes.statement_start(value)
        evidence = [
            e
            for e in self._flow(value, function, set(), line, 0)
            if not isinstance(e, SameAs)
            or self.scopes.bound_on_every_path(e.name.split(".")[0], value)
        ]
        if ON_HOST in evidence:
            return ON_HOST
        proven = [e for e in evidence if e.proof and not isinstance(e, Unknown)]
        if proven:
            return proven[0]
        if AS_INDEX in evidence:
            return AS_INDEX
        judged = [e for e in evidence if not isinstance(e, Unknown)]
        if judged:
            return judged[0]
        # Judgements, best first. Never "the first tensor argument": an argument the value does
        # not meet says nothing about where it is needed (and may not even be a tensor).
        owner = function.owner
        if owner is not None and owner.is_module and owner.has_device_property:
            return Named(
                "the module's own `device` property", proof=False, name=f"{_self(function)}.device"
            )
        shared = self._factories_device(function)
        if shared is not None:
            return shared
        shaped = self._shape_source(value, function)
        if shaped is not None:
            return shaped
        if owner is not None and owner.is_module:
            self_var = _self(function)
            chosen = next((a for a, q in owner.layers.items() if q in RECURRENT_LAYERS), None)
            if chosen is not None:
                # A state the module builds for its recurrent layer, which consumes it.
                return ParamsOf(
                    f"the module's recurrent layer `{self_var}.{chosen}` consumes it",
                    proof=False,
                    module=f"{self_var}.{chosen}",
                    parameter=LAYER_PARAMETER[owner.layers[chosen]],
                )
            if not self._places_its_layers(owner.node, self_var):
                chosen = next((a for a, q in owner.layers.items() if q in LAYER_PARAMETER), None)
                if chosen is not None:
                    # What the module's methods make, its own computation consumes, and that
                    # runs where its parameters are: in each replica, after any `model.to()`.
                    return ParamsOf(
                        f"a judgement: the module's work runs where its parameters are, and "
                        f"its layer `{self_var}.{chosen}` holds some",
                        proof=False,
                        module=f"{self_var}.{chosen}",
                        parameter=LAYER_PARAMETER[owner.layers[chosen]],
                    )
            if not owner.layers and self.facts.modules.builds_parts_from_registries(owner.node):
                # Parts built from a configuration (`build_backbone(cfg)`): their types are not
                # in the file, but the module's parameters are theirs.
                return Named(
                    "a judgement: the module's work runs where its parameters are, and its "
                    "parts built from the configuration hold them",
                    proof=False,
                    name=f"next({self_var}.parameters()).device",
                )
        return NOTHING_TELLS

    def moved_before_it_meets_a_tensor(
        self, value: cst.BaseExpression, function: FunctionInfo
    ) -> bool:
        """The value of `value` reaches a move (`x = x.to(y.device)`, through rebindings)
        and meets no tensor or layer that tells its device before: the author placed it."""
        line = self.scopes.statement_start(value)
        # A few steps further than `needed_by` looks: the move often follows some reshapes.
        for evidence in self._flow(value, function, set(), line, -_EXTRA_MOVE_DEPTH):
            if evidence is MOVED_ON:
                return True
            if not isinstance(evidence, Unknown) or evidence is ON_HOST:
                return False
        return False

    def makes_data_tensor(self, call: cst.Call, function: FunctionInfo) -> bool:
        """`torch.tensor(x)` makes a tensor with dimensions (which must live where the tensors
        it meets live), not a 0-dim scalar (which may stay on the CPU next to CUDA tensors):
        `x` is a list, tuple or comprehension, a NumPy array, a value the code takes `len()`
        of, iterates or indexes, or the result is given dimensions (`.unsqueeze(0)`,
        `.view(...)`)."""
        positional = [arg for arg in call.args if arg.keyword is None]
        if not positional:
            return False
        data = positional[0].value
        if self._is_sequence(data, function, 0):
            return True
        if self._updated_in_place(call, function):
            return True
        parent = self.context.parent(call)
        if isinstance(parent, cst.Attribute) and parent.value is call:
            return parent.attr.value in _GIVES_DIMENSIONS
        return False

    def _updated_in_place(self, call: cst.Call, function: FunctionInfo) -> bool:
        """`loss = torch.tensor(0.0)`, then `loss += ...`: a 0-dim CPU tensor that is written
        to is never let off next to a CUDA value (only one that is read is)."""
        name = self.scopes.assigned_name(call)
        if name is None:
            return False
        return any(
            isinstance(node, cst.AugAssign)
            and isinstance(node.target, cst.Name)
            and node.target.value == name
            and not isinstance(node.value, (cst.Integer, cst.Float))
            for node in self.context.subtree(function.node.body)
        )

    def moved_when_made(self, node: cst.Call, function: FunctionInfo) -> bool:
        """`torch.zeros(n).to(x.device)` or `.cuda()`: the device is stated right after the
        tensor is made (DF102 judges it), or `.type_as(x)`, which is `.to(x.options())`: `x`'s
        dtype and device."""
        current: cst.CSTNode = node
        for _ in range(8):
            parent = self.context.parent(current)
            if isinstance(parent, cst.Attribute) and parent.value is current:
                call = self.context.parent(parent)
                if not isinstance(call, cst.Call):
                    return False
                # `type_as(other)` is `to(other.options())`: other's dtype and device.
                if parent.attr.value in ("to", "cuda", "cpu", "numpy", "tolist", "item", "type_as"):
                    return True
                current = call
            elif isinstance(parent, cst.Arg):
                return self.facts.moves.moved_by_helper(parent)
            else:
                return False
        return False

    def _is_sequence(self, data: cst.BaseExpression, function: FunctionInfo, depth: int) -> bool:
        if isinstance(data, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
            return True
        if depth > 3:
            return False
        if isinstance(data, cst.Call):
            qualified = self.names.qualified_name(data.func)
            if qualified is not None and qualified.startswith("numpy."):
                return qualified.rsplit(".", 1)[1] not in _NUMPY_SCALARS
            if qualified in ("list", "builtins.list", "tuple", "builtins.tuple"):
                return True
            return isinstance(data.func, cst.Attribute) and data.func.attr.value == "tolist"
        if isinstance(data, cst.BinaryOperation):
            return self._is_sequence(data.left, function, depth + 1) or self._is_sequence(
                data.right, function, depth + 1
            )
        text = dotted_name(data)
        if text is None:
            return False
        scope: cst.CSTNode = function.node
        if text.startswith(f"{_self(function)}.") and function.owner is not None:
            scope = function.owner.node  # `self.quantiles` is used by every method
        elif isinstance(data, cst.Name):
            for value in self.scopes.simple_assignments(function.node, text):
                if self._is_sequence(value, function, depth + 1):
                    return True
        for node in self.context.subtree(scope):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and node.func.value == "len"
                and len(node.args) == 1
                and dotted_name(node.args[0].value) == text
            ) or (isinstance(node, (cst.For, cst.CompFor)) and dotted_name(node.iter) == text):
                return True
            if self._tested_as_array(node, text):
                return True
        return False

    def _tested_as_array(self, node: cst.CSTNode, text: str) -> bool:
        """`isinstance(text, np.ndarray)` (or `list`, `tuple`): the code takes it for an array."""
        if not (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "isinstance"
            and len(node.args) == 2
            and dotted_name(node.args[0].value) == text
        ):
            return False
        kinds = node.args[1].value
        named = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
        return any(
            self.names.qualified_name(kind) in _ARRAY_TYPES
            or (isinstance(kind, cst.Name) and kind.value in ("list", "tuple"))
            for kind in named
        )

    def _factories_device(self, function: FunctionInfo) -> Device | None:
        """`device=targets.device` given to the function's other factories, the same input's
        each time and at least twice: the author's own choice of where its tensors live (a
        judgement: this one may be needed elsewhere). An input of the function only (a
        parameter), never `self`'s attributes."""
        parameters = {p.name.value for p in function.node.params.params} - {_self(function)}
        chosen: set[str] = set()
        count = 0
        for call in self.context.of_type(function.node, cst.Call):
            argument = keyword_argument(call, "device")
            if argument is None or self.names.qualified_name(call.func) not in TENSOR_FACTORIES:
                continue
            device = argument.value
            if not (
                isinstance(device, cst.Attribute)
                and device.attr.value == "device"
                and isinstance(device.value, cst.Name)
            ):
                return None
            chosen.add(device.value.value)
            count += 1
        if count < 2 or len(chosen) != 1 or not chosen <= parameters:
            return None
        name = next(iter(chosen))
        return SameAs(
            f"the function makes its other tensors on `{name}.device`", proof=False, name=name
        )

    def attribute_meets(self, function: FunctionInfo, attribute: str) -> Device | None:
        """Where `self.<attribute>` is needed: the device of a tensor it meets in arithmetic in
        any method of the class (`torch.tanh(mean) * self.action_scale` with `mean` the output
        of a policy moved to `self.device`); None when no operand it meets is known to be on a
        device."""
        owner = function.owner
        if owner is None:
            return None
        wanted = f"{_self(function)}.{attribute}"
        for operation in self.context.of_type(owner.node, cst.BinaryOperation):
            for mine, other in (
                (operation.left, operation.right),
                (operation.right, operation.left),
            ):
                if dotted_name(mine) != wanted:
                    continue
                placed = self.placed(other, operation)
                if isinstance(placed, ParamsOf) and placed.expression() is None:
                    placed = self._moved_as_assigned(owner.node, placed)
                if placed is not None and placed.expression() is not None:
                    return placed
        return None

    def _moved_as_assigned(self, classdef: cst.ClassDef, params: ParamsOf) -> Device | None:
        """`self.policy = Policy(...).to(self.device)`, the one binding of the module whose
        output it is: the device it was moved to (`self.device`)."""
        bindings = self.scopes.table(classdef).bindings.get(params.module, [])
        if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call):
            return None
        move = bindings[0].value
        func = move.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "to" and move.args):
            return None
        device = dotted_name(move.args[0].value)
        if device is None or move.args[0].keyword is not None:
            return None
        return Named(f"{params.evidence}, moved to `{device}`", proof=params.proof, name=device)

    def sized_by(self, value: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """`<x>.device` for a factory that a tensor `x` of the function sizes
        (`torch.as_tensor(x.shape[0])`: a count of its rows); None without one."""
        function = self.facts.modules.enclosing_function(at)
        found = self._shape_source(value, function) if function is not None else None
        return found.expression() if found is not None else None

    def _shape_source(
        self, value: cst.BaseExpression, function: FunctionInfo, depth: int = 0
    ) -> Device | None:
        """`torch.zeros(x.shape[0], n)`, `torch.zeros(X.size(0), n)` (also inside a
        comprehension over `X`), `torch.zeros(n, dtype=x.dtype)`: the tensor whose sizes size
        the new one, or whose dtype it takes, a judgement of where it is needed. Only a name,
        or a name subscripted with a literal key."""
        factory = value
        while (
            isinstance(factory, cst.Call)
            and isinstance(factory.func, cst.Attribute)
            and isinstance(factory.func.value, cst.Call)
        ):
            factory = factory.func.value  # `torch.zeros(...).to(device)`
        if (
            depth == 0
            and isinstance(factory, cst.Call)
            and isinstance(factory.func, cst.Attribute)
            and factory.func.attr.value in MOVE_METHODS
            and isinstance(factory.func.value, cst.Name)
        ):
            # `lengths = torch.LongTensor([steps] * x.size(0))` ... `lengths = lengths.cuda()`:
            # the moved tensor is the one the name's current value made.
            made = self.scopes.value_at(factory.func.value.value, factory)
            return self._shape_source(made, function, 1) if made is not None else None
        if not isinstance(factory, cst.Call):
            return None
        for arg in factory.args:
            if arg.keyword is not None and arg.keyword.value == "dtype":
                found = self._typed_after(arg.value, function)
                if found is not None:
                    return found
            if arg.keyword is not None and arg.keyword.value not in ("size",):
                continue
            found = self._sized_after(arg.value, function)
            if found is not None:
                return found
            if isinstance(arg.value, cst.Name):
                # `h, w = x.shape[-2:]` then `torch.arange(h)`: one binding, read once.
                bound = self.scopes.table(function.node).bindings.get(arg.value.value, [])
                if len(bound) == 1 and bound[0].kind in ("assign", "unpack") and bound[0].value:
                    found = self._sized_after(bound[0].value, function)
                    if found is not None:
                        return found
        return None

    def _typed_after(self, dtype: cst.BaseExpression, function: FunctionInfo) -> Device | None:
        """`dtype=scores.dtype`: the tensor the new one is made like, a judgement of where it
        is needed (`torch.zeros(n, dtype=scores.dtype)` stands in for `scores`)."""
        if not (isinstance(dtype, cst.Attribute) and dtype.attr.value == "dtype"):
            return None
        source = dtype.value
        root = receiver_root(source) if _plain_reference(source) else None
        if root is None or root == _self(function) or self._metadata_only(root, function):
            return None
        shown = code_of(source)
        return SameAs(f"it takes the dtype of `{shown}`", proof=False, name=shown)

    def _metadata_only(self, name: str, function: FunctionInfo) -> bool:
        """A parameter the function copies both the size and the dtype of and reads nothing
        else of (`def make(info): return torch.empty(*info.shape, dtype=info.dtype)`), or a
        name bound only to NumPy's results: an array or a record of a tensor's metadata as well
        as a tensor, which may have no `.device` to name. A parameter read for its shape alone
        (`torch.ones(scores.shape[-2:])`) is a tensor the new one is laid over; a module's
        inputs, and a parameter annotated as a tensor, are tensors."""
        if function.owner is not None and function.owner.is_module and name in function.params:
            return False
        if name not in function.params:
            values = self.scopes.simple_assignments(function.node, name)
            return bool(values) and all(
                isinstance(v, cst.Call)
                and (self.names.qualified_name(v.func) or "").startswith("numpy.")
                for v in values
            )
        if any(
            param.name.value == name
            and param.annotation is not None
            and is_tensor_type(self.names.qualified_name(param.annotation.annotation))
            for param in all_params(function.node.params)
        ):
            return False
        read: set[str] = set()
        for use in self.scopes.names_in(function.node.body, name):
            parent = self.context.parent(use)
            if not (
                isinstance(parent, cst.Attribute)
                and parent.value is use
                and parent.attr.value in ("shape", "dtype", "ndim")
            ):
                return False
            read.add(parent.attr.value)
        return "dtype" in read and bool(read & {"shape", "ndim"})

    def _sized_after(self, size: cst.BaseExpression, function: FunctionInfo) -> Device | None:
        """The tensor whose `.shape` or `.size()` the expression `size` reads."""
        for node in self.context.subtree(size):
            source: cst.BaseExpression | None = None
            if isinstance(node, cst.Attribute) and node.attr.value == "shape":
                source = node.value
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "size"
            ):
                source = node.func.value
            if source is None or not _plain_reference(source):
                continue
            root = receiver_root(source)
            if root is None or root == _self(function) or self._metadata_only(root, function):
                continue
            shown = code_of(source)
            return SameAs(f"it is shaped after `{shown}`", proof=False, name=shown)
        return None

    def _layer(self, function: FunctionInfo, attr: str | None, evidence: str) -> Device | None:
        owner = function.owner
        if attr is None or owner is None:
            return None
        if attr in owner.sequential_heads:
            # `self.encoder = nn.Sequential(nn.Linear(...), ...)`: its first layer's weight.
            head = LAYER_PARAMETER[owner.sequential_heads[attr]]
            return ParamsOf(evidence, module=f"self.{attr}[0]", parameter=head)
        if attr not in owner.layers:
            return None
        return ParamsOf(
            evidence, module=f"self.{attr}", parameter=LAYER_PARAMETER[owner.layers[attr]]
        )

    def _flow(
        self,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """Evidence about the device that the value of `node` meets, in source order."""
        if depth > _MAX_FLOW_DEPTH:
            return
        parent = self.context.parent(node)
        if parent is None:
            return
        # libcst never subclasses its node classes, so the exact class picks the step.
        step = self._FLOW_STEPS.get(type(parent))
        if step is not None:
            yield from step(self, parent, node, function, own_names, line, depth)

    def _flow_into_method(
        self,
        parent: cst.Attribute,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """`node.method(...)`: the method's arguments, then its result."""
        if parent.value is not node:
            return
        call = self.context.parent(parent)
        if not (isinstance(call, cst.Call) and call.func is parent):
            return  # `.shape`, `.device`: no tensor flows on
        method = parent.attr.value
        if method == "type_as":
            # `type_as(t)` is `to(t.options())`: the tensor goes where `t` is.
            yield from self._meets_in_args(call, None, function, own_names, line)
            return
        if method in MOVE_METHODS:
            yield MOVED_ON
            return
        if method in LEAVES_DEVICE_METHODS:
            return
        if method not in SHAPE_ARGUMENT_METHODS:
            yield from self._meets_in_args(call, None, function, own_names, line)
        yield from self._flow(call, function, own_names, line, depth + 1)

    def _flow_into_argument(
        self,
        parent: cst.Arg,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        call = self.context.parent(parent)
        if isinstance(call, cst.Call):
            yield from self._into_call(call, parent, function, own_names, line, depth)

    def _flow_into_element(
        self,
        parent: cst.Element,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        container = self.context.parent(parent)
        if not isinstance(container, (cst.List, cst.Tuple)):
            return
        # Siblings meet only inside `torch.cat([...])`-like calls, not in any tuple
        # (`return x.shape, t` or `h = (h0, c0)` put nothing on one device).
        if self._is_concatenated(container):
            for element in container.elements:
                if element is not parent:
                    yield from self._meet(element.value, function, own_names, line)
        yield from self._flow(container, function, own_names, line, depth + 1)

    def _flow_into_operation(
        self,
        parent: cst.BinaryOperation,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        other = parent.right if parent.left is node else parent.left
        yield from self._meet(other, function, own_names, line, arithmetic=True)
        yield from self._flow(parent, function, own_names, line, depth + 1)

    def _flow_into_comparison_target(
        self,
        parent: cst.ComparisonTarget,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """`a < node`: the left operand."""
        comparison = self.context.parent(parent)
        if isinstance(comparison, cst.Comparison):
            yield from self._meet(comparison.left, function, own_names, line)
            yield from self._flow(comparison, function, own_names, line, depth + 1)

    def _flow_into_comparison(
        self,
        parent: cst.Comparison,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """`node < b`: the operands on the right."""
        for target in parent.comparisons:
            yield from self._meet(target.comparator, function, own_names, line)
        yield from self._flow(parent, function, own_names, line, depth + 1)

    def _flow_through(
        self,
        parent: cst.UnaryOperation | cst.IfExp,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """`-node`, `node if c else y`: the value flows on unchanged."""
        yield from self._flow(parent, function, own_names, line, depth + 1)

    def _flow_into_subscript(
        self,
        parent: cst.Subscript,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        if parent.value is node:
            # `eye[labels]`: a CPU tensor indexed by a tensor on a GPU fails ("indices should be
            # either on cpu or on the same device as the indexed tensor"), so it meets them.
            # Indices on the host say nothing: a tensor anywhere takes them.
            for element in parent.slice:
                if isinstance(element.slice, cst.Index):
                    for found in self._meet(element.slice.value, function, own_names, line):
                        if found is not ON_HOST:
                            yield found
            yield from self._flow(parent, function, own_names, line, depth + 1)

    def _flow_into_index(
        self,
        parent: cst.Index,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        # Used as an index: CPU indices into a CUDA tensor are legal, so no device is owed.
        yield AS_INDEX

    def _flow_into_aug_assign(
        self,
        parent: cst.AugAssign,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        if parent.target is node:
            # `acc += <value>`: the accumulator meets every value added to it.
            yield from self._meet(parent.value, function, own_names, line, arithmetic=True)
        else:
            yield from self._meet(parent.target, function, own_names, line, arithmetic=True)

    def _flow_into_return(
        self,
        parent: cst.Return,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        if depth < _MAX_FLOW_DEPTH:
            yield from self._returned(function, depth)

    def _flow_into_assignment(
        self,
        parent: cst.Assign | cst.AnnAssign,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        """`name = node`: every later use of the names it binds."""
        if parent.value is not node:
            return
        targets = (
            [t.target for t in parent.targets]
            if isinstance(parent, cst.Assign)
            else [parent.target]
        )
        names = [t.value for t in targets if isinstance(t, cst.Name)]
        own_names.update(names)
        for name in names:
            for use in self._uses_after(name, parent, function):
                yield from self._flow(use, function, own_names, line, depth + 1)

    #: How `_flow` follows a value into its parent, by the parent's class; any other parent
    #: ends the flow.
    _FLOW_STEPS: ClassVar[
        dict[
            type[cst.CSTNode],
            Callable[
                [DeviceInference, Any, cst.BaseExpression, FunctionInfo, set[str], int, int],
                Iterator[Device],
            ],
        ]
    ] = {
        cst.Attribute: _flow_into_method,
        cst.Arg: _flow_into_argument,
        cst.Element: _flow_into_element,
        cst.BinaryOperation: _flow_into_operation,
        cst.ComparisonTarget: _flow_into_comparison_target,
        cst.Comparison: _flow_into_comparison,
        cst.UnaryOperation: _flow_through,
        cst.IfExp: _flow_through,
        cst.Subscript: _flow_into_subscript,
        cst.Index: _flow_into_index,
        cst.AugAssign: _flow_into_aug_assign,
        cst.Return: _flow_into_return,
        cst.Assign: _flow_into_assignment,
        cst.AnnAssign: _flow_into_assignment,
    }

    def _returned(self, function: FunctionInfo, depth: int) -> Iterator[Device]:
        """A method's return value meets, in its callers of the same class, the module state
        they feed it to (`hidden = self.init_hidden(n); self.lstm(x, hidden)`). Only the
        module's own layers and parameters are named the same way in both methods."""
        owner = function.owner
        if owner is None or not owner.is_module:
            return
        for caller in _methods_of(owner.node):
            if caller is function.node:
                continue
            caller_info = self.facts.modules.function_info(caller)
            self_var = _self(caller_info)
            for call in self.context.subtree(caller.body):
                if not (
                    isinstance(call, cst.Call)
                    and self_attribute(call.func, self_var) == function.name
                ):
                    continue
                line = self.scopes.statement_start(call)
                for found in self._flow(call, caller_info, set(), line, depth + 1):
                    if isinstance(found, ParamsOf) and found.module.startswith("self"):
                        yield ParamsOf(
                            f"`{caller.name.value}` hands it on: {found.evidence}",
                            proof=found.proof,
                            module=found.module,
                            parameter=found.parameter,
                        )

    def _into_call(
        self,
        call: cst.Call,
        arg: cst.Arg,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[Device]:
        yield from self._meets_in_args(call, arg, function, own_names, line)
        if isinstance(call.func, cst.Attribute):
            layer_attr = self_attribute(call.func)
            layer = self._layer(function, layer_attr, f"it is fed to `self.{layer_attr}`")
            if layer is not None:
                yield layer
                return
            if layer_attr is None:
                # `scores.masked_fill(mask, ...)`: the receiver is what the value meets.
                yield from self._meet(call.func.value, function, own_names, line)
        qualified = self.names.qualified_name(call.func)
        if qualified in SAME_DEVICE_FUNCTIONS or qualified in ("torch.cat", "torch.stack"):
            yield from self._flow(call, function, own_names, line, depth + 1)

    def _meets_in_args(
        self,
        call: cst.Call,
        skip: cst.Arg | None,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
    ) -> Iterator[Device]:
        for other in call.args:
            if other is not skip and other.keyword is None:
                yield from self._meet(other.value, function, own_names, line)

    def _meet(
        self,
        other: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        *,
        arithmetic: bool = False,
    ) -> Iterator[Device]:
        """Evidence if `other` is a tensor whose device can be named at `line`. In arithmetic, a
        name not proven to be a tensor is still taken as one (a judgement): `x + t` puts `t`
        on `x`'s device whenever `x` is a tensor at all."""
        if isinstance(other, (cst.BinaryOperation, cst.Comparison)):
            # `(d >= 0)`, `a * b`: the value meets each operand.
            operands = (
                [other.left, other.right]
                if isinstance(other, cst.BinaryOperation)
                else [other.left, *(c.comparator for c in other.comparisons)]
            )
            for operand in operands:
                yield from self._meet(operand, function, own_names, line, arithmetic=arithmetic)
            return
        if isinstance(other, cst.UnaryOperation):
            yield from self._meet(other.expression, function, own_names, line)
            return
        moved = self._moved_operand(other, function, own_names, line)
        if moved is not None:
            yield from moved
            return
        root = receiver_root(other)
        if isinstance(other, cst.Call):
            output = self._output_meets(other, function, own_names, line)
            if output is not None:
                yield from output
                return
        state = self._registered_state(other, function)
        if state is not None:
            yield state
            return
        if root is None or root in own_names or root == "self":
            return
        shown = dotted_name(other) or root
        if self._moved_to_an_input(root, other, function):
            # `level = (torch.ones(n) * k).to(z.device)`: a new tensor put where an input is.
            yield SameAs(f"it meets `{shown}`, made on the input's device", name=root)
            return
        if not self.is_tensor_expression(other, function):
            if arithmetic and isinstance(other, cst.Name) and self._is_input(root, function, line):
                yield SameAs(f"it meets the input `{shown}` in arithmetic", proof=False, name=root)
            elif self._reshaped_input_field(other, root, function):
                yield SameAs(
                    f"it meets `{shown}`, a tensor the input holds (`view`/`unsqueeze`)",
                    name=root,
                )
            return
        origin = self._tensor_origin(root, function, line, set())
        if origin is not None and not self._made_without_device(origin, function):
            yield SameAs(f"it meets `{shown}`", name=origin)

    def _moved_operand(
        self, other: cst.BaseExpression, function: FunctionInfo, own_names: set[str], line: int
    ) -> list[Device] | None:
        """Evidence from an operand that a move put somewhere: on the host, or where the move
        says; None for an operand no move made."""
        if self._on_host(other):
            return [ON_HOST]
        target = self._move_target(other)
        if target is None:
            return None
        # `x.to(d)` is where the move puts it, not where `x` is: `d.device` names a tensor it
        # meets; any other device says nothing the value can follow.
        if isinstance(target, cst.Attribute) and target.attr.value == "device":
            return list(self._meet(target.value, function, own_names, line))
        return []

    def _move_target(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The device argument of the move a method chain makes (`x.to(d).float()` -> `d`,
        `x.cuda()` -> the call itself); None when the chain moves nothing (`.to(torch.half)`)."""
        current = node
        while isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute):
            if is_move_call(current):
                if current.func.attr.value == "cuda":
                    return current
                device = device_argument(current)
                if device is not None and not self.names.is_dtype(device):
                    return device
            current = current.func.value
        return None

    def _made_without_device(self, name: str, function: FunctionInfo) -> bool:
        """`b = torch.tensor([...])` and nothing else: a CPU tensor made beside the new one,
        whose device is as much in question as its own."""
        values = self.scopes.simple_assignments(function.node, name)
        return bool(values) and all(
            isinstance(v, cst.Call)
            and self.names.qualified_name(v.func) in TENSOR_FACTORIES - {"torch.as_tensor"}
            and keyword_argument(v, "device") is None
            for v in values
        )

    def _output_meets(
        self, call: cst.Call, function: FunctionInfo, own_names: set[str], line: int
    ) -> list[Device] | None:
        """Evidence from the output of `call` when it is a layer's (its parameters) or the
        class's own computation or the file's function (`self.subloss(z, q)`: its result is
        where the tensors handed to it are, a judgement); None for any other call."""
        layer_attr = self_attribute(call.func)
        layer = self._layer(function, layer_attr, f"it meets the output of `self.{layer_attr}`")
        if layer is not None:
            return [layer]
        if self._own_function(call, function) is None:
            return None
        return [
            dataclasses.replace(found, proof=False)
            for arg in call.args
            if arg.keyword is None
            for found in self._meet(arg.value, function, own_names, line)
        ]

    def _own_function(self, call: cst.Call, function: FunctionInfo) -> cst.FunctionDef | None:
        """The function a call runs when it is a method of the calling function's own class
        (`self.subloss(...)`, not a layer) or a function the file defines."""
        if isinstance(call.func, cst.Name):
            return self.scopes.module_functions().get(call.func.value)
        owner = function.owner
        attr = self_attribute(call.func)
        if owner is None or attr is None or attr in owner.layers:
            return None
        return next((m for m in _methods_of(owner.node) if m.name.value == attr), None)

    def _moved_to_an_input(self, name: str, at: cst.CSTNode, function: FunctionInfo) -> bool:
        """`name` holds a tensor a torch factory made and moved to the device of one of the
        function's inputs: `(torch.ones(n) * k).to(z.device)` (read as `t` or `t.float()`)."""
        value = self.scopes.value_at(name, at)
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "to"
            and len(value.args) == 1
        ):
            return False
        device = value.args[0].value
        receiver = value.func.value
        while isinstance(receiver, cst.BinaryOperation):
            receiver = receiver.left
        return (
            isinstance(device, cst.Attribute)
            and device.attr.value == "device"
            and isinstance(device.value, cst.Name)
            and device.value.value in function.params
            and isinstance(receiver, cst.Call)
            and self.names.qualified_name(receiver.func) in TENSOR_FACTORIES
        )

    def _on_host(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """`t.cpu()` or `t.to("cpu")`, what keeps its device (`.float()`, `.data`, `[i]`,
        arithmetic with it), or a name that every assignment before `node` binds to one of
        those (`x = x.gather(...)` asks about the `x` bound before it)."""
        if depth > _MAX_CPU_DEPTH:
            return False
        current = node
        while True:
            if copies_to_host(current):
                return True
            if isinstance(current, cst.BinaryOperation):
                return any(
                    self._on_host(operand, depth + 1) for operand in (current.left, current.right)
                )
            if isinstance(current, cst.Subscript) or (
                isinstance(current, cst.Attribute) and current.attr.value == "data"
            ):
                current = current.value
            elif (
                isinstance(current, cst.Call)
                and isinstance(current.func, cst.Attribute)
                and current.func.attr.value not in MOVE_METHODS
                and current.func.attr.value not in NON_TENSOR_MEMBERS
            ):
                current = current.func.value
            else:
                break
        if not isinstance(current, cst.Name):
            return False
        # The assignment `node` is part of (`x = x[:, :-1]`, `d = d * t`) is not before it.
        start = self.context.order(node)[0]
        values = [
            value
            for value in self.scopes.assigned_before(current.value, node)
            if not self.context.order(value)[0] <= start <= self.context.order(value)[1]
        ]
        return bool(values) and all(self._on_host(value, depth + 1) for value in values)

    def _registered_state(self, other: cst.BaseExpression, function: FunctionInfo) -> Device | None:
        """`self.bias` (or `self.bias.unsqueeze(0)`, `self.table[idx]`) where the class registers
        `bias` as a parameter or buffer: it lives where the module's state lives."""
        owner = function.owner
        if owner is None or not owner.is_module:
            return None
        node = other
        while True:
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value in MOVE_METHODS or node.func.attr.value in (
                    NON_TENSOR_MEMBERS
                ):
                    return None
                node = node.func.value
            else:
                break
        self_var = _self(function)
        attr = self_attribute(node, self_var)
        if attr is None or not self.facts.modules.registered_otherwise(owner.node, attr):
            return None
        return ParamsOf(
            f"it meets the module's registered `{self_var}.{attr}`",
            module=self_var,
            parameter=attr,
        )

    def _reshaped_input_field(
        self, other: cst.BaseExpression, root: str, function: FunctionInfo
    ) -> bool:
        """`seq_lens.view(-1, 1)` where `seq_lens = batch.seq_lens` was read from an input
        before: `view`/`unsqueeze` are methods of tensors only (NumPy arrays and numbers
        have neither), so the field is a tensor, on whatever device the input's tensors are."""
        if not (isinstance(other, cst.Call) and call_tail(other.func) in _TENSOR_ONLY_METHODS):
            return False
        if receiver_root(other.func) != root:
            return False
        bound = function.bindings.get(root, [])
        if len(bound) != 1 or not bound[0] < self.context.order(other)[0]:
            return False
        value = self.scopes.latest_binding(root, other)
        return (
            isinstance(value, cst.Attribute)
            and isinstance(value.value, cst.Name)
            and value.value.value in function.params
        )

    def _is_input(self, name: str, function: FunctionInfo, line: int) -> bool:
        """`name` is a parameter not rebound before `line`, in a function where no parameter is
        proven to be a tensor (otherwise the first tensor argument is the better judgement)."""
        if function.tensor_params or name not in function.params:
            return False
        return not any(b < line for b in function.bindings.get(name, []))

    def _tensor_origin(
        self, name: str, function: FunctionInfo, line: int, seen: set[str]
    ) -> str | None:
        """A name bound before `line` whose device is the device of tensor `name`, or None."""
        if name in seen:
            return None
        seen.add(name)
        bound_lines = function.bindings.get(name, [])
        if name in function.tensor_params and not any(b < line for b in bound_lines):
            return name
        if bound_lines and min(bound_lines) < line and self._is_local_tensor(name, function):
            return name
        if len(bound_lines) == 1:
            # `h_t = h[idx, t].squeeze(1)`, bound only after `line`: on the device of `h`,
            # which can be named there.
            values = self.scopes.assigned_values(name, function.node.body)
            root = _same_device_root(values[0]) if len(values) == 1 else None
            if root is not None and root != name:
                return self._tensor_origin(root, function, line, seen)
            if len(values) == 1:
                return self._operands_origin(values[0], function, line, seen)
        return None

    def _operands_origin(
        self, value: cst.BaseExpression, function: FunctionInfo, line: int, seen: set[str]
    ) -> str | None:
        """`torch.mm(a, b.t())`: a torch function of tensors computes on the device they share,
        so its result is where its first operand that can be named at `line` is (also scaled:
        `torch.mm(a, b) / t`)."""
        if isinstance(value, cst.BinaryOperation):
            return self._operands_origin(value.left, function, line, seen) or self._operands_origin(
                value.right, function, line, seen
            )
        if not (
            isinstance(value, cst.Call) and takes_tensors(self.names.qualified_name(value.func))
        ):
            return None
        for arg in value.args:
            if arg.keyword is not None or arg.star:
                continue
            root = _same_device_root(arg.value)
            origin = self._tensor_origin(root, function, line, seen) if root else None
            if origin is not None:
                return origin
        return None

    def _is_local_tensor(
        self, name: str, function: FunctionInfo, seen: set[str] | None = None
    ) -> bool:
        """An assignment to local `name` computes a tensor from tensors of this function.

        `seen` holds the names already being asked about, so `a = b + 1; b = a * 2` ends.
        """
        seen = {name} if seen is None else seen | {name}
        values = [
            assign.value
            for assign in self.context.subtree(function.node.body)
            if isinstance(assign, cst.Assign)
            and any(bound.value == name for t in assign.targets for bound in target_names(t.target))
        ]
        return any(self.is_tensor_expression(value, function, seen) for value in values)

    def is_tensor_expression(
        self, node: cst.BaseExpression, function: FunctionInfo, seen: set[str] | None = None
    ) -> bool:
        """Whether `node` evaluates to a tensor derived from this function's tensors."""
        seen = set() if seen is None else seen
        if isinstance(node, cst.Name):
            if node.value in function.tensor_params:
                return True
            if node.value in seen or node.value not in function.bindings:
                return False
            seen.add(node.value)
            return self._is_local_tensor(node.value, function, seen)
        if isinstance(node, cst.Attribute):
            if node.attr.value in NON_TENSOR_MEMBERS:
                return False
            return self.is_tensor_expression(node.value, function, seen)
        if isinstance(node, cst.Subscript):
            return self.is_tensor_expression(node.value, function, seen)
        if isinstance(node, cst.BinaryOperation):
            return self.is_tensor_expression(
                node.left, function, seen
            ) or self.is_tensor_expression(node.right, function, seen)
        if isinstance(node, cst.UnaryOperation):
            return self.is_tensor_expression(node.expression, function, seen)
        if isinstance(node, cst.Comparison):
            return self.is_tensor_expression(node.left, function, seen) or any(
                self.is_tensor_expression(c.comparator, function, seen) for c in node.comparisons
            )
        if isinstance(node, cst.Call):
            return self._is_tensor_call(node, function, seen)
        return False

    def _is_tensor_call(self, call: cst.Call, function: FunctionInfo, seen: set[str]) -> bool:
        """A layer of the module, a tensor method of a tensor, or a torch function given one."""
        layer_attr = self_attribute(call.func)
        own = self._own_function(call, function)
        if own is not None:
            return self.facts.modules.returns_tensor(own)  # `sinkhorn(out)`, `self.score(x)`
        if layer_attr is not None:
            owner = function.owner
            return owner is not None and (
                layer_attr in owner.layers
                or layer_attr in self.facts.modules.torch_layers(owner.node)
            )
        if isinstance(call.func, cst.Attribute):
            if call.func.attr.value in NON_TENSOR_MEMBERS:
                return False
            if self.is_tensor_expression(call.func.value, function, seen):
                return True
        qualified = self.names.qualified_name(call.func)
        if qualified in TENSOR_FACTORIES and _given_a_device(call):
            return True  # `torch.randn(n, z, device=device)`: a tensor on a named device
        if qualified is not None and qualified.startswith("torch."):
            return any(
                self.is_tensor_expression(arg.value, function, seen)
                or (
                    isinstance(arg.value, (cst.List, cst.Tuple))
                    and any(
                        self.is_tensor_expression(e.value, function, seen)
                        for e in arg.value.elements
                    )
                )
                for arg in call.args
            )
        return False

    def _is_concatenated(self, container: cst.CSTNode) -> bool:
        arg = self.context.parent(container)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and self.names.qualified_name(call.func) in (
            CONCATENATIONS
        )

    def _uses_after(
        self, name: str, statement: cst.CSTNode, function: FunctionInfo
    ) -> Iterator[cst.Name]:
        """The uses of `name` after `statement`, up to the end of the first statement that
        binds it again whenever `statement` has run (`x = x.to(d)`: later uses hold another
        tensor; the flow reaches them through that statement's value if it derives from it)."""
        end = self.context.order(statement)[1]
        rebound_until: int | None = None
        for candidate in self.context.subtree(function.node.body):
            if not isinstance(candidate, cst.Name) or candidate.value != name:
                continue
            position = self.context.order(candidate)[0]
            if position <= end:
                continue
            if rebound_until is not None and position > rebound_until:
                return
            parent = self.context.parent(candidate)
            if isinstance(parent, cst.AssignTarget):
                assign = self.context.parent(parent)
                if (
                    rebound_until is None
                    and assign is not None
                    and self._runs_whenever(assign, statement, function)
                ):
                    rebound_until = self.context.order(assign)[1]
                continue
            if isinstance(parent, cst.Attribute) and parent.attr is candidate:
                continue
            yield candidate

    def _runs_whenever(
        self, later: cst.CSTNode, first: cst.CSTNode, function: FunctionInfo
    ) -> bool:
        """Every branch or loop around `later` (in `function`) is also around `first`."""
        around_first = set(map(id, self.context.ancestors(first)))
        for ancestor in self.context.ancestors(later):
            if ancestor is function.node:
                return True
            if isinstance(ancestor, _BRANCHES) and id(ancestor) not in around_first:
                return False
        return True

    # -- a module that spreads its work over its own devices ------------------------------------

    def device_list_element(
        self, expr: cst.BaseExpression | None, function: FunctionInfo
    ) -> str | None:
        """`self.device_ids[k]` (as a move's device): an element of a list of devices the
        module stores; the list's name, else None."""
        if not isinstance(expr, cst.Subscript) or function.owner is None:
            return None
        self_var = _self(function)
        attr = self_attribute(expr.value, self_var)
        if attr is None or attr in function.owner.layers:
            return None
        if attr in self.facts.modules.tensor_attributes(function.owner.node):
            return None
        return f"{self_var}.{attr}"

    def model_code_moving(
        self, call: cst.Call, offload_to: cst.BaseExpression | None = None
    ) -> FunctionInfo | None:
        """The model code (not run while the module is built) in which `call` moves a value,
        unless the move is one to keep: a plain function's deliberate offload to `offload_to`
        (a second GPU; see `deliberate_offload`) or a move among the devices the method spreads
        its work over (`spread_move`)."""
        if offload_to is not None and self.deliberate_offload(call, gpu_index(offload_to)):
            return None
        function = self.facts.modules.model_code_after_construction(call)
        if function is None or self.spread_move(call, function):
            return None
        if self._transfers_an_input(call, function):
            return None
        return function

    def _transfers_an_input(self, call: cst.Call, function: FunctionInfo) -> bool:
        """`if not blocks.is_cuda and torch.cuda.is_available(): blocks = blocks.cuda()`: the
        function moves its inputs under a test of where an input is and of whether a GPU is
        there, a transfer of its data to the GPU for its work, on purpose."""
        if not isinstance(call.func, cst.Attribute):
            return False
        root = receiver_root(call.func.value)
        if root is None or root not in function.params:
            return False
        for ancestor in self.context.ancestors(call):
            if ancestor is function.node:
                return False
            if not isinstance(ancestor, cst.If):
                continue
            tested = self.context.subtree(ancestor.test)
            if any(
                isinstance(node, cst.Attribute)
                and node.attr.value in ("is_cuda", "device")
                and isinstance(node.value, cst.Name)
                and node.value.value in function.params
                for node in tested
            ) and any(
                isinstance(node, cst.Call)
                and self.names.qualified_name(node.func) == "torch.cuda.is_available"
                for node in tested
            ):
                return True
        return False

    def fixed_move(
        self, call: cst.Call, device: cst.BaseExpression, *, offload: bool
    ) -> tuple[FunctionInfo, Device] | None:
        """Model code in which `call` moves a value to `device`, fixed outside the call (see
        `fixed_outside`), and that fixed device; None where the move is right or one to keep
        (`model_code_moving`; `offload`: a second GPU may be a plain function's offload). A
        device name stored at construction is a latent hazard even where the script runs on
        that one device today: replicas, a later `model.to(other)` or a shard break it. In a
        library's helper class around a model (`_library_helper_of_tensors`), only a literal
        GPU counts."""
        function = self.model_code_moving(call, offload_to=device if offload else None)
        if function is not None:
            fixed = self.fixed_outside(device, function)
            return (function, fixed) if fixed is not None else None
        helper = self._library_helper_of_tensors(call)
        fixed = self.fixed_outside(device, helper) if helper is not None else None
        return (helper, fixed) if helper is not None and isinstance(fixed, Literal) else None

    def _library_helper_of_tensors(self, call: cst.Call) -> FunctionInfo | None:
        """A method taking tensors of a helper class that holds a model (a loss built around
        it, a sampler) in a file that neither trains nor runs on several GPUs: a library's
        code, which no script-level rule reads. Only a literal CUDA device is judged there; a
        device variable in such a class is the script's choice."""
        flow = self.facts.flow
        if flow.trains() or flow.runs_on_several_gpus():
            return None
        function = self.facts.modules.enclosing_function(call)
        if function is None or function.owner is None or not function.owner.drives_models:
            return None
        if not function.tensor_params or self.facts.modules.is_construction(function):
            return None
        return function

    def device_the_class_reads(self, function: FunctionInfo, moved: cst.CSTNode) -> Named | None:
        """In a plain class's method (a loss or sampler around a model), the device the class's
        code reads elsewhere: the model's (`self.model.device`) or that of a tensor argument
        this method takes too (`device = targets.device` in `__call__(self, p, targets)`);
        never the device of the value being moved. A judgement, for a literal device that
        nothing else replaces."""
        owner = function.owner
        if owner is None or owner.is_module or owner.is_dataset:
            return None
        own = {n.value for n in self.context.subtree(moved) if isinstance(n, cst.Name)}
        cls = owner.node.name.value
        for node in self.context.of_type(owner.node.body, cst.Attribute):
            if node.attr.value != "device":
                continue
            base = node.value
            if isinstance(base, cst.Name):
                if base.value in function.params and base.value not in own:
                    return Named(
                        f"a judgement: `{cls}` takes its device from `{base.value}` elsewhere",
                        proof=False,
                        name=f"{base.value}.device",
                    )
                continue
            attr = self_attribute(base)
            if attr is not None and attr not in owner.device_attrs:
                return Named(
                    f"a judgement: `{cls}` uses the device of `self.{attr}` elsewhere",
                    proof=False,
                    name=f"self.{attr}.device",
                )
        return None

    def copied_back(self, moved: cst.CSTNode) -> Named | None:
        """A move back after a round trip to the host: the block holding `moved` first copies a
        tensor of the function to the CPU (`_boxes = boxes.cpu().float()`, an out-of-memory
        fallback) and computes on the copies. A judgement: the results return to where that
        tensor was."""
        statement = next(
            (a for a in self.context.ancestors(moved) if isinstance(a, cst.SimpleStatementLine)),
            None,
        )
        block = self.context.parent(statement) if statement is not None else None
        if not isinstance(block, cst.IndentedBlock):
            return None
        for earlier in block.body:
            if earlier is statement:
                return None
            assign = name_assignment(earlier)
            if assign is None:
                continue
            for inner in self.context.subtree(assign.value):
                if not isinstance(inner, cst.BaseExpression) or not copies_to_host(inner):
                    continue
                if any(isinstance(a, _COMPREHENSIONS) for a in self.context.ancestors(inner)):
                    continue  # `tuple(t.cpu() for t in xs)`: `t` is the comprehension's own
                root = receiver_root(inner)
                # `boxes = boxes.cpu()` leaves no name for where `boxes` was.
                bound = {n.value for t in assign.targets for n in target_names(t.target)}
                if root is not None and root != "self" and root not in bound:
                    return Named(
                        f"a judgement: it returns to where `{root}` was copied to the CPU from "
                        f"(line {self.scopes.line_of(earlier)})",
                        proof=False,
                        name=f"{root}.device",
                    )
        return None

    def made_for(self, move: cst.Call, function: FunctionInfo) -> Device | None:
        """`t = torch.zeros(b, n)`, later `t = t.cuda()` (or `torch.cat([t, u]).to(device)`):
        the device the factories that made the moved tensors need (where the tensor they are
        shaped after or meet lives), when they agree, for the move to name."""
        receiver = move.func.value if isinstance(move.func, cst.Attribute) else None
        names: list[cst.BaseExpression] = [receiver] if receiver is not None else []
        if (
            isinstance(receiver, cst.Call)
            and self.names.qualified_name(receiver.func) in CONCATENATIONS
            and receiver.args
            and isinstance(receiver.args[0].value, (cst.List, cst.Tuple))
        ):
            # `torch.cat([xs, ys], 1).to(device)`: where the pieces are made for.
            names = [element.value for element in receiver.args[0].value.elements]
        pieces = {name.value for name in names if isinstance(name, cst.Name)}
        found: set[str] = set()
        needs: list[Device] = []
        for name in names:
            factory = self._factory_binding(name, move) if isinstance(name, cst.Name) else None
            needed = self.needed_by(factory, function) if factory is not None else None
            expression = needed.expression() if needed is not None else None
            if needed is None or isinstance(needed, Unknown) or expression is None:
                return None
            if isinstance(needed, SameAs) and needed.name in pieces:
                continue  # `ys` meets `xs` in the cat: where `xs` goes, it goes
            found.add(expression)
            needs.append(needed)
        return needs[0] if len(found) == 1 else None

    def _factory_binding(self, name: cst.Name, at: cst.CSTNode) -> cst.Call | None:
        """The torch factory in the value last bound to `name` before `at`
        (`Variable(torch.LongTensor(b, n)).long()`)."""
        built = self.scopes.latest_binding(name.value, at)
        return (
            next(
                (
                    inner
                    for inner in self.context.subtree(built)
                    if isinstance(inner, cst.Call)
                    and self.names.qualified_name(inner.func)
                    in TENSOR_FACTORIES | LEGACY_CONSTRUCTORS
                ),
                None,
            )
            if built is not None
            else None
        )

    def spread_move(self, call: cst.Call, function: FunctionInfo) -> bool:
        """A move (`.to(...)`, `.cuda(...)`, `device=`) to an element of the device list that
        `function` spreads its work over."""
        owner = self.device_list_element(device_argument(call), function)
        return owner is not None and owner == self.spread_devices(function)

    def _places_its_layers(self, classdef: cst.ClassDef, self_var: str) -> bool:
        """The class moves its own submodules to devices of its choosing (`self.head.to(...)`,
        `self.enc.cuda(1)`), or a method spreads its work over a device list: model
        parallelism by hand, where one layer's device says nothing about another's."""
        for node in self.context.of_type(classdef.body, cst.Call):
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("to", "cuda")
                and node.args
                and self_attribute(func.value, self_var) is not None
            ):
                return True
        for member in classdef.body.body:
            if isinstance(member, cst.FunctionDef) and self.spread_devices(
                self.facts.modules.function_info(member)
            ):
                return True
        return False

    def spread_devices(self, function: FunctionInfo) -> str | None:
        """The module's device list that `function` spreads its work over (moves to two or
        more different elements of it: `x.cuda(self.device_id[i])` in a loop, `[0]` and
        `[1]`): deliberate model parallelism inside the module; None when it does not."""
        elements: dict[str, set[str]] = {}
        for node in self.context.of_type(function.node.body, cst.Call):
            device = _move_target(node)
            owner = self.device_list_element(device, function)
            if owner is not None and device is not None:
                elements.setdefault(owner, set()).add(code_of(device))
        return next((owner for owner, found in elements.items() if len(found) > 1), None)

    def inputs_meeting_placed(
        self, function: FunctionInfo
    ) -> Iterator[tuple[cst.BaseExpression, str]]:
        """In a function that spreads its work over the module's devices: (input expression,
        placed local) where a value computed from a parameter without any move (on the
        caller's device) is handed to a method of, or combined with, a local the function put
        on one of those devices (`one_hot.scatter_(1, label.view(-1, 1), 1)`)."""
        owner = self.spread_devices(function)
        if owner is None:
            return
        placed: set[str] = set()
        for assign in self.context.of_type(function.node.body, cst.Assign):
            # Put there by a move, or computed from what was (`torch.zeros_like(logits)`).
            if any(
                self.device_list_element(_move_target(inner), function) == owner
                or (isinstance(inner, cst.Name) and inner.value in placed)
                for inner in self.context.subtree(assign.value)
            ):
                for target in assign.targets:
                    if isinstance(target.target, cst.Name):
                        placed.add(target.target.value)
        inputs = {
            name for name in function.params if name not in function.bindings and name not in placed
        }
        for node in self.context.of_type(function.node.body, (cst.Call, cst.BinaryOperation)):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value in placed
                and node.func.attr.value not in MOVE_METHODS
            ):
                for arg in node.args:
                    if _unmoved_from(arg.value, inputs):
                        yield arg.value, node.func.value.value
            elif isinstance(node, cst.BinaryOperation):
                for side, other in ((node.left, node.right), (node.right, node.left)):
                    if (
                        isinstance(other, cst.Name)
                        and other.value in placed
                        and _unmoved_from(side, inputs)
                    ):
                        yield side, other.value

    # -- a device fixed outside the call -------------------------------------------------------

    def fixed_outside(self, value: cst.BaseExpression, function: FunctionInfo) -> Device | None:
        """`value` names a device fixed before the call runs: a CUDA literal, a global device
        variable, or a device attribute stored in `__init__` (a class without a `device`
        property); None otherwise."""
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if isinstance(text, str) and text.startswith("cuda"):
                return Literal(f"the literal {value.value}", text=text)
            return None
        if isinstance(value, cst.Call) and self.names.qualified_name(value.func) == "torch.device":
            first = value.args[0].value if value.args else None
            if isinstance(first, cst.SimpleString) and str(first.evaluated_value).startswith(
                "cuda"
            ):
                return Literal(f"`{code_of(value)}`", text=str(first.evaluated_value))
            if isinstance(first, cst.IfExp) and self._cuda_if_available(first):
                return Literal(f"`{code_of(value)}`", text="cuda")
            return None
        if isinstance(value, cst.IfExp) and self._cuda_if_available(value):
            return Literal(f"`{code_of(value)}`", text="cuda")
        owner = function.owner
        option = self._stored_option_device(value, function)
        if option is not None:
            return option
        if isinstance(value, cst.Attribute):
            attr = self_attribute(value)
            if attr is None or owner is None or (owner.has_device_property and attr == "device"):
                return None  # Lightning's and Hugging Face's `self.device`: the weights' device
            if attr in owner.device_attrs:
                return Named(f"`self.{attr}`, stored in `__init__`", name=f"self.{attr}")
            return None
        if isinstance(value, cst.Name):
            name = value.value
            if name in function.params:
                return None
            if name in function.bindings:
                return self._local_cuda_literal(name, function)
            bindings = self.scopes.module_bindings().get(name)
            if bindings and (
                "dev" in name.lower()
                or any(
                    "torch.device" in code_of(node).lower() or "cuda" in code_of(node).lower()
                    for node in bindings
                )
            ):
                return Named(f"the global `{name}`", name=name)
        return None

    def _cuda_if_available(self, choice: cst.IfExp) -> bool:
        """`"cuda" if torch.cuda.is_available() else "cpu"`: the default GPU whenever there is
        one, whatever device the tensors at hand are on."""
        body = choice.body
        return (
            isinstance(body, cst.SimpleString)
            and str(body.evaluated_value).startswith("cuda")
            and any(
                isinstance(node, cst.Call)
                and self.names.qualified_name(node.func) == "torch.cuda.is_available"
                for node in self.context.subtree(choice.test)
            )
        )

    def _device_chooser(self, bindings: list[Binding]) -> str | None:
        """`_device = get_device()` (every binding): a function of the project, imported or
        defined in the file, called with no arguments: it picks a device for the whole
        program, not that of the tensors at hand. Its name, or None."""
        names: set[str] = set()
        for binding in bindings:
            value = binding.value
            if not (
                binding.kind == "assign"
                and isinstance(value, cst.Call)
                and not value.args
                and isinstance(value.func, cst.Name)
                and (
                    self.names.binds_from_import(value.func.value)
                    or value.func.value in self.scopes.module_functions()
                )
            ):
                return None
            names.add(value.func.value)
        return next(iter(names)) if len(names) == 1 else None

    def _local_cuda_literal(self, name: str, function: FunctionInfo) -> Device | None:
        """`device = torch.device("cuda")` (every binding of the local `name` a CUDA literal):
        model code that picks a device of its own, whatever device its inputs are on."""
        bindings = self.scopes.table(function.node).bindings.get(name, [])
        chooser = self._device_chooser(bindings)
        if chooser is not None:
            return Named(
                f"`{name}`, set by `{chooser}()`, which sees none of this call's tensors",
                name=name,
            )
        found: list[Literal] = []
        for binding in bindings:
            if binding.kind != "assign" or binding.value is None:
                return None
            literal = self.fixed_outside(binding.value, function)
            if not isinstance(literal, Literal):
                return None
            found.append(literal)
        if not found:
            return None
        return Literal(f"`{name}`, set to {found[0].evidence}", text=found[0].text)

    def _stored_option_device(
        self, value: cst.BaseExpression, function: FunctionInfo
    ) -> Device | None:
        """`self.opt.device` (an options object the constructor kept) or `args.device` (a
        module-level options object): a device chosen once, outside the forward pass."""
        if not (isinstance(value, cst.Attribute) and names_a_device(value.attr.value)):
            return None
        holder = value.value
        kept = self_attribute(holder)
        owner = function.owner
        if kept is not None and owner is not None:
            if any(
                isinstance(call, cst.Call) and self_attribute(call.func) == kept
                for call in self.context.of_type(owner.node.body, cst.Call)
            ):
                return None  # `self.encoder(x)`: a submodule, whose `.device` is its weights'
            init = method(owner.node, "__init__")
            parameters = {p.name.value for p in init.params.params} if init is not None else set()
            for assign in self.context.of_type(init.body, cst.Assign) if init is not None else ():
                if (
                    len(assign.targets) == 1
                    and self_attribute(assign.targets[0].target) == kept
                    and isinstance(assign.value, cst.Name)
                    and assign.value.value in parameters - {"self"}
                ):
                    return Named(
                        f"`{code_of(value)}`, an option the constructor keeps",
                        name=code_of(value),
                    )
            return None
        if isinstance(holder, cst.Name):
            name = holder.value
            if name in function.params or name in function.bindings or name == "self":
                return None
            if self.scopes.module_bindings().get(name):
                return Named(f"the global `{code_of(value)}`", name=code_of(value))
        return None

    # -- where a value lives ----------------------------------------------------------------

    def placed(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> Device | None:
        """The device `expr` provably lives on as seen at `at`, when that is not the CPU: moved
        there (`.cuda()` -> Current, `.to(d)` -> Named/Literal), the output of a model moved
        there (ParamsOf), a factory with `device=`, or computed from one of these; None when
        it is on the CPU or nothing says."""
        if depth > _MAX_PLACED_DEPTH:
            return None
        # libcst never subclasses its node classes, so the exact class picks the rule.
        rule = self._PLACED_BY_KIND.get(type(expr))
        return rule(self, expr, at, depth) if rule is not None else None

    def _placed_call(self, call: cst.Call, at: cst.CSTNode, depth: int) -> Device | None:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in LEAVES_DEVICE_METHODS or method in NON_TENSOR_MEMBERS:
                return None
            moved = self._moved_by(call, method, at)
            if moved is not None:
                return None if isinstance(moved, CPU) else moved
        if dotted_name(func) is not None:
            output = self._model_output(call)
            if output is not None:
                return output
            qualified = self.names.qualified_name(func)
            if qualified is not None and qualified.startswith("torch."):
                return self._placed_torch_call(call, at, depth)
            if qualified is not None and self._is_module_instance(func, at):
                return self._any_argument(call, at, depth)
        if isinstance(func, cst.Attribute):
            return self.placed(func.value, at, depth + 1)
        return None

    def _moved_by(self, call: cst.Call, method: str, at: cst.CSTNode) -> Device | None:
        """Where `.cuda()` / `.to(d)` moves its receiver, CPU for the host; None for another
        method or a device whose kind nothing tells."""
        if method == "cuda":
            return Current("moved with `.cuda()`")
        if method != "to":
            return None
        device = device_argument(call)
        kind = (
            self.facts.moves.device_kind(device, self.scopes.enclosing_function(at))
            if device
            else None
        )
        if kind == "cpu":
            return CPU("moved to the CPU")
        if kind is None or device is None:
            return None
        text = code_of(device)
        evidence = f"moved with `.to({text})`"
        literal = string_device(device)
        if literal is not None:
            return Literal(evidence, text=literal)
        return Named(evidence, name=text)

    def cpu_factory_of(self, value: cst.BaseExpression, at: cst.CSTNode) -> cst.Call | None:
        """The CPU factory call that makes `value` (no `device=`): the call itself, the value
        a name holds at `at` (`t = torch.tensor([x])`, updated in place since: `t += 1`),
        through tensor methods that keep the device (`.float()`), or the element of a
        comprehension (`[torch.zeros(n) for _ in ranks]`); None otherwise."""
        held = dotted_name(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if held is not None:
            # `self.n = torch.as_tensor(k)` earlier in the function holds as a local does.
            bound = self.scopes.value_at(held, at, through_updates=True)
            if bound is None:
                return None
            value = bound
        if isinstance(value, cst.ListComp):
            value = value.elt
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in DEVICE_KEEPING_METHODS
        ):
            value = value.func.value
        if not isinstance(value, cst.Call) or self.names.qualified_name(value.func) not in (
            CPU_SOURCES
        ):
            return None
        return value if keyword_argument(value, "device") is None else None

    def operand_on_a_device(self, value: cst.BaseExpression, depth: int = 0) -> str | None:
        """`torch.tensor(w) * loss` in a script's code, where `loss` is computed from a moved
        model's output (or a tensor moved to a device): the dotted name of the operand that
        the new tensor meets in arithmetic or a comparison. The new tensor is `value`, carried
        on through methods that keep its shape and device (`.unsqueeze(1)`, `.long()`), the
        operations it takes part in, and the names they are assigned to (a few uses each:
        `mask = torch.arange(n) < counts`, then `hidden * mask.unsqueeze(-1)`). Only a name:
        its `.device` is where the new tensor must live."""
        if depth > _MAX_OPERAND_DEPTH:
            return None
        node = value
        while (
            isinstance(parent := self.context.parent(node), cst.Attribute)
            and parent.value is node
            and parent.attr.value in _CARRYING_METHODS
            and isinstance(call := self.context.parent(parent), cst.Call)
            and call.func is parent
        ):
            node = call
        parent = self.context.parent(node)
        if isinstance(parent, cst.ComparisonTarget):
            parent = self.context.parent(parent)  # the right of `a < b`
        if isinstance(parent, cst.Assign) and parent.value is node:
            name = self.scopes.assigned_name(node)
            if name is None:
                return None
            uses = [
                use
                for use in self.scopes.names_after(self.scopes.enclosing_scope(node), name, parent)
                if not self.scopes.within(use, parent)
            ]
            for use in uses[:_MAX_OPERAND_USES]:
                found = self.operand_on_a_device(use, depth + 1)
                if found is not None:
                    return found
            return None
        if isinstance(parent, cst.BinaryOperation):
            others = [parent.right if parent.left is node else parent.left]
        elif isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1:
            right = parent.comparisons[0].comparator
            others = [right if parent.left is node else parent.left]
        else:
            return None
        for other in others:
            shown = dotted_name(other)
            member = isinstance(other, cst.Attribute) and other.attr.value in NON_TENSOR_MEMBERS
            if shown is not None and not member and self.placed(other, parent) is not None:
                return shown
        # What the operation makes holds the new tensor's values: it meets what that meets.
        return self.operand_on_a_device(parent, depth + 1)

    def _model_output(self, call: cst.Call) -> Device | None:
        """`model(x)`, `model.generate(...)`: the output of a model moved to a device."""
        func = call.func
        model = self.facts.flow.model_device(
            func.value
            if isinstance(func, cst.Attribute) and func.attr.value in ("generate", "forward")
            else func,
            call,
        )
        if model is None:
            return None
        return ParamsOf(f"output of `{model.model}`, which is on a device", module=model.model)

    def _placed_torch_call(self, call: cst.Call, at: cst.CSTNode, depth: int) -> Device | None:
        """A torch function: the accelerator its `device=` names, else its arguments'."""
        keyword = keyword_argument(call, "device")
        if keyword is not None and self.facts.moves.device_kind(
            keyword.value, self.scopes.enclosing_function(at)
        ) in ("accelerator", "device"):
            text = code_of(keyword.value)
            return Named(f"created with `device={text}`", name=text)
        return self._any_argument(call, at, depth)

    def _placed_name(self, name: cst.Name, at: cst.CSTNode, depth: int) -> Device | None:
        """The value of the binding `at` reads, else a sum built up in the scope."""
        binding = self._reaching(name.value, at)
        if binding is not None and binding[0] in ("assign", "unpack") and binding[1]:
            value = binding[1]
            if binding[0] == "unpack":
                value = self._unpacked_element(name.value, value) or value
            # The bound value's own names are read where it is (`x = Variable(x)`: the `x`
            # moved before it), not at the use.
            found = self.placed(value, value, depth + 1)
            if found is not None:
                return found
        return self._accumulated(name.value, at, depth)

    def _unpacked_element(self, name: str, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """`x, y = x.to(device), y.to(device)`: the element of the tuple that `name` takes."""
        assign = self.context.parent(value)
        if not isinstance(value, (cst.Tuple, cst.List)) or not isinstance(assign, cst.Assign):
            return None
        for target in assign.targets:
            names = target.target
            if not isinstance(names, (cst.Tuple, cst.List)) or len(names.elements) != len(
                value.elements
            ):
                continue
            for bound, element in zip(names.elements, value.elements):
                if isinstance(element, cst.StarredElement):
                    return None
                if isinstance(bound.value, cst.Name) and bound.value.value == name:
                    return element.value
        return None

    def _placed_attribute(self, expr: cst.Attribute, at: cst.CSTNode, depth: int) -> Device | None:
        if expr.attr.value in NON_TENSOR_MEMBERS or (dotted_name(expr) or "").startswith("self."):
            return None
        return self.placed(expr.value, at, depth + 1)

    def _placed_subscript(self, expr: cst.Subscript, at: cst.CSTNode, depth: int) -> Device | None:
        return self.placed(expr.value, at, depth + 1)

    def _placed_operation(
        self, expr: cst.BinaryOperation, at: cst.CSTNode, depth: int
    ) -> Device | None:
        return self.placed(expr.left, at, depth + 1) or self.placed(expr.right, at, depth + 1)

    def _placed_unary(self, expr: cst.UnaryOperation, at: cst.CSTNode, depth: int) -> Device | None:
        return self.placed(expr.expression, at, depth + 1)

    def _placed_dict(self, expr: cst.Dict, at: cst.CSTNode, depth: int) -> Device | None:
        """The first value of the dict display that is placed."""
        for element in expr.elements:
            if isinstance(element, cst.DictElement):
                found = self.placed(element.value, at, depth + 1)
                if found is not None:
                    return found
        return None

    def _placed_elements(
        self,
        comprehension: cst.DictComp | cst.ListComp | cst.SetComp | cst.GeneratorExp,
        at: cst.CSTNode,
        depth: int,
    ) -> Device | None:
        """`{k: v.to(device) for k, v in batch.items()}`: the device every element is moved
        to, when it can be named outside the comprehension (not `v.device`)."""
        element = (
            comprehension.value if isinstance(comprehension, cst.DictComp) else comprehension.elt
        )
        found = self.placed(element, at, depth + 1)
        if found is None:
            return None
        text = found.expression()
        local = {
            bound.value
            for clause in self.context.of_type(comprehension, cst.CompFor)
            for bound in target_names(clause.target)
        }
        root = (dotted_name(cst.parse_expression(text)) or "").split(".")[0] if text else ""
        return None if root in local else found

    #: How `placed` reads each kind of expression, by its class; any other kind tells nothing.
    _PLACED_BY_KIND: ClassVar[
        dict[
            type[cst.CSTNode],
            Callable[[DeviceInference, Any, cst.CSTNode, int], Device | None],
        ]
    ] = {
        cst.Call: _placed_call,
        cst.Name: _placed_name,
        cst.Attribute: _placed_attribute,
        cst.Subscript: _placed_subscript,
        cst.BinaryOperation: _placed_operation,
        cst.UnaryOperation: _placed_unary,
        cst.DictComp: _placed_elements,
        cst.ListComp: _placed_elements,
        cst.SetComp: _placed_elements,
        cst.GeneratorExp: _placed_elements,
        cst.Dict: _placed_dict,
    }

    def _reaching(self, name: str, at: cst.CSTNode) -> tuple[str, cst.BaseExpression | None] | None:
        """(kind, value) of the binding of `name` that `at` reads: the last one before it, not
        counting the assignment `at` is the value of (`x = f(x)` reads the previous `x`)."""
        function = self.scopes.enclosing_function(at)
        table, table_function = self.scopes.lookup(name, function)
        bindings = table.bindings.get(name, [])
        if table_function is function:
            position = self.context.order(at)[0]
            bindings = [
                b
                for b in bindings
                if b.position < position
                and not (
                    b.value is not None
                    and self.context.order(b.value)[0] <= position <= self.context.order(b.value)[1]
                )
            ]
        if not bindings:
            return None
        return bindings[-1].kind, bindings[-1].value

    def _accumulated(self, name: str, at: cst.CSTNode, depth: int) -> Device | None:
        """`total = 0` then `total += loss` (a device tensor) before `at`: the sum is a tensor
        on that device."""
        function = self.scopes.enclosing_function(at)
        scope: cst.CSTNode = function if function is not None else self.context.module
        position = self.context.order(at)[0]
        for node in self.scopes.nodes(scope):
            if (
                isinstance(node, cst.AugAssign)
                and isinstance(node.target, cst.Name)
                and node.target.value == name
                and self.context.order(node)[1] < position
            ):
                found = self.placed(node.value, node, depth + 1)
                if found is not None:
                    return dataclasses.replace(
                        found, evidence=f"`{name}` adds up a tensor {found.evidence}"
                    )
        return None

    def list_of_placed(self, name: str, at: cst.CSTNode) -> Device | None:
        """`losses = []` (the binding `at` reads) filled only by `losses.append(<placed
        tensor>)` in the scope of `at`, up to the name's next binding: where the first appended
        tensor is; None when anything else fills, extends or indexes the list, or an appended
        value is not provably placed."""
        reaching = self._reaching(name, at)
        made_list = reaching[1] if reaching is not None and reaching[0] == "assign" else None
        if not (isinstance(made_list, cst.List) and not made_list.elements):
            return None
        function = self.scopes.enclosing_function(at)
        scope: cst.CSTNode = function if function is not None else self.context.module
        first: Device | None = None
        made = self.context.order(made_list)[0]
        for use in self.scopes.names_in(scope, name):
            if self.context.order(use)[0] < made:
                continue  # what the name held before this list
            parent = self.context.parent(use)
            if isinstance(parent, cst.AssignTarget):
                if self.context.order(use)[0] > made:
                    break  # `logits = torch.cat(logits)`: later uses read another object
                continue
            if isinstance(parent, cst.Attribute) and parent.value is use:
                call = self.context.parent(parent)
                method = parent.attr.value
                if method == "append" and isinstance(call, cst.Call) and len(call.args) == 1:
                    found = self.placed(call.args[0].value, call)
                    if found is None:
                        return None
                    first = first or found
                    continue
                if method in ("extend", "insert", "__setitem__") or not isinstance(call, cst.Call):
                    return None
                continue
            if isinstance(parent, (cst.AugAssign, cst.Subscript)):
                return None
        return first

    def _any_argument(self, call: cst.Call, at: cst.CSTNode, depth: int) -> Device | None:
        for arg in call.args:
            if arg.keyword is not None:
                continue
            if isinstance(arg.value, cst.Name):
                # `torch.cat(outputs)`: a list filled with placed tensors.
                filled = self.list_of_placed(arg.value.value, call)
                if filled is not None:
                    return filled
            values = (
                [e.value for e in arg.value.elements]
                if isinstance(arg.value, (cst.List, cst.Tuple))
                else [arg.value]
            )
            for value in values:
                origin = self.placed(value, at, depth + 1)
                if origin is not None:
                    return origin
        return None

    def _is_module_instance(self, func: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`criterion(...)` where `criterion = nn.CrossEntropyLoss(...)` (a torch.nn module), or
        `model(...)` where `model = handpose_model()` is used as one (`model.load_state_dict`,
        `model.eval()`): its output is where its input is."""
        if not isinstance(func, cst.Name):
            return False
        binding = self.scopes.binding_before(func.value, at)
        if binding is None or binding[0] != "assign" or not isinstance(binding[1], cst.Call):
            return False
        if self._used_as_module(func.value, at):
            return True
        value = binding[1]
        while isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
            value = value.func.value  # `nn.CrossEntropyLoss().to(device)`
        qualified = self.names.qualified_name(value.func)
        return (
            qualified is not None
            and qualified.startswith("torch.nn.")
            and (not qualified.startswith("torch.nn.functional."))
        )

    def _used_as_module(self, name: str, at: cst.CSTNode) -> bool:
        """The scope of `at` (or the module) calls a method only modules have on `name`."""
        function = self.scopes.enclosing_function(at)
        scopes: list[cst.CSTNode] = [self.context.module]
        if function is not None:
            scopes.insert(0, function)
        for scope in scopes:
            for node in self.scopes.nodes(scope):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in MODULE_ONLY_METHODS
                    and isinstance(node.func.value, cst.Name)
                    and node.func.value.value == name
                ):
                    return True
        return False

    # -- values on the CPU ---------------------------------------------------------------------

    def on_cpu(self, value: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> bool:
        """`value` is provably a CPU tensor: a factory without `device=` (or with "cpu"),
        `.cpu()`, `torch.from_numpy`, tensor methods, arithmetic and dtype-only `.to` of one,
        a name last bound to one, or a `self.<attr>` `__init__` sets to one."""
        if depth > _MAX_CPU_DEPTH:
            return False
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and call_tail(func) in ("to", "cuda", "cpu"):
                if func.attr.value == "cpu":
                    return True
                if func.attr.value == "to" and self._to_is_dtype_only(value):
                    return self.on_cpu(func.value, at, depth + 1)
                return False
            qualified = (
                self.names.qualified_name(func)
                if isinstance(func, (cst.Name, cst.Attribute))
                else None
            )
            if qualified in CPU_SOURCES:
                device = keyword_argument(value, "device")
                return device is None or string_device(device.value) == "cpu"
            if isinstance(func, cst.Attribute) and func.attr.value != "type":
                # A tensor method on a CPU tensor: `w.float()`, `torch.tensor(..).sqrt()`.
                return self.on_cpu(func.value, at, depth + 1)
            return False
        if isinstance(value, cst.BinaryOperation):
            sides = [value.left, value.right]
            if any(is_move_call(side) for side in sides):
                return False
            return any(self.on_cpu(side, at, depth + 1) for side in sides)
        if isinstance(value, cst.UnaryOperation):
            return self.on_cpu(value.expression, at, depth + 1)
        if isinstance(value, cst.Subscript):
            return self.on_cpu(value.value, at, depth + 1)
        if isinstance(value, cst.Name):
            bound = self.scopes.latest_binding(value.value, at)
            return bound is not None and self.on_cpu(bound, bound, depth + 1)
        if (
            isinstance(value, cst.Attribute)
            and isinstance(value.value, cst.Name)
            and value.value.value == "self"
        ):
            return self._self_attribute_is_cpu(value.attr.value, at, depth)
        return False

    def _to_is_dtype_only(self, call: cst.Call) -> bool:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                return False
            if arg.keyword is None and not self.names.is_dtype(arg.value):
                return False
        return True

    def _self_attribute_is_cpu(self, attr: str, at: cst.CSTNode, depth: int) -> bool:
        """`self.attr = <CPU tensor>` in `__init__` of the class around `at` (not a buffer)."""
        for ancestor in self.context.ancestors(at):
            if isinstance(ancestor, cst.ClassDef):
                for statement in ancestor.body.body:
                    if (
                        isinstance(statement, cst.FunctionDef)
                        and statement.name.value == "__init__"
                    ):
                        for inner in self.scopes.statements(statement):
                            if (
                                isinstance(inner, cst.Assign)
                                and len(inner.targets) == 1
                                and isinstance(inner.targets[0].target, cst.Attribute)
                                and self.context.module.code_for_node(inner.targets[0].target)
                                == f"self.{attr}"
                            ):
                                return self.on_cpu(inner.value, inner.value, depth + 1)
                return False
        return False

    def device_move_at(self, device: Device, use: cst.CSTNode) -> DeviceMove | str | None:
        """A placed device (`devices.placed`) as a move written at `use`; a reason when it
        cannot be written; None when nothing is known."""
        if isinstance(device, Current):
            return DeviceMove("cuda", None)
        if isinstance(device, (Named, Literal)):
            text = device.expression()
            if text is None:
                return None
            kind = "accelerator" if isinstance(device, Literal) else "device"
            return DeviceMove("to", cst.parse_expression(text), kind=kind)
        if isinstance(device, ParamsOf):
            model = device.module
            try:
                model_expr = cst.parse_expression(model)
            except cst.ParserSyntaxError:
                return None
            found = self.facts.flow.model_device(model_expr, use)
            if found is None:
                return None
            return found.move if found.move is not None else found.reason
        return None


def instance_name(function: FunctionInfo) -> str:
    """The name of a method's instance parameter (`self`, usually)."""
    return _self(function)


def _self(function: FunctionInfo) -> str:
    """The name of a method's instance parameter (`self`, usually)."""
    params = [*function.node.params.posonly_params, *function.node.params.params]
    return params[0].name.value if params and function.owner is not None else "self"


def _methods_of(classdef: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in classdef.body.body if isinstance(s, cst.FunctionDef)]


def _plain_reference(node: cst.BaseExpression) -> bool:
    """A name, or a name subscripted with literal keys (`inputs["time"]`, `xs[0]`): safe to
    read again where the fix puts it."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Subscript):
        return _plain_reference(node.value) and all(
            isinstance(element.slice, cst.Index)
            and isinstance(element.slice.value, (cst.SimpleString, cst.Integer))
            for element in node.slice
        )
    return False


def _move_target(node: cst.CSTNode) -> cst.BaseExpression | None:
    """The device of `x.to(d)` / `x.cuda(d)`, else None."""
    if not (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("to", "cuda")
    ):
        return None
    if node.func.attr.value == "to":
        return device_argument(node)
    return next(
        (a.value for a in node.args if a.keyword is None or a.keyword.value == "device"), None
    )


def _unmoved_from(node: cst.BaseExpression, inputs: set[str]) -> bool:
    """`label`, `label.view(-1, 1).long()`: computed from an input by tensor methods alone,
    with no move on the way."""
    while True:
        if isinstance(node, cst.Name):
            return node.value in inputs
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value in MOVE_METHODS:
                return False
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return False


def _given_a_device(call: cst.Call) -> bool:
    """A `device=` keyword naming a device (not `device=None`, which means the default)."""
    device = keyword_argument(call, "device")
    return device is not None and not (
        isinstance(device.value, cst.Name) and device.value.value == "None"
    )


def _same_device_root(value: cst.BaseExpression) -> str | None:
    """The name `value` is indexed or reshaped from (`h[idx, t].squeeze(1)` -> "h"), with no
    call on the way that could change the device; also through arithmetic and comparisons
    of it with itself or a number (`y.unsqueeze(0) == y.unsqueeze(1)`, `~mask`, `x * 2`)."""
    while True:
        if isinstance(value, cst.Name):
            return value.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        elif isinstance(value, (cst.BinaryOperation, cst.Comparison)):
            left = value.left
            others = (
                [value.right]
                if isinstance(value, cst.BinaryOperation)
                else [c.comparator for c in value.comparisons]
            )
            root = _same_device_root(left)
            if root is None or not all(
                isinstance(other, (cst.Integer, cst.Float)) or _same_device_root(other) == root
                for other in others
            ):
                return None
            return root
        elif isinstance(value, cst.Subscript):
            value = value.value
        elif (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in SAME_DEVICE_METHODS
        ):
            value = value.func.value
        else:
            return None
