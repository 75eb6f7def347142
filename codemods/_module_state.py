"""What DF103-DF106 share: module state in `__init__`, module constructions, loss objects.

These helpers answer questions about the *state* a module class keeps (tensor attributes,
submodules, loss objects) rather than about the device a new tensor meets (`_model_code`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import dotted_name
from devfix.codemods._torch_names import (
    LAYER_PARAMETER,
    LEGACY_CONSTRUCTORS,
    NON_TENSOR_MEMBERS,
    TENSOR_FACTORIES,
)
from devfix.context import children_view
from devfix.types import ImportSpec

#: Methods of nn.Module that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "train",
        "eval",
        "requires_grad_",
        "type",
        "apply",
        "xpu",
        "mps",
        "to_empty",
    }
)
#: torch.nn classes that are not modules (or hold no device state worth a container).
_NON_MODULE_CLASSES = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.nn.UninitializedParameter",
        "torch.nn.UninitializedBuffer",
        "torch.nn.Buffer",
        "torch.nn.parameter.Buffer",
        "torch.nn.ParameterList",
        "torch.nn.ParameterDict",
    }
)
#: Tensor-producing torch functions beyond the factories (their result is a new tensor).
_TENSOR_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "from_numpy",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "log2",
        "log10",
        "sqrt",
        "rsqrt",
        "pow",
        "outer",
        "ger",
        "cat",
        "concat",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "triu",
        "tril",
        "matmul",
        "mm",
        "bmm",
        "einsum",
        "where",
        "meshgrid",
        "cartesian_prod",
        "cumsum",
        "cumprod",
        "flip",
        "roll",
        "abs",
        "neg",
        "reciprocal",
        "sigmoid",
        "tanh",
        "softmax",
        "log_softmax",
        "clamp",
        "clip",
        "floor",
        "ceil",
        "round",
        "diag",
        "diag_embed",
        "block_diag",
        "kron",
        "repeat_interleave",
        "tile",
        "polar",
        "complex",
        "view_as_real",
        "view_as_complex",
        "fft.fft",
        "fft.rfft",
        "unsqueeze",
        "squeeze",
        "transpose",
        "reshape",
        "flatten",
        "t",
        "mul",
        "add",
        "sub",
        "div",
        "true_divide",
        "maximum",
        "minimum",
        "logical_not",
        "bernoulli",
        "multinomial",
        "normal",
        "tensor_split",
        "erf",
        "sign",
        "atan2",
        "arccos",
        "acos",
        "asin",
        "atan",
    )
)
#: Tensor methods whose result is not a tensor.
_NON_TENSOR_METHODS = NON_TENSOR_MEMBERS | frozenset(
    {
        "numpy",
        "tolist",
        "item",
        "data_ptr",
        "storage",
        "untyped_storage",
        "is_contiguous",
        "is_floating_point",
        "equal",
        "allclose",
        "any_",
        "__len__",
        "chunk",
        "split",
        "unbind",
    }
)
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

#: `nn.*Loss` classes called as `loss(input, target)`; CTC and the pairwise losses are left out.
INPUT_TARGET_LOSS_CLASSES = frozenset(
    f"torch.nn.{name}"
    for name in (
        "L1Loss",
        "MSELoss",
        "CrossEntropyLoss",
        "NLLLoss",
        "NLLLoss2d",
        "PoissonNLLLoss",
        "KLDivLoss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "HuberLoss",
        "SmoothL1Loss",
        "SoftMarginLoss",
        "MultiLabelSoftMarginLoss",
        "MultiLabelMarginLoss",
        "MultiMarginLoss",
        "HingeEmbeddingLoss",
    )
)
#: `F.*` losses called as `loss(input, target, ...)`.
INPUT_TARGET_LOSS_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}"
    for name in (
        "l1_loss",
        "mse_loss",
        "cross_entropy",
        "nll_loss",
        "poisson_nll_loss",
        "kl_div",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "huber_loss",
        "smooth_l1_loss",
        "soft_margin_loss",
        "multilabel_soft_margin_loss",
        "multilabel_margin_loss",
        "multi_margin_loss",
        "hinge_embedding_loss",
    )
)


def walk_function_body(function: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """Nodes of `function` itself, not of functions, lambdas or classes nested in it."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        stack.extend(reversed(children_view(node)))


def self_name(function: cst.FunctionDef) -> str | None:
    """The name of the first parameter of a method (`self`, usually)."""
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


def self_attribute(node: cst.CSTNode, self_var: str) -> str | None:
    """`self.x` -> "x"."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == self_var
    ):
        return node.attr.value
    return None


def methods(classdef: cst.ClassDef) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []
    for statement in classdef.body.body:
        if isinstance(statement, cst.FunctionDef):
            found.append(statement)
    return found


def method(classdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((m for m in methods(classdef) if m.name.value == name), None)


def class_level_names(classdef: cst.ClassDef) -> set[str]:
    """Names a class body binds itself (methods, properties, class attributes)."""
    names: set[str] = set()
    for statement in classdef.body.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            names.add(target.target.value)
                elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    names.add(small.target.value)
    return names


def is_super_init(node: cst.CSTNode) -> bool:
    """`super().__init__(...)`, `super(Cls, self).__init__(...)` or `Base.__init__(self, ...)`."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    if node.func.attr.value != "__init__":
        return False
    receiver = node.func.value
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name):
        return receiver.func.value == "super"
    return dotted_name(receiver) is not None


def super_init_call(init: cst.FunctionDef) -> cst.Call | None:
    """The top-level `super().__init__(...)` statement of `__init__`, if any."""
    for statement in init.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Expr) and is_super_init(small.value):
                    assert isinstance(small.value, cst.Call)
                    return small.value
    return None


def nn_reference(checker: DevicePass, name: str) -> tuple[str, tuple[ImportSpec, ...]]:
    """How this file can spell `torch.nn.<name>`, and the import that needs (if any)."""
    module = checker.context.module
    spelled: str | None = None
    for line in module.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    imported = dotted_name(alias.name)
                    bound = alias.asname.name if alias.asname else None
                    bound_name = bound.value if isinstance(bound, cst.Name) else None
                    if imported == "torch.nn" and bound_name:
                        return f"{bound_name}.{name}", ()
                    if imported == "torch" and bound_name:
                        spelled = spelled or f"{bound_name}.nn.{name}"
                    elif imported in ("torch", "torch.nn") and bound_name is None:
                        spelled = spelled or f"torch.nn.{name}"
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = dotted_name(small.module) if small.module is not None else None
                for alias in small.names:
                    imported = dotted_name(alias.name)
                    bound_node: cst.BaseExpression = (
                        alias.asname.name if alias.asname else alias.name
                    )
                    bound_name = bound_node.value if isinstance(bound_node, cst.Name) else None
                    if bound_name is None:
                        continue
                    if source == "torch" and imported == "nn":
                        return f"{bound_name}.{name}", ()
                    if source == "torch.nn" and imported == name:
                        return bound_name, ()
    if spelled is not None:
        return spelled, ()
    return name, (ImportSpec("torch.nn", name),)


class ClassTables:
    """Module classes defined at the top level of a file, by name."""

    def __init__(self, checker: DevicePass) -> None:
        self.checker = checker
        self.by_name: dict[str, cst.ClassDef] = {
            statement.name.value: statement
            for statement in checker.context.module.body
            if isinstance(statement, cst.ClassDef)
        }

    @classmethod
    def of(cls, checker: DevicePass) -> ClassTables:
        shared = checker.context.shared.get("module_state_classes")
        if not isinstance(shared, ClassTables):
            shared = ClassTables(checker)
            checker.context.shared["module_state_classes"] = shared
        return shared

    def local_module_class(self, qualified: str | None) -> cst.ClassDef | None:
        from devfix.codemods._model_code import ModelCode

        if qualified is None or qualified not in self.by_name:
            return None
        node = self.by_name[qualified]
        return node if ModelCode.of(self.checker).class_info(node).is_module else None


def strip_module_methods(node: cst.BaseExpression) -> cst.BaseExpression:
    """`nn.Linear(a, b).to(device).half()` -> `nn.Linear(a, b)`."""
    while (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in MODULE_SELF_METHODS
        and isinstance(node.func.value, cst.Call)
    ):
        node = node.func.value
    return node


def constructed_module(checker: DevicePass, node: cst.BaseExpression) -> str | None:
    """The qualified class name if `node` constructs an nn.Module (`nn.Linear(...)`, a local
    `Block(...)`, either followed by `.to(...)`, `.cuda()`, ...), else None."""
    node = strip_module_methods(node)
    if not isinstance(node, cst.Call) or dotted_name(node.func) is None:
        return None
    qualified = checker.qualified_name(node.func)
    if qualified is None:
        return None
    if qualified.startswith("torch.nn.") and qualified not in _NON_MODULE_CLASSES:
        tail = qualified.rsplit(".", 1)[1]
        inner = qualified[len("torch.nn.") :]
        if tail[:1].isupper() and not inner.startswith(("functional.", "init.", "utils.")):
            return qualified
        return None
    if ClassTables.of(checker).local_module_class(qualified) is not None:
        return qualified
    return None


class TensorJudge:
    """Whether an expression in one function provably evaluates to a torch tensor.

    Only what is certain counts: tensor factories, legacy constructors, torch math on tensors,
    tensor methods, arithmetic with a tensor, and local names every binding of which is one.
    """

    def __init__(self, checker: DevicePass, function: cst.FunctionDef) -> None:
        self.checker = checker
        self.function = function
        self.self_var = self_name(function)
        self._locals: dict[str, list[cst.BaseExpression]] | None = None
        self._annotated: set[str] = set()
        for param in (
            *function.params.posonly_params,
            *function.params.params,
            *function.params.kwonly_params,
        ):
            if param.annotation is not None:
                qualified = self.checker.qualified_name(param.annotation.annotation)
                if qualified in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
                    self._annotated.add(param.name.value)

    def _local_values(self) -> dict[str, list[cst.BaseExpression]]:
        if self._locals is None:
            table: dict[str, list[cst.BaseExpression]] = {}
            for node in walk_function_body(self.function):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            table.setdefault(target.target.value, []).append(node.value)
                        else:
                            for name in _bound_names(target.target):
                                table.setdefault(name, []).append(cst.Name("__unknown__"))
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(
                    node.target, cst.Name
                ):
                    value = node.value
                    table.setdefault(node.target.value, []).append(
                        value
                        if isinstance(node, cst.AnnAssign) and value is not None
                        else cst.Name("__augmented__")
                    )
                elif isinstance(node, (cst.For, cst.CompFor, cst.With, cst.NamedExpr)):
                    for name in _bound_names(node):
                        table.setdefault(name, []).append(cst.Name("__unknown__"))
            self._locals = table
        return self._locals

    def is_tensor(
        self,
        node: cst.BaseExpression,
        seen: frozenset[str] = frozenset(),
        same_attr: str | None = None,
    ) -> bool:
        return self._judge(node, seen, same_attr) is not None

    def requires_grad(self, node: cst.BaseExpression) -> bool:
        return self._judge(node, frozenset(), None) == "trainable"

    def _judge(
        self, node: cst.BaseExpression, seen: frozenset[str], same_attr: str | None
    ) -> str | None:
        """ "tensor", "trainable" (requires grad) or None (not provably a tensor)."""
        if isinstance(node, cst.Name):
            if node.value in self._annotated:
                return "tensor"
            values = self._local_values().get(node.value)
            if not values or node.value in seen:
                return None
            verdicts = [self._judge(v, seen | {node.value}, same_attr) for v in values]
            augmented = [
                v for v in values if isinstance(v, cst.Name) and v.value == "__augmented__"
            ]
            real = [x for x, v in zip(verdicts, values) if v not in augmented]
            if not real or any(x is None for x in real):
                return None
            return "trainable" if "trainable" in real else "tensor"
        if isinstance(node, cst.Attribute):
            if (
                self.self_var is not None
                and same_attr is not None
                and (self_attribute(node, self.self_var) == same_attr)
            ):
                return "tensor"
            if node.attr.value in ("T", "mT", "H", "data", "real", "imag"):
                return self._judge(node.value, seen, same_attr)
            return None
        if isinstance(node, cst.Subscript):
            return self._judge(node.value, seen, same_attr)
        if isinstance(node, cst.BinaryOperation):
            left = self._judge(node.left, seen, same_attr)
            right = self._judge(node.right, seen, same_attr)
            if left is None and right is None:
                return None
            return "trainable" if "trainable" in (left, right) else "tensor"
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return self._judge(node.expression, seen, same_attr)
        if isinstance(node, cst.Call):
            return self._judge_call(node, seen, same_attr)
        return None

    def _judge_call(
        self, node: cst.Call, seen: frozenset[str], same_attr: str | None
    ) -> str | None:
        trainable = any(
            arg.keyword is not None
            and arg.keyword.value == "requires_grad"
            and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
            for arg in node.args
        )
        if isinstance(node.func, cst.Attribute) and dotted_name(node.func) is None:
            # A method call on a computed receiver: `torch.zeros(3).unsqueeze(0)`.
            return self._method(node, seen, same_attr)
        qualified = self.checker.qualified_name(node.func) if dotted_name(node.func) else None
        if qualified is not None:
            if qualified in _VARIABLE:
                positional = [a for a in node.args if a.keyword is None]
                if positional and self._judge(positional[0].value, seen, same_attr):
                    return "trainable" if trainable else "tensor"
                return None
            if qualified in TENSOR_FACTORIES or qualified in LEGACY_CONSTRUCTORS:
                return "trainable" if trainable else "tensor"
            if qualified in _TENSOR_FUNCTIONS:
                if any(self._judge(a.value, seen, same_attr) for a in node.args) or any(
                    isinstance(a.value, (cst.List, cst.Tuple))
                    and any(self._judge(e.value, seen, same_attr) for e in a.value.elements)
                    for a in node.args
                ):
                    return "trainable" if trainable else "tensor"
                if qualified == "torch.from_numpy":
                    return "tensor"
                return None
        if isinstance(node.func, cst.Attribute):
            return self._method(node, seen, same_attr)
        return None

    def _method(self, node: cst.Call, seen: frozenset[str], same_attr: str | None) -> str | None:
        assert isinstance(node.func, cst.Attribute)
        name = node.func.attr.value
        if name in _NON_TENSOR_METHODS:
            return None
        receiver = self._judge(node.func.value, seen, same_attr)
        if receiver is None:
            return None
        if name == "requires_grad_":
            off = (
                node.args
                and isinstance(node.args[0].value, cst.Name)
                and (node.args[0].value.value == "False")
            )
            return "tensor" if off else "trainable"
        if name in ("detach", "detach_"):
            return "tensor"
        return receiver


def _bound_names(node: cst.CSTNode) -> Iterator[str]:
    if isinstance(node, (cst.For, cst.CompFor)):
        yield from _target_names(node.target)
    elif isinstance(node, cst.With):
        for item in node.items:
            if item.asname is not None:
                yield from _target_names(item.asname.name)
    elif isinstance(node, cst.NamedExpr):
        yield from _target_names(node.target)
    else:
        yield from _target_names(node)


def _target_names(node: cst.CSTNode) -> Iterator[str]:
    """Names an assignment target binds; `self.x` and `a[i]` bind none."""
    if isinstance(node, cst.Name):
        yield node.value
    elif isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:
            yield from _target_names(element.value)
    elif isinstance(node, cst.StarredElement):
        yield from _target_names(node.value)


def known_layer(checker: DevicePass, classdef: cst.ClassDef, attr: str) -> str | None:
    """`self.<attr> = nn.Linear(...)[.to(...)...]` in `__init__` (the only assignment to it in
    the class): the qualified layer class, when `LAYER_PARAMETER` knows its parameter."""
    found: str | None = None
    for function in methods(classdef):
        self_var = self_name(function)
        if self_var is None:
            continue
        for node in walk_function_body(function):
            targets: list[cst.BaseExpression] = []
            value: cst.BaseExpression | None = None
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
                value = node.value
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                targets = [node.target]
                value = node.value
            for target in targets:
                if self_attribute(target, self_var) != attr:
                    continue  # `self.head.weight = ...` (tying) keeps the layer
                if function.name.value != "__init__" or found is not None or value is None:
                    return None
                qualified = constructed_module(checker, value)
                if qualified not in LAYER_PARAMETER:
                    return None
                found = qualified
    return found


def layer_parameter_device(
    checker: DevicePass, classdef: cst.ClassDef, attr: str, self_var: str
) -> str | None:
    """`self.head.weight.device` for a known layer attribute, else None."""
    layer = known_layer(checker, classdef, attr)
    if layer is None:
        return None
    return f"{self_var}.{attr}.{LAYER_PARAMETER[layer]}.device"


def submodule_class(checker: DevicePass, classdef: cst.ClassDef, attr: str) -> str | None:
    """The module class `self.<attr>` is constructed from in `__init__`, or None."""
    init = method(classdef, "__init__")
    if init is None:
        return None
    self_var = self_name(init)
    if self_var is None:
        return None
    for node in walk_function_body(init):
        if isinstance(node, cst.Assign) and any(
            self_attribute(t.target, self_var) == attr for t in node.targets
        ):
            return constructed_module(checker, node.value)
    return None


def needs_parentheses(node: cst.BaseExpression) -> bool:
    """Whether `node.method()` needs `node` wrapped in parentheses."""
    if getattr(node, "lpar", None):
        return False
    return not isinstance(
        node,
        (
            cst.Name,
            cst.Attribute,
            cst.Call,
            cst.Subscript,
            cst.SimpleString,
            cst.List,
            cst.Tuple,
            cst.Dict,
            cst.ListComp,
        ),
    )


def move_to(node: cst.BaseExpression, device: cst.BaseExpression) -> cst.Call:
    """`node.to(device)`, parenthesising `node` where needed."""
    receiver = node
    if needs_parentheses(node):
        receiver = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(
        func=cst.Attribute(value=receiver, attr=cst.Name("to")), args=[cst.Arg(value=device)]
    )
