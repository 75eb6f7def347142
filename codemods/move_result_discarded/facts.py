"""What a name holds where a statement uses it: a tensor, or something whose `.to()` works in
place (an `nn.Module`, a Hugging Face `BatchEncoding`, a PyG `Data`), or nothing the file says.

A tensor's `.to(device)` / `.cuda()` returns a moved copy; a module's moves the module itself.
The answer rests on what the file states: how the name is bound (a torch factory, a module
constructor) and how it is used (`x.shape`, `x * 2`, `y.expand_as(x)` are tensor uses;
`m.parameters()`, `m(x)` are not). A name with evidence both ways is not a tensor: precision
first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import strip_module_methods
from devfix.codemods.analysis.names import call_tail, dotted_name, keyword_argument, string_value
from devfix.codemods.analysis.torch_names import (
    CONCATENATIONS,
    LEGACY_CONSTRUCTORS,
    MODEL_WRAPPERS,
    NOT_TENSOR_MEMBERS,
    TENSOR_ARGUMENT_METHODS,
    TENSOR_FACTORIES,
    TENSOR_FUNCTIONS,
    TENSOR_ONLY_MEMBERS,
    TENSOR_PRODUCING_FUNCTIONS,
    VARIABLE,
)

_TENSOR_SOURCES = TENSOR_FACTORIES | LEGACY_CONSTRUCTORS | TENSOR_PRODUCING_FUNCTIONS | VARIABLE
#: Calls that load or build a model or a tokenizer (their result is no tensor).
_LOADERS = frozenset({"from_pretrained", "from_config", "from_single_file"})
#: Methods of a tensor that return a tensor on a device (a moved or cast copy).
_TENSOR_RESULT_METHODS = frozenset({"to", "cuda", "float", "half", "double", "cpu"})
#: Tensor-only methods whose result is no tensor.
NOT_TENSOR_RESULTS = frozenset(
    {"shape", "ndim", "dim", "numel", "is_cuda", "get_device", "item", "numpy", "tolist"}
    | {"requires_grad", "grad", "backward", "fill_", "zero_", "copy_"}
)
_ARITHMETIC = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.MatrixMultiply,
    cst.Power,
)


@dataclass(frozen=True)
class Held:
    """What a name holds: `kind` "tensor", "other" (a module or an object with an in-place
    `.to`), or None (the file does not say); `evidence` says why, for messages."""

    kind: str | None
    evidence: str = ""
    #: The binding itself makes it a tensor (a torch factory, torch math), not only its uses.
    proven: bool = False


UNKNOWN = Held(None)


class HeldValues(Analysis):
    """What names hold, of one file."""

    def held(self, name: str, at: cst.CSTNode) -> Held:
        """What the plain name `name` holds where `at` reads it."""
        scope = self._binding_scope(name, at)
        if scope is None:
            return UNKNOWN
        values = self._values(scope, name)
        uses = list(self._uses(scope, name))
        other = self._not_a_tensor(values, uses, scope)
        if other:
            return Held("other", other)
        for value in values:
            if value is not None and self._tensor_value(value, scope, depth=0):
                latest = self._latest_value(name, at, scope)
                proven = latest is not None and self._tensor_value(latest, scope, depth=0)
                if isinstance(value, cst.Call) and _encodes_to_a_tensor(value):
                    why = (
                        f'`{name}` is the tensor of ids `encode(..., return_tensors="pt")` returns'
                    )
                    return Held("tensor", why, proven)
                return Held("tensor", f"`{name}` is built by torch", proven)
        loop = self._loop_over_tensors(name, scope)
        if loop:
            return Held("tensor", loop)
        if self._collated_tensor(name, scope):
            why = f"`{name}` is a batch of a DataLoader whose `collate_fn` returns a tensor"
            return Held("tensor", why, proven=len(values) == 1)
        for value in values:
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in TENSOR_ONLY_MEMBERS - NOT_TENSOR_RESULTS
            ):
                return Held("tensor", f"`{name}` is the result of `.{value.func.attr.value}()`")
        for use in uses:
            found = self._tensor_use(use)
            if found:
                return Held("tensor", found)
        sibling = self._sibling_evidence(name, values, scope)
        if sibling:
            return Held("tensor", sibling)
        return UNKNOWN

    # -- where the name lives -----------------------------------------------------------------

    def _binding_scope(self, name: str, at: cst.CSTNode) -> cst.CSTNode | None:
        """The function (or the module) whose binding of `name` `at` reads."""
        scope = self.scopes.enclosing_scope(at)
        if isinstance(scope, cst.Lambda):
            return None
        if isinstance(scope, cst.FunctionDef) and name in self.scopes.table(scope).bindings:
            return scope
        if name in self.scopes.table(self.context.module).bindings:
            return self.context.module
        return scope if isinstance(scope, cst.FunctionDef) else None

    def _values(self, scope: cst.CSTNode, name: str) -> list[cst.BaseExpression | None]:
        """The values bound to `name` in `scope` (None: a parameter, a loop target, ...)."""
        return [b.value for b in self.scopes.table(scope).bindings.get(name, [])]

    def _latest_value(
        self, name: str, at: cst.CSTNode, scope: cst.CSTNode
    ) -> cst.BaseExpression | None:
        position = self.context.order(at)[0]
        bindings = [
            b for b in self.scopes.table(scope).bindings.get(name, []) if b.position < position
        ]
        if not bindings or bindings[-1].kind != "assign":
            return None
        return bindings[-1].value

    def _uses(self, scope: cst.CSTNode, name: str) -> Iterator[cst.Name]:
        root = scope.body if isinstance(scope, cst.FunctionDef) else scope
        for node in self.scopes.names_in(root, name):
            parent = self.context.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            yield node

    # -- evidence -----------------------------------------------------------------------------

    def _not_a_tensor(
        self,
        values: list[cst.BaseExpression | None],
        uses: list[cst.Name],
        scope: cst.CSTNode,
    ) -> str:
        for value in values:
            if value is None:
                continue
            built = strip_module_methods(value)
            if self.facts.modules.constructed_module(built) is not None:
                return "it is bound to a module"
            if isinstance(built, cst.Call):
                qualified = self.names.qualified_name(built.func)
                if qualified in MODEL_WRAPPERS:
                    return "it is bound to a wrapped model"
                if call_tail(built.func) in _LOADERS:
                    return "it is loaded with `from_pretrained`"
                callee = dotted_name(built.func)
                if callee is not None and self._is_loaded(callee, scope):
                    return f"it is the output of `{callee}` (a tokenizer or processor)"
        for use in uses:
            parent = self.context.parent(use)
            if isinstance(parent, cst.Attribute) and parent.value is use:
                if parent.attr.value in NOT_TENSOR_MEMBERS:
                    return f"it has `.{parent.attr.value}`, which a tensor has not"
            elif isinstance(parent, cst.Call) and parent.func is use:
                return "it is called"
            elif isinstance(parent, cst.Arg) and parent.star == "**":
                return "it is unpacked as keyword arguments"
        return ""

    def _is_loaded(self, callee: str, scope: cst.CSTNode) -> bool:
        """`callee` is bound to `X.from_pretrained(...)` (a tokenizer, a processor, a model)."""
        root = callee.split(".")[0]
        for table_scope in (scope, self.context.module):
            for binding in self.scopes.table(table_scope).bindings.get(root, []):
                value = binding.value
                if isinstance(value, cst.Call) and call_tail(value.func) in _LOADERS:
                    return True
        return False

    def _tensor_value(self, value: cst.BaseExpression, scope: cst.CSTNode, depth: int) -> bool:
        """`value` is a tensor by construction: torch factories and math, tensor methods of
        one, arithmetic with one, names bound to one in the same scope."""
        if depth > 4:
            return False
        if isinstance(value, cst.Call):
            func = value.func
            if isinstance(func, cst.Attribute) and not dotted_name(func):
                return (
                    func.attr.value in TENSOR_ONLY_MEMBERS | _TENSOR_RESULT_METHODS
                    and self._tensor_value(func.value, scope, depth + 1)
                )
            qualified = self.names.qualified_name(func) if dotted_name(func) else None
            if qualified in _TENSOR_SOURCES or _encodes_to_a_tensor(value):
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in (
                TENSOR_ONLY_MEMBERS | _TENSOR_RESULT_METHODS
            ):
                return self._tensor_value(func.value, scope, depth + 1)
            return False
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, _ARITHMETIC):
            return self._tensor_value(value.left, scope, depth + 1) or self._tensor_value(
                value.right, scope, depth + 1
            )
        if isinstance(value, cst.Subscript):
            return self._tensor_value(value.value, scope, depth + 1)
        if isinstance(value, cst.Name):
            bound = self._values(scope, value.value)
            return bool(bound) and all(
                v is not None and self._tensor_value(v, scope, depth + 1) for v in bound
            )
        return False

    def _loop_over_tensors(self, name: str, scope: cst.CSTNode) -> str:
        """`for t in [a, b]` / `for t in tensors` (a list of torch-built tensors)."""
        root = scope.body if isinstance(scope, cst.FunctionDef) else scope
        for node in self.scopes.nodes(root):
            if not (isinstance(node, cst.For) and isinstance(node.target, cst.Name)):
                continue
            if node.target.value != name:
                continue
            items: cst.BaseExpression | None = node.iter
            if isinstance(items, cst.Name):
                bound = self._values(scope, items.value)
                items = bound[0] if len(bound) == 1 else None
            if (
                isinstance(items, (cst.List, cst.Tuple))
                and items.elements
                and all(
                    isinstance(element, cst.Element)
                    and self._tensor_value(element.value, scope, depth=1)
                    for element in items.elements
                )
            ):
                return f"`{name}` runs over tensors built by torch"
        return ""

    def _collated_tensor(self, name: str, scope: cst.CSTNode) -> bool:
        """`for i, ids in enumerate(loader)`, the loader's `collate_fn` returning a tensor."""
        root = scope.body if isinstance(scope, cst.FunctionDef) else scope
        return any(
            isinstance(node, cst.For) and self.facts.flow.collated_tensor_batch(node) == name
            for node in self.scopes.nodes(root)
        )

    def _tensor_use(self, use: cst.Name) -> str:
        """Why this use shows a tensor (empty when it does not)."""
        name = use.value
        parent = self.context.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            if parent.attr.value in TENSOR_ONLY_MEMBERS:
                return f"`{name}.{parent.attr.value}` is used"
            return ""
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _ARITHMETIC):
            other = parent.right if parent.left is use else parent.left
            if not isinstance(other, (cst.SimpleString, cst.FormattedString, cst.List)):
                return f"`{name}` takes part in arithmetic"
            return ""
        if isinstance(parent, cst.Subscript) and parent.value is use:
            if len(parent.slice) > 1 and any(
                isinstance(element.slice, cst.Slice) for element in parent.slice
            ):
                return f"`{name}` is indexed along several dimensions"
            return ""
        if isinstance(parent, cst.Element):
            container = self.context.parent(parent)
            arg = self.context.parent(container) if container is not None else None
            call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
            if (
                isinstance(call, cst.Call)
                and self.names.qualified_name(call.func) in CONCATENATIONS
            ):
                return f"`{name}` is concatenated with torch"
            return ""
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = self.context.parent(parent)
            if not isinstance(call, cst.Call):
                return ""
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_ARGUMENT_METHODS:
                return f"`{name}` is the argument of `.{func.attr.value}()`"
            qualified = self.names.qualified_name(func) if dotted_name(func) else None
            if qualified in TENSOR_FUNCTIONS:
                return f"`{name}` is the argument of `{qualified}`"
        return ""

    def _sibling_evidence(
        self, name: str, values: list[cst.BaseExpression | None], scope: cst.CSTNode
    ) -> str:
        """`a = load(p); b = load(q)` and `a` is a tensor: so is `b` (one function, one kind)."""
        callees = {
            dotted_name(v.func)
            for v in values
            if isinstance(v, cst.Call) and dotted_name(v.func) is not None
        }
        if len(callees) != 1 or len(values) != len([v for v in values if isinstance(v, cst.Call)]):
            return ""
        callee = callees.pop()
        for other, bindings in self.scopes.table(scope).bindings.items():
            if other == name:
                continue
            if not any(
                isinstance(b.value, cst.Call) and dotted_name(b.value.func) == callee
                for b in bindings
            ):
                continue
            other_values = [b.value for b in bindings]
            uses = list(self._uses(scope, other))
            if self._not_a_tensor(other_values, uses, scope):
                return ""
            for use in uses:
                if self._tensor_use(use):
                    return f"`{other}`, also from `{callee}(...)`, is a tensor"
        return ""

    def from_module_state(self, name: str, at: cst.CSTNode) -> bool:
        """In a method of an `nn.Module`, every binding of `name` is computed from the module's
        own state (`self.pe[:, :n]`, `Variable(self.pe[...])`): it is on the module's device
        already, so a move of it changes nothing."""
        function = self.scopes.enclosing_function(at)
        if function is None or not self.scopes.bound_in(name, function):
            return False
        owner = self.scopes.class_of(function)
        if owner is None or not self.facts.modules.class_info(owner).is_module:
            return False
        values = self._values(function, name)
        return bool(values) and all(
            value is not None and self._rooted_at_self(value) for value in values
        )

    def _rooted_at_self(self, value: cst.BaseExpression) -> bool:
        """`self.x`, `self.x[...]`, `self.x.t()`, `Variable(self.x[...])`."""
        while True:
            if isinstance(value, cst.Name):
                return value.value == "self"
            if isinstance(value, (cst.Attribute, cst.Subscript)):
                value = value.value
            elif isinstance(value, cst.Call):
                if isinstance(value.func, cst.Attribute) and not (
                    dotted_name(value.func) and self.names.qualified_name(value.func)
                ):
                    value = value.func.value
                elif (
                    self.names.qualified_name(value.func) in VARIABLE
                    and value.args
                    and value.args[0].keyword is None
                ):
                    value = value.args[0].value
                else:
                    return False
            else:
                return False


def _encodes_to_a_tensor(call: cst.Call) -> bool:
    """`tokenizer.encode(text, return_tensors="pt")`: one tensor of ids, not a `BatchEncoding`
    (whose `.to()` moves it in place), which `tokenizer(text)` and `encode_plus` return."""
    if call_tail(call.func) != "encode":
        return False
    returned = keyword_argument(call, "return_tensors")
    return returned is not None and string_value(returned.value) == "pt"
