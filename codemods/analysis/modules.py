"""Module facts: which classes are `nn.Module`s (or Datasets), their submodules and known layers,
the tensors and device attributes `__init__` stores, and which functions are model code.
"""

from __future__ import annotations

import builtins
import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import (
    Names,
    argument_of,
    call_tail,
    code_of,
    dotted_name,
    indexed_by_a_string,
    receiver_root,
)
from devfix.codemods.analysis.scopes import ASSIGNING_NODES, Scopes, bound_by, target_names
from devfix.codemods.analysis.torch_names import (
    BASES_WITH_DEVICE_PROPERTY,
    DATASET_BASES,
    INPUT_TARGET_LOSS_CLASSES,
    INPUT_TARGET_LOSS_FUNCTIONS,
    LAYER_PARAMETER,
    LEGACY_CONSTRUCTORS,
    LIGHTNING_STEP_HOOKS,
    MODEL_MEMBERS_KEEPING_PLACE,
    MODEL_OUTPUT_FIELDS,
    MODEL_PLACING_TRAINERS,
    MODULE_BASES,
    MODULE_RETURNING_WRAPPERS,
    MODULE_SELF_METHODS,
    MOVE_METHODS,
    NON_MODULE_CLASSES,
    NON_TENSOR_METHODS,
    PAIRWISE_OR_REDUCING,
    PARAMETER,
    SINGLE_TENSOR_LAYERS,
    SPARSE_CONSTRUCTORS,
    SPLIT_MODEL_BASES,
    TENSOR_FACTORIES,
    TENSOR_FUNCTIONS,
    TENSOR_MEMBERS,
    TENSOR_PRODUCING_FUNCTIONS,
    TENSOR_PROPERTIES,
    VARIABLE,
)

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts
    from devfix.context import FileContext


@dataclass
class ClassInfo:
    node: cst.ClassDef
    is_module: bool = False
    is_dataset: bool = False
    has_device_property: bool = False
    #: Not a module itself, it moves models it holds (`self.G.to(self.device)`) and trains or
    #: reads them (`self.G.parameters()`): a solver/trainer, whose device is the script's choice.
    drives_models: bool = False
    #: A subclass of a Hugging Face / TRL `Trainer`: the model it is handed is on its device.
    is_trainer: bool = False
    #: `self.<attr> = nn.<Layer>(...)` in `__init__`: attr -> qualified layer name.
    layers: dict[str, str] = field(default_factory=dict)
    #: `self.<attr>` assigned in `__init__` from something that holds a device.
    device_attrs: set[str] = field(default_factory=set)
    #: `self.<attr>` that `__init__` only ever builds as a layer returning one tensor.
    tensor_layers: set[str] = field(default_factory=set)
    #: `self.<attr> = nn.Sequential(nn.<Layer>(...), ...)`: attr -> its first layer's name.
    sequential_heads: dict[str, str] = field(default_factory=dict)


@dataclass
class SelfRun:
    """A module's method running the module on inputs it was handed and never moves."""

    #: Each input, and whether it is known to be a tensor.
    inputs: list[tuple[cst.BaseExpression, bool]]
    #: The line where the module moves itself.
    line: int
    #: Where its parameters are: `next(self.parameters()).device`.
    device: cst.BaseExpression


@dataclass
class FunctionInfo:
    node: cst.FunctionDef
    owner: ClassInfo | None
    params: list[str]
    #: Pre-order indices of the targets that bind each local name.
    bindings: dict[str, list[int]]
    #: Computes `tensor_params` (a walk over the body) when first asked.
    find_tensor_params: Callable[[], list[str]] = field(repr=False, compare=False)
    #: For a function nested in a method (at any depth): that method's class.
    host: ClassInfo | None = None

    @functools.cached_property
    def tensor_params(self) -> list[str]:
        """The parameters the body uses as tensors (or annotated as tensors)."""
        return self.find_tensor_params()

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
        if self.owner is not None and self.owner.is_trainer and self.name in _TRAINER_STEPS:
            return True  # what it makes meets the outputs of the model the Trainer placed
        if self.owner is not None and self.owner.drives_models:
            return False  # a solver or trainer: the script's own code around its models
        if self.owner is None and self.host is not None and self.host.drives_models:
            return False  # a helper nested in a trainer's step is the trainer's code too
        return bool(self.tensor_params)


_TENSOR_KEYWORDS = frozenset({"input", "other", "target", "tensor", "mat2", "weight"})
#: The methods of a Trainer subclass that compute with the model's outputs.
_TRAINER_STEPS = frozenset({"compute_loss", "prediction_step", "training_step"})
_LOSS_FUNCTION_TAILS = frozenset(name.rsplit(".", 1)[1] for name in INPUT_TARGET_LOSS_FUNCTIONS)


def self_name(function: cst.FunctionDef) -> str | None:
    """The name of the first parameter of a method (`self`, usually)."""
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


def self_attribute(node: cst.CSTNode, self_var: str = "self") -> str | None:
    """`self.x` -> "x"."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == self_var
    ):
        return node.attr.value
    return None


def methods(classdef: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in classdef.body.body if isinstance(s, cst.FunctionDef)]


def _parameter_default(function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
    """The default value of parameter `name` of `function`, if it has one."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.default
    return None


def forward_parameter_index(forward: cst.FunctionDef, parameter: str) -> int | None:
    """The position of `parameter` among the arguments a call of a module hands its
    `forward` (after `self`); None when `forward` is not one or has no such parameter."""
    params = [p.name.value for p in forward.params.params][1:]
    if forward.name.value != "forward" or parameter not in params:
        return None
    return params.index(parameter)


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


def _hands_back(value: cst.BaseExpression | None, name: str) -> bool:
    """`name`, or a call (not of a builtin such as `str`) whose first argument is `name`."""
    if isinstance(value, cst.Name):
        return value.value == name
    if isinstance(value, cst.Call) and value.args and value.args[0].keyword is None:
        if isinstance(value.func, cst.Name) and value.func.value in _BUILTIN_NAMES:
            return False
        first = value.args[0].value
        return isinstance(first, cst.Name) and first.value == name
    return False


_BUILTIN_NAMES = frozenset(dir(builtins))


def _is_static(function: cst.FunctionDef) -> bool:
    return any(
        (dotted_name(d.decorator) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod")
        for d in function.decorators
    )


#: The methods OpenMMLab's base model classes call from their own `forward`.
_MM_FORWARDS = ("forward_train", "forward_test")
#: Bases that never make a class an `nn.Module`, whatever it defines.
_PLAIN_BASES = frozenset({"object", "builtins.object", "abc.ABC", "typing.Generic"})


def _unknown_bases(node: cst.ClassDef, qualified: set[str]) -> bool:
    """The class has a base, and none that is a plain Python base or a torch class (torch
    classes are judged by name): a base imported from elsewhere in the project."""
    if not node.bases:
        return False
    return not any(name in _PLAIN_BASES or name.startswith("torch.") for name in qualified)


#: Words of a base class's resolved name that say it is a model class of its project
#: (`lib.models.core.Estimator`, `lib.nets.BaseNet`), for a class that also defines `forward`.
_MODEL_PACKAGES = frozenset(
    {"model", "models", "module", "modules", "nn", "net", "nets", "networks"}
)
_MODEL_CLASS_WORDS = ("Model", "Module", "Net")


#: The functions of `torchvision.models` that return no model.
_TORCHVISION_NON_BUILDERS = frozenset({"get_weight", "get_model_weights", "list_models"})


def _torchvision_model_builder(qualified: str) -> bool:
    """`torchvision.models.resnet18`, `torchvision.models.detection.fasterrcnn_resnet50_fpn`,
    `torchvision.models.get_model`: a function that builds a model (weights enums and the
    helpers of `torchvision.models` aside)."""
    if not qualified.startswith("torchvision.models."):
        return False
    tail = qualified.rsplit(".", 1)[1]
    return (
        ".utils." not in qualified
        and tail not in _TORCHVISION_NON_BUILDERS
        and not tail.endswith("_Weights")
        and not tail.startswith("_")
    )


def _named_as_model_base(node: cst.ClassDef, context: FileContext) -> bool:
    """A base whose resolved name is a model class of its project: its class name has "Model",
    "Module" or "Net" in it, or its package is a `models` (`nn`, `networks`, ...) package. Such
    a base cannot be read from this file; the class around `forward` is all the evidence."""
    for base in node.bases:
        for qualified in context.qualified_names(base.value):
            *package, class_name = qualified.name.split(".")
            if any(word in class_name for word in _MODEL_CLASS_WORDS):
                return True
            if any(part in _MODEL_PACKAGES for part in package):
                return True
    return False


def _unpacked_values(
    target: cst.BaseExpression, value: cst.BaseExpression
) -> list[tuple[str, cst.BaseExpression]]:
    """What each name of `a, b = value` holds, for the tensor judge: `value[i]` for a call's
    result unpacked into plain names (a helper's returned tuple), else an unknown marker."""
    elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else []
    if (
        isinstance(value, cst.Call)
        and elements
        and all(
            isinstance(element, cst.Element) and isinstance(element.value, cst.Name)
            for element in elements
        )
    ):
        return [
            (
                cast("cst.Name", element.value).value,
                cst.Subscript(value, [cst.SubscriptElement(cst.Index(cst.Integer(str(position))))]),
            )
            for position, element in enumerate(elements)
        ]
    return [(name.value, cst.Name("__unknown__")) for name in target_names(target)]


def _constant_index(node: cst.Subscript) -> int | None:
    """`i` of `value[i]` for a non-negative integer literal `i`."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    index = node.slice[0].slice.value
    return int(index.value) if isinstance(index, cst.Integer) and index.value.isdigit() else None


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


#: Members only a model has (a tensor has `float()` too, but is never called).
_MODEL_ONLY_MEMBERS = MODEL_MEMBERS_KEEPING_PLACE | {"generate", "forward"}


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


_MODEL_METHODS = frozenset({"parameters", "train", "eval", "state_dict", "load_state_dict"})


def _moves_models_it_trains(context: FileContext, classdef: cst.ClassDef) -> bool:
    """`self.G.to(self.device)` (or `.cuda()`, or `self.G = Net(...).to(self.device)`) and
    `self.G.parameters()` in one class."""
    moved: set[str] = set()
    used: set[str] = set()
    for target in context.of_type(classdef.body, cst.AssignTarget):
        assign = context.parent(target)
        value = assign.value if isinstance(assign, cst.Assign) else None
        attr = self_attribute(target.target)
        if (
            attr is not None
            and isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("to", "cuda")
        ):
            moved.add(attr)
    for node in context.of_type(classdef.body, cst.Call):
        func = node.func
        if not isinstance(func, cst.Attribute):
            continue
        attr = self_attribute(func.value)
        if attr is None:
            continue
        if func.attr.value in ("to", "cuda"):
            moved.add(attr)
        elif func.attr.value in _MODEL_METHODS:
            used.add(attr)
    return bool(moved & used)


def _reads_the_model_it_is_given(context: FileContext, classdef: cst.ClassDef) -> bool:
    """`__init__(self, model, ...)` reads `model.parameters()` (or `.state_dict()`, ...): an
    object built around a model the script already placed (a loss, an EMA, an evaluator), whose
    device follows that model."""
    init = method(classdef, "__init__")
    if init is None:
        return False
    params = {p.name.value for p in (*init.params.posonly_params, *init.params.params)[1:]}
    for node in context.of_type(init.body, cst.Call):
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _MODEL_METHODS
            and isinstance(func.value, cst.Name)
            and func.value.value in params
        ):
            return True
    return False


def names_a_device(attribute: str) -> bool:
    """`self.device`, `self._device`, `self.dev`: an attribute that holds a device."""
    return attribute.lower().strip("_") in ("device", "dev", "torch_device", "target_device")


def names_a_loss(name: str) -> bool:
    """`criterion`, `loss_fn`, `ctc_loss`: a name its author gave a loss."""
    lowered = name.lower()
    return "loss" in lowered or "criterion" in lowered


def _mentions_device(node: cst.CSTNode) -> bool:
    code = code_of(node).lower()
    return "device" in code or "cuda" in code


def is_tensor_type(qualified: str | None) -> bool:
    return qualified is not None and qualified.startswith("torch.") and qualified.endswith("Tensor")


def takes_tensors(qualified: str | None) -> bool:
    """torch functions whose positional arguments are tensors (not sizes, seeds or devices)."""
    if qualified is None:
        return False
    return qualified.startswith("torch.nn.functional.") or qualified in TENSOR_FUNCTIONS


class ModuleFacts(Analysis):
    """Class and function tables of one file, built on first use."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._classes: dict[int, ClassInfo] = {}
        self._functions: dict[int, FunctionInfo] = {}
        self._judges: dict[int, TensorJudge] = {}
        self._global_losses: set[str] | None = None
        self._local_tables: dict[int, set[str]] = {}
        self._construction: dict[int, frozenset[str]] = {}
        self._returns_tensor: dict[int, bool] = {}
        self._returns_tensor_at: dict[tuple[int, int], bool] = {}
        self._tensor_attrs: dict[int, frozenset[str]] = {}
        self._called: dict[int, frozenset[str]] = {}
        self._torch_layers: dict[int, frozenset[str]] = {}

    # -- classes ---------------------------------------------------------------------------

    def class_info(self, node: cst.ClassDef) -> ClassInfo:
        info = self._classes.get(id(node))
        if info is None:
            self._classes[id(node)] = ClassInfo(node)  # a class that builds itself stops here
            info = self._build_class(node)
            self._classes[id(node)] = info
        return info

    def _build_class(self, node: cst.ClassDef) -> ClassInfo:
        bases: set[str] = set()
        for base in node.bases:
            bases |= {qn.name for qn in self.context.qualified_names(base.value)}
            # `class Detect(nn.Module)` with `nn` from `from models.common import *`.
            through_star = self.names.qualified_name_through_star(base.value)
            bases |= {through_star} if through_star is not None else set()
        info = ClassInfo(node)
        info.is_dataset = bool(bases & DATASET_BASES)
        info.is_module = not info.is_dataset and (
            any(name in MODULE_BASES or name.startswith("torch.nn.") for name in bases)
            or any(self.is_pretrained_model_base(base.value) for base in node.bases)
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
        if not info.is_module and not info.is_dataset and _unknown_bases(node, bases):
            info.is_module = self._used_as_module(node)
        info.has_device_property = bool(bases & BASES_WITH_DEVICE_PROPERTY)
        info.is_trainer = bool(bases & MODEL_PLACING_TRAINERS)
        if not info.is_module and not info.is_dataset:
            info.drives_models = _moves_models_it_trains(self.context, node) or (
                _reads_the_model_it_is_given(self.context, node)
                and not self._built_in_model_code(node.name.value)
            )
        construction = self.construction_methods(node)
        for member in node.body.body:
            if isinstance(member, cst.FunctionDef):
                if member.name.value == "device":
                    info.has_device_property = True
                if member.name.value in construction:
                    self._read_init(member, info)
        return info

    def _built_in_model_code(self, class_name: str) -> bool:
        """Whether a module's method of this file builds a `class_name` (then the model it is
        given is one still being built, not one the script placed)."""
        for call in self.context.of_type(self.context.module, cst.Call):
            if (
                isinstance(call.func, cst.Name)
                and call.func.value == class_name
                and self.in_model_method(call)
            ):
                return True
        return False

    def is_pretrained_model_base(self, base: cst.BaseExpression) -> bool:
        """A Hugging Face model base class: `transformers.PreTrainedModel` (however imported),
        a model family's base (`transformers...LlamaPreTrainedModel`), or `PreTrainedModel`
        imported relatively from a `modeling_utils` module (a vendored copy of transformers, or
        a model's remote code shipped next to it)."""
        qualified = self.names.qualified_name(base)
        if qualified in SPLIT_MODEL_BASES or (
            qualified is not None
            and qualified.startswith("transformers.")
            and qualified.endswith("PreTrainedModel")
        ):
            return True
        if isinstance(base, cst.Name) and base.value == "PreTrainedModel":
            source = self.names.relative_import_source(base.value)
            return source is not None and source.rsplit(".", 1)[-1] == "modeling_utils"
        return False

    def is_generic_pretrained_base(self, base: cst.BaseExpression) -> bool:
        """`transformers.PreTrainedModel` itself (however imported, vendored copies included),
        not a model family's base such as `LlamaPreTrainedModel`."""
        if self.names.qualified_name(base) in SPLIT_MODEL_BASES:
            return True
        return isinstance(base, cst.Name) and base.value == "PreTrainedModel"

    def declares_no_split_modules(self, node: cst.ClassDef) -> bool:
        """`_no_split_modules = [...]` (not None) in the class body: what transformers needs
        before it places the model with `device_map="auto"`."""
        for statement in node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    targets = [small.target]
                else:
                    continue
                value = small.value
                if (
                    any(isinstance(t, cst.Name) and t.value == "_no_split_modules" for t in targets)
                    and value is not None
                    and not (isinstance(value, cst.Name) and value.value == "None")
                ):
                    return True
        return False

    def _used_as_module(self, node: cst.ClassDef) -> bool:
        """A class whose base comes from elsewhere (another file of the project) is an
        `nn.Module` when it is used as one: it defines `forward`, calls `super().__init__()` and
        builds `torch.nn` layers on `self` while it is constructed. OpenMMLab's model classes
        (mmdet, mmseg, mmpose, ...) keep `forward` in their base and define `forward_train` /
        `forward_test`, building their parts from config registries (`build_backbone(cfg)`)."""
        init = method(node, "__init__")
        if init is None or super_init_call(init) is None:
            return False
        if method(node, "forward") is None:
            return any(method(node, name) is not None for name in _MM_FORWARDS) and (
                self.builds_parts_from_registries(node)
            )
        construction = self.construction_methods(node)
        built = [
            value
            for function in methods(node)
            if function.name.value in construction
            for value in self._self_attribute_values(function)
        ]
        if any((self.constructed_module(value) or "").startswith("torch.nn.") for value in built):
            return True
        if _named_as_model_base(node, self.context):
            return True
        # Parts of types from elsewhere (a star import) that the class moves as it builds them
        # and then calls: only modules are both moved and callable.
        called = self.called_attributes(node)
        return any(
            value is not strip_module_methods(value)
            and isinstance(assign := self.context.parent(value), cst.Assign)
            and self_attribute(assign.targets[0].target) in called
            for value in built
        )

    def called_attributes(self, classdef: cst.ClassDef) -> frozenset[str]:
        """The attributes the class calls (`self.head(x)`): layers or other callables, never
        tensors."""
        found = self._called.get(id(classdef))
        if found is None:
            found = self._called[id(classdef)] = frozenset(
                attribute
                for call in self.context.of_type(classdef.body, cst.Call)
                if (attribute := self_attribute(call.func)) is not None
            )
        return found

    def _self_attribute_values(self, function: cst.FunctionDef) -> Iterator[cst.BaseExpression]:
        """The values a method assigns to `self.<attr>` (one target each)."""
        self_var = self_name(function)
        if self_var is None:
            return
        for assign in self.context.subtree(function.body):
            if (
                isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and self_attribute(assign.targets[0].target, self_var) is not None
            ):
                yield assign.value

    def builds_parts_from_registries(self, node: cst.ClassDef) -> bool:
        """`self.backbone = build_backbone(backbone)` in `__init__`: submodules of types that
        only the configuration names."""
        init = method(node, "__init__")
        return init is not None and any(
            isinstance(value, cst.Call) and (call_tail(value.func) or "").startswith("build_")
            for value in self._self_attribute_values(init)
        )

    # -- construction-time methods -----------------------------------------------------------

    def construction_methods(self, classdef: cst.ClassDef) -> frozenset[str]:
        """`__init__` and the methods that run only while the object is built: methods every
        use of which (`self.<m>(...)`, `self.apply(self.<m>)`) is in a construction-time method
        of the class. Code there runs before `model.to(device)`, like `__init__` itself."""
        found = self._construction.get(id(classdef))
        if found is not None:
            return found
        by_name = {m.name.value: m for m in methods(classdef)}
        users: dict[str, set[str]] = {name: set() for name in by_name}
        for caller, function in by_name.items():
            self_var = self_name(function)
            if self_var is None or _is_static(function):
                continue
            for node in self.context.of_type(function.body, cst.Attribute):
                attr = self_attribute(node, self_var)
                if attr in users and caller != attr:
                    users[attr].add(caller)
        construction = {"__init__"} if "__init__" in by_name else set()
        changed = True
        while changed:
            changed = False
            for name, callers in users.items():
                if (
                    name not in construction
                    and name != "forward"
                    and not name.startswith("__")
                    and callers
                    and callers <= construction
                ):
                    construction.add(name)
                    changed = True
        found = frozenset(construction)
        self._construction[id(classdef)] = found
        return found

    def is_construction(self, function: FunctionInfo) -> bool:
        """`function` is `__init__` or a method only `__init__` (transitively) calls."""
        if function.owner is None:
            return False
        return function.name in self.construction_methods(function.owner.node)

    def adopted_tensor_shaping(self, call: cst.Call, function: FunctionInfo) -> str | None:
        """The tensor a factory in `__init__` is shaped after when the module adopts it from an
        argument (`self.register_parameter("weight", base.weight)`, `self.weight = base.weight`,
        or `base.weight` itself), as code: `torch.randn(r, self.weight.shape[1])` in a LoRA
        wrapper built around a layer that may already be on a GPU. None otherwise."""
        if function.owner is None or function.name != "__init__":
            return None
        params = set(function.params)
        adopted = self._adopted_attributes(function)
        for arg in call.args:
            for node in self.context.subtree(arg.value):
                if isinstance(node, cst.Attribute) and node.attr.value == "shape":
                    tensor: cst.BaseExpression = node.value
                elif (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value == "size"
                ):
                    tensor = node.func.value
                else:
                    continue
                name = dotted_name(tensor)
                if name is None or "." not in name:
                    continue
                if name.split(".", 1)[0] in params or name in adopted:
                    return name
        return None

    def _adopted_attributes(self, function: FunctionInfo) -> set[str]:
        """`self.<attr>` that `__init__` binds to a tensor of an argument: `self.weight =
        base.weight`, `self.register_parameter("weight", base.weight)`."""
        self_var = self_name(function.node) or "self"
        params = set(function.params)
        found: set[str] = set()
        for node in self.scopes.nodes(function.node.body):
            if isinstance(node, cst.Assign) and len(node.targets) == 1:
                target, value = dotted_name(node.targets[0].target), dotted_name(node.value)
                if target and value and "." in value and value.split(".", 1)[0] in params:
                    found.add(target)
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("register_parameter", "register_buffer")
                and len(node.args) >= 2
                and isinstance(node.args[0].value, cst.SimpleString)
            ):
                value = dotted_name(node.args[1].value)
                key = node.args[0].value.evaluated_value
                if (
                    isinstance(key, str)
                    and value
                    and "." in value
                    and value.split(".", 1)[0] in params
                ):
                    found.add(f"{self_var}.{key}")
        return found

    def tensor_attributes(self, classdef: cst.ClassDef) -> frozenset[str]:
        """Attributes that construction-time methods of the class set to a tensor (plain,
        a buffer or an `nn.Parameter`): `self.<attr>` reads a tensor in any method."""
        found = self._tensor_attrs.get(id(classdef))
        if found is not None:
            return found
        self._tensor_attrs[id(classdef)] = frozenset()  # a cycle through the judge stops here
        attrs: set[str] = set()
        construction = self.construction_methods(classdef)
        for function in methods(classdef):
            if function.name.value not in construction:
                continue
            self_var = self_name(function)
            if self_var is None:
                continue
            judge = self.tensor_judge(function)
            for node in self.scopes.nodes(function.body):
                if isinstance(node, cst.Assign) and len(node.targets) == 1:
                    attr = self_attribute(node.targets[0].target, self_var)
                    value = node.value
                    if attr is not None and (
                        judge.is_tensor(value)
                        or (
                            isinstance(value, cst.Call)
                            and self.names.qualified_name(value.func) in PARAMETER
                        )
                    ):
                        attrs.add(attr)
                elif (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("register_buffer", "register_parameter")
                    and self_attribute(node.func, self_var) is not None
                    and len(node.args) >= 2
                    and isinstance(node.args[0].value, cst.SimpleString)
                ):
                    name = node.args[0].value.evaluated_value
                    if isinstance(name, str):
                        attrs.add(name)
        found = frozenset(attrs)
        self._tensor_attrs[id(classdef)] = found
        return found

    def returns_tensor(self, function: cst.FunctionDef) -> bool:
        """Every `return` of `function` (a method or a module-level function of this file)
        returns a value that is provably a tensor, and there is at least one."""
        known = self._returns_tensor.get(id(function))
        if known is not None:
            return known
        if (
            function.returns is not None
            and is_tensor_type(self.names.qualified_name(function.returns.annotation))
            and not any(
                isinstance(node, cst.Call)
                and self.names.qualified_name(node.func) == "torch.nn.Parameter"
                for node in self.context.subtree(function.body)
            )
        ):
            # `def get_bias(...) -> Tensor:` (a Parameter, also a Tensor, registers itself).
            self._returns_tensor[id(function)] = True
            return True
        self._returns_tensor[id(function)] = False  # recursion: not proven
        judge = self.tensor_judge(function)
        returns = [
            node for node in self.scopes.nodes(function.body) if isinstance(node, cst.Return)
        ]
        verdict = bool(returns) and all(
            r.value is not None and judge.is_tensor(r.value) for r in returns
        )
        self._returns_tensor[id(function)] = verdict
        return verdict

    def returns_tensor_at(self, function: cst.FunctionDef, index: int) -> bool:
        """Every `return` of `function` returns a tuple whose element `index` is provably a
        tensor, and there is at least one."""
        key = (id(function), index)
        known = self._returns_tensor_at.get(key)
        if known is not None:
            return known
        self._returns_tensor_at[key] = False  # recursion (`a, b = pair(n - 1)`): not proven
        judge = self.tensor_judge(function)
        returns = [
            node for node in self.scopes.nodes(function.body) if isinstance(node, cst.Return)
        ]
        verdict = bool(returns) and all(
            isinstance(r.value, cst.Tuple)
            and len(r.value.elements) > index
            and not isinstance(r.value.elements[index], cst.StarredElement)
            and judge.is_tensor(r.value.elements[index].value)
            for r in returns
        )
        self._returns_tensor_at[key] = verdict
        return verdict

    def _read_init(self, init: cst.FunctionDef, info: ClassInfo) -> None:
        other_values: set[str] = set()
        for assign in self.context.subtree(init.body):
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                continue
            attr = self_attribute(assign.targets[0].target)
            if attr is None:
                continue
            value = assign.value
            if isinstance(value, cst.Call) and (
                self.names.qualified_name(value.func) in SINGLE_TENSOR_LAYERS
            ):
                info.tensor_layers.add(attr)
            else:
                other_values.add(attr)
            if isinstance(value, cst.Call):
                layer = self.names.qualified_name(value.func)
                if layer in LAYER_PARAMETER:
                    info.layers[attr] = layer
                    continue
                head = value.args[0].value if value.args and not value.args[0].star else None
                if layer == "torch.nn.Sequential" and isinstance(head, cst.Call):
                    first = self.names.qualified_name(head.func)
                    if first in LAYER_PARAMETER:
                        info.sequential_heads[attr] = first
                if layer == "torch.device":
                    info.device_attrs.add(attr)
                    continue
            if names_a_device(attr) or ("device" in attr.lower() and _mentions_device(value)):
                info.device_attrs.add(attr)
        info.tensor_layers -= other_values

    def parameter_receiving(self, call: cst.Call, index: int) -> str | None:
        """The name of the positional parameter that the `index`-th argument of `call` binds,
        for a function of this file (`make_mask(n, device)`) or a method of the class the
        call is in (`self.make_mask(n, device)`); None for anything else."""
        func = call.func
        function: cst.FunctionDef | None = None
        skip = 0
        if isinstance(func, cst.Name):
            function = self.scopes.module_functions().get(func.value)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            classdef = self.enclosing_class(call)
            caller = self.scopes.enclosing_function(call)
            if (
                classdef is not None
                and caller is not None
                and func.value.value == self_name(caller)
            ):
                function = method(classdef, func.attr.value)
                skip = 1
        if function is None:
            return None
        positional = [
            p.name.value for p in (*function.params.posonly_params, *function.params.params)
        ]
        return positional[index + skip] if index + skip < len(positional) else None

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor
        return None

    def local_module_class(self, qualified: str | None) -> cst.ClassDef | None:
        """The top-level `nn.Module` class of this file named `qualified`, if any."""
        if qualified is None:
            return None
        node = self.scopes.module_classes().get(qualified)
        return node if node is not None and self.class_info(node).is_module else None

    def constructed_module(self, node: cst.BaseExpression) -> str | None:
        """The qualified class name if `node` constructs an nn.Module (`nn.Linear(...)`, a local
        `Block(...)`, either followed by `.to(...)`, `.cuda()`, ...), else None."""
        node = strip_module_methods(node)
        if not isinstance(node, cst.Call) or dotted_name(node.func) is None:
            return None
        qualified = self.names.qualified_name(node.func)
        if qualified is None:
            return None
        if qualified.startswith("torch.nn.") and qualified not in NON_MODULE_CLASSES:
            tail = qualified.rsplit(".", 1)[1]
            inner = qualified[len("torch.nn.") :]
            if tail[:1].isupper() and not inner.startswith(("functional.", "init.", "utils.")):
                return qualified
            return None
        if self.local_module_class(qualified) is not None:
            return qualified
        if qualified == "timm.create_model" or _torchvision_model_builder(qualified):
            return qualified
        return None

    def held_modules(self, classdef: cst.ClassDef) -> frozenset[str]:
        """The attributes `__init__` sets to a module it builds (`self.q_net = QNet(...)`,
        `self.head = nn.Linear(...)`), for any class, module or not."""
        init = method(classdef, "__init__")
        if init is None:
            return frozenset()
        found: set[str] = set()
        for assign in self.context.of_type(init.body, cst.Assign):
            if self.constructed_module(assign.value) is None:
                continue
            for target in assign.targets:
                attr = self_attribute(target.target)
                if attr is not None:
                    found.add(attr)
        return frozenset(found)

    def treated_as_model(self, model: str, function: cst.FunctionDef) -> bool:
        """`function` treats the callable `model` (a name or `self.<attr>`) as a model: a
        member only models have (`model.eval()`, `model.parameters()`, `model.generate(...)`),
        or a field of a model's output read from what it returned (`model(ids).logits`, `out =
        model(ids)` then `out.past_key_values`)."""
        outputs: set[str] = set()
        for call in self.context.of_type(function.body, cst.Call):
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and dotted_name(func.value) == model
                and func.attr.value in _MODEL_ONLY_MEMBERS
            ):
                return True
            if dotted_name(func) != model:
                continue
            parent = self.context.parent(call)
            if isinstance(parent, cst.Attribute) and parent.attr.value in MODEL_OUTPUT_FIELDS:
                return True
            name = self.scopes.assigned_name(call)
            if name is not None:
                outputs.add(name)
        return any(
            isinstance(node.value, cst.Name)
            and node.value.value in outputs
            and node.attr.value in MODEL_OUTPUT_FIELDS
            for node in self.context.of_type(function.body, cst.Attribute)
        )

    def handed_layers(self, classdef: cst.ClassDef) -> frozenset[str]:
        """The attributes `__init__` sets from one of its parameters (`self.layer = linear`)
        that the class both calls and reads parameters of (`self.layer.parameters()`,
        `self.layer.weight`): a module the constructor is given."""
        init = method(classdef, "__init__")
        if init is None:
            return frozenset()
        params = {p.name.value for p in init.params.params[1:]}
        from_params = {
            attr
            for assign in self.context.of_type(init.body, cst.Assign)
            if isinstance(assign.value, cst.Name) and assign.value.value in params
            for target in assign.targets
            if (attr := self_attribute(target.target)) is not None
        }
        with_parameters = {
            attr
            for node in self.context.of_type(classdef.body, cst.Attribute)
            if node.attr.value in ("parameters", "weight", "named_parameters")
            and (attr := self_attribute(node.value)) is not None
        }
        return frozenset(from_params & with_parameters & self.called_attributes(classdef))

    def torch_layers(self, classdef: cst.ClassDef) -> frozenset[str]:
        """The attributes `__init__` sets to a `torch.nn` layer, with parameters or without
        (`self.act = nn.LogSoftmax(dim=1)`): calling one returns a tensor."""
        found = self._torch_layers.get(id(classdef))
        if found is None:
            init = method(classdef, "__init__")
            found = self._torch_layers[id(classdef)] = frozenset(
                attr
                for assign in (self.context.of_type(init.body, cst.Assign) if init else ())
                if (self.constructed_module(assign.value) or "").startswith("torch.nn.")
                for target in assign.targets
                if (attr := self_attribute(target.target)) is not None
            )
        return found

    def is_module_expression(self, node: cst.BaseExpression) -> bool:
        """`self`, `self.head` or a constructed module (`Net(...)`, `nn.Linear(...).cuda()`): a
        receiver whose `.to()` / `.cuda()` moves a module, not a tensor."""
        if isinstance(node, cst.Name) and node.value == "self":
            return True
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            return True
        return self.constructed_module(node) is not None

    def held_kind(self, node: cst.BaseExpression) -> str | None:
        """What a container element is: "module" (`nn.Linear(...)`, a local module class, or
        one passed through a wrapper that returns it: `weight_norm(nn.Linear(...))`,
        `init_(nn.Linear(...))` with a local `def init_(m): return init(m, ...)`), "parameter"
        (`nn.Parameter(...)`), or None."""
        if self.constructed_module(node) is not None:
            return "module"
        if not isinstance(node, cst.Call) or dotted_name(node.func) is None:
            return None
        qualified = self.names.qualified_name(node.func)
        if qualified in PARAMETER:
            return "parameter"
        positional = [arg for arg in node.args if arg.keyword is None]
        if not positional or self.constructed_module(positional[0].value) is None:
            return None
        if qualified in MODULE_RETURNING_WRAPPERS or self._passes_first_argument(node.func):
            return "module"
        return None

    def _passes_first_argument(self, func: cst.BaseExpression) -> bool:
        """`func` is a function or lambda of this file (module level, or local to the function
        around it) whose every return is its first parameter, or a call that takes its first
        parameter first (`return init(m, init_method)`): an initialiser that hands the module
        back."""
        if not isinstance(func, cst.Name):
            return False
        candidates: list[cst.FunctionDef | cst.Lambda] = []
        enclosing = self.scopes.enclosing_function(func)
        scopes: list[cst.CSTNode] = [enclosing] if enclosing is not None else []
        scopes.append(self.context.module)
        for scope in scopes:
            for node in self.scopes.nodes(
                scope.body if isinstance(scope, cst.FunctionDef) else scope
            ):
                if isinstance(node, cst.FunctionDef) and node.name.value == func.value:
                    candidates.append(node)
                elif (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value == func.value
                    and isinstance(node.value, cst.Lambda)
                ):
                    candidates.append(node.value)
            if candidates:
                break
        if len(candidates) != 1:
            return False
        function = candidates[0]
        params = [*function.params.posonly_params, *function.params.params]
        if not params:
            return False
        first = params[0].name.value
        if isinstance(function, cst.Lambda):
            returns: list[cst.BaseExpression | None] = [function.body]
        else:
            returns = [
                node.value
                for node in self.context.subtree(function.body)
                if isinstance(node, cst.Return)
            ]
        return bool(returns) and all(_hands_back(value, first) for value in returns)

    def assignments_to(
        self, classdef: cst.ClassDef, attr: str
    ) -> Iterator[tuple[cst.FunctionDef, cst.CSTNode, cst.BaseExpression | None]]:
        """(method, statement, value) of every `self.<attr> = / : T = / += value` in the class."""
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in self.scopes.nodes(function.body):
                targets: list[cst.BaseExpression] = []
                if isinstance(node, cst.Assign):
                    targets = [t.target for t in node.targets]
                elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                    targets = [node.target]
                if any(self_attribute(t, self_var) == attr for t in targets):
                    yield function, node, node.value  # type: ignore[attr-defined]

    def known_layer(self, classdef: cst.ClassDef, attr: str) -> str | None:
        """`self.<attr> = nn.Linear(...)[.to(...)...]` in `__init__` (the only assignment to it
        in the class): the qualified layer class, when `LAYER_PARAMETER` knows its parameter."""
        found: str | None = None
        for function, _node, value in self.assignments_to(classdef, attr):
            if function.name.value != "__init__" or found is not None or value is None:
                return None
            qualified = self.constructed_module(value)
            if qualified not in LAYER_PARAMETER:
                return None
            found = qualified
        return found

    def layer_parameter_device(
        self, classdef: cst.ClassDef, attr: str, self_var: str
    ) -> str | None:
        """`self.head.weight.device` for a known layer attribute, else None."""
        layer = self.known_layer(classdef, attr)
        if layer is None:
            return None
        return f"{self_var}.{attr}.{LAYER_PARAMETER[layer]}.device"

    def submodule_class(self, classdef: cst.ClassDef, attr: str) -> str | None:
        """The module class `self.<attr>` is constructed from in `__init__`, or None."""
        init = method(classdef, "__init__")
        if init is None:
            return None
        self_var = self_name(init)
        if self_var is None:
            return None
        for node in self.scopes.find(init.body, cst.Assign, own_scope=True):
            if any(self_attribute(t.target, self_var) == attr for t in node.targets):
                return self.constructed_module(node.value)
        return None

    def stored_function(self, call: cst.Call) -> str | None:
        """`self.win(n)` where `__init__` stores a function of a library (`self.win =
        torch.hann_window`): that function's qualified name; None otherwise."""
        attr = self_attribute(call.func)
        if attr is None:
            return None
        classdef = self.enclosing_class(call)
        if classdef is None:
            return None
        key = f"modules.stored_functions.{id(classdef)}"
        cached = self.context.shared.get(key)
        if isinstance(cached, dict):
            return cached.get(attr)
        table: dict[str, str] = {}
        init = method(classdef, "__init__")
        self_var = self_name(init) if init is not None else None
        if init is not None and self_var is not None:
            for assign in self.scopes.find(init.body, cst.Assign, own_scope=True):
                stored = self_attribute(assign.targets[-1].target, self_var)
                value = assign.value
                if isinstance(value, cst.Name):
                    # `def __init__(self, tensor=torch.FloatTensor): self.Tensor = tensor`
                    value = _parameter_default(init, value.value) or value
                if stored is not None and isinstance(value, (cst.Name, cst.Attribute)):
                    qualified = self.names.qualified_name(value)
                    if qualified is not None and "." in qualified:
                        table[stored] = qualified
        self.context.shared[key] = table
        return table.get(attr)

    def handed_by_callers(
        self, forward: cst.FunctionDef, parameter: str
    ) -> list[cst.BaseExpression]:
        """What the other modules of this file hand `parameter` of a module's `forward`: the
        arguments of `self.<attr>(...)` in their methods, where `__init__` builds `self.<attr>`
        from this class (`self.encoder = Encoder(...)`; `self.encoder(embedded, lengths)`)."""
        owner = self.enclosing_class(forward)
        index = forward_parameter_index(forward, parameter)
        if owner is None or index is None:
            return []
        found: list[cst.BaseExpression] = []
        for classdef in self.context.of_type(self.context.module, cst.ClassDef):
            if classdef is owner:
                continue
            for function in self.context.of_type(classdef, cst.FunctionDef):
                self_var = self_name(function)
                for call in self.context.of_type(function.body, cst.Call):
                    attr = self_attribute(call.func, self_var) if self_var else None
                    if attr is None or self.submodule_class(classdef, attr) != owner.name.value:
                        continue
                    if any(arg.star for arg in call.args):
                        continue
                    argument = argument_of(call, parameter, index)
                    if argument is not None:
                        found.append(argument.value)
        return found

    def dispatched_in_init(self, classdef: cst.ClassDef, attribute: str) -> str | None:
        """`dispatch_model(self.head, device_map=...)` in the class's `__init__`: the submodule
        `attribute` (`self.head`) was placed on purpose as a part of a model spread over
        devices. The name of the call as written, or None."""
        init = method(classdef, "__init__")
        if init is None:
            return None
        for call in self.context.of_type(init.body, cst.Call):
            qualified = self.names.qualified_name(call.func) or ""
            if qualified.rsplit(".", 1)[-1] != "dispatch_model" or not call.args:
                continue
            if dotted_name(call.args[0].value) == attribute:
                return code_of(call.func)
        return None

    def submodule_moved(
        self, move: cst.Call
    ) -> tuple[str, str, cst.FunctionDef, cst.ClassDef] | None:
        """(self variable, attribute, method, class) when `move` is `self.<submodule>.to(...)`
        (or `.cuda()`) in a method of an `nn.Module` other than `__init__`, and `__init__`
        provably builds `self.<submodule>` as a module."""
        function = self.enclosing_function(move)
        if function is None or function.name == "__init__":
            return None
        if function.owner is None or not function.owner.is_module:
            return None
        method, classdef = function.node, function.owner.node
        self_var = self_name(method)
        if self_var is None or not isinstance(move.func, cst.Attribute):
            return None
        attr = self_attribute(move.func.value, self_var)
        if attr is None or self.submodule_class(classdef, attr) is None:
            return None  # not provably a module: a tensor attribute or unknown
        return self_var, attr, method, classdef

    def moves_itself(self, classdef: cst.ClassDef) -> cst.Call | None:
        """`self.cuda()` / `self.to(<device>)` in a method of the module (not to the CPU, not a
        cast) to a device it chooses itself: not one a parameter of the method hands it (the
        caller's choice, which the caller's inputs follow), not in its own `.to()` / `.cuda()`
        overrides."""
        for member in classdef.body.body:
            if not isinstance(member, cst.FunctionDef) or member.name.value in MOVE_METHODS:
                continue
            self_var = self_name(member)
            handed = set(self.function_info(member).params)
            for node in self.context.of_type(member, cst.Call):
                func = node.func
                read = {n.value for n in self.context.subtree(node) if isinstance(n, cst.Name)}
                if (
                    isinstance(func, cst.Attribute)
                    and isinstance(func.value, cst.Name)
                    and func.value.value == self_var
                    and self.facts.moves.move_of(node) is not None
                    and not read & handed
                ):
                    return node
        return None

    def inputs_run_unmoved(self, call: cst.Call) -> SelfRun | None:
        """The arguments of `self(...)` (or `self.forward(...)`) in a method of a module that
        moves itself (`predict(self, X)` running `self(X[0].unsqueeze(0))`) that come from the
        method's own parameters and that nothing in the method moves: they reach the module's
        parameters where the caller left them. Each with whether it is known to be a tensor."""
        function = self.enclosing_function(call)
        if function is None or function.owner is None or not function.owner.is_module:
            return None
        self_var = self_name(function.node)
        if function.name in ("forward", "__call__", "__init__") or self_var is None:
            return None
        func = call.func
        runs_itself = (isinstance(func, cst.Name) and func.value == self_var) or (
            self_attribute(func, self_var) == "forward"
        )
        moved_at = self.moves_itself(function.owner.node) if runs_itself else None
        if moved_at is None:
            return None
        moved = {
            receiver_root(node)
            for node in self.context.of_type(function.node.body, cst.Call)
            if self.facts.moves.move_of(node) is not None
        }
        inputs = set(function.params) - moved - {self_var}
        judge = self.tensor_judge(function.node)
        found = [
            (arg.value, judge.is_tensor(arg.value) or root in function.tensor_params)
            for arg in call.args
            if not arg.star and arg.keyword is None and (root := receiver_root(arg.value)) in inputs
        ]
        device = cst.parse_expression(f"next({self_var}.parameters()).device")
        return SelfRun(found, self.scopes.line_of(moved_at), device) if found else None

    def registered_otherwise(self, classdef: cst.ClassDef, attr: str) -> bool:
        """The class registers `attr` itself (`register_buffer("x", ...)`, `nn.Parameter`)."""
        for call in self.scopes.find(classdef, cst.Call):
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("register_buffer", "register_parameter")
                and call.args
                and isinstance(call.args[0].value, cst.SimpleString)
                and call.args[0].value.evaluated_value == attr
            ):
                return True
        for _function, node, value in self.assignments_to(classdef, attr):
            if (
                isinstance(node, cst.Assign)
                and isinstance(value, cst.Call)
                and dotted_name(value.func) is not None
                and self.names.qualified_name(value.func) in PARAMETER
                # `if learn: self.x = nn.Parameter(self.x)`: on the other path a plain tensor.
                and self.scopes.on_every_path(node, lambda _statement: False)
            ):
                return True
        return False

    def grad_enabled_later(self, classdef: cst.ClassDef, attr: str) -> bool:
        """`self.x.requires_grad = True` or `self.x.requires_grad_()` anywhere in the class."""
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in self.scopes.nodes(function.body):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        t = target.target
                        if (
                            isinstance(t, cst.Attribute)
                            and t.attr.value == "requires_grad"
                            and self_attribute(t.value, self_var) == attr
                            and not (
                                isinstance(node.value, cst.Name) and node.value.value == "False"
                            )
                        ):
                            return True
                elif (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value == "requires_grad_"
                    and self_attribute(node.func.value, self_var) == attr
                ):
                    return True
        return False

    # -- functions -------------------------------------------------------------------------

    def enclosing_function(self, node: cst.CSTNode) -> FunctionInfo | None:
        function = self.scopes.enclosing_function(node)
        return self.function_info(function) if function is not None else None

    def step_hook(self, node: cst.CSTNode) -> tuple[str, ClassInfo] | None:
        """The method `node` is in, when it runs once per batch (a LightningModule step hook or
        `forward`), and its class."""
        function = self.enclosing_function(node)
        if function is None or function.owner is None or function.name not in LIGHTNING_STEP_HOOKS:
            return None
        return function.name, function.owner

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
        owner = self.scopes.class_of(node)
        return self.class_info(owner) if owner is not None else None

    def _build_function(self, node: cst.FunctionDef) -> FunctionInfo:
        owner = self._owner(node)
        params = [
            p.name.value
            for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        ]
        if owner is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        bindings: dict[str, list[int]] = {}
        for inner in self.context.of_type(node.body, ASSIGNING_NODES):
            for target in bound_by(inner, comprehensions=False):
                bindings.setdefault(target.value, []).append(self.context.order(target)[0])

        # A weak reference: the analysis holds the info, the info must not hold the analysis.
        modules = weakref.proxy(self)

        def tensor_params() -> list[str]:
            evidence = modules._tensor_evidence(node, owner)
            annotated = {
                param.name.value
                for param in (*node.params.posonly_params, *node.params.params)
                if param.annotation is not None
                and is_tensor_type(modules.names.qualified_name(param.annotation.annotation))
            }
            return [p for p in params if p in evidence or p in annotated]

        return FunctionInfo(node, owner, params, bindings, tensor_params, self._host(node))

    def _host(self, node: cst.FunctionDef) -> ClassInfo | None:
        """The class of the method `node` is nested in, at any depth."""
        outer = next(
            (a for a in self.context.ancestors(node) if isinstance(a, cst.FunctionDef)), None
        )
        if outer is None:
            return None
        info = self.function_info(outer)
        return info.owner or info.host

    def _used_as_tensor_member(self, node: cst.Attribute) -> bool:
        """`x.shape` read, or `x.chunk(...)` called: a tensor's property or method. A method
        that is only read (`args.chunk`, `opt.split`) and `.device` (a field of many argument
        namespaces and configs: `args.device`) say nothing."""
        member = node.attr.value
        if member in TENSOR_PROPERTIES:
            return True
        if member not in TENSOR_MEMBERS or member == "device":
            return False
        parent = self.context.parent(node)
        return isinstance(parent, cst.Call) and parent.func is node

    def _type_checked_as_tensor(self, call: cst.Call) -> str | None:
        """`isinstance(x, torch.Tensor)`, or `type(x)` compared with `torch.Tensor`: the name
        the code checks to be a tensor before it handles it as one."""
        qualified = self.names.qualified_name(call.func)
        positional = [a.value for a in call.args if a.keyword is None]
        negated = self.context.parent(call)
        if isinstance(negated, cst.UnaryOperation) and isinstance(negated.operator, cst.Not):
            return None  # `if not isinstance(x, torch.Tensor): x = torch.tensor(x)`
        if qualified in ("isinstance", "builtins.isinstance") and len(positional) == 2:
            kind = self.names.qualified_name(positional[1])
            if kind == "torch.Tensor" and isinstance(positional[0], cst.Name):
                return positional[0].value
            return None
        if qualified not in ("type", "builtins.type") or len(positional) != 1:
            return None
        comparison = self.context.parent(call)
        if not isinstance(comparison, cst.Comparison) or not isinstance(positional[0], cst.Name):
            return None
        others = [comparison.left, *(c.comparator for c in comparison.comparisons)]
        if any(
            other is not call and self.names.qualified_name(other) == "torch.Tensor"
            for other in others
        ):
            return positional[0].value
        return None

    def _tensor_evidence(self, function: cst.FunctionDef, owner: ClassInfo | None) -> set[str]:
        """Names the body uses as tensors: `x.shape`, `F.relu(x)`, `x * torch.exp(...)`,
        `self.<layer>(x)`. One walk over the body for every parameter at once."""
        names: set[str] = set()
        layers = owner.layers if owner is not None and owner.is_module else {}
        for node in self.context.of_type(
            function.body, (cst.Attribute, cst.Call, cst.BinaryOperation)
        ):
            if isinstance(node, cst.Attribute):
                base = node.value
                if isinstance(base, cst.Subscript) and not indexed_by_a_string(base):
                    base = base.value  # `y[mask].shape`; `batch["x"].shape` is the entry's
                if isinstance(base, cst.Name) and self._used_as_tensor_member(node):
                    names.add(base.value)
            elif isinstance(node, cst.Call):
                checked = self._type_checked_as_tensor(node)
                if checked is not None:
                    names.add(checked)
                    continue
                if (
                    isinstance(node.func, cst.Attribute)
                    and isinstance(node.func.value, cst.Name)
                    and any(a.keyword is not None and a.keyword.value == "dim" for a in node.args)
                    and (self.names.qualified_name(node.func) or node.func.value.value).split(".")[
                        0
                    ]
                    == node.func.value.value
                ):
                    names.add(node.func.value.value)  # `x.argmax(dim=1)`: NumPy says `axis=`
                # Keyword arguments of torch functions are mostly numbers (`min=`, `max=`,
                # `dim=`); only the ones that name a tensor count.
                arg_names = [
                    a.value.value
                    for a in node.args
                    if isinstance(a.value, cst.Name)
                    and (a.keyword is None or a.keyword.value in _TENSOR_KEYWORDS)
                ]
                if not arg_names:
                    continue
                if self_attribute(node.func) in layers or (
                    dotted_name(node.func) is not None
                    and takes_tensors(self.names.qualified_name(node.func))
                ):
                    names.update(arg_names)
            elif isinstance(node, cst.BinaryOperation):
                sides = (node.left, node.right)
                if any(
                    isinstance(side, cst.Call)
                    and dotted_name(side.func) is not None
                    and takes_tensors(self.names.qualified_name(side.func))
                    for side in sides
                ):
                    names.update(side.value for side in sides if isinstance(side, cst.Name))
        return names

    def layer_device(self, owner: ClassInfo | None, attr: str) -> str | None:
        """`self.<attr>.<parameter>.device` for a layer `__init__` builds, else None."""
        if owner is None or attr not in owner.layers:
            return None
        return f"self.{attr}.{LAYER_PARAMETER[owner.layers[attr]]}.device"

    def model_code_after_construction(self, node: cst.CSTNode) -> FunctionInfo | None:
        """The model code around `node` (a module's method, a function of tensors) unless it
        runs while the module is built (`__init__` and its helpers place what they make)."""
        function = self.enclosing_function(node)
        if function is None or not function.is_model_code or self.is_construction(function):
            return None
        return function

    def in_model_method(self, node: cst.CSTNode) -> bool:
        """Inside a method of an `nn.Module` subclass (at any depth)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = self.function_info(ancestor)
                if info.owner is not None and info.owner.is_module:
                    return True
        return False

    def in_trainer_subclass(self, node: cst.CSTNode) -> bool:
        """Inside a method of a subclass of a Hugging Face / TRL `Trainer`, whose model (the
        `model` it is handed, `self.model`) is on the Trainer's device."""
        function = self.enclosing_function(node)
        return function is not None and function.owner is not None and function.owner.is_trainer

    # -- losses --------------------------------------------------------------------------------

    def loss_kind(self, node: cst.Call) -> str | None:
        """ "function" for a call of an `F.*` loss, "module" for a call of an `nn.*Loss`
        instance (built inline, a module-level or local name, a `self.<attr>` built in
        `__init__`), else None; only losses called as `loss(input, target)`."""
        func = node.func
        if call_tail(func) in _LOSS_FUNCTION_TAILS and dotted_name(func) is not None:
            if self.names.qualified_name(func) in INPUT_TARGET_LOSS_FUNCTIONS:
                return "function"
            return None
        if isinstance(func, cst.Call):
            return "module" if self.constructed_module(func) in INPUT_TARGET_LOSS_CLASSES else None
        if isinstance(func, cst.Name):
            if func.value in self._module_level_losses():
                return "module"
            function = self.enclosing_function(node)
            if function is not None and self._local_loss(func.value, function.node):
                return "module"
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            function = self.enclosing_function(node)
            if function is None or function.owner is None:
                return None
            attr = self_attribute(func, self_name(function.node) or "")
            if attr is None:
                return None
            if self.submodule_class(function.owner.node, attr) in INPUT_TARGET_LOSS_CLASSES:
                return "module"
        return None

    def _module_level_losses(self) -> set[str]:
        if self._global_losses is None:
            names: set[str] = set()
            for statement in self.context.module.body:
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    if isinstance(small, cst.Assign) and len(small.targets) == 1:
                        target = small.targets[0].target
                        if isinstance(target, cst.Name) and (
                            self.constructed_module(small.value) in INPUT_TARGET_LOSS_CLASSES
                        ):
                            names.add(target.value)
            self._global_losses = names
        return self._global_losses

    def _local_loss(self, name: str, function: cst.FunctionDef) -> bool:
        """Every binding of local `name` in `function` constructs an `nn.*Loss`."""
        table = self._local_tables.get(id(function))
        if table is None:
            bindings: dict[str, list[bool]] = {}
            for node in self.scopes.find(function.body, cst.Assign, own_scope=True):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            is_loss = (
                                self.constructed_module(node.value) in INPUT_TARGET_LOSS_CLASSES
                            )
                            bindings.setdefault(target.target.value, []).append(is_loss)
            table = {local for local, verdicts in bindings.items() if all(verdicts)}
            self._local_tables[id(function)] = table
        return name in table

    def tensor_judge(self, function: cst.FunctionDef) -> TensorJudge:
        """Whether expressions of `function` are provably tensors (built once per function)."""
        judge = self._judges.get(id(function))
        if judge is None:
            judge = self._judges[id(function)] = TensorJudge(
                self.names, self.scopes, function, self
            )
        return judge


#: A verdict inside a name's own bindings: computed from the name itself.
_SELF_REFERENCE = "self-reference"


class TensorJudge:
    """Whether an expression in one function provably evaluates to a torch tensor.

    Only what is certain counts: tensor factories, legacy constructors, torch math on tensors,
    tensor methods, arithmetic with a tensor, and local names every binding of which is one.
    """

    def __init__(
        self,
        names: Names,
        scopes: Scopes,
        function: cst.FunctionDef,
        modules: ModuleFacts | None = None,
    ) -> None:
        self.names = names
        self.scopes = scopes
        self.function = function
        #: With the module facts, `self.<tensor attribute>` and calls of methods and functions
        #: of this file that return tensors are judged too.
        self.modules = modules
        self.owner = scopes.class_of(function)
        self.self_var = self_name(function) if self.owner is not None else None
        self._locals: dict[str, list[cst.BaseExpression]] | None = None
        self._annotated: set[str] = set()
        for param in (
            *function.params.posonly_params,
            *function.params.params,
            *function.params.kwonly_params,
        ):
            if param.annotation is not None:
                qualified = self.names.qualified_name(param.annotation.annotation)
                if qualified in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
                    self._annotated.add(param.name.value)

    def _local_values(self) -> dict[str, list[cst.BaseExpression]]:
        if self._locals is None:
            table: dict[str, list[cst.BaseExpression]] = {}
            bindings = (
                cst.Assign,
                cst.AugAssign,
                cst.AnnAssign,
                cst.For,
                cst.CompFor,
                cst.NamedExpr,
                cst.With,
            )
            for node in self.scopes.find(self.function.body, bindings, own_scope=True):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        if isinstance(target.target, cst.Name):
                            table.setdefault(target.target.value, []).append(node.value)
                        else:
                            for unpacked, element in _unpacked_values(target.target, node.value):
                                table.setdefault(unpacked, []).append(element)
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(
                    node.target, cst.Name
                ):
                    value = node.value
                    table.setdefault(node.target.value, []).append(
                        value
                        if isinstance(node, cst.AnnAssign) and value is not None
                        else cst.Name("__augmented__")
                    )
                elif isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
                    for name in bound_by(node):
                        table.setdefault(name.value, []).append(cst.Name("__unknown__"))
                elif isinstance(node, cst.With):
                    for item in node.items:
                        if item.asname is not None:
                            for name in target_names(item.asname.name):
                                table.setdefault(name.value, []).append(cst.Name("__unknown__"))
            self._locals = table
        return self._locals

    def is_tensor(
        self,
        node: cst.BaseExpression,
        seen: frozenset[str] = frozenset(),
        same_attr: str | None = None,
    ) -> bool:
        return self._judge(node, seen, same_attr) not in (None, _SELF_REFERENCE)

    def requires_grad(self, node: cst.BaseExpression) -> bool:
        return self._judge(node, frozenset(), None) == "trainable"

    def _judge(
        self, node: cst.BaseExpression, seen: frozenset[str], same_attr: str | None
    ) -> str | None:
        """ "tensor", "trainable" (requires grad) or None (not provably a tensor); inside the
        bindings of a name, `_SELF_REFERENCE` for a value computed from that same name
        (`omega = 1.0 / omega`), which the name's other bindings decide."""
        if isinstance(node, cst.Name):
            if node.value in self._annotated:
                return "tensor"
            values = self._local_values().get(node.value)
            if not values:
                return None
            if node.value in seen:
                return _SELF_REFERENCE
            verdicts = [self._judge(v, seen | {node.value}, same_attr) for v in values]
            augmented = [
                v for v in values if isinstance(v, cst.Name) and v.value == "__augmented__"
            ]
            real = [
                x for x, v in zip(verdicts, values) if v not in augmented and x != _SELF_REFERENCE
            ]
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
            attr = self_attribute(node, self.self_var) if self.self_var else None
            if (
                attr is not None
                and self.modules is not None
                and self.owner is not None
                and attr in self.modules.tensor_attributes(self.owner)
            ):
                return "tensor"  # derived from the module's state, never a new leaf
            return None
        if isinstance(node, cst.Subscript):
            return self._judge_subscript(node, seen, same_attr)
        if isinstance(node, cst.BinaryOperation):
            left = self._judge(node.left, seen, same_attr)
            right = self._judge(node.right, seen, same_attr)
            sides = {left, right} - {None, _SELF_REFERENCE}
            if not sides:
                return _SELF_REFERENCE if _SELF_REFERENCE in (left, right) else None
            return "trainable" if "trainable" in sides else "tensor"
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return self._judge(node.expression, seen, same_attr)
        if isinstance(node, cst.Call):
            return self._judge_call(node, seen, same_attr)
        return None

    def _judge_subscript(
        self, node: cst.Subscript, seen: frozenset[str], same_attr: str | None
    ) -> str | None:
        index = _constant_index(node)
        helper = (
            self._local_callee(node.value.func)
            if index is not None and isinstance(node.value, cst.Call)
            else None
        )
        if helper is not None and index is not None and self.modules is not None:
            # `slopes, bias = build_bias(n)`: the element each `return` of the helper has.
            return "tensor" if self.modules.returns_tensor_at(helper, index) else None
        return self._judge(node.value, seen, same_attr)

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
        helper = self._local_callee(node.func)
        if helper is not None:
            return "tensor" if self.modules and self.modules.returns_tensor(helper) else None
        layer = self_attribute(node.func, self.self_var) if self.self_var else None
        if (
            layer is not None
            and self.modules is not None
            and self.owner is not None
            and layer in self.modules.class_info(self.owner).tensor_layers
        ):
            return "tensor"  # `self.norm(x)`: a layer's output, never a new leaf to keep
        qualified = self.names.qualified_name(node.func) if dotted_name(node.func) else None
        if qualified is not None:
            if qualified in VARIABLE:
                positional = [a for a in node.args if a.keyword is None]
                if positional and self._judge(positional[0].value, seen, same_attr):
                    return "trainable" if trainable else "tensor"
                return None
            if qualified in TENSOR_FACTORIES or qualified in LEGACY_CONSTRUCTORS:
                return "trainable" if trainable else "tensor"
            if qualified in SPARSE_CONSTRUCTORS:
                return "tensor"
            if qualified in PAIRWISE_OR_REDUCING:
                pair = [a.value for a in node.args if a.keyword is None]
                if len(pair) == len(node.args) == 2 and all(
                    self._judge(a, seen, same_attr) for a in pair
                ):
                    return "tensor"
                return None
            if qualified in TENSOR_PRODUCING_FUNCTIONS:
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

    def _local_callee(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The function of this file that `func(...)` calls: `self.<method>`, `Cls.<method>`
        of the enclosing class, or a module-level function."""
        if self.modules is None:
            return None
        if isinstance(func, cst.Attribute) and self.owner is not None:
            receiver = func.value
            if isinstance(receiver, cst.Name) and receiver.value in (
                self.self_var,
                self.owner.name.value,
            ):
                return method(self.owner, func.attr.value)
            return None
        if isinstance(func, cst.Name) and not self._local_values().get(func.value):
            return self.scopes.module_functions().get(func.value)
        return None

    def _method(self, node: cst.Call, seen: frozenset[str], same_attr: str | None) -> str | None:
        assert isinstance(node.func, cst.Attribute)
        name = node.func.attr.value
        if name in NON_TENSOR_METHODS:
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


LIST_ONLY_METHODS = frozenset({"index", "remove", "reverse", "sort", "count", "clear", "copy"})
DICT_ONLY_METHODS = frozenset({"get", "setdefault", "popitem", "copy", "fromkeys"})


def valid_module_key(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and value != "" and "." not in value
    return False


class AttributeUses:
    """How the rest of the class uses `self.<attr>`."""

    def __init__(self) -> None:
        self.added_modules = 0
        self.added_parameters = 0
        self.added_unknown = 0
        self.list_only: set[str] = set()
        self.dict_only: set[str] = set()
        self.reassigned: str | None = None
        #: The keys of `self.<attr>[key] = value` assignments.
        self.keys: list[cst.BaseExpression] = []
        #: A subscript assignment that is not one plain key (a slice, several indices).
        self.bad_keys = False
        self.registered_elsewhere = False

    @classmethod
    def collect(
        cls, modules: ModuleFacts, classdef: cst.ClassDef, attr: str, origin: cst.Assign
    ) -> AttributeUses:
        """How the methods of `classdef` use `self.<attr>` besides the assignment `origin`."""
        uses = cls()
        for function in methods(classdef):
            self_var = self_name(function)
            if self_var is None:
                continue
            for node in modules.scopes.nodes(function.body):
                if isinstance(node, cst.Assign) and node is not origin:
                    uses._assigned(modules, node, self_var, attr, function.name.value)
                elif (
                    isinstance(node, cst.AugAssign)
                    and self_attribute(node.target, self_var) == attr
                ):
                    uses._added(modules, node.value)
                if isinstance(node, cst.Call):
                    uses._called(modules, classdef, function, node, self_var, attr)
                elif isinstance(node, cst.For) and uses._registers_each(
                    modules, node, self_var, attr
                ):
                    uses.registered_elsewhere = True
        return uses

    @staticmethod
    def _registers_each(modules: ModuleFacts, loop: cst.For, self_var: str, attr: str) -> bool:
        """`for i, layer in enumerate(self.<attr>): self.add_module(str(i), layer)` (or
        `register_module`, `setattr(self, ...)`): each element is registered under a name of
        its own, so an `nn` container would register it twice."""
        subtree = modules.context.subtree
        if not any(self_attribute(node, self_var) == attr for node in subtree(loop.iter)):
            return False
        for node in subtree(loop.body):
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == self_var
                and func.attr.value in ("add_module", "register_module")
            ):
                return True
            if (
                modules.names.qualified_name(func) in ("setattr", "builtins.setattr")
                and node.args
                and isinstance(node.args[0].value, cst.Name)
                and node.args[0].value.value == self_var
            ):
                return True
        return False

    def _assigned(
        self, modules: ModuleFacts, assign: cst.Assign, self_var: str, attr: str, where: str
    ) -> None:
        """`self.<attr> = ...` (in method `where`) or `self.<attr>[key] = value`."""
        for target in assign.targets:
            t = target.target
            if self_attribute(t, self_var) == attr:
                self.reassigned = where
            elif isinstance(t, cst.Subscript) and self_attribute(t.value, self_var) == attr:
                self._count(modules, assign.value)
                index = t.slice[0].slice if len(t.slice) == 1 else None
                if isinstance(index, cst.Index):
                    self.keys.append(index.value)
                else:
                    self.bad_keys = True

    def _added(self, modules: ModuleFacts, value: cst.BaseExpression) -> None:
        """`self.<attr> += value`: a list or tuple display's elements, else something unknown."""
        if isinstance(value, (cst.List, cst.Tuple)):
            for element in value.elements:
                self._count(modules, element.value)
        else:
            self.added_unknown += 1

    def _called(
        self,
        modules: ModuleFacts,
        classdef: cst.ClassDef,
        function: cst.FunctionDef,
        call: cst.Call,
        self_var: str,
        attr: str,
    ) -> None:
        """`f(self.<attr>)`, which a construction method's module call registers the
        submodules with, or a method of `self.<attr>` (`.append(m)`, `.extend(...)`)."""
        if any(self_attribute(arg.value, self_var) == attr for arg in call.args):
            if (
                function.name.value in modules.construction_methods(classdef)
                and modules.constructed_module(call) is not None
            ):
                self.registered_elsewhere = True
            return
        if (
            isinstance(call.func, cst.Attribute)
            and self_attribute(call.func.value, self_var) == attr
        ):
            self._method_called(modules, call.func.attr.value, call.args)

    def _method_called(self, modules: ModuleFacts, method: str, args: Sequence[cst.Arg]) -> None:
        """`self.<attr>.method(*args)`: what it adds, and the methods only lists or dicts have."""
        if method in ("append", "insert") and args:
            self._count(modules, args[-1].value)
        elif method == "extend" and args:
            extended = args[0].value
            if isinstance(extended, (cst.List, cst.Tuple)):
                for element in extended.elements:
                    self._count(modules, element.value)
            elif isinstance(extended, (cst.ListComp, cst.GeneratorExp)):
                self._count(modules, extended.elt)
            else:
                self.added_unknown += 1
        elif method == "update":
            self.added_unknown += 1
        if method in LIST_ONLY_METHODS:
            self.list_only.add(method)
        if method in DICT_ONLY_METHODS:
            self.dict_only.add(method)

    def _count(self, modules: ModuleFacts, value: cst.BaseExpression) -> None:
        kind = modules.held_kind(value)
        if kind == "module":
            self.added_modules += 1
        elif kind == "parameter":
            self.added_parameters += 1
        else:
            self.added_unknown += 1

    def blocker(self, kind: str) -> str | None:
        if self.reassigned is not None:
            return f"it is assigned again in `{self.reassigned}`"
        methods_used = self.list_only if kind == "list" else self.dict_only
        if methods_used:
            names = ", ".join(f"`.{m}()`" for m in sorted(methods_used))
            return f"it is used with {names}, which the module container lacks"
        return None
