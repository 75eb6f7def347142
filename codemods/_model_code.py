"""What the passes know about model code: module classes, their layers, and where tensors meet.

The central question for DF101/DF102 is "which device will this new tensor meet?". The answer is
read from the code that consumes the value, in this order of certainty:

1. the value meets another tensor in an operation (`x + pos`, `torch.cat([h, x])`,
   `scores.masked_fill(mask, ...)`, `self.rnn(x, h)`): it must be on that tensor's device;
2. the value is fed to a registered layer (`self.pos_embedding(pos)`): the layer's parameter device;
3. otherwise the function's first tensor argument (a guess, so the fix is marked unsafe).

`self.device` is never invented, and `next(self.parameters())` is never used: it is empty on
DataParallel replicas.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import call_tail, dotted_name
from devfix.codemods._torch_names import (
    BASES_WITH_DEVICE_PROPERTY,
    DATASET_BASES,
    LAYER_PARAMETER,
    LEAVES_DEVICE_METHODS,
    MODULE_BASES,
    MOVE_METHODS,
    NON_TENSOR_MEMBERS,
    RECURRENT_LAYERS,
    SAME_DEVICE_FUNCTIONS,
    SHAPE_ARGUMENT_METHODS,
    TENSOR_FUNCTIONS,
    TENSOR_MEMBERS,
)
from devfix.codemods._tree import walk

_MAX_FLOW_DEPTH = 6


@dataclass
class ClassInfo:
    node: cst.ClassDef
    is_module: bool = False
    is_dataset: bool = False
    has_device_property: bool = False
    #: `self.<attr> = nn.<Layer>(...)` in `__init__`: attr -> qualified layer name.
    layers: dict[str, str] = field(default_factory=dict)
    #: `self.<attr>` assigned in `__init__` from something that holds a device.
    device_attrs: set[str] = field(default_factory=set)


@dataclass
class FunctionInfo:
    node: cst.FunctionDef
    owner: ClassInfo | None
    params: list[str]
    tensor_params: list[str]
    #: Line numbers of the statements that bind each local name.
    bindings: dict[str, list[int]]

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def is_model_code(self) -> bool:
        """Module methods and functions with a tensor argument; never data-pipeline code."""
        if self.owner is not None and self.owner.is_dataset:
            return False
        if "collate" in self.name.lower():
            return False
        if self.owner is not None and self.owner.is_module:
            return True
        return bool(self.tensor_params)


@dataclass(frozen=True)
class DeviceSource:
    """Where a new tensor should be created, and how sure the pass is."""

    expression: str
    certain: bool
    reason: str


#: torch functions whose list argument puts every element side by side on one device.
CONCATENATIONS = frozenset(
    f"torch.{name}"
    for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack")
)

#: The value only indexes other tensors: it may stay on the CPU. Passes report nothing.
AS_INDEX = DeviceSource("", False, "used as an index")


def _self_attribute(node: cst.BaseExpression) -> str | None:
    """`self.x` -> "x"."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    ):
        return node.attr.value
    return None


def _names_a_device(attribute: str) -> bool:
    """`self.device`, `self._device`, `self.dev`: an attribute that holds a device."""
    return attribute.lower().strip("_") in ("device", "dev", "torch_device", "target_device")


def _mentions_device(node: cst.CSTNode) -> bool:
    code = cst.Module(body=[]).code_for_node(node).lower()
    return "device" in code or "cuda" in code


class ModelCode:
    """Class and function tables of one file, built on first use and shared by the passes."""

    def __init__(self, checker: DevicePass) -> None:
        self.checker = checker
        self.context = checker.context
        self._classes: dict[int, ClassInfo] = {}
        self._functions: dict[int, FunctionInfo] = {}

    @classmethod
    def of(cls, checker: DevicePass) -> ModelCode:
        shared = checker.context.shared.get("model_code")
        if not isinstance(shared, ModelCode):
            shared = ModelCode(checker)
            checker.context.shared["model_code"] = shared
        return shared

    # -- classes ---------------------------------------------------------------------------

    def class_info(self, node: cst.ClassDef) -> ClassInfo:
        info = self._classes.get(id(node))
        if info is None:
            info = self._build_class(node)
            self._classes[id(node)] = info
        return info

    def _base_names(self, node: cst.ClassDef) -> set[str]:
        names: set[str] = set()
        for base in node.bases:
            names |= {qn.name for qn in self.context.qualified_names(base.value)}
        return names

    def _build_class(self, node: cst.ClassDef) -> ClassInfo:
        bases = self._base_names(node)
        info = ClassInfo(node)
        info.is_dataset = bool(bases & DATASET_BASES)
        info.is_module = not info.is_dataset and any(
            name in MODULE_BASES or name.startswith("torch.nn.") for name in bases
        )
        if not info.is_module:
            # A subclass of another model class in the same file is model code too.
            local_bases = {
                base.value.value for base in node.bases if isinstance(base.value, cst.Name)
            }
            for statement in self.context.module.body:
                if (
                    isinstance(statement, cst.ClassDef)
                    and statement.name.value in local_bases
                    and statement is not node
                    and self.class_info(statement).is_module
                ):
                    info.is_module = True
        info.has_device_property = bool(bases & BASES_WITH_DEVICE_PROPERTY)
        for member in node.body.body:
            if isinstance(member, cst.FunctionDef):
                if member.name.value == "device":
                    info.has_device_property = True
                if member.name.value == "__init__":
                    self._read_init(member, info)
        return info

    def _read_init(self, init: cst.FunctionDef, info: ClassInfo) -> None:
        for assign in _walk(init.body, cst.Assign):
            if len(assign.targets) != 1:
                continue
            attr = _self_attribute(assign.targets[0].target)
            if attr is None:
                continue
            value = assign.value
            if isinstance(value, cst.Call):
                layer = self.checker.qualified_name(value.func)
                if layer in LAYER_PARAMETER:
                    info.layers[attr] = layer
                    continue
                if layer == "torch.device":
                    info.device_attrs.add(attr)
                    continue
            if _names_a_device(attr) or ("device" in attr.lower() and _mentions_device(value)):
                info.device_attrs.add(attr)

    # -- functions -------------------------------------------------------------------------

    def enclosing_function(self, node: cst.CSTNode) -> FunctionInfo | None:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.Lambda):
                return None
            if isinstance(ancestor, cst.FunctionDef):
                return self.function_info(ancestor)
        return None

    def function_info(self, node: cst.FunctionDef) -> FunctionInfo:
        info = self._functions.get(id(node))
        if info is None:
            info = self._build_function(node)
            self._functions[id(node)] = info
        return info

    def _owner(self, node: cst.FunctionDef) -> ClassInfo | None:
        """The class whose instance method `node` is; None for functions, class/static methods."""
        for decorator in node.decorators:
            name = dotted_name(decorator.decorator)
            if name is not None and name.rsplit(".", 1)[-1] in ("classmethod", "staticmethod"):
                return None
        parent = self.context.parent(node)
        grandparent = self.context.parent(parent) if parent is not None else None
        if isinstance(grandparent, cst.ClassDef):
            return self.class_info(grandparent)
        return None

    def _build_function(self, node: cst.FunctionDef) -> FunctionInfo:
        owner = self._owner(node)
        params = [
            p.name.value
            for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        ]
        if owner is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        evidence = self._tensor_evidence(node, owner)
        annotated = {
            param.name.value
            for param in (*node.params.posonly_params, *node.params.params)
            if param.annotation is not None
            and _is_tensor_type(self.checker.qualified_name(param.annotation.annotation))
        }
        tensor_params = [p for p in params if p in evidence or p in annotated]
        bindings: dict[str, list[int]] = {}
        for target in _binding_targets(node.body):
            bindings.setdefault(target.value, []).append(self.context.order(target)[0])
        return FunctionInfo(node, owner, params, tensor_params, bindings)

    def _tensor_evidence(self, function: cst.FunctionDef, owner: ClassInfo | None) -> set[str]:
        """Names the body uses as tensors: `x.shape`, `F.relu(x)`, `x * torch.exp(...)`,
        `self.<layer>(x)`. One walk over the body for every parameter at once."""
        names: set[str] = set()
        layers = owner.layers if owner is not None and owner.is_module else {}
        for node in _descendants(function.body):
            if isinstance(node, cst.Attribute):
                if isinstance(node.value, cst.Name) and node.attr.value in TENSOR_MEMBERS:
                    names.add(node.value.value)
            elif isinstance(node, cst.Call):
                arg_names = [a.value.value for a in node.args if isinstance(a.value, cst.Name)]
                if not arg_names:
                    continue
                if _self_attribute(node.func) in layers or (
                    _is_name_chain(node.func)
                    and _takes_tensors(self.checker.qualified_name(node.func))
                ):
                    names.update(arg_names)
            elif isinstance(node, cst.BinaryOperation):
                sides = (node.left, node.right)
                if any(
                    isinstance(side, cst.Call)
                    and _is_name_chain(side.func)
                    and _takes_tensors(self.checker.qualified_name(side.func))
                    for side in sides
                ):
                    names.update(side.value for side in sides if isinstance(side, cst.Name))
        return names

    # -- devices ---------------------------------------------------------------------------

    def layer_device(self, owner: ClassInfo | None, attr: str) -> str | None:
        if owner is None or attr not in owner.layers:
            return None
        return f"self.{attr}.{LAYER_PARAMETER[owner.layers[attr]]}.device"

    def resolve_device(
        self, value: cst.BaseExpression, function: FunctionInfo
    ) -> DeviceSource | None:
        """The device the tensor computed by `value` should live on, or None if unknowable."""
        statement_line = self._statement_start(value)
        own_names: set[str] = set()
        evidence = list(self._flow(value, function, own_names, statement_line, 0))
        meets = [e for e in evidence if e.certain]
        if meets:
            return meets[0]
        if AS_INDEX in evidence:
            return AS_INDEX
        if function.tensor_params:
            first = function.tensor_params[0]
            return DeviceSource(f"{first}.device", False, f"`{first}` is the first tensor argument")
        if function.owner is not None and function.owner.layers:
            layers = function.owner.layers
            chosen = next((a for a, q in layers.items() if q in RECURRENT_LAYERS), None)
            chosen = chosen or next(iter(layers))
            expression = self.layer_device(function.owner, chosen)
            if expression is not None:
                return DeviceSource(
                    expression, False, f"the module's layer `self.{chosen}` holds it"
                )
        return None

    def _flow(
        self,
        node: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[DeviceSource]:
        """Evidence about the device that the value of `node` meets, in source order."""
        if depth > _MAX_FLOW_DEPTH:
            return
        parent = self.context.parent(node)
        if parent is None:
            return
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = self.context.parent(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                return  # `.shape`, `.device`: no tensor flows on
            method = parent.attr.value
            if method in LEAVES_DEVICE_METHODS or method in MOVE_METHODS:
                return
            if method not in SHAPE_ARGUMENT_METHODS:
                yield from self._meets_in_args(call, None, function, own_names, line)
            yield from self._flow(call, function, own_names, line, depth + 1)
        elif isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            if not isinstance(call, cst.Call):
                return
            yield from self._into_call(call, parent, function, own_names, line, depth)
        elif isinstance(parent, cst.Element):
            container = self.context.parent(parent)
            if isinstance(container, (cst.List, cst.Tuple)):
                # Siblings meet only inside `torch.cat([...])`-like calls, not in any tuple
                # (`return x.shape, t` or `h = (h0, c0)` put nothing on one device).
                if self._is_concatenated(container):
                    for element in container.elements:
                        if element is not parent:
                            yield from self._meet(element.value, function, own_names, line)
                yield from self._flow(container, function, own_names, line, depth + 1)
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            yield from self._meet(other, function, own_names, line)
            yield from self._flow(parent, function, own_names, line, depth + 1)
        elif isinstance(parent, cst.ComparisonTarget):
            comparison = self.context.parent(parent)
            if isinstance(comparison, cst.Comparison):
                yield from self._meet(comparison.left, function, own_names, line)
                yield from self._flow(comparison, function, own_names, line, depth + 1)
        elif isinstance(parent, cst.Comparison):
            for target in parent.comparisons:
                yield from self._meet(target.comparator, function, own_names, line)
            yield from self._flow(parent, function, own_names, line, depth + 1)
        elif isinstance(parent, (cst.UnaryOperation, cst.IfExp)) or (
            isinstance(parent, cst.Subscript) and parent.value is node
        ):
            yield from self._flow(parent, function, own_names, line, depth + 1)
        elif isinstance(parent, cst.Index):
            # Used as an index: CPU indices into a CUDA tensor are legal, so no device is owed.
            yield AS_INDEX
        elif isinstance(parent, cst.AugAssign):
            yield from self._meet(parent.target, function, own_names, line)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
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

    def _into_call(
        self,
        call: cst.Call,
        arg: cst.Arg,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
        depth: int,
    ) -> Iterator[DeviceSource]:
        yield from self._meets_in_args(call, arg, function, own_names, line)
        if isinstance(call.func, cst.Attribute):
            layer_attr = _self_attribute(call.func)
            layer = self.layer_device(function.owner, layer_attr) if layer_attr else None
            if layer is not None:
                yield DeviceSource(layer, True, f"it is fed to `self.{layer_attr}`")
                return
            if layer_attr is None:
                # `scores.masked_fill(mask, ...)`: the receiver is what the value meets.
                yield from self._meet(call.func.value, function, own_names, line)
        qualified = self.checker.qualified_name(call.func)
        if qualified in SAME_DEVICE_FUNCTIONS or qualified in ("torch.cat", "torch.stack"):
            yield from self._flow(call, function, own_names, line, depth + 1)

    def _meets_in_args(
        self,
        call: cst.Call,
        skip: cst.Arg | None,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
    ) -> Iterator[DeviceSource]:
        for other in call.args:
            if other is not skip and other.keyword is None:
                yield from self._meet(other.value, function, own_names, line)

    def _meet(
        self,
        other: cst.BaseExpression,
        function: FunctionInfo,
        own_names: set[str],
        line: int,
    ) -> Iterator[DeviceSource]:
        """Evidence if `other` is a tensor whose device can be named at `line`."""
        root = _root_name(other)
        if isinstance(other, cst.Call):
            layer_attr = _self_attribute(other.func)
            layer = self.layer_device(function.owner, layer_attr) if layer_attr else None
            if layer is not None:
                yield DeviceSource(layer, True, f"it meets the output of `self.{layer_attr}`")
                return
        if root is None or root in own_names or root == "self":
            return
        if not self.is_tensor_expression(other, function):
            return
        origin = self._tensor_origin(root, function, line, set())
        if origin is not None:
            yield DeviceSource(f"{origin}.device", True, f"it meets `{dotted_name(other) or root}`")

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
            for assign in _walk(function.node.body, cst.Assign)
            if any(bound.value == name for t in assign.targets for bound in _target_names(t.target))
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
        if isinstance(node, (cst.BinaryOperation,)):
            return self.is_tensor_expression(
                node.left, function, seen
            ) or self.is_tensor_expression(node.right, function, seen)
        if isinstance(node, cst.UnaryOperation):
            return self.is_tensor_expression(node.expression, function, seen)
        if isinstance(node, cst.Call):
            layer_attr = _self_attribute(node.func)
            if layer_attr is not None:
                return function.owner is not None and layer_attr in function.owner.layers
            if isinstance(node.func, cst.Attribute):
                if node.func.attr.value in NON_TENSOR_MEMBERS:
                    return False
                if self.is_tensor_expression(node.func.value, function, seen):
                    return True
            qualified = self.checker.qualified_name(node.func)
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
                    for arg in node.args
                )
        return False

    def _is_concatenated(self, container: cst.CSTNode) -> bool:
        arg = self.context.parent(container)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and self.checker.qualified_name(call.func) in (
            CONCATENATIONS
        )

    def _statement_start(self, node: cst.CSTNode) -> int:
        """Source-order index of the statement that holds `node` (its "line", without positions)."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(
            current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
        ):
            current = self.context.parent(current)
        return self.context.order(current if current is not None else node)[0]

    def _uses_after(
        self, name: str, statement: cst.CSTNode, function: FunctionInfo
    ) -> Iterator[cst.Name]:
        end = self.context.order(statement)[1]
        for candidate in _walk(function.node.body, cst.Name):
            if candidate.value != name:
                continue
            if self.context.order(candidate)[0] <= end:
                continue
            parent = self.context.parent(candidate)
            if isinstance(parent, cst.AssignTarget) or (
                isinstance(parent, cst.Attribute) and parent.attr is candidate
            ):
                continue
            yield candidate


def _is_tensor_type(qualified: str | None) -> bool:
    return qualified is not None and qualified.startswith("torch.") and qualified.endswith("Tensor")


def _takes_tensors(qualified: str | None) -> bool:
    """torch functions whose positional arguments are tensors (not sizes, seeds or devices)."""
    if qualified is None:
        return False
    return qualified.startswith("torch.nn.functional.") or qualified in TENSOR_FUNCTIONS


def _is_name_chain(node: cst.BaseExpression) -> bool:
    return dotted_name(node) is not None


def _root_name(node: cst.BaseExpression) -> str | None:
    """The name a tensor expression starts from: `x.transpose(1, 2)[0]` -> "x"."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return None


NodeT = TypeVar("NodeT", bound=cst.CSTNode)


_descendants = walk


def _walk(root: cst.CSTNode, kind: type[NodeT]) -> Iterator[NodeT]:
    for node in _descendants(root):
        if isinstance(node, kind):
            yield node


def _binding_targets(body: cst.CSTNode) -> Iterator[cst.Name]:
    for node in _descendants(body):
        targets: list[cst.BaseExpression] = []
        if isinstance(
            node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)
        ):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        for target in targets:
            yield from _target_names(target)


def _target_names(target: cst.BaseExpression) -> Iterator[cst.Name]:
    """Names bound by an assignment target; `self.x` and `a[i]` bind none."""
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def call_method_name(node: cst.Call) -> str | None:
    return call_tail(node.func) if isinstance(node.func, cst.Attribute) else None
