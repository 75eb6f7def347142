"""Script flow: what a training script does around its model. Which device the model called
at some point was moved to (and how that device can be written there), which DataLoaders a loop
iterates, which batch names reach the model unmoved, which functions prepare data, and whether
the script runs as one process of several.

Only what the code states is used. When the device is known but cannot be written where it is
needed, the answer carries the reason, and the passes report instead of guessing.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, cast

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import self_attribute
from devfix.codemods.analysis.moves import DeviceMove, copies_to_host
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
    receiver_root,
    root_name,
    statement_call,
)
from devfix.codemods.analysis.scopes import Binding, ScopeTable
from devfix.codemods.analysis.torch_names import (
    DATA_FACTORIES,
    DATA_KEYWORDS,
    DATALOADERS,
    DEVICE_CARRYING_MODEL_TYPES,
    DISTRIBUTED_MARKERS,
    GRAD_SCALERS,
    ITERATION_WRAPPERS,
    LEGACY_CONSTRUCTORS,
    LOGGING_METHODS,
    MAPPING_METHODS,
    MODEL_WRAPPERS,
    MODULE_SELF_METHODS,
    OPTIMIZER_CLASS_NAMES,
    OTHER_OPTIMIZERS,
    PER_ITEM_METHODS,
    PLACEMENT_NAMES,
    PLACEMENT_WORDS,
    SELF_MOVING_TRAINERS,
    TENSOR_DATASETS,
    TOKEN_ID_METHODS,
)
from devfix.context import FileContext
from devfix.notebooks import is_notebook
from devfix.types import Edit

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

_MOVES = ("to", "cuda")
#: Where a model's device comes from: its move (None when only `from_pretrained` placed it), the
#: function the move's device is written in, and whether `from_pretrained` loaded it onto a
#: device (a device map, or an adapter over a placed model).
FoundMove = tuple[Optional[DeviceMove], Optional[cst.FunctionDef], bool]
#: Checkpoint keys that conventionally hold Python numbers or configuration, not tensors.
METADATA_KEY = re.compile(
    r"^(epoch|epochs|start_epoch|step|steps|global_step|iteration|iter|it|best\w*|acc\w*|lr|"
    r"args|config|cfg|hparams|hyper_parameters|version|arch|meta|metadata|n_\w+|num_\w+)$"
)


_INSPECTING_CALLS = frozenset({"print", "len", "isinstance", "type", "str", "repr", "id", "range"})
_MARKER_TAILS = frozenset(name.rsplit(".", 1)[1] for name in DISTRIBUTED_MARKERS)
_INSPECTING_BUILTINS = frozenset({"len", "print", "isinstance", "type", "str", "repr", "id"})
#: Methods that run a training routine when called with data (`model.train()` alone does not).
_TRAINING_ROUTINES = frozenset({"train", "fit", "train_model", "train_epoch", "train_one_epoch"})
#: Module-level calls a library module makes as well as a script (not work of its own).
_SETUP_MODULES = frozenset({"logging", "typing", "collections", "warnings", "os", "re", "sys"})
_SETUP_CALLS = frozenset(
    {"getLogger", "get_logger", "TypeVar", "namedtuple", "NamedTuple", "compile", "register"}
)

#: The comment that opens each code cell of a notebook in the module devfix analyses.
_CELL_MARKER = "# ~~devfix-cell~~ "
#: How many callers up a model parameter's move is looked for.
_MAX_CALLER_DEPTH = 6


@dataclass(frozen=True)
class ModelDevice:
    """A model moved to a device: `move` as written where it was asked for, else `reason`."""

    model: str
    move: DeviceMove | None
    reason: str = ""
    #: The model was loaded with `from_pretrained(...)` (it has a `.device`).
    pretrained: bool = False


@dataclass
class TrainingObject:
    """A name bound to an optimizer, a learning-rate scheduler or a grad scaler."""

    kind: str  # "optimizer" | "scheduler" | "scaler"
    qualified: str
    models: set[str] = field(default_factory=set)
    #: For a scheduler: the optimizer names it was built on.
    optimizers: set[str] = field(default_factory=set)
    #: Built by a function of the project named for an optimizer (`build_optimizer(cfg,
    #: model)`): what it builds, and whether it keeps its state lazily, is unknown.
    factory: bool = False


@dataclass
class EarlyState:
    """Optimizer state created (`kind` "construct") or restored ("load") by `node`, for the
    optimizer `name`, before `move`, the model move it must follow; `label`: how it is
    restored, for a message (`opt.load_state_dict`)."""

    node: cst.Call
    kind: str
    name: str
    move: cst.Call
    label: str = ""


@dataclass
class DataFunction:
    """A function (or lambda) that prepares data, the role it plays, and the DataLoaders that
    consume it; `preloads`: it runs once when the dataset is built (`__init__`)."""

    node: cst.FunctionDef | cst.Lambda
    role: str
    #: DataLoader calls that consume it (empty: none found).
    loaders: list[cst.Call] = field(default_factory=list)
    preloads: bool = False
    #: It is mapped over a `datasets` dataset (`ds.map(f)`), not run by a DataLoader.
    mapping: bool = False


@dataclass(frozen=True)
class DataHazard:
    """Why a move inside data preparation breaks (`text`), and whether the device it moves to
    is the right one for the batch (then the training loop can move the batch there instead)."""

    text: str
    right_device: bool


@dataclass
class LoopPlan:
    """What DF204 (and DF201) make of one `for` loop over a DataLoader."""

    #: The `for` loop, or the `x, y = next(iter(loader))` statement that takes one batch.
    loop: cst.CSTNode
    loaders: list[cst.Call]
    model: str | None = None
    move: DeviceMove | None = None
    #: The project's own helper that moves a batch (`self._batch_to_device`), when another
    #: loop feeding the same callee moves its batch with it.
    helper: str = ""
    #: Batch names that reach the model unmoved, in target order.
    unmoved: list[str] = field(default_factory=list)
    #: The statement that moves them, and where it goes; None when the plan has a reason.
    edit: Edit | None = None
    statement_code: str = ""
    #: Why no edit can be made although names are unmoved.
    reason: str = ""
    #: Batch names left on the CPU, and dict keys a whole-batch move leaves out: the consumer
    #: their values reach needs them there (`analysis.cpu_only`).
    kept: dict[str, str] = field(default_factory=dict)
    cpu_keys: dict[str, str] = field(default_factory=dict)


class ScriptFlow(Analysis):
    """Where models are moved, what loops iterate and feed, of one file; built on first use."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._call_sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] | None = None
        self._plans: dict[int, LoopPlan | None] = {}
        self._distributed: str | None = None
        self._callbacks: frozenset[str] | None = None
        self._module_objects: dict[str, TrainingObject] | None = None
        self._multi_device: bool | None = None
        self._aligns_targets: bool | None = None
        self._one_device: bool | None = None
        self._data: dict[int, DataFunction] | None = None
        self._loggers: set[str] | None = None

    def device_move(self, call: cst.Call, function: cst.FunctionDef | None) -> DeviceMove | None:
        """A move to a device known to be one (a literal, `.cuda()`, a device variable)."""
        move = self.facts.moves.move_of(call, function)
        return move if move is not None and move.kind is not None else None

    def _scope_nodes(self, root: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The nodes under `root` (not `root` itself) that belong to its scope."""
        nodes = self.scopes.nodes(root)
        next(nodes)
        return nodes

    # -- call sites ------------------------------------------------------------------------

    def call_sites(
        self, function: cst.FunctionDef
    ) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
        """Calls `f(...)` of a module-level function, with the function each call is in."""
        if self._call_sites is None:
            sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] = {}
            functions = self.scopes.module_functions()
            for node in self.context.subtree(self.context.module):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Name)
                    and node.func.value in functions
                ):
                    sites.setdefault(node.func.value, []).append(
                        (node, self.scopes.enclosing_function(node))
                    )
            self._call_sites = sites
        if self.scopes.module_functions().get(function.name.value) is not function:
            return self._method_call_sites(function)
        return self._call_sites.get(function.name.value, [])

    def _method_call_sites(
        self, method: cst.FunctionDef
    ) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
        """Calls `self.m(...)` of a private method `m` (`_train`) from its own class: only the
        class calls it, so these are all its callers. [] for other functions."""
        owner = self.scopes.class_of(method)
        params = method.params.params
        if (
            owner is None
            or not method.name.value.startswith("_")
            or method.name.value.startswith("__")
            or not params
            or params[0].name.value != "self"
            or method.decorators
        ):
            return []
        sites: list[tuple[cst.Call, cst.FunctionDef | None]] = []
        for node in self.context.subtree(owner):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == method.name.value
                and _is_name(node.func.value, "self")
            ):
                sites.append((node, self.scopes.enclosing_function(node)))
        return sites

    def _argument_for(
        self, call: cst.Call, function: cst.FunctionDef, param: str
    ) -> cst.BaseExpression | None:
        if any(arg.star for arg in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return arg.value
        names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if (
            names
            and names[0] == "self"
            and isinstance(call.func, cst.Attribute)
            and _is_name(call.func.value, "self")
        ):
            names = names[1:]  # `self.m(a)`: `a` fills the parameter after `self`
        if param not in names:
            return None
        index = names.index(param)
        positional = [arg for arg in call.args if arg.keyword is None]
        if index < len(positional):
            return positional[index].value
        return None

    def model_device(
        self,
        model: cst.BaseExpression,
        at: cst.CSTNode,
        *,
        _depth: int = 0,
        _before: int | None = None,
        _function: cst.FunctionDef | None = None,
    ) -> ModelDevice | None:
        """The device the model named by `model` was moved to, written as seen at `at`."""
        name = dotted_name(model)
        if name is None or _depth > 4:
            return None
        function = _function if _depth else self.scopes.enclosing_function(at)
        if _before is None and _depth == 0:
            _before = self.context.order(at)[0]
        found = self._find_move(name, function, _before, _depth)
        if found is None:
            return None
        move, origin, pretrained = found
        if move is None:
            return ModelDevice(name, None, "", pretrained) if pretrained else None
        if move.conditional_line:
            return ModelDevice(
                name,
                None,
                f"the model is moved only when the `if` on line {move.conditional_line} holds",
                pretrained,
            )
        expressed = self.express(move, origin, function)
        if isinstance(expressed, str):
            return ModelDevice(name, None, expressed, pretrained)
        return ModelDevice(name, expressed, "", pretrained)

    def _find_move(
        self,
        name: str,
        function: cst.FunctionDef | None,
        before: int | None,
        depth: int,
    ) -> FoundMove | None:
        if depth > _MAX_CALLER_DEPTH:
            return None  # a recursive function passes its parameter to itself
        table, table_function = self.scopes.lookup(name, function)
        same_scope = table_function is function and not name.startswith("self.")
        limit = before if same_scope else None
        candidates: list[tuple[int, FoundMove]] = []
        pretrained = False
        direct_moves: dict[int, cst.CSTNode] = {}
        for binding in table.bindings.get(name, []):
            if limit is not None and binding.position >= limit:
                continue
            if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
                found = self._move_from_callers(table.node, name, binding, depth)
                if found is None and self._receives_device_carrying_model(table.node, name):
                    found = (None, table_function, True)
                if found is not None:
                    candidates.append((binding.position, found))
                continue
            if binding.kind != "assign" or binding.value is None:
                candidates.append((binding.position, (None, table_function, False)))
                continue
            received = self._stored_parameter(table, binding.value, depth)
            if received is not None:
                candidates.append((binding.position, received))
                continue
            result = self._move_in_value(binding.value, table_function, binding.position, depth)
            if result is not None and result[2]:
                pretrained = True
            if _is_move_call(binding.value):
                direct_moves[binding.position] = binding.value
            candidates.append((binding.position, result or (None, table_function, False)))
        for position, call in table.statement_moves.get(name, []):
            if limit is not None and position >= limit:
                continue
            move = self.device_move(call, table_function)
            direct_moves[position] = call
            candidates.append((position, (move, table_function, pretrained)))
        if not candidates and "." in name:
            return self._attribute_of_parameter_move(name, function, depth)
        if not candidates:
            return None
        candidates.sort(key=lambda item: item[0])
        position, (move, origin, was_pretrained) = candidates[-1]
        if move is None and not (pretrained or was_pretrained):
            return None
        direct = direct_moves.get(position)
        if (
            direct is not None
            and move is not None
            and position in table.conditional
            and not self._moved_on_every_path(direct)
        ):
            move = dataclasses.replace(
                move, conditional_line=self.scopes.line_of(table.conditional[position])
            )
        return move, origin, pretrained or was_pretrained

    def _moved_on_every_path(self, move: cst.CSTNode) -> bool:
        """The move (`model.to(device)` or `model = model.to(device)`) sits under `if`s whose
        other branches make the same move or end in `raise`/`return` (a model built one way or
        another, each followed by the same move)."""
        statement = self.context.parent(move)
        if not isinstance(statement, (cst.Expr, cst.Assign)):
            return False

        def same(other: cst.BaseStatement) -> bool:
            return isinstance(other, cst.SimpleStatementLine) and any(
                small.deep_equals(statement) for small in other.body
            )

        return self.scopes.on_every_path(statement, same)

    def _receives_device_carrying_model(self, function: cst.FunctionDef, param: str) -> bool:
        """`param` is annotated as a Hugging Face model and no call in this file fills it: the
        caller chooses its device, and the model carries it as `.device` (a library class or
        function given a model, e.g. `def __init__(self, model: PreTrainedModel, ...)`)."""
        if self.call_sites(function):
            return False
        for candidate in (
            *function.params.posonly_params,
            *function.params.params,
            *function.params.kwonly_params,
        ):
            if candidate.name.value == param and candidate.annotation is not None:
                annotation = candidate.annotation.annotation
                return self.names.qualified_name(annotation) in DEVICE_CARRYING_MODEL_TYPES
        return False

    def _stored_parameter(
        self, table: ScopeTable, value: cst.BaseExpression, depth: int
    ) -> FoundMove | None:
        """`self.model = model` in a method, `model` a parameter of that method annotated as a
        Hugging Face model that no call in this file fills: the model carries its device."""
        if not isinstance(table.node, cst.ClassDef) or not isinstance(value, cst.Name):
            return None
        method = self.scopes.enclosing_function(value)
        if method is None or self.scopes.class_of(method) is not table.node:
            return None
        bindings = self.scopes.table(method).bindings.get(value.value, [])
        if len(bindings) != 1 or bindings[0].kind != "param" or depth > 4:
            return None
        if self._receives_device_carrying_model(method, value.value):
            return (None, None, True)
        return None

    def _move_in_value(
        self,
        value: cst.BaseExpression,
        function: cst.FunctionDef | None,
        position: int,
        depth: int,
    ) -> FoundMove | None:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value in _MOVES:
                move = self.device_move(value, function)
                inner = self._move_in_value(value.func.value, function, position, depth)
                pretrained = bool(inner and inner[2])
                return (move, function, pretrained) if move or pretrained else None
            if value.func.attr.value == "from_pretrained":
                # Loaded with a device map: on a device, reachable only through `model.device`.
                device_map = next(
                    (a.value for a in value.args if a.keyword and a.keyword.value == "device_map"),
                    None,
                )
                wrapped = self._wrapped_by_adapter(value, function, position, depth)
                if device_map is None and wrapped is not None:
                    return wrapped
                if (
                    device_map is None
                    or self.facts.moves.device_kind(device_map, function) == "cpu"
                ):
                    return None
                return (None, function, True)
            if value.func.attr.value in ("eval", "train", "half", "float", "bfloat16"):
                return self._move_in_value(value.func.value, function, position, depth)
        if isinstance(value, cst.Call):
            qualified = self.names.qualified_name(value.func)
            positional = [a for a in value.args if a.keyword is None]
            inner_arg = positional[0].value if positional else None
            for arg in value.args:
                if arg.keyword is not None and arg.keyword.value in ("module", "model"):
                    inner_arg = arg.value
            if qualified in MODEL_WRAPPERS and isinstance(inner_arg, cst.Call):
                # `DDP(model.to(rank), device_ids=[rank])`
                return self._move_in_value(inner_arg, function, position, depth + 1)
            if qualified in MODEL_WRAPPERS and inner_arg is not None:
                inner_name = dotted_name(inner_arg)
                if inner_name is not None:
                    return self._find_move(inner_name, function, position, depth + 1)
            return None
        inner_name = dotted_name(value)
        if inner_name is not None:
            return self._find_move(inner_name, function, position, depth + 1)
        return None

    def _wrapped_by_adapter(
        self,
        value: cst.Call,
        function: cst.FunctionDef | None,
        position: int,
        depth: int,
    ) -> FoundMove | None:
        """`PeftModel.from_pretrained(model, path)`: adapters loaded onto a model given as the
        first argument stay on that model's device, and the result has a `.device`."""
        positional = [a for a in value.args if a.keyword is None]
        inner = positional[0].value if positional else argument(value, "model")
        inner_name = dotted_name(inner) if inner is not None else None
        if inner_name is None:
            return None
        found = self._find_move(inner_name, function, position, depth + 1)
        if found is None or not found[2]:
            return None
        return found

    def _attribute_of_parameter_move(
        self, name: str, function: cst.FunctionDef | None, depth: int
    ) -> FoundMove | None:
        """`agent.q_net` where `agent` is a parameter of `function`: the move its callers made
        of that attribute of the object they pass (`agent.q_net.to(args.device)` in `main`)."""
        root, _, rest = name.partition(".")
        if function is None or root == "self":
            return None
        table, table_function = self.scopes.lookup(root, function)
        bindings = table.bindings.get(root, [])
        if (
            table_function is not function
            or len(bindings) != 1
            or bindings[0].kind != "param"
            or not isinstance(table.node, cst.FunctionDef)
        ):
            return None
        return self._move_from_callers(table.node, root, bindings[0], depth, suffix="." + rest)

    def _move_from_callers(
        self,
        function: cst.FunctionDef,
        param: str,
        binding: Binding,
        depth: int,
        *,
        suffix: str = "",
    ) -> FoundMove | None:
        sites = self.call_sites(function)
        if not sites:
            return None
        results = []
        for call, caller in sites:
            argument = self._argument_for(call, function, param)
            if argument is None or dotted_name(argument) is None:
                return None
            found = self._find_move(
                (dotted_name(argument) or "") + suffix,
                caller,
                self.context.order(call)[0],
                depth + 1,
            )
            if found is None or found[0] is None:
                return None
            if found[0].conditional_line:
                return found
            expressed = self.express(found[0], found[1], function)
            if isinstance(expressed, str):
                # Moved, but to a device that cannot be written here: the caller's own words,
                # so that the answer carries the reason.
                return found
            results.append(expressed)
        codes = {r.code for r in results}
        if len(codes) != 1:
            return None
        return results[0], function, False

    def express(
        self, move: DeviceMove, origin: cst.FunctionDef | None, target: cst.FunctionDef | None
    ) -> DeviceMove | str:
        """The same move written so that it means the same thing inside `target`."""
        if move.method != "to" or move.expression is None:
            return move
        expression = move.expression
        roots = self._root_names(expression)
        if origin is target or not roots:
            return move
        code = code_of(expression)
        if (
            roots == {"self"}
            and self.scopes.class_of(target) is not None
            and (origin is None or self.scopes.class_of(origin) is self.scopes.class_of(target))
        ):
            return move
        # `self.device = device` in the class: use the attribute.
        owner = self.scopes.class_of(target)
        if owner is not None:
            table = self.scopes.table(owner)
            for attr, bindings in table.bindings.items():
                if any(b.value is not None and code_of(b.value) == code for b in bindings):
                    return DeviceMove("to", cst.parse_expression(attr))
        # A parameter of `target` that every caller fills with the same expression.
        if target is not None:
            params = [p.name.value for p in (*target.params.posonly_params, *target.params.params)]
            sites = self.call_sites(target)
            for param in params:
                if sites and all(
                    (arg := self._argument_for(call, target, param)) is not None
                    and code_of(arg) == code
                    for call, _ in sites
                ):
                    return DeviceMove("to", cst.Name(param))
            # `args.device` where every caller passes its `args` on as a parameter.
            root = _attribute_chain_root(expression)
            for param in params:
                if (
                    root is not None
                    and sites
                    and all(
                        isinstance(arg := self._argument_for(call, target, param), cst.Name)
                        and arg.value == root.value
                        for call, _ in sites
                    )
                ):
                    renamed = expression.deep_replace(root, cst.Name(param))
                    assert isinstance(renamed, cst.BaseExpression)
                    return DeviceMove("to", renamed)
        # Globals of the module, not shadowed in `target`.
        module_table = self.scopes.table(self.context.module)
        if all(
            not self.scopes.bound_in(root, target)
            and (root in module_table.bindings or root in ("torch",))
            and (origin is None or not self.scopes.bound_in(root, origin))
            for root in roots
        ):
            return move
        where = f"`{target.name.value}`" if target is not None else "the module"
        return f"the device `{code}` the model was moved to is not visible in {where}"

    # -- loaders and loops -----------------------------------------------------------------

    def dataloader_calls(
        self, expr: cst.BaseExpression, function: cst.FunctionDef | None, depth: int = 0
    ) -> list[cst.Call]:
        """The `DataLoader(...)` calls an iterable comes from; [] if anything else may feed it."""
        if depth > 6:
            return []
        if isinstance(expr, cst.IfExp):
            # `None if val is None else DataLoader(...)`: a `None` is never iterated.
            branches = [b for b in (expr.body, expr.orelse) if not _is_name(b, "None")]
            found_in = [self.dataloader_calls(b, function, depth + 1) for b in branches]
            return [c for calls in found_in for c in calls] if all(found_in) else []
        if isinstance(expr, cst.Call):
            qualified = self.names.qualified_name(expr.func)
            if qualified in DATALOADERS:
                return [expr]
            if (qualified in ITERATION_WRAPPERS or _names_an_iterator(expr.func)) and (
                expr.args and expr.args[0].keyword is None
            ):
                return self.dataloader_calls(expr.args[0].value, function, depth + 1)
            return self._returned_loaders(expr, None, depth)
        name = dotted_name(expr)
        if name is None:
            return []
        table, table_function = self.scopes.lookup(name, function)
        bindings = table.bindings.get(name, [])
        if not bindings:
            return []
        found: list[cst.Call] = []
        for binding in bindings:
            if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
                sites = self.call_sites(table.node)
                if not sites:
                    return []
                for call, caller in sites:
                    argument = self._argument_for(call, table.node, name)
                    if argument is None:
                        return []
                    calls = self.dataloader_calls(argument, caller, depth + 1)
                    if not calls:
                        return []
                    found.extend(calls)
                continue
            if binding.kind == "unpack" and isinstance(binding.value, cst.Call):
                # `train_loader, test_loader = load_data()`: that element of what it returns.
                index = _unpacked_index(self.context, binding.value, name)
                calls = (
                    self._returned_loaders(binding.value, index, depth) if index is not None else []
                )
                if not calls:
                    return []
                found.extend(calls)
                continue
            if binding.kind != "assign" or binding.value is None:
                return []
            calls = self.dataloader_calls(binding.value, table_function, depth + 1)
            if not calls:
                return []
            found.extend(calls)
        return found

    def _returned_loaders(self, call: cst.Call, index: int | None, depth: int) -> list[cst.Call]:
        """The DataLoaders a module function returns (`return DataLoader(...)`), or the
        `index`-th element of the tuple it returns; [] when any return is something else."""
        if not isinstance(call.func, cst.Name):
            return []
        function = self.scopes.module_functions().get(call.func.value)
        if function is None or not isinstance(function.body, cst.IndentedBlock):
            return []
        found: list[cst.Call] = []
        for node in self._scope_nodes(function.body):
            if not isinstance(node, cst.Return) or node.value is None:
                continue
            value: cst.BaseExpression = node.value
            if index is not None:
                if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements):
                    return []
                value = value.elements[index].value
            calls = self.dataloader_calls(value, function, depth + 1)
            if not calls:
                return []
            found.extend(calls)
        return found

    def loop_plan(self, loop: cst.For) -> LoopPlan | None:
        """The plan for a loop over a DataLoader that feeds a moved model; None otherwise."""
        key = id(loop)
        if key not in self._plans:
            self._plans[key] = self._make_plan(loop)
        return self._plans[key]

    def _make_plan(self, loop: cst.For) -> LoopPlan | None:
        function = self.scopes.enclosing_function(loop)
        loaders = self.dataloader_calls(loop.iter, function)
        if loaders and all(self.yields_device_batches(loader) for loader in loaders):
            return None
        # A loop over something not known to be a DataLoader counts only by its own moves.
        untyped = not loaders and not self._typed_loader(loop.iter, function)
        target = self._batch_target(loop)
        if target is None:
            return None
        one_line = not isinstance(loop.body, cst.IndentedBlock)
        body = [] if one_line else list(cast(cst.IndentedBlock, loop.body).body)
        names: list[str]
        single: str | None = None
        after_anchor = False
        if isinstance(target, cst.Name):
            single = target.value
            names = [single]
            unpacked = _unpacking(body[0], single) if body else None
            if unpacked is not None:
                names, single, after_anchor = unpacked, None, True
        elif isinstance(target, (cst.Tuple, cst.List)) and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements
        ):
            names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
        else:
            return None
        calls = [n for n in self._scope_nodes(loop.body) if isinstance(n, cst.Call)]
        model_calls = [
            (call, found)
            for call, found in ([] if untyped else self._model_calls(calls, names))
            if found.move is not None or found.reason
        ]
        plan = LoopPlan(loop, loaders)
        if model_calls:
            devices = {(m.move.code if m.move else m.reason) for _, m in model_calls}
            first = model_calls[0][1]
            plan.model = first.model
            if len(devices) > 1:
                plan.reason = "the loop feeds models on different devices"
            elif first.move is None:
                plan.reason = first.reason
            else:
                plan.move = first.move
            fed = [c for c, _ in model_calls]
        else:
            sibling = None if untyped else self._sibling_feed(loop, calls, names, function)
            if sibling is None:
                sibling = self._loop_own_move(loop.body, names, calls, function)
            if sibling is None:
                return None
            fed, plan.model, plan.move, plan.helper = sibling
        nodes = list(self._scope_nodes(loop.body))
        bound = self._device_bound(nodes, names, fed, torch_calls_only=untyped)
        plan.unmoved = [n for n in names if n in bound and not self._is_moved(loop.body, n)]
        self._keep_on_cpu(plan, loop.body, fed, single)
        if one_line and not plan.reason:
            plan.reason = "the loop body is on the `for` line"
        if not plan.unmoved or plan.reason or (plan.move is None and not plan.helper):
            return plan
        anchor = body[0]
        new_line = self._move_line(loop.body, plan, single)
        if new_line is None:
            return plan
        group = [anchor, new_line] if after_anchor else [new_line, anchor]
        plan.edit = Edit(anchor, cst.FlattenSentinel(group))
        return plan

    def _keep_on_cpu(
        self, plan: LoopPlan, body: cst.CSTNode, fed: list[cst.Call], single: str | None
    ) -> None:
        """Leave out of `plan` the batch names (or, for a dict batch `single`, the keys) whose
        values reach an argument that must stay on the CPU (`pack_padded_sequence` lengths)."""
        for use in self.facts.cpu_only.uses(body, fed):
            if single is not None:
                key = _string_key(use.expr, single)
                if key is not None and key not in plan.cpu_keys:
                    plan.cpu_keys[key] = use.reason
                    continue
            for name in _tensor_roots(use.expr) & set(plan.unmoved):
                if single is None or isinstance(use.expr, cst.Name):
                    plan.unmoved.remove(name)
                    plan.kept[name] = use.reason

    def _loop_own_move(
        self,
        body: cst.BaseSuite,
        names: list[str],
        calls: list[cst.Call],
        function: cst.FunctionDef | None,
    ) -> tuple[list[cst.Call], str, DeviceMove, str] | None:
        """A loop that moves some batch names itself (`ids = ids.to(config.device)`), all to one
        device, and hands them to a model (a call of a name that is no batch name and not
        torch's): that model runs on that device, whatever the file says about it, so the batch
        names that meet its output belong there too. (fed calls, model, move, helper "")."""
        moves: dict[str, DeviceMove] = {}
        for node in self._scope_nodes(body):
            if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
                continue
            target, value = node.targets[0].target, node.value
            if (
                isinstance(target, cst.Name)
                and target.value in names
                and _is_move_call(value)
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and _is_name(value.func.value, target.value)
            ):
                move = self.device_move(value, function)
                if move is None or move.conditional_line:
                    return None
                moves[target.value] = move
        if not moves or len({move.code for move in moves.values()}) != 1:
            return None
        move = next(iter(moves.values()))
        for call in calls:
            model = dotted_name(call.func)
            if model is None or model.split(".", 1)[0] in names:
                continue
            if (self.names.qualified_name(call.func) or "").startswith(("torch.", "builtins.")):
                continue
            if any(_tensor_roots(arg.value) & set(moves) for arg in call.args):
                return [call], model, move, ""
        return None

    def _batch_target(self, loop: cst.For) -> cst.BaseExpression | None:
        """What a loop binds each batch to: its target, or the second of `for i, batch in
        enumerate(...)`; None when an `enumerate` loop does not unpack a pair."""
        target = loop.target
        if isinstance(loop.iter, cst.Call) and self.names.qualified_name(loop.iter.func) in (
            "enumerate",
            "builtins.enumerate",
        ):
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                return None
            return target.elements[1].value
        return target

    def _model_calls(
        self, calls: list[cst.Call], batch_names: list[str]
    ) -> Iterator[tuple[cst.Call, ModelDevice]]:
        """The calls among `calls` of a model whose device is known or explained (`model(x)`,
        `model.forward(x)`), with that device; a batch name called is not a model."""
        for call in calls:
            callee = call.func
            if isinstance(callee, cst.Attribute) and callee.attr.value == "forward":
                callee = callee.value
            if dotted_name(callee) is None or dotted_name(callee) in batch_names:
                continue
            found = self.model_device(callee, call)
            if found is not None:
                yield call, found

    def _move_line(
        self, body: cst.BaseSuite, plan: LoopPlan, single: str | None
    ) -> cst.BaseStatement | None:
        """The statement that moves `plan.unmoved` (its code kept in `plan.statement_code`);
        None, with the reason in `plan`, when the batch's shape cannot be told."""
        statement = self._move_statement(body, plan, single)
        if statement is None:
            plan.reason = f"cannot tell whether `{single}` is a tensor, a sequence or a dict"
            return None
        plan.statement_code = statement
        return cst.parse_statement(statement + "\n", config=self.context.module.config_for_parsing)

    def _move_statement(
        self, body: cst.BaseSuite, plan: LoopPlan, single: str | None
    ) -> str | None:
        """The statement that moves `plan.unmoved`: `x, y = x.to(d), y.to(d)`, the project's
        helper (`batch = self._batch_to_device(batch)`), or by how a single batch name is read."""
        if plan.helper:
            if plan.cpu_keys:
                return None
            moved = ", ".join(f"{plan.helper}({n})" for n in plan.unmoved)
            return f"{', '.join(plan.unmoved)} = {moved}"
        assert plan.move is not None
        if single is not None:
            return self._single_move(body, single, plan.move, tuple(plan.cpu_keys))
        moved = ", ".join(code_of(plan.move.apply(cst.Name(n))) for n in plan.unmoved)
        return f"{', '.join(plan.unmoved)} = {moved}"

    def next_batch_plan(self, assign: cst.Assign) -> LoopPlan | None:
        """`x, y = next(iter(loader))` (one batch taken from a DataLoader): the plan to move
        the names the statements after it hand to a model on a device, right after it."""
        value = assign.value
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "next"
            and len(value.args) == 1
            and isinstance(value.args[0].value, cst.Call)
            and isinstance(value.args[0].value.func, cst.Name)
            and value.args[0].value.func.value == "iter"
            and len(value.args[0].value.args) == 1
            and len(assign.targets) == 1
        ):
            return None
        function = self.scopes.enclosing_function(assign)
        source = value.args[0].value.args[0].value
        loaders = self.dataloader_calls(source, function)
        if loaders and all(self.yields_device_batches(loader) for loader in loaders):
            return None
        if not loaders and not self._typed_loader(source, function):
            return None
        target = assign.targets[0].target
        if isinstance(target, cst.Name):
            names, single = [target.value], target.value
        elif isinstance(target, (cst.Tuple, cst.List)) and all(
            isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements
        ):
            names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
            single = None
        else:
            return None
        line = self.context.parent(assign)
        block = self.context.parent(line) if line is not None else None
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(
            block, (cst.IndentedBlock, cst.Module)
        ):
            return None
        following = list(block.body)[list(block.body).index(line) + 1 :]
        nodes: list[cst.CSTNode] = []
        for after in following:
            nodes.append(after)
            nodes.extend(self._scope_nodes(after))
        calls = [n for n in nodes if isinstance(n, cst.Call)]
        plan = LoopPlan(assign, loaders)
        fed: list[cst.Call] = []
        for call, found in self._model_calls(calls, names):
            if found.move is not None:
                fed.append(call)
                plan.model, plan.move = found.model, found.move
        if not fed:
            sibling = self._sibling_feed(assign, calls, names, function)
            if sibling is None:
                return None
            fed, plan.model, plan.move, plan.helper = sibling
        bound = self._device_bound(nodes, names, fed)
        plan.unmoved = [
            n
            for n in names
            if n in bound and not any(self._is_moved(after, n) for after in following)
        ]
        self._keep_on_cpu(plan, cst.IndentedBlock(body=following), fed, single)
        if not plan.unmoved:
            return plan
        new_line = self._move_line(cst.IndentedBlock(body=following), plan, single)
        if new_line is None:
            return plan
        plan.edit = Edit(line, cst.FlattenSentinel([line, new_line]))
        return plan

    def _typed_loader(self, expr: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """`expr` is a parameter annotated as a DataLoader (`loader: DataLoader`), or an
        attribute `__init__` sets from one (`self.valid_dataloader = valid_dataloader`)."""
        for _ in range(4):
            if (
                isinstance(expr, cst.Call)
                and (
                    self.names.qualified_name(expr.func) in ITERATION_WRAPPERS
                    or _names_an_iterator(expr.func)
                )
                and expr.args
            ):
                expr = expr.args[0].value
                continue
            name = dotted_name(expr)
            if name is None:
                return False
            if name.startswith("self.") and function is not None:
                owner = self.scopes.class_of(function)
                init = _method_of(owner, "__init__") if owner is not None else None
                if owner is None or init is None:
                    return False
                bindings = self.scopes.table(owner).bindings.get(name, [])
                if len(bindings) != 1 or bindings[0].value is None:
                    return False
                expr, function = bindings[0].value, init
                continue
            if function is None:
                return False
            for param in (*function.params.posonly_params, *function.params.params):
                if param.name.value == name and param.annotation is not None:
                    return any(
                        self.names.qualified_name(node) in DATALOADERS
                        for node in self.context.subtree(param.annotation.annotation)
                        if isinstance(node, (cst.Name, cst.Attribute))
                    )
            return False
        return False

    def _sibling_feed(
        self,
        site: cst.CSTNode,
        calls: list[cst.Call],
        names: list[str],
        function: cst.FunctionDef | None,
    ) -> tuple[list[cst.Call], str, DeviceMove | None, str] | None:
        """Evidence from another loop over a DataLoader in the same class (or module): it
        moves its batch first (`x, y = x.to(DEVICE), y.to(DEVICE)`, `batch =
        self._batch_to_device(batch)`) and then hands it to a callee (`self.model`,
        `self._step`) that the batch names of `site` reach unmoved. Returns the calls of that
        callee here, its name, and the move (as written here) or the helper."""
        owner = self.scopes.class_of(function) if function is not None else None
        scope: cst.CSTNode = owner if owner is not None else self.context.module
        wanted = {dotted_name(c.func) for c in calls} - {None} - set(names)
        for loop in self.context.subtree(scope):
            if (
                not isinstance(loop, cst.For)
                or loop is site
                or not isinstance(loop.body, cst.IndentedBlock)
            ):
                continue
            first, last = self.context.order(loop)
            if first <= self.context.order(site)[0] <= last:
                continue  # `site` is inside this loop
            loop_function = self.scopes.enclosing_function(loop)
            if not (
                self.dataloader_calls(loop.iter, loop_function)
                or self._typed_loader(loop.iter, loop_function)
            ):
                continue
            found = self._moving_head(loop)
            if found is None:
                continue
            moved_names, move, helper = found
            callees = {
                dotted_name(call.func)
                for call in self._scope_nodes(loop.body)
                if isinstance(call, cst.Call)
                and any(moved_names & self.scopes.names_read(arg.value) for arg in call.args)
            } & wanted
            here = [c for c in calls if dotted_name(c.func) in callees]
            if not here:
                continue
            # Name the model rather than a torch function it shares the batch with.
            model = next(
                (
                    code_of(c.func)
                    for c in here
                    if not (self.names.qualified_name(c.func) or "").startswith("torch.")
                ),
                code_of(here[0].func),
            )
            if helper:
                return here, model, None, helper
            assert move is not None
            expressed = self.express(move, loop_function, function)
            if isinstance(expressed, str):
                return None
            return here, model, expressed, ""
        return None

    def _moving_head(self, loop: cst.For) -> tuple[set[str], DeviceMove | None, str] | None:
        """The first statements of a loop that move its batch: the names moved, and the move
        (`.to(d)`/`.cuda()`) or the helper's name (`self._batch_to_device`)."""
        body = cast(cst.IndentedBlock, loop.body).body
        for statement in body[:3]:
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                continue
            assign = statement.body[0]
            if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
                continue
            target = assign.targets[0].target
            values = (
                [e.value for e in assign.value.elements]
                if isinstance(assign.value, cst.Tuple)
                else [assign.value]
            )
            targets = (
                [e.value for e in target.elements]
                if isinstance(target, (cst.Tuple, cst.List))
                else [target]
            )
            if len(values) != len(targets) or not all(isinstance(t, cst.Name) for t in targets):
                continue
            moved = {t.value for t in targets if isinstance(t, cst.Name)}
            moves = [v for v in values if isinstance(v, cst.Call)]
            if len(moves) != len(values):
                continue
            first = moves[0]
            if isinstance(first.func, cst.Attribute) and first.func.attr.value in _MOVES:
                move = self.device_move(first, self.scopes.enclosing_function(loop))
                if move is not None and all(
                    _moved_whole(v.func.value, t.value)
                    for v, t in zip(moves, targets)
                    if isinstance(v.func, cst.Attribute) and isinstance(t, cst.Name)
                ):
                    return moved, move, ""
            elif (
                _device_helper(first)
                and len(moves) == 1
                and len(first.args) == 1
                and _is_name(first.args[0].value, cast(cst.Name, targets[0]).value)
            ):
                return moved, None, code_of(first.func)
        return None

    def batch_move(
        self, loop: cst.For, move: DeviceMove, origin: cst.FunctionDef | None, data: DataFunction
    ) -> tuple[Edit, str] | str:
        """The statement that moves the batch of `loop` (a loop over a DataLoader that runs
        `data`) to the device `move` (written in `origin`) put it on before, at the head of the
        loop: the edit and the statement, or why there is none. The batch's shape comes from
        what `data` returns (a tuple of tensors, `None`s and lists is moved element by element
        where it is a tensor), else from how the loop reads it."""
        function = self.scopes.enclosing_function(loop)
        expressed = self.express(move, origin, function)
        if isinstance(expressed, str):
            return expressed
        target = self._batch_target(loop)
        if target is None:
            return "the loop's target is not a batch"
        if not isinstance(target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
            return "the loop unpacks the batch in its header"
        name = target.value
        if self._is_moved(loop.body, name):
            return ""  # the loop moves the batch already
        if not any(
            not _is_inspected(self.context.parent(use), self.context)
            for use in self.scopes.names_in(loop.body, name)
        ):
            return ""  # the loop does not use the batch (it counts or prints it)
        shape = self._returned_shape(data.node)
        calls = [n for n in self._scope_nodes(loop.body) if isinstance(n, cst.Call)]
        fed = [call for call, _ in self._model_calls(calls, [name])]
        kept = [
            use
            for use in self.facts.cpu_only.uses(loop.body, fed)
            if name in _tensor_roots(use.expr)
        ]
        keys = tuple(
            dict.fromkeys(k for use in kept if (k := _string_key(use.expr, name)) is not None)
        )
        if kept and (shape is not None or len(keys) != len(kept)):
            # A move of the whole batch would take it along; the shape leaves no key to spare.
            return f"`{code_of(kept[0].expr)}` stays on the CPU: {kept[0].reason}"
        if shape is None:
            statement = self._single_move(loop.body, name, expressed, keys)
            if statement is None:
                return f"cannot tell whether `{name}` is a tensor, a sequence or a dict"
        else:
            kind, mixed = shape
            item = "t" if "t" not in self._root_names_of_move(expressed) else "item"
            moved = code_of(expressed.apply(cst.Name(item)))
            torch_name, _ = self.names.torch_spelling()
            guarded = f"{moved} if isinstance({item}, {torch_name}.Tensor) else {item}"
            if kind == "tensor":
                statement = f"{name} = {code_of(expressed.apply(cst.Name(name)))}"
            elif kind == "dict":
                key = "k" if "k" not in self._root_names_of_move(expressed) else "key"
                value = guarded if mixed else moved
                statement = f"{name} = {{{key}: {value} for {key}, {item} in {name}.items()}}"
            elif mixed:
                # Tensors move; `None`s and lists of other objects stay as they are.
                statement = f"{name} = tuple({guarded} for {item} in {name})"
                source = f"{name} = tuple(\n    {guarded}\n    for {item} in {name}\n)\n"
            else:
                statement = f"{name} = [{moved} for {item} in {name}]"
        anchor = loop.body.body[0]
        new_line = cst.parse_statement(
            source if shape is not None and shape == ("sequence", True) else statement + "\n",
            config=self.context.module.config_for_parsing,
        )
        return Edit(anchor, cst.FlattenSentinel([new_line, anchor])), statement

    def _returned_shape(self, function: cst.FunctionDef | cst.Lambda) -> tuple[str, bool] | None:
        """What a collate function returns: ("sequence" | "dict" | "tensor", whether some
        elements are not tensors: `None`, lists); None when it cannot be told."""
        if not isinstance(function, cst.FunctionDef) or not isinstance(
            function.body, cst.IndentedBlock
        ):
            return None
        shapes: set[tuple[str, bool]] = set()
        for node in self._scope_nodes(function.body):
            if isinstance(node, cst.Return):
                if node.value is None:
                    return None
                shape = self._shape_of(node.value, node)
                if shape is None:
                    return None
                shapes.add(shape)
        if len(shapes) != 1:
            return None
        return shapes.pop()

    def _shape_of(self, value: cst.BaseExpression, at: cst.CSTNode) -> tuple[str, bool] | None:
        if isinstance(value, (cst.Tuple, cst.List)):
            return "sequence", any(_not_a_tensor(e.value) for e in value.elements)
        if isinstance(value, cst.Dict):
            return "dict", any(
                isinstance(e, cst.DictElement) and _not_a_tensor(e.value) for e in value.elements
            )
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value in ("tuple", "list")
            and len(value.args) == 1
        ):
            inner = value.args[0].value
            if isinstance(inner, cst.Name):
                return "sequence", self._filled_with_non_tensors(inner.value, at)
            return None
        if isinstance(value, cst.Call):
            qualified = self.names.qualified_name(value.func) or ""
            if qualified.startswith("torch.") and call_tail(value.func) in (
                "stack",
                "cat",
                "tensor",
                "as_tensor",
                "from_numpy",
            ):
                return "tensor", False
        return None

    def _filled_with_non_tensors(self, name: str, at: cst.CSTNode) -> bool:
        """`name = []` appended to in the function: whether it gets `None`s or lists too."""
        function = self.scopes.enclosing_function(at)
        scope: cst.CSTNode = function if function is not None else self.context.module
        for node in self.context.subtree(scope):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "append"
                and _is_name(node.func.value, name)
                and node.args
                and _not_a_tensor(node.args[0].value)
            ):
                return True
        return False

    def moves_in_its_pipeline(self, loader: cst.Call) -> bool:
        """The DataLoader's batches are moved to a device before the loop sees them: its
        `collate_fn` (a function of this file) returns moved tensors, or its dataset is a class
        of this file whose `__getitem__` returns them (moved there, or in `__init__`). Whether
        that move belongs there is DF201's question; the loop has nothing left to move."""
        collate = keyword_argument(loader, "collate_fn")
        if collate is not None and isinstance(collate.value, cst.Name):
            function = self.scopes.module_functions().get(collate.value.value)
            if function is not None and self._returns_moved(function, frozenset()):
                return True
        dataset = self._dataset_of(loader)
        if isinstance(dataset, cst.Call) and isinstance(dataset.func, cst.Name):
            dataset_class = self.scopes.module_classes().get(dataset.func.value)
            if dataset_class is not None:
                return self._serves_moved(dataset_class)
        return False

    def _dataset_of(self, loader: cst.Call) -> cst.BaseExpression | None:
        """The dataset a DataLoader call reads, through up to three names bound to it."""
        dataset = argument(loader, "dataset")
        for _ in range(3):
            if not isinstance(dataset, cst.Name):
                break
            dataset = self.scopes.latest_binding(dataset.value, loader)
        return dataset

    def yields_device_batches(self, loader: cst.Call) -> bool:
        """The DataLoader serves tensors already on a device: its dataset is a
        `TensorDataset` of tensors moved there (`TensorDataset(x.to(device), y.to(device))`)."""
        dataset = self._dataset_of(loader)
        if not (
            isinstance(dataset, cst.Call)
            and self.names.qualified_name(dataset.func) in TENSOR_DATASETS
            and dataset.args
        ):
            return False
        for arg in dataset.args:
            value = arg.value
            if isinstance(value, cst.Name):
                bound = self.scopes.latest_binding(value.value, loader)
                if bound is None:
                    return False
                value = bound
            if arg.star or not _is_move_call(value):
                return False
        return True

    def _serves_moved(self, dataset: cst.ClassDef) -> bool:
        """`__getitem__` of the dataset class returns tensors on a device: moved there, or read
        from attributes `__init__` moved (`self.x = x.to(device)` ... `return self.x[i]`)."""
        methods = {
            statement.name.value: statement
            for statement in getattr(dataset.body, "body", ())
            if isinstance(statement, cst.FunctionDef)
        }
        getitem = methods.get("__getitem__")
        if getitem is None:
            return False
        moved: set[str] = set()
        init = methods.get("__init__")
        for node in self.scopes.nodes(init) if init is not None else ():
            if isinstance(node, cst.Assign) and _is_move_call(node.value):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and _is_name(
                        target.target.value, "self"
                    ):
                        moved.add(target.target.attr.value)
        return self._returns_moved(getitem, frozenset(moved))

    def _returns_moved(self, function: cst.FunctionDef, moved_attributes: frozenset[str]) -> bool:
        """Every `return` of `function` gives tensors on a device: each element (of a tuple, a
        list or a dict) is a move, a name last bound to one, or `self.<attr>[...]` of an
        attribute in `moved_attributes`."""
        returns = [n for n in self.scopes.nodes(function) if isinstance(n, cst.Return)]
        if not returns:
            return False

        def moved(value: cst.BaseExpression, at: cst.CSTNode) -> bool:
            while isinstance(value, cst.Subscript):
                value = value.value
            if _is_move_call(value) and isinstance(value, cst.Call):
                if self.device_move(value, function) is not None:
                    return True
                # `labels.to(torch.long)`: a dtype, not a device; where is `labels`?
                assert isinstance(value.func, cst.Attribute)
                return moved(value.func.value, at)
            if isinstance(value, cst.Attribute) and _is_name(value.value, "self"):
                return value.attr.value in moved_attributes
            if isinstance(value, cst.Name):
                bound = self.scopes.latest_binding(value.value, at)
                return bound is not None and bound is not value and moved(bound, at)
            return False

        for node in returns:
            value = node.value
            if value is None:
                return False
            if isinstance(value, (cst.Tuple, cst.List)):
                elements = [e.value for e in value.elements]
            elif isinstance(value, cst.Dict):
                elements = [e.value for e in value.elements if isinstance(e, cst.DictElement)]
            else:
                elements = [value]
            if not elements or not all(moved(e, node) for e in elements):
                return False
        return True

    def _single_move(
        self, body: cst.CSTNode, name: str, move: DeviceMove, cpu_keys: tuple[str, ...] = ()
    ) -> str | None:
        """`batch = batch.to(d)` / `{k: v.to(d) ...}` / `[t.to(d) ...]` by how `batch` is used;
        a dict's `cpu_keys` keep their values (None for another shape that has such keys)."""
        as_dict = as_sequence = as_tensor = False
        for node in self._scope_nodes(body):
            if isinstance(node, cst.Arg) and node.star == "**" and _is_name(node.value, name):
                as_dict = True
            elif isinstance(node, cst.Subscript) and _is_name(node.value, name):
                index = node.slice[0].slice if len(node.slice) == 1 else None
                if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                    as_dict = True
                elif isinstance(index, cst.Index) and isinstance(
                    index.value, (cst.Integer, cst.UnaryOperation)
                ):
                    as_sequence = True
                elif isinstance(index, cst.Index):
                    return None
                else:
                    as_tensor = True
            elif isinstance(node, cst.Attribute) and _is_name(node.value, name):
                if node.attr.value in ("items", "keys", "values"):
                    as_dict = True
                else:
                    as_tensor = True
            elif isinstance(node, cst.Arg) and node.star == "" and _is_name(node.value, name):
                call = self.context.parent(node)
                if not (
                    isinstance(call, cst.Call)
                    and isinstance(call.func, cst.Name)
                    and call.func.value in _INSPECTING_BUILTINS
                ):
                    as_tensor = True
        if as_dict + as_sequence + as_tensor != 1 or (cpu_keys and not as_dict):
            return None
        if as_dict:
            key, value = (
                ("k", "v") if not {"k", "v"} & self._root_names_of_move(move) else ("key", "value")
            )
            moved = code_of(move.apply(cst.Name(value)))
            kept = [_string_literal(k) for k in cpu_keys]
            if len(kept) == 1:
                moved = f"{value} if {key} == {kept[0]} else {moved}"
            elif kept:
                moved = f"{value} if {key} in ({', '.join(kept)}) else {moved}"
            return f"{name} = {{{key}: {moved} for {key}, {value} in {name}.items()}}"
        if as_sequence:
            item = "t" if "t" not in self._root_names_of_move(move) else "item"
            return f"{name} = [{code_of(move.apply(cst.Name(item)))} for {item} in {name}]"
        return f"{name} = {code_of(move.apply(cst.Name(name)))}"

    def _device_bound(
        self,
        nodes: list[cst.CSTNode],
        names: list[str],
        model_calls: list[cst.Call],
        *,
        torch_calls_only: bool = False,
    ) -> set[str]:
        """Batch names passed to the model, or meeting its output in a call or an operation,
        in `nodes` (a loop body's). `torch_calls_only`: the calls that count are torch's (a
        loss, `F.cross_entropy`, a method of the output), not `print(out, name)`: for loops
        over values that need not all be tensors."""
        wanted = set(names)
        assigns = [n for n in nodes if isinstance(n, cst.Assign)]
        # `x = batch[0]`, `inp = x.float()`: names that hold (part of) a batch name unmoved.
        aliases: dict[str, set[str]] = {n: {n} for n in names}
        for _ in range(3):
            for assign in assigns:
                origin = {b for r in _tensor_roots(assign.value) for b in aliases.get(r, ())}
                if not origin:
                    continue
                for target in assign.targets:
                    for bound_name in self.scopes.names_read(target.target) - wanted:
                        aliases.setdefault(bound_name, set()).update(origin)
        # `img = img_list[j]` then `img = img.cuda()`: the alias is moved before it is used.
        for assign in assigns:
            if _is_move_call(assign.value) and len(assign.targets) == 1:
                target_node = assign.targets[0].target
                if (
                    isinstance(target_node, cst.Name)
                    and target_node.value not in wanted
                    and _moved_whole(assign.value, target_node.value)
                ):
                    aliases.pop(target_node.value, None)

        def batch_of(node: cst.BaseExpression) -> set[str]:
            return {b for r in _tensor_roots(node) for b in aliases.get(r, ())}

        bound: set[str] = set()
        for call in model_calls:
            for arg in call.args:
                bound |= batch_of(arg.value)
        derived: set[str] = set()
        model_ids = {id(c) for c in model_calls}

        def from_model(node: cst.CSTNode) -> bool:
            return any(
                id(n) in model_ids or (isinstance(n, cst.Name) and n.value in derived)
                for n in self.context.subtree(node)
            )

        for _ in range(4):
            for assign in assigns:
                if from_model(assign.value):
                    for target in assign.targets:
                        derived |= self.scopes.names_read(target.target)
        for node in nodes:
            parts: list[cst.BaseExpression] = []
            if isinstance(node, cst.Call) and id(node) not in model_ids:
                if torch_calls_only and not self._torch_call(node, from_model):
                    continue
                if isinstance(node.func, cst.Attribute):
                    parts.append(node.func.value)
                parts.extend(arg.value for arg in node.args)
            elif isinstance(node, cst.BinaryOperation):
                parts = [node.left, node.right]
            elif isinstance(node, cst.Comparison):
                parts = [node.left, *(c.comparator for c in node.comparisons)]
            if len(parts) < 2:
                continue
            flags = [from_model(p) for p in parts]
            if not any(flags):
                continue
            for part, is_model in zip(parts, flags):
                if not is_model:
                    bound |= batch_of(part)
        return bound

    def _torch_call(self, call: cst.Call, from_model: Callable[[cst.CSTNode], bool]) -> bool:
        """`F.cross_entropy(...)`, `criterion(...)` with `criterion = nn.CrossEntropyLoss()`, or a
        method of the model's output (`out.eq(y)`)."""
        if (self.names.qualified_name_through_star(call.func) or "").startswith("torch."):
            return True
        dotted = dotted_name(call.func) or ""
        if (
            dotted.split(".")[0] in ("F", "nn")
            and self.names.qualified_name(call.func) is None
            and self.names.has_star_import()
        ):
            return True  # `F.cross_entropy` where `F` comes with a `from utils import *`
        if isinstance(call.func, cst.Attribute):
            return from_model(call.func.value)
        if isinstance(call.func, cst.Name):
            return any(
                isinstance(value, cst.Call)
                and (self.names.qualified_name(value.func) or "").startswith("torch.nn.")
                for value in self.scopes.assigned_before(call.func.value, call)
            )
        return False

    # -- the script around the model ---------------------------------------------------------

    def distributed_evidence(self) -> str | None:
        """What makes the script one process of several, in a word ("Trainer", "accelerate",
        "DistributedDataParallel", "torchrun"); None when nothing does."""
        if self._distributed is not None:
            return self._distributed or None
        found: str | None = None
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.SimpleString):
                if node.evaluated_value in ("LOCAL_RANK", "RANK"):
                    found = found or "torchrun"
                continue
            if not isinstance(node, (cst.Name, cst.Attribute)):
                continue
            tail = node.attr.value if isinstance(node, cst.Attribute) else node.value
            if not (tail.endswith("Trainer") or tail in _MARKER_TAILS):
                continue
            name = self.names.qualified_name(node)
            if name is None:
                continue
            root, _, last = name.rpartition(".")
            if last.endswith("Trainer") and root.split(".")[0] in ("transformers", "trl"):
                found = "Trainer"
                break
            if name.startswith("accelerate."):
                found = "accelerate"
                break
            if name in DISTRIBUTED_MARKERS:
                found = found or "DistributedDataParallel"
        self._distributed = found or ""
        return found

    def runs_on_one_device(self) -> bool:
        """The file is a script (or notebook) that runs on the one device it chooses itself:
        code outside classes moves things only to one device variable it binds
        (`device = torch.device(...)`; `model.to(device)`), and nothing spreads the work over
        several devices (DataParallel, DDP, torchrun, `Trainer`, device maps, `device_count()`,
        a GPU other than `cuda:0`). Model code of such a file that uses a device stored at
        construction uses that same device."""
        if self._one_device is None:
            self._one_device = self._one_device_script()
        return self._one_device

    def _one_device_script(self) -> bool:
        if self.is_distributed() or self.places_over_devices():
            return False
        chosen: set[str] = set()
        for node in self.context.subtree(self.context.module):
            if not isinstance(node, cst.Call):
                continue
            wrapper = self.names.qualified_name(node.func)
            if wrapper in MODEL_WRAPPERS and wrapper.endswith("DataParallel"):
                return False
            if self.facts.modules.enclosing_class(node) is not None:
                continue
            function_info = self.facts.modules.enclosing_function(node)
            if function_info is not None and function_info.is_model_code:
                continue  # model code: the moves under judgement, not the script's choice
            move = self.facts.moves.move_of(node)
            if move is None or move.kind is None:
                continue
            if move.method == "cuda" or move.expression is None:
                return False  # the current device, chosen elsewhere
            name = dotted_name(move.expression)
            if name is None or name.endswith(".device"):
                continue  # `x.to(y.device)`: follows a tensor
            function = function_info.node if function_info is not None else None
            root = name.split(".")[0]
            if function is not None and any(
                binding.kind == "param"
                for binding in self.scopes.table(function).bindings.get(root, [])
            ):
                continue  # a helper's parameter: its callers choose
            chosen.add(name)
        return len(chosen) == 1

    def is_distributed(self) -> bool:
        """The script runs as one of several processes (torchrun, DDP, accelerate, `Trainer`)."""
        return self.distributed_evidence() is not None

    def is_notebook(self) -> bool:
        """The file is a Jupyter notebook (its code cells joined into one module)."""
        return is_notebook(self.context.path) or _CELL_MARKER in self.context.text

    def same_cell(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Both nodes are in one code cell (always true outside a notebook)."""
        if not self.is_notebook():
            return True
        lines = self.context.text.splitlines()
        low, high = sorted((self.scopes.line_of(first), self.scopes.line_of(second)))
        return not any("~~devfix-cell" in line for line in lines[low:high])

    def one_process_reason(self) -> str | None:
        """Why the file runs as a single process whatever it imports, or None: a notebook is one
        kernel process (unless it starts workers with `notebook_launcher`)."""
        if not self.is_notebook():
            return None
        launches = any(
            isinstance(node, (cst.Name, cst.Attribute))
            and (call_tail(node) or "") == "notebook_launcher"
            and self.names.qualified_name(node) == "accelerate.notebook_launcher"
            for node in self.context.subtree(self.context.module)
        )
        return None if launches else "a notebook runs in one process"

    def declares_model_parallelism(self, model: str) -> cst.CSTNode | None:
        """`model.model_parallel = True` / `model.is_parallelizable = True`: the script states
        that `model` is split over the GPUs of one process on purpose (a `Trainer` then neither
        moves nor wraps it). The assignment, or None."""
        for node in self.context.subtree(self.context.module):
            if not isinstance(node, cst.Assign) or not (
                isinstance(node.value, cst.Name) and node.value.value == "True"
            ):
                continue
            for target in node.targets:
                if (
                    isinstance(target.target, cst.Attribute)
                    and target.target.attr.value in ("model_parallel", "is_parallelizable")
                    and dotted_name(target.target.value) == model
                ):
                    return node
        return None

    def data_callbacks(self) -> frozenset[str]:
        """Names of functions handed to `ds.map(f)`, `DataLoader(collate_fn=f)`, `transform=f`."""
        if self._callbacks is None:
            names: set[str] = set()
            for call in self.context.subtree(self.context.module):
                if not isinstance(call, cst.Call):
                    continue
                mapping = (
                    isinstance(call.func, cst.Attribute) and call.func.attr.value in MAPPING_METHODS
                )
                for arg in call.args:
                    keyword = arg.keyword.value if arg.keyword is not None else None
                    if isinstance(arg.value, cst.Name) and (
                        keyword in DATA_KEYWORDS or (mapping and keyword in (None, "function"))
                    ):
                        names.add(arg.value.value)
            self._callbacks = frozenset(names)
        return self._callbacks

    def in_data_pipeline(self, node: cst.CSTNode) -> bool:
        """Inside a `Dataset` method, a collate function or a function handed to `ds.map(...)`."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = self.facts.modules.function_info(ancestor)
                if info.owner is not None and info.owner.is_dataset:
                    return True
                if "collate" in info.name.lower() or info.name in self.data_callbacks():
                    return True
        return False

    # -- optimizers, schedulers, scalers ------------------------------------------------------

    def training_objects(self, scope: cst.CSTNode) -> dict[str, TrainingObject]:
        """Optimizers, schedulers and scalers bound in the module and then in `scope`."""
        if self._module_objects is None:
            self._module_objects = self._bound_in(self.context.module)
        found = dict(self._module_objects)
        if scope is not self.context.module:
            found.update(self._bound_in(scope))
        return found

    def _bound_in(self, scope: cst.CSTNode) -> dict[str, TrainingObject]:
        found: dict[str, TrainingObject] = {}
        for statement in self.scopes.statements_of_type(scope, cst.Assign):
            if not (
                isinstance(statement, cst.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)
                and isinstance(statement.value, cst.Call)
            ):
                continue
            call = statement.value
            kind, qualified = self._kind(call)
            if kind is None or qualified is None:
                continue
            obj = TrainingObject(kind, qualified, factory=kind == "factory")
            reads = set().union(*(self.scopes.names_read(arg.value) for arg in call.args))
            if kind in ("optimizer", "factory"):
                obj.kind = "optimizer"
                obj.models = self._parameter_owners(call, obj.factory)
            elif kind == "scheduler":
                obj.optimizers = reads
            found[statement.targets[0].target.value] = obj
        return found

    def _kind(self, call: cst.Call) -> tuple[str | None, str | None]:
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None, None
        qualified = self.names.qualified_name(call.func)
        if qualified is None:
            return None, None
        if qualified.startswith("torch.optim.lr_scheduler.") or (
            qualified.startswith("transformers.") and "schedule" in qualified
        ):
            return "scheduler", qualified
        if qualified in GRAD_SCALERS:
            return "scaler", qualified
        if (
            qualified.startswith("torch.optim.")
            and not qualified.startswith("torch.optim.swa_utils.")
            and qualified.rsplit(".", 1)[1][:1].isupper()
        ) or qualified in OTHER_OPTIMIZERS:
            return "optimizer", qualified
        if not qualified.startswith("torch.") and _names_an_optimizer(call_tail(call.func) or ""):
            return "factory", qualified
        return None, None

    def optimizer_restore(self, call: cst.Call, optimizers: set[str]) -> str | None:
        """The optimizer (one of `optimizers`, plain names) whose state `call` restores:
        `opt.load_state_dict(...)`, or a checkpoint helper named for loading that is handed it
        (`load_checkpoint(path, model, opt)`, `utils.resume(model, optimizer=opt)`). A helper
        defined in this file counts only when it calls `load_state_dict` itself."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            if isinstance(func.value, cst.Name) and func.value.value in optimizers:
                return func.value.value
            return None
        words = set(re.split(r"_+", (call_tail(func) or "").lower()))
        qualified = self.names.qualified_name(func) or ""
        if qualified.startswith("torch.") or not words & {"load", "resume", "restore"}:
            return None
        handed = [
            arg.value.value
            for arg in call.args
            if isinstance(arg.value, cst.Name) and arg.value.value in optimizers
        ]
        if len(handed) != 1:
            return None
        if isinstance(func, cst.Name):
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == func.value:
                    loads = any(
                        isinstance(inner, cst.Call) and call_tail(inner.func) == "load_state_dict"
                        for inner in self.context.subtree(statement)
                    )
                    return handed[0] if loads else None
        return handed[0]

    def _parameter_owners(self, call: cst.Call, factory: bool) -> set[str]:
        """Names whose parameters an optimizer built by `call` may train: the roots of
        `model.parameters()` / `named_parameters()`, of modules handed to parameter helpers
        (`get_params(net.backbone, "weight")`), of what a name in the parameters was bound to
        (`params = model.param_groups(); Adam(params)`), and for a factory the modules it is
        given (`build_optimizer(cfg, model)`). Names that are not modules come along; callers
        match them against the modules they move."""
        owners: set[str] = set()
        if factory:
            values = [arg.value for arg in call.args]
            owners |= _roots(values)
        else:
            params = argument(call, "params")
            values = [] if params is None else [params]
        for value in values:
            owners |= self._owners_in(value)
            for name in self.scopes.names_read(value):
                bound = self.scopes.latest_binding(name, call)
                if bound is None:
                    continue
                owners |= self._owners_in(bound)
                if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute):
                    root = root_name(bound.func.value)  # `model.set_train_params(...)`
                    if root is not None and root not in self.names.import_table():
                        owners.add(root)
        return owners

    def _owners_in(self, expr: cst.BaseExpression) -> set[str]:
        owners: set[str] = set()
        for node in self.context.subtree(expr):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "parameters",
                "named_parameters",
            ):
                values = [node.func.value]
            else:
                values = [arg.value for arg in node.args]
            owners |= _roots(values)
        return owners

    # -- values fed to a model ----------------------------------------------------------------

    def model_call_fed(
        self, node: cst.BaseExpression, *, submodules: bool = False
    ) -> tuple[cst.Call, ModelDevice] | None:
        """The call of a model on a device that the value of `node` reaches without a move
        (directly, through attributes and subscripts, or through names bound to it), and the
        model's device. `submodules`: a call of a model's attribute (`vae.decoder(z)`) counts
        as a call of that model when the attribute itself was never moved."""
        flow = self
        value: cst.BaseExpression = node
        while True:
            parent = self.context.parent(value)
            if isinstance(parent, cst.Attribute) and parent.value is value:
                if parent.attr.value in _MOVES:
                    return None
                grand = self.context.parent(parent)
                if isinstance(grand, cst.Call) and grand.func is parent:
                    return None  # a method call on the output: leave it alone
                value = parent
            elif isinstance(parent, cst.Subscript) and parent.value is value:
                value = parent
            else:
                break
        parent = self.context.parent(value)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            if isinstance(call, cst.Call):
                return self._as_model_call(call, flow, submodules, parent)
            return None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                return self._follow(target.value, parent, flow, depth=0, submodules=submodules)
        return None

    def _follow(
        self,
        name: str,
        assign: cst.CSTNode,
        flow: ScriptFlow,
        depth: int,
        *,
        submodules: bool = False,
    ) -> tuple[cst.Call, ModelDevice] | None:
        scope = flow.scopes.enclosing_function(assign) or self.context.module
        start = self.context.position(assign).end
        result: tuple[cst.Call, ModelDevice] | None = None
        for use in self.scopes.names_in(scope, name):
            position = self.context.position(use).start
            if (position.line, position.column) <= (start.line, start.column):
                continue
            if self._moved_on_the_way(use):
                return None
            expression: cst.CSTNode = use
            parent = self.context.parent(use)
            while (
                isinstance(parent, (cst.Attribute, cst.Subscript))
                and parent.value is expression
                and not (isinstance(parent, cst.Attribute) and parent.attr.value in _MOVES)
            ):
                expression, parent = parent, self.context.parent(parent)
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and result is None:
                    result = self._as_model_call(call, flow, submodules, parent)
            elif (
                isinstance(parent, cst.Assign)
                and depth == 0
                and expression is not use
                and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)
            ):
                derived = self._follow(
                    parent.targets[0].target.value, parent, flow, depth + 1, submodules=submodules
                )
                target = parent.targets[0].target.value
                if derived is None and any(
                    self._moved_on_the_way(other) for other in self.scopes.names_in(scope, target)
                ):
                    return None
                result = result or derived
            elif isinstance(parent, cst.Assign):
                return None  # rebound from something else: unknown
        return result

    def _as_model_call(
        self,
        call: cst.Call,
        flow: ScriptFlow,
        submodules: bool = False,
        arg: cst.Arg | None = None,
    ) -> tuple[cst.Call, ModelDevice] | None:
        found = self._as_direct_model_call(call, flow, submodules)
        if found is None and arg is not None:
            found = self._through_a_method(call, arg, flow)
        return found

    def built_by(self, name: str, at: cst.CSTNode, _depth: int = 0) -> cst.Call | None:
        """The call that built the object the plain name `name` holds at `at` (`CTCLoss(...)`
        for `criterion`), following a parameter to what its callers pass when they all agree;
        None when it is bound otherwise or more than once."""
        if _depth > 3:
            return None
        function = self.scopes.enclosing_function(at)
        table, _ = self.scopes.lookup(name, function)
        # `model = model.to(device)` rebinds the same object.
        bindings = [
            b
            for b in table.bindings.get(name, [])
            if not (b.kind == "assign" and b.value is not None and _rebinds_itself(b.value, name))
        ]
        if len(bindings) != 1:
            return None
        binding = bindings[0]
        if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
            built: list[cst.Call] = []
            for call, _caller in self.call_sites(table.node):
                argument = self._argument_for(call, table.node, name)
                if not isinstance(argument, cst.Name):
                    return None
                found = self.built_by(argument.value, call, _depth + 1)
                if found is None:
                    return None
                built.append(found)
            if built and all(b.func.deep_equals(built[0].func) for b in built):
                return built[0]
            return None
        value = binding.value
        if binding.kind == "assign" and isinstance(value, cst.Call):
            return value
        return None

    def _through_a_method(
        self, call: cst.Call, arg: cst.Arg, flow: ScriptFlow
    ) -> tuple[cst.Call, ModelDevice] | None:
        """`agent.act(obs)` where the one class of the file with an `act` method hands that
        parameter straight to a module it holds (`return self.q_net(obs).argmax()`): a call of
        `agent.q_net`, on the device that model was moved to."""
        func = call.func
        if not isinstance(func, cst.Attribute) or dotted_name(func.value) is None:
            return None
        if arg.keyword is not None or arg.star:
            return None
        index = [a for a in call.args if a.keyword is None and not a.star].index(arg)
        methods = [
            member
            for classdef in self.context.of_type(self.context.module, cst.ClassDef)
            for member in classdef.body.body
            if isinstance(member, cst.FunctionDef) and member.name.value == func.attr.value
        ]
        if len(methods) != 1:
            return None
        method = methods[0]
        owner = self.scopes.class_of(method)
        params = [p.name.value for p in (*method.params.posonly_params, *method.params.params)]
        if owner is None or len(params) <= index + 1 or params[0] != "self":
            return None
        param = params[index + 1]
        held = self.facts.modules.held_modules(owner)
        for inner in self.context.of_type(method.body, cst.Call):
            attr = self_attribute(inner.func)
            if attr is None or attr not in held:
                continue
            if any(_is_name(a.value, param) for a in inner.args if not a.star):
                target = cst.parse_expression(f"{dotted_name(func.value)}.{attr}")
                model = flow.model_device(target, call)
                if model is not None and (model.move is not None or model.pretrained):
                    return call, dataclasses.replace(model, model=code_of(target))
        return None

    def _as_direct_model_call(
        self, call: cst.Call, flow: ScriptFlow, submodules: bool = False
    ) -> tuple[cst.Call, ModelDevice] | None:
        callee = call.func
        if isinstance(callee, cst.Attribute) and callee.attr.value in ("generate", "forward"):
            callee = callee.value
        if dotted_name(callee) is None:
            return None
        if isinstance(callee, cst.Name) and (
            callee.value in self.scopes.module_functions()
            or self.names.binds_from_import(callee.value)
        ):
            return self._model_through_helper(call, flow)
        model = flow.model_device(callee, call)
        if model is None and submodules and isinstance(callee, cst.Attribute):
            model = flow.model_device(callee.value, call)
        if model is None or (model.move is None and not model.pretrained and not model.reason):
            return None
        return call, model

    def token_id_tensor(self, call: cst.Call, _depth: int = 0) -> bool:
        """`call` makes a CPU tensor of token ids: `torch.tensor(ids)` / `torch.LongTensor([ids])`
        (no `device=`) of a list a tokenizer's `encode` returned, or a call of a function of this
        file that returns such a tensor (`def text_to_ids(text, tok): ...; return tensor`)."""
        qualified = self.names.qualified_name(call.func)
        if qualified in DATA_FACTORIES or qualified in LEGACY_CONSTRUCTORS:
            if keyword_argument(call, "device") is not None or not call.args:
                return False
            return self._holds_token_ids(call.args[0].value, call)
        if not isinstance(call.func, cst.Name) or _depth > 2:
            return False
        function = self.scopes.module_functions().get(call.func.value)
        if function is None:
            return False
        returned = [
            node.value
            for node in self.context.subtree(function.body)
            if isinstance(node, cst.Return) and node.value is not None
        ]
        return bool(returned) and all(
            self._token_tensor_value(value, _depth + 1) for value in returned
        )

    def _token_tensor_value(self, value: cst.BaseExpression, depth: int) -> bool:
        """`value` (a returned expression) is a token-id tensor made on the CPU, possibly
        reshaped (`.unsqueeze(0)`, `[None]`) or bound to a name first."""
        while True:
            if isinstance(value, cst.Subscript):
                value = value.value
            elif (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("unsqueeze", "view", "reshape", "long", "flatten")
            ):
                value = value.func.value
            else:
                break
        if isinstance(value, cst.Call):
            return self.token_id_tensor(value, depth)
        if isinstance(value, cst.Name):
            assigned = self.scopes.assigned_values(value.value, value)
            return len(assigned) == 1 and self._token_tensor_value(assigned[0], depth)
        return False

    def _holds_token_ids(self, data: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`data` is (a list of) what a tokenizer's `encode` returned: the call itself or a name
        bound only to it."""
        if isinstance(data, cst.List) and len(data.elements) == 1:
            data = data.elements[0].value
        if isinstance(data, cst.Call):
            return isinstance(data.func, cst.Attribute) and data.func.attr.value in TOKEN_ID_METHODS
        if isinstance(data, cst.Name):
            assigned = self.scopes.assigned_values(data.value, at)
            return len(assigned) == 1 and self._holds_token_ids(assigned[0], at)
        return False

    def _model_through_helper(
        self, call: cst.Call, flow: ScriptFlow
    ) -> tuple[cst.Call, ModelDevice] | None:
        """`generate(model=model, idx=ids, ...)`: a function given a model moved to a device
        by name, next to the data (`model=` or a first positional model). When the function is
        defined in this file it must call that parameter; the model's device is the answer."""
        candidates = [
            arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "model"
        ]
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if not candidates and positional:
            candidates = [positional[0]]
        if len(candidates) != 1 or dotted_name(candidates[0].value) is None:
            return None
        if isinstance(call.func, cst.Name):
            function = self.scopes.module_functions().get(call.func.value)
            if function is not None and not self._calls_parameter(function, call, candidates[0]):
                return None
        model = flow.model_device(candidates[0].value, call)
        if model is None or (model.move is None and not model.pretrained):
            return None
        return call, model

    def _calls_parameter(self, function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> bool:
        """The parameter of `function` that `arg` of `call` fills is called in its body."""
        names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if arg.keyword is not None:
            param = arg.keyword.value
        elif names:
            param = names[0]
        else:
            return False
        if param not in names:
            return False
        return any(
            isinstance(node, cst.Call) and _is_name(node.func, param)
            for node in self.context.subtree(function.body)
        )

    def _moved_on_the_way(self, use: cst.Name) -> bool:
        """`inputs.to(d)`, `inputs["x"].to(d)`, `{k: v.to(d) for k, v in inputs.items()}`,
        `to_device(inputs)`: the output is moved somewhere on the way."""
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, cst.Attribute) and ancestor.value is current:
                if ancestor.attr.value in _MOVES:
                    return True
            elif isinstance(ancestor, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
                return any(
                    isinstance(n, cst.Attribute) and n.attr.value in _MOVES
                    for n in self.context.subtree(ancestor)
                )
            elif isinstance(ancestor, cst.Call):
                tail = (dotted_name(ancestor.func) or "").rsplit(".", 1)[-1].lower()
                if "device" in tail or "cuda" in tail or tail.startswith(("to_", "move", "send")):
                    return True
            elif isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            current = ancestor
        return False

    # -- checkpoints ---------------------------------------------------------------------------

    def loads_its_own_save(self, load: cst.Call) -> bool:
        """`torch.load(path)` reads a file that this program writes itself with
        `torch.save(obj, path)` (the same string, or the same module-level or local name):
        in one process the saved tensors come back on the device they were saved from, which
        is this program's own."""
        path = argument(load, "f")
        return path is not None and any(_same_path(saved, path) for saved in self._saved_paths())

    def _saved_paths(self) -> list[cst.BaseExpression]:
        """The path argument of every `torch.save(obj, path)` of the file (found once)."""
        key = "flow.saved_paths"
        cached = self.context.shared.get(key)
        if isinstance(cached, list):
            return cached
        found = [
            saved
            for call in self.scopes.find(self.context.module, cst.Call)
            if call_tail(call.func) == "save"
            and self.names.qualified_name(call.func) == "torch.save"
            and (saved := argument(call, "f", 1)) is not None
        ]
        self.context.shared[key] = found
        return found

    def feeds_only_state_dicts(self, node: cst.Call) -> bool:
        """Everything a loaded checkpoint (`torch.load(...)`) is used for is a
        `load_state_dict(...)` argument or a metadata read (`ckpt["epoch"]`, `"k" in ckpt`)."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            return self._is_state_dict_argument(parent)
        if not (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return False
        name = parent.targets[0].target.value
        start = self.scopes.line_of(parent)
        uses = [
            candidate
            for candidate in self.scopes.statements(self.scopes.enclosing_scope(node))
            if isinstance(candidate, cst.Name)
            and candidate.value == name
            and self.scopes.line_of(candidate) > start
        ]
        return all(self._harmless_use(use) for use in uses)

    def _harmless_use(self, use: cst.Name) -> bool:
        parent = self.context.parent(use)
        if isinstance(parent, cst.Attribute) and parent.attr is use:
            return True
        if isinstance(parent, cst.Subscript) and parent.value is use:
            key = parent.slice[0].slice if len(parent.slice) == 1 else None
            if (
                isinstance(key, cst.Index)
                and isinstance(key.value, cst.SimpleString)
                and isinstance(key.value.evaluated_value, str)
                and METADATA_KEY.match(key.value.evaluated_value)
            ):
                return True
        if isinstance(parent, cst.ComparisonTarget):
            return True  # `"key" in checkpoint`
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, cst.Arg):
                return self._is_state_dict_argument(ancestor)
            if isinstance(ancestor, cst.BaseStatement):
                return False
            if (
                isinstance(ancestor, cst.Attribute)
                and ancestor.value is current
                and ancestor.attr.value in ("keys", "items", "values")
                and isinstance(self.context.parent(ancestor), cst.Call)
            ):
                return ancestor.attr.value == "keys"
            current = ancestor
        return False

    def _is_state_dict_argument(self, arg: cst.Arg) -> bool:
        call = self.context.parent(arg)
        return isinstance(call, cst.Call) and call_tail(call.func) in (
            "load_state_dict",
            "load_state_dict_from_checkpoint",
        )

    def sets_current_device(self) -> bool:
        """The script calls `torch.cuda.set_device(...)` (bare `"cuda"` is then its GPU)."""
        return any(
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "set_device"
            and self.names.qualified_name(call.func) == "torch.cuda.set_device"
            for call in self.context.subtree(self.context.module)
        )

    def moved_after(self, name: str, node: cst.CSTNode) -> bool:
        """`name.to(...)` / `name.cuda(...)` somewhere after `node`."""
        after = self.context.position(node).end.line
        for call in self.context.subtree(self.context.module):
            if (
                isinstance(call, cst.Call)
                and self.facts.moves.moved_name(call) == name
                and self.context.position(call).start.line > after
            ):
                return True
        return False

    def guarded_by_cuda_check(self, node: cst.CSTNode) -> bool:
        """`node` runs only when `torch.cuda.is_available()` / `device_count()` says so."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, (cst.If, cst.IfExp))
                and current is ancestor.body
                and self._mentions_cuda_check(ancestor.test)
            ):
                return True
            if isinstance(ancestor, cst.BooleanOperation) and self._mentions_cuda_check(
                ancestor.left
            ):
                return True
            current = ancestor
        return False

    def _mentions_cuda_check(self, test: cst.CSTNode, depth: int = 0) -> bool:
        for inner in self.context.subtree(test):
            if isinstance(inner, (cst.Attribute, cst.Name)) and call_tail(inner) in (
                "is_available",
                "device_count",
            ):
                name = self.names.qualified_name_through_star(inner)
                if name in ("torch.cuda.is_available", "torch.cuda.device_count"):
                    return True
            elif isinstance(inner, cst.Name) and depth == 0:
                # `is_cuda = torch.cuda.is_available()` ... `if is_cuda:`
                values = self.scopes.assigned_values(inner.value, inner)
                if values and all(self._mentions_cuda_check(v, depth + 1) for v in values):
                    return True
        return False

    # -- what kind of program the file is (DF304) ------------------------------------------

    def gpus_used(self) -> set[int]:
        """GPU indices the file places work on: those it names (`"cuda:1"`, `.cuda(0)`), and
        0 for a bare `"cuda"` / `.cuda()` (the current device, GPU 0 unless the file calls
        `torch.cuda.set_device`)."""
        used = set(self.facts.moves.explicit_gpu_indices())
        if used and not self.sets_current_device() and self._uses_bare_cuda():
            used.add(0)
        return used

    def _uses_bare_cuda(self) -> bool:
        for node in self.context.of_type(self.context.module, (cst.SimpleString, cst.Call)):
            if isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda":
                holder = self.context.parent(node)
                if isinstance(holder, cst.Arg):
                    call = self.context.parent(holder)
                    if isinstance(call, cst.Call) and call_tail(call.func) in ("to", "device"):
                        return True
                elif isinstance(holder, (cst.IfExp, cst.Assign)):
                    return True
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "cuda"
                and not node.args
            ):
                return True
        return False

    def model_attribute_moved_to(self, node: cst.CSTNode, code: str) -> str | None:
        """In the class around `node`: the attribute `A` of `self.A = m.to(p)` where
        `self.<attr>` written `code` is also bound to `p` (`self.gpu_id = gpu_id`): the model
        that knows the device `code` names."""
        function = self.scopes.enclosing_function(node)
        owner = self.scopes.class_of(function)
        if owner is None or not code.startswith("self."):
            return None
        table = self.scopes.table(owner)
        sources = {
            binding.value.value
            for binding in table.bindings.get(code, [])
            if isinstance(binding.value, cst.Name)
        }
        if len(sources) != 1:
            return None
        found: set[str] = set()
        for attr, bindings in table.bindings.items():
            for binding in bindings:
                value = binding.value
                if (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value in _MOVES
                    and len(value.args) == 1
                    and isinstance(value.args[0].value, cst.Name)
                    and value.args[0].value.value in sources
                ):
                    found.add(attr.split(".", 1)[1])
        return found.pop() if len(found) == 1 else None

    def runs_on_several_gpus(self) -> bool:
        """One process of several (torchrun, DDP, accelerate, `Trainer`) or `nn.DataParallel`."""
        if self.is_distributed():
            return True
        if "DataParallel" not in self.context.text:
            return False
        return any(
            isinstance(node, (cst.Name, cst.Attribute))
            and call_tail(node) == "DataParallel"
            and self.names.qualified_name_through_star(node)
            in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel")
            for node in self.context.subtree(self.context.module)
        )

    def trains(self) -> bool:
        """The file trains a model: `loss.backward()`, an optimizer's `.step()`, or a training
        routine called with its data (`net.train(songs=..., epoch=...)`, `trainer.fit(model)`;
        `model.train()` alone only switches the mode)."""
        key = "flow.trains"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        optimizers = {
            name
            for scope in self._scopes_with_functions()
            for name, obj in self._bound_in(scope).items()
            if obj.kind == "optimizer"
        }
        found = False
        for node in self.context.subtree(self.context.module):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
                continue
            method = node.func.attr.value
            if method == "backward" or (
                method == "step" and dotted_name(node.func.value) in optimizers
            ):
                found = True
            elif method in _TRAINING_ROUTINES and any(
                arg.keyword is None or arg.keyword.value != "mode" for arg in node.args
            ):
                only = node.args[0].value if len(node.args) == 1 else None
                found = not (isinstance(only, cst.Name) and only.value in ("True", "False"))
            if found:
                break
        self.context.shared[key] = found
        return found

    def _scopes_with_functions(self) -> Iterator[cst.CSTNode]:
        yield self.context.module
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.FunctionDef):
                yield node

    def runs_as_script(self) -> bool:
        """The file does work when run: an `if __name__ == "__main__":` block or top-level
        statements beyond imports, definitions and constants (a library module does none)."""
        for statement in self.context.module.body:
            if isinstance(statement, cst.If):
                if "__name__" in self.scopes.names_read(statement.test):
                    return True
                continue
            if isinstance(statement, (cst.For, cst.While, cst.With)):
                return True
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
                    if isinstance(value, cst.Call) and not self._is_setup_call(value):
                        return True
        return False

    def _is_setup_call(self, call: cst.Call) -> bool:
        """Module-level calls a library makes too: loggers, type variables, constants."""
        name = self.names.qualified_name(call.func) or dotted_name(call.func) or ""
        return name.split(".")[0] in _SETUP_MODULES or name.rsplit(".", 1)[-1] in _SETUP_CALLS

    def overridden_default(self, node: cst.CSTNode) -> bool:
        """`node` is a parameter's default value and every call of the function in the file
        passes that parameter (there is at least one call)."""
        param = self.context.parent(node)
        if not (isinstance(param, cst.Param) and param.default is node):
            return False
        function = next(
            (a for a in self.context.ancestors(param) if isinstance(a, cst.FunctionDef)), None
        )
        if function is None:
            return False
        name = param.name.value
        calls = [
            n
            for n in self.context.subtree(self.context.module)
            if isinstance(n, cst.Call) and call_tail(n.func) == function.name.value
        ]
        return bool(calls) and all(self._passes(call, function, name) for call in calls)

    def _passes(self, call: cst.Call, function: cst.FunctionDef, param: str) -> bool:
        if any(arg.star for arg in call.args):
            return True  # `**kwargs` may hold it; the caller chose
        if any(arg.keyword is not None and arg.keyword.value == param for arg in call.args):
            return True
        positional = [
            p.name.value for p in (*function.params.posonly_params, *function.params.params)
        ]
        if positional and positional[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
            positional = positional[1:]
        index = positional.index(param) if param in positional else -1
        return 0 <= index < len([a for a in call.args if a.keyword is None])

    def falls_back_in_else(self, assign: cst.Assign) -> bool:
        """`if use_gpu: device = <gpu>` / `else: device = <cpu>`: a selection with a fallback
        (the user's own switch), whichever branch `assign` is in."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return False
        name = assign.targets[0].target.value
        if_node: cst.If | None = None
        for ancestor in self.context.ancestors(assign):
            if isinstance(ancestor, cst.If):
                if_node = ancestor
                break
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return False
        if if_node is None:
            return False
        blocks: list[cst.CSTNode] = [if_node.body]
        orelse = if_node.orelse
        while isinstance(orelse, cst.If):
            blocks.append(orelse.body)
            orelse = orelse.orelse
        if orelse is None:
            return False
        blocks.append(orelse)
        kinds: set[str] = set()
        for block in blocks:
            for node in self.scopes.nodes(block):
                if (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value == name
                ):
                    kinds.add(self.facts.moves.device_kind(node.value, None) or "unknown")
        return "cpu" in kinds

    def places_over_devices(self) -> bool:
        """Whether the file shows a model placed over several devices: `device_map`,
        `dispatch_model`, `hf_device_map`, `parallelize`, `device_count()`, a GPU other than
        `cuda:0`, or a Hugging Face `PreTrainedModel` subclass."""
        if self._multi_device is None and not any(
            word in self.context.text for word in PLACEMENT_WORDS
        ):
            self._multi_device = False
        if self._multi_device is None:
            self._multi_device = any(
                self._placement_evidence(node)
                for node in self.context.of_type(
                    self.context.module, (cst.Name, cst.SimpleString, cst.ClassDef)
                )
            )
        return self._multi_device

    def aligns_targets_with_inputs(self) -> bool:
        """Whether a loss of the file gets its target moved to the device of its input
        (`labels = labels.to(logits.device)` before `loss_fct(logits, labels)`, or the move in
        the call): the author expects the two on different devices, as under a model split
        over GPUs (the placement itself may be chosen in another file)."""
        if self._aligns_targets is None:
            self._aligns_targets = ".device" in self.context.text and any(
                self._target_moved_to_input(node)
                for node in self.context.of_type(self.context.module, cst.Call)
            )
        return self._aligns_targets

    def _target_moved_to_input(self, call: cst.Call) -> bool:
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) < 2 or self.facts.modules.loss_kind(call) is None:
            return False
        source = receiver_root(positional[0])
        target = positional[1]
        if isinstance(target, cst.Name):
            bound = self.scopes.binding_before(target.value, call)
            target = bound[1] if bound is not None and bound[1] is not None else target
        return source is not None and any(
            isinstance(node, cst.Call)
            and call_tail(node.func) == "to"
            and isinstance(device := argument(node, "device"), cst.Attribute)
            and device.attr.value == "device"
            and receiver_root(device.value) == source
            for node in self.context.subtree(target)
        )

    def _placement_evidence(self, node: cst.CSTNode) -> bool:
        """`device_map=...`, `dispatch_model`, `"cuda:1"`, `torch.cuda.device_count()`, or a
        Hugging Face `PreTrainedModel` subclass (which may be loaded with `device_map`)."""
        if isinstance(node, cst.Name):
            return node.value in PLACEMENT_NAMES
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return (
                isinstance(value, str) and value.startswith("cuda:") and value[5:] not in ("", "0")
            )
        if isinstance(node, cst.ClassDef):
            bases = [
                b.value for b in node.bases if self.facts.modules.is_pretrained_model_base(b.value)
            ]
            # transformers refuses `device_map="auto"` for a model without `_no_split_modules`
            # ("does not support `device_map`"): a family base of transformers has it; a class
            # of this file on `PreTrainedModel` itself must declare it.
            return any(
                not self.facts.modules.is_generic_pretrained_base(base) for base in bases
            ) or (bool(bases) and self.facts.modules.declares_no_split_modules(node))
        return False

    # -- which code prepares data -------------------------------------------------------------

    def data_functions(self) -> dict[int, DataFunction]:
        """Dataset per-item methods, collate functions and collator classes, functions mapped
        over datasets, transforms, and module functions those call, by `id(node)`."""
        if self._data is not None:
            return self._data
        found: dict[int, DataFunction] = {}
        module = self.context.module
        functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
        code = self.facts.modules
        flow = self
        # Every spelling of a DataLoader (an alias, `data.DataLoader`) contains the word.
        loaders = [
            n
            for n in (
                self.context.of_type(module, cst.Call) if "DataLoader" in self.context.text else ()
            )
            if dotted_name(n.func) is not None and self.names.qualified_name(n.func) in DATALOADERS
        ]

        def add(node: cst.FunctionDef | cst.Lambda, role: str, consumers: list[cst.Call]) -> None:
            entry = found.get(id(node))
            if entry is None:
                entry = found[id(node)] = DataFunction(node, role)
            entry.loaders.extend(c for c in consumers if c not in entry.loaders)

        # Dataset classes (torch's, or the project's own `...Dataset` bases that define
        # `__getitem__`) and the loaders built on their instances.
        for name, cls in classes.items():
            if not (code.class_info(cls).is_dataset or self._project_dataset(cls)):
                continue
            consumers = [
                c
                for c in loaders
                if self._dataset_class_of(argument(c, "dataset"), c, flow) == name
            ]
            for statement in cls.body.body:
                if not isinstance(statement, cst.FunctionDef):
                    continue
                method = statement.name.value
                if method in PER_ITEM_METHODS or not method.startswith("__"):
                    add(statement, f"`{name}.{method}`", consumers)
                elif method == "__init__":
                    entry = DataFunction(statement, f"`{name}.__init__`", list(consumers), True)
                    found[id(statement)] = entry

        # Callbacks: collate_fn=, data_collator=, transform=, ds.map(f).
        for call in self.context.of_type(module, cst.Call):
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                is_mapping = (
                    isinstance(call.func, cst.Attribute)
                    and call.func.attr.value in MAPPING_METHODS
                    and arg is call.args[0]
                    and keyword is None
                )
                if keyword not in DATA_KEYWORDS and not is_mapping:
                    continue
                target = self._callable(arg.value, functions, classes, flow, call)
                if target is None:
                    continue
                if is_mapping:
                    consumers = [c for c in loaders if self._mapped_from(c, call, flow)]
                    role = f"the function mapped over the dataset (`{code_of(call.func)}`)"
                    add(target, role, consumers)
                    found[id(target)].mapping = True
                    continue
                elif keyword == "collate_fn":
                    consumers = [call] if call in loaders else []
                    role = "the `collate_fn`"
                elif keyword == "data_collator":
                    consumers = []
                    role = "the `data_collator`"
                else:
                    # `CIFAR10(..., transform=f)`: the loaders built on that dataset.
                    consumers = [c for c in loaders if self._mapped_from(c, call, flow)]
                    role = f"the `{keyword}`"
                add(target, role, consumers)

        # `loader.collate_fn = f` installs a collate function after the loader is built.
        for assign in self.context.of_type(module, cst.Assign):
            for assign_target in assign.targets:
                target_node = assign_target.target
                if not (
                    isinstance(target_node, cst.Attribute)
                    and target_node.attr.value == "collate_fn"
                ):
                    continue
                target = self._callable(assign.value, functions, classes, flow, assign)
                if target is not None:
                    consumers = self.dataloader_calls(
                        target_node.value, self.scopes.enclosing_function(assign)
                    )
                    add(target, "the `collate_fn`", consumers)

        # Functions and methods named as collate functions (`collate`, `pad_collate`,
        # `_batch_collate_fn`): a library hands them to DataLoaders its users build. One the
        # file only ever calls itself runs in the caller's process.
        for node in self.context.of_type(module, cst.FunctionDef):
            if "collate" not in node.name.value.lower():
                continue
            if id(node) in found or self._only_called_directly(node):
                continue
            owner = self.scopes.class_of(node)
            where = f"{owner.name.value}.{node.name.value}" if owner else node.name.value
            add(node, f"the collate function `{where}`", [])

        # Functions those call, one level down: module functions, and methods of the same
        # class called on `self`.
        for entry in list(found.values()):
            owner = (
                self.scopes.class_of(entry.node)
                if isinstance(entry.node, cst.FunctionDef)
                else None
            )
            for inner in self.context.of_type(entry.node, cst.Call):
                helper: cst.FunctionDef | None = None
                if isinstance(inner.func, cst.Name) and inner.func.value in functions:
                    helper = functions[inner.func.value]
                elif (
                    owner is not None
                    and isinstance(inner.func, cst.Attribute)
                    and _is_name(inner.func.value, "self")
                ):
                    helper = _method_of(owner, inner.func.attr.value)
                if helper is not None and id(helper) not in found:
                    add(helper, f"`{helper.name.value}` (called by {entry.role})", entry.loaders)
        self._data = found
        return found

    def _only_called_directly(self, function: cst.FunctionDef) -> bool:
        """Every other mention of the function's name calls it (`f(batch)`), and there is one:
        nothing hands it on as a value."""
        mentions = [
            use
            for use in self.scopes.names_in(self.context.module, function.name.value)
            if use is not function.name
        ]
        for use in mentions:
            parent = self.context.parent(use)
            if isinstance(parent, cst.Attribute) and parent.attr is use:
                parent = self.context.parent(parent)
                use_node: cst.CSTNode = self.context.parent(use) or use
            else:
                use_node = use
            if not (isinstance(parent, cst.Call) and parent.func is use_node):
                return False
        return bool(mentions)

    def _project_dataset(self, cls: cst.ClassDef) -> bool:
        """A dataset class of the project: it defines `__getitem__` and derives from a class
        named as a dataset (`DataFrameDataset`, `BaseDataset`) that is not a torch name."""
        if _method_of(cls, "__getitem__") is None:
            return False
        for base in cls.bases:
            name = dotted_name(base.value)
            qualified = self.names.qualified_name(base.value) or ""
            if (
                name is not None
                and name.rsplit(".", 1)[-1].endswith("Dataset")
                and not qualified.startswith("torch.")
            ):
                return True
        return False

    def _callable(
        self,
        value: cst.BaseExpression,
        functions: dict[str, cst.FunctionDef],
        classes: dict[str, cst.ClassDef],
        flow: ScriptFlow,
        at: cst.CSTNode,
    ) -> cst.FunctionDef | cst.Lambda | None:
        if isinstance(value, cst.Lambda):
            return value
        if isinstance(value, cst.Name) and value.value in functions:
            return functions[value.value]
        if isinstance(value, cst.Attribute) and _is_name(value.value, "self"):
            # `collate_fn=self._collate`: a method of the class the call is in.
            function = self.scopes.enclosing_function(at)
            owner = self.scopes.class_of(function) if function is not None else None
            return _method_of(owner, value.attr.value) if owner is not None else None
        instance = value
        if isinstance(value, cst.Name):
            values = self.scopes.assigned_values(value.value, at)
            if len(values) == 1:
                instance = values[0]
        if (
            isinstance(instance, cst.Call)
            and self.names.qualified_name(instance.func) == "functools.partial"
            and instance.args
            and instance.args[0].keyword is None
        ):
            # `collate = partial(custom_collate, device=device)`: the function it wraps.
            return self._callable(instance.args[0].value, functions, classes, flow, at)
        if isinstance(instance, cst.Call) and isinstance(instance.func, cst.Name):
            cls = classes.get(instance.func.value)
            if cls is not None:
                for statement in cls.body.body:
                    if (
                        isinstance(statement, cst.FunctionDef)
                        and statement.name.value == "__call__"
                    ):
                        return statement
        return None

    def _dataset_class_of(
        self, value: cst.BaseExpression | None, at: cst.CSTNode, flow: ScriptFlow
    ) -> str | None:
        for _ in range(4):
            if value is None:
                return None
            if isinstance(value, cst.Call):
                return value.func.value if isinstance(value.func, cst.Name) else None
            name = dotted_name(value)
            if name is None:
                return None
            values = self.scopes.assigned_values(name, at)
            if len(values) != 1:
                return None
            value = values[0]
        return None

    def _mapped_from(self, loader: cst.Call, mapping: cst.Call, flow: ScriptFlow) -> bool:
        value = argument(loader, "dataset")
        for _ in range(4):
            if value is None:
                return False
            if any(node is mapping for node in self.context.subtree(value)):
                return True
            name = dotted_name(value)
            if name is None:
                return False
            values = self.scopes.assigned_values(name, loader)
            if not values:
                return False
            value = values[-1]
        return False

    # -- the moves -------------------------------------------------------------------------

    def data_function_of(self, node: cst.CSTNode) -> DataFunction | None:
        """The data-preparation function `node` is in (not across a class boundary)."""
        data = self.data_functions()
        if not data:
            return None
        for ancestor in self.context.ancestors(node):
            entry = data.get(id(ancestor))
            if entry is not None:
                return entry
            if isinstance(ancestor, cst.ClassDef):
                return None
        return None

    def consuming_loops(self, entry: DataFunction) -> list[cst.For]:
        """The `for` loops over a DataLoader that runs `entry`."""
        if not entry.loaders:
            return []
        return [
            loop
            for loop in self.context.subtree(self.context.module)
            if isinstance(loop, cst.For)
            and any(
                call in entry.loaders
                for call in self.dataloader_calls(loop.iter, self.scopes.enclosing_function(loop))
            )
        ]

    def early_optimizer_state(
        self, scope: cst.CSTNode, objects: dict[str, TrainingObject]
    ) -> list[EarlyState]:
        """Optimizers of `scope` (a function or the module; `objects`: its training objects)
        built, or restored, before the first move of a model they hold: each with the move it
        must follow (the latest of its models' first moves)."""
        first_move: dict[str, cst.Call] = {}
        for inner in self.scopes.statements(scope):
            if isinstance(inner, cst.Call):
                moved = self.facts.moves.moved_module(inner)
                if moved is not None and moved[0] not in first_move:
                    first_move[moved[0]] = inner
        if not first_move:
            return []
        found: list[EarlyState] = []
        for inner in self.scopes.statements(scope):
            if isinstance(inner, cst.Call):
                early = self._early_state(inner, objects, first_move)
                if early is not None:
                    found.append(early)
        return found

    def _early_state(
        self, call: cst.Call, objects: dict[str, TrainingObject], first_move: dict[str, cst.Call]
    ) -> EarlyState | None:
        parent = self.context.parent(call)
        if (
            isinstance(parent, cst.Assign)
            and parent.value is call
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            name = parent.targets[0].target.value
            obj = objects.get(name)
            if obj is not None and obj.kind == "optimizer":
                move = self._latest_move(obj.models, first_move)
                if (
                    move is not None
                    and self.scopes.line_of(move) > self.scopes.line_of(call)
                    and not self._rebound_after(name, move)
                ):
                    return EarlyState(call, "construct", name, move)
            return None
        optimizers = {name for name, obj in objects.items() if obj.kind == "optimizer"}
        restored = self.optimizer_restore(call, optimizers)
        if restored is None:
            return None
        name = restored
        models = set(objects[name].models)
        direct = isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"
        if not direct:
            # A checkpoint helper handed the model too restores it with the model's state.
            models |= self.scopes.names_read(call)
        move = self._latest_move(models, first_move)
        if (
            move is not None
            and self.scopes.line_of(move) > self.scopes.line_of(call)
            and not self._rebound_after(name, move)
        ):
            label = (
                f"{name}.load_state_dict"
                if direct
                else f"{self.context.module.code_for_node(call.func)}(..., {name})"
            )
            return EarlyState(call, "load", name, move, label)
        return None

    def _rebound_after(self, name: str, move: cst.Call) -> bool:
        """A fresh object is bound to `name` after the move: the early one is a different one."""
        scope = self.scopes.enclosing_scope(move)
        after = self.scopes.line_of(move)
        return any(
            isinstance(inner, cst.AssignTarget)
            and name in self.scopes.names_bound(inner)
            and self.scopes.line_of(inner) >= after
            for inner in self.scopes.statements(scope)
        )

    def _latest_move(self, models: set[str], first_move: dict[str, cst.Call]) -> cst.Call | None:
        moves = [first_move[name] for name in models if name in first_move]
        return max(moves, key=lambda c: self.scopes.line_of(c)) if moves else None

    def data_batch_moves(
        self, entry: DataFunction, loops: list[cst.For], data_device: DeviceMove | None
    ) -> tuple[list[Edit], list[str]] | str:
        """What makes the `loops` that consume data preparation `entry` move their batch, once
        a move inside `entry` is removed: the edits and the statements they add (none where
        every loop moves its batch already), or why no fix can be made. `data_device`: the
        move removed from `entry`, when its device is the right one for the batch."""
        if not loops:
            return (
                "no loop over its DataLoader was found that could move the batch to the model's "
                "device instead"
            )
        covered = {
            id(call)
            for loop in loops
            for call in self.dataloader_calls(loop.iter, self.scopes.enclosing_function(loop))
        }
        elsewhere = [call for call in entry.loaders if id(call) not in covered]
        if elsewhere:
            line = self.context.position(elsewhere[0]).start.line
            return (
                f"the batches of the DataLoader on line {line} are used where they cannot be "
                "followed, and would stay on the CPU"
            )
        edits: list[Edit] = []
        statements: list[str] = []
        origin = entry.node if isinstance(entry.node, cst.FunctionDef) else None
        for loop in loops:
            plan = self.loop_plan(loop)
            if data_device is not None and (plan is None or (plan.edit is None and plan.unmoved)):
                # The device the data went to is the right one: the loop moves it there.
                found = self.batch_move(loop, data_device, origin, entry)
                if isinstance(found, tuple):
                    edits.append(found[0])
                    statements.append(found[1])
                    continue
                if not found:
                    continue  # the loop moves the batch already
                if plan is None and self.hands_batch_on(loop):
                    return found
            if plan is None and not self.hands_batch_on(loop):
                continue  # the loop only inspects the batch (or does nothing with it)
            if plan is None:
                return (
                    "cannot tell which device the model fed by the loop on "
                    f"line {self.context.position(loop).start.line} is on"
                )
            if plan.reason and plan.unmoved:
                return plan.reason
            if plan.edit is not None:
                edits.append(plan.edit)
                statements.append(plan.statement_code)
        return edits, statements

    def data_move_hazard(
        self, entry: DataFunction, node: cst.CSTNode, move: DeviceMove
    ) -> DataHazard | None:
        """Where `move` inside data preparation `entry` breaks, or None where it cannot (then it
        is not a bug): the function runs in DataLoader worker processes (`num_workers`, or
        loaders this file does not show), its loader pins memory, it is mapped over a
        `datasets` dataset, the script runs as several processes and the device is not each
        process's own, or the model is on another device. A function that feeds a model itself
        (feature extraction inside `ds.map`) needs its moves."""
        if self._feeds_a_model(entry.node):
            return None
        right_device = move.kind == "device"
        if entry.mapping:
            return DataHazard(
                "a mapped dataset is stored on the CPU, and with `num_proc` the function runs "
                "in worker processes, which cannot use CUDA",
                False,
            )
        model_devices = {
            plan.move.code
            for loop in self.consuming_loops(entry)
            if (plan := self.loop_plan(loop)) is not None and plan.move is not None
        }
        evidence = self.distributed_evidence()
        if evidence is not None and not self._is_process_device(move, node, model_devices):
            return DataHazard(
                f"the script runs as several processes ({evidence}) and {move.describe()} is not "
                "each process's own device",
                False,
            )
        right_device = right_device and not (model_devices - {move.code})
        for loader in entry.loaders:
            workers = argument(loader, "num_workers", 5)
            if isinstance(workers, cst.Name):
                workers = self.scopes.latest_binding(workers.value, loader) or workers
            if workers is not None and not (
                isinstance(workers, cst.Integer) and workers.evaluated_value == 0
            ):
                return DataHazard(
                    "its DataLoader runs it in worker processes "
                    f"(`num_workers={code_of(workers)}`), which cannot use CUDA",
                    right_device,
                )
            pinned = argument(loader, "pin_memory", 7)
            if isinstance(pinned, cst.Name) and pinned.value not in ("True", "False"):
                pinned = self.scopes.latest_binding(pinned.value, loader) or pinned
            if pinned is not None and not _is_name(pinned, "False"):
                return DataHazard(
                    f"its DataLoader pins the batches (`pin_memory={code_of(pinned)}`), which "
                    "works only on CPU tensors",
                    right_device,
                )
        if not entry.loaders:
            return DataHazard(
                "no DataLoader in this file is known to run it: with `num_workers > 0` it runs "
                "in worker processes, which cannot use CUDA",
                right_device,
            )
        if evidence is not None or move.kind != "accelerator":
            return None  # each process's own device, or the script's choice in one process
        others = sorted(model_devices - {move.code})
        if others:
            return DataHazard(
                f"the model is on `{others[0]}`, the data on {move.describe()}", False
            )
        return None

    def _is_process_device(
        self, move: DeviceMove, node: cst.CSTNode, model_devices: set[str]
    ) -> bool:
        """The move is to each process's own device: the rank's (`cuda:{local_rank}`), the
        current device after `set_device(local_rank)`, or the device every process moves its
        model to."""
        if move.code in model_devices:
            return True
        if move.method == "cuda":
            return not move.cuda_args and self.sets_current_device()
        device = move.expression
        return isinstance(device, cst.Name) and self.facts.moves.is_process_device(
            device.value, node
        )

    def _feeds_a_model(self, function: cst.FunctionDef | cst.Lambda) -> bool:
        """`function` calls a model that is on a device (`model(**inputs)`, `model.generate`)."""
        for call in self.context.subtree(function):
            if not isinstance(call, cst.Call):
                continue
            callee = call.func
            if isinstance(callee, cst.Attribute) and callee.attr.value in ("forward", "generate"):
                callee = callee.value
            if dotted_name(callee) is None:
                continue
            found = self.model_device(callee, call)
            if found is not None and (found.move is not None or found.pretrained or found.reason):
                return True
        return False

    def has_self_moving_trainer(self) -> bool:
        """A Hugging Face / Lightning trainer that moves batches to the model itself."""
        key = "flow.self_moving_trainer"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        result = any(
            isinstance(n, cst.Call)
            and dotted_name(n.func) is not None
            and self.names.qualified_name(n.func) in SELF_MOVING_TRAINERS
            for n in self.context.subtree(self.context.module)
        )
        self.context.shared[key] = result
        return result

    def hands_batch_on(self, loop: cst.For) -> bool:
        """Whether the loop passes one of its target names to a call (other than `print`, `len`)."""
        targets = {n.value for n in self.context.subtree(loop.target) if isinstance(n, cst.Name)}
        for node in self.context.subtree(loop.body):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Name) and node.func.value in _INSPECTING_CALLS:
                continue
            for arg in node.args:
                if any(
                    isinstance(n, cst.Name) and n.value in targets
                    for n in self.context.subtree(arg.value)
                ):
                    return True
            if isinstance(node.func, cst.Attribute) and any(
                isinstance(n, cst.Name) and n.value in targets
                for n in self.context.subtree(node.func.value)
            ):
                return True
        return False

    def _root_names(self, expr: cst.CSTNode) -> set[str]:
        """Names an expression reads at its roots: `torch.device(args.gpu)` -> {"torch", "args"}."""
        roots: set[str] = set()
        for node in self.context.subtree(expr):
            if isinstance(node, cst.Attribute):
                root = node
                while isinstance(root, cst.Attribute):
                    root = root.value  # type: ignore[assignment]
                if isinstance(root, cst.Name):
                    roots.add(root.value)
        attr_names = {
            id(n.attr) for n in self.context.subtree(expr) if isinstance(n, cst.Attribute)
        }
        keyword_names = {
            id(n.keyword)
            for n in self.context.subtree(expr)
            if isinstance(n, cst.Arg) and n.keyword
        }
        for node in self.context.subtree(expr):
            if isinstance(node, cst.Name) and id(node) not in attr_names | keyword_names:
                roots.add(node.value)
        return roots

    def _root_names_of_move(self, move: DeviceMove) -> set[str]:
        if move.expression is not None:
            return self._root_names(move.expression)
        return set()

    def _is_moved(self, body: cst.CSTNode, name: str) -> bool:
        """Whether the loop moves `name` itself (`.to`, `.cuda`, a device helper, a comprehension)
        or rebinds it from something that may have moved it."""
        for node in self._scope_nodes(body):
            if isinstance(node, cst.Call):
                if (
                    isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in _MOVES
                    and _moved_whole(node.func.value, name)
                    and self._bound_result(node)
                ):
                    return True
                if _device_helper(node) and any(
                    name in self.scopes.names_read(a.value) for a in node.args
                ):
                    return True
            elif isinstance(node, (cst.ListComp, cst.DictComp, cst.GeneratorExp, cst.SetComp)):
                if name in self.scopes.names_read(node.for_in.iter) and any(
                    isinstance(n, cst.Call)
                    and isinstance(n.func, cst.Attribute)
                    and n.func.attr.value in _MOVES
                    for n in self.context.subtree(node)
                ):
                    return True
            elif (
                isinstance(node, cst.Assign)
                and any(name in self.scopes.names_read(t.target) for t in node.targets)
                and not self._keeps_device(node.value)
                and not _to_host(node.value)
            ):
                return True
        return False

    def _bound_result(self, call: cst.Call) -> bool:
        """The move's result is assigned (`x = x.to(d)`, `x, y = x.to(d), y.to(d)`), not used
        once inline (`criterion(out, y.to(d))` leaves `y` itself where it was)."""
        node: cst.CSTNode = call
        parent = self.context.parent(node)
        while isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
            node, parent = parent, self.context.parent(parent)
        return isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node

    def _keeps_device(self, value: cst.BaseExpression) -> bool:
        """A rebinding computed by tensor methods and torch functions only (it stays where it
        was)."""
        for node in self.context.subtree(value):
            if isinstance(node, cst.Call):
                if (
                    isinstance(node.func, cst.Attribute)
                    and not dotted_name(node.func)
                    and node.func.attr.value not in _MOVES
                ):
                    continue  # `batch[0].float()`; but `data[0].to(d)` moves
                qualified = self.names.qualified_name(node.func)
                if qualified is not None and qualified.startswith("torch."):
                    continue
                if isinstance(node.func, cst.Attribute) and node.func.attr.value not in _MOVES:
                    # `x.view(...)`, `x.float()`: a tensor method keeps the device.
                    receiver = dotted_name(node.func.value)
                    if receiver is not None and "." not in receiver:
                        continue
                return False
        return True

    # -- training, optimizers and output, as a script-level judgement sees them ---------------

    def calls_backward(self, root: cst.CSTNode, _depth: int = 0) -> bool:
        """A `.backward()` call under `root`, or in a module-level function called there
        (followed two calls deep): the code under `root` trains."""
        module = self.context.module
        for call in self.scopes.find(root, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
                return True
            if _depth < 2 and isinstance(call.func, cst.Name):
                for statement in module.body:
                    if (
                        isinstance(statement, cst.FunctionDef)
                        and statement.name.value == call.func.value
                        and statement.body is not root
                        and self.calls_backward(statement.body, _depth + 1)
                    ):
                        return True
        return False

    def runs_module(self, root: cst.CSTNode, name: str) -> bool:
        """Code under `root` runs the module bound to `name`: `name(x)`, `name.forward(x)`,
        `name.generate(x)`, or hands it to a call together with a tensor built there
        (`writer.add_graph(name, torch.rand(1, 3, 224, 224))`)."""
        for call in self.scopes.find(root, cst.Call):
            func = call.func
            if isinstance(func, cst.Name) and func.value == name:
                return True
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == name
                and func.attr.value in ("forward", "generate", "predict")
            ):
                return True
            values = [arg.value for arg in call.args]
            if any(isinstance(v, cst.Name) and v.value == name for v in values) and any(
                (self.names.qualified_name(inner.func) or "").startswith("torch.")
                for value in values
                for inner in self.context.subtree(value)
                if isinstance(inner, cst.Call)
            ):
                return True
        return False

    def builds_optimizer(self, call: cst.Call) -> bool:
        """An optimizer is built here: one of torch.optim (schedulers aside), a known optimizer
        class of another library (`FusedAdam`), or a factory named for one
        (`build_optimizer(cfg, model)`). Looser than :meth:`training_objects`: enough to tell
        which models a script trains."""
        qualified = self.names.qualified_name(call.func) or ""
        if qualified.startswith("torch.optim.") and ".lr_scheduler" not in qualified:
            return True
        tail = call_tail(call.func) or ""
        return tail in OPTIMIZER_CLASS_NAMES or "optimizer" in tail.lower()

    def logs(self, statement: cst.BaseStatement) -> bool:
        """`print(...)`, `logging.info(...)` or `logger.info(...)` alone on its line."""
        call = statement_call(statement)
        if call is None:
            return False
        qualified = self.names.qualified_name(call.func) or ""
        if qualified in ("builtins.print", "print") or (
            qualified.startswith("logging.") and call_tail(call.func) in LOGGING_METHODS
        ):
            return True
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in LOGGING_METHODS
            and isinstance(call.func.value, cst.Name)
        ):
            return call.func.value.value in self.loggers()
        return False

    def in_log_statement(self, node: cst.CSTNode) -> bool:
        """`node` is part of a statement that :meth:`logs` (a string that is printed)."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.SimpleStatementLine):
                return self.logs(ancestor)
        return False

    def loggers(self) -> set[str]:
        """Names bound to `logging.getLogger(...)` anywhere in the file."""
        if self._loggers is None:
            self._loggers = set()
            for assign in self.scopes.find(self.context.module, cst.Assign):
                if (
                    isinstance(assign.value, cst.Call)
                    and self.names.qualified_name(assign.value.func) == "logging.getLogger"
                ):
                    for target in assign.targets:
                        if isinstance(target.target, cst.Name):
                            self._loggers.add(target.target.value)
        return self._loggers


# -- small helpers ----------------------------------------------------------------------------

#: Words of a function name that say it returns something else than an optimizer
#: (`get_optimizer_params`, `optimizer_cls`, `load_optimizer_state`, `prepare_optimizer`).
_NOT_AN_OPTIMIZER = frozenset(
    {"param", "params", "parameters", "group", "groups", "state", "states", "dict", "sched",
     "scheduler", "cls", "class", "type", "name", "kwargs", "args", "config", "cfg", "lr",
     "prepare", "wrap", "step", "zero", "grad", "save", "to", "device"}
)  # fmt: skip


def _names_an_optimizer(tail: str) -> bool:
    """`build_optimizer`, `create_optimizer_v2`, `make_optim`, `FusedAdam`; not
    `get_optimizer_grouped_parameters` or `optimizer_cls`."""
    if tail in OPTIMIZER_CLASS_NAMES:
        return True
    words = set(re.split(r"_+", tail.lower()))
    return bool(words & {"optimizer", "optim", "optimizers"}) and not words & _NOT_AN_OPTIMIZER


def _is_move_call(value: cst.BaseExpression) -> bool:
    """`x.to(...)`, `x.cuda()`, also under `.eval()`/`.train()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in _MOVES:
            return True
        value = value.func.value
    return False


def _roots(values: list[cst.BaseExpression]) -> set[str]:
    """The root names of the names and attributes among `values` (`model` of `model.head`)."""
    return {
        root
        for value in values
        if isinstance(value, (cst.Name, cst.Attribute)) and (root := root_name(value)) is not None
    }


def _tensor_roots(expr: cst.BaseExpression) -> set[str]:
    """Names whose tensor `expr` is, unmoved: `x`, `batch[0]`, `x.float().view(-1)`, `x * 2`;
    nothing for `x.to(d)` or for values passed through other calls (`tokenizer(texts)`)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return _tensor_roots(expr.value)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value not in _MOVES:
            return _tensor_roots(expr.func.value)
        return set()
    if isinstance(expr, cst.BinaryOperation):
        return _tensor_roots(expr.left) | _tensor_roots(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _tensor_roots(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return {r for e in expr.elements for r in _tensor_roots(e.value)}
    return set()


def _string_literal(text: str) -> str:
    """`text` as a string literal in double quotes where it can be (as black writes them)."""
    return f'"{text}"' if text.isprintable() and not set(text) & {'"', "\\"} else repr(text)


def _string_key(expr: cst.BaseExpression, name: str) -> str | None:
    """`batch["lengths"]` (or `batch["lengths"].long()`) -> "lengths", for the dict `name`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value
    if not (isinstance(expr, cst.Subscript) and _is_name(expr.value, name)):
        return None
    index = expr.slice[0].slice if len(expr.slice) == 1 else None
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        value = index.value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_name(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _unpacking(statement: cst.BaseStatement, name: str) -> list[str] | None:
    """`x, y = batch` as the first statement of the loop: the names it binds."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not _is_name(assign.value, name) or not isinstance(target, (cst.Tuple, cst.List)):
        return None
    if not all(
        isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements
    ):
        return None
    return [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]


def _is_inspected(parent: cst.CSTNode | None, context: FileContext) -> bool:
    """A use of a name as the argument of `len(...)`, `print(...)` and the like."""
    if not isinstance(parent, cst.Arg):
        return False
    call = context.parent(parent)
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Name)
        and call.func.value in _INSPECTING_CALLS
    )


def _unpacked_index(context: FileContext, value: cst.BaseExpression, name: str) -> int | None:
    """In `a, name = value`: the position of `name` (1)."""
    assign = context.parent(value)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    for index, element in enumerate(target.elements):
        if isinstance(element, cst.StarredElement):
            return None
        if _is_name(element.value, name):
            return index
    return None


def _names_an_iterator(func: cst.BaseExpression) -> bool:
    """A project's own progress-bar or iterator wrapper (`_build_tqdm_iterator(loader)`,
    `make_iter(loader)`), named as one: it yields what its first argument yields."""
    tail = (call_tail(func) or "").lower()
    return (
        isinstance(func, (cst.Name, cst.Attribute))
        and any(word in tail for word in ("tqdm", "iter", "progress"))
        and tail not in ("iter", "next")
    )


def _not_a_tensor(value: cst.BaseExpression) -> bool:
    """`None`, a string, a list or list comprehension: what a collate returns next to tensors."""
    return _is_name(value, "None") or isinstance(value, (cst.SimpleString, cst.List, cst.ListComp))


def _method_of(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def _device_helper(call: cst.Call) -> bool:
    name = dotted_name(call.func)
    tail = (name or "").rsplit(".", 1)[-1].lower()
    return "device" in tail or "cuda" in tail or tail.startswith(("to_", "move", "send"))


def _moved_whole(receiver: cst.BaseExpression, name: str) -> bool:
    """`x.to(d)`, `x.float().to(d)`: all of `x` is moved; `batch["ids"].to(d)` moves one entry."""
    while True:
        if isinstance(receiver, cst.Name):
            return receiver.value == name
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
            receiver = receiver.func.value
        elif isinstance(receiver, cst.Attribute):
            receiver = receiver.value
        else:
            return False


def is_main_guard(node: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either operand order): the script's entry point."""
    if not isinstance(node, cst.If):
        return False
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    parts = [test.left, test.comparisons[0].comparator]
    names = [p for p in parts if isinstance(p, cst.Name) and p.value == "__name__"]
    strings = [
        p for p in parts if isinstance(p, cst.SimpleString) and p.evaluated_value == "__main__"
    ]
    return bool(names and strings) and isinstance(test.comparisons[0].operator, cst.Equal)


def _same_path(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Two path expressions that name the same file: equal string literals, one name, or the
    same expression however it is laid out (`os.path.join(root, "best.pth")` over two lines)."""
    if isinstance(a, cst.SimpleString) and isinstance(b, cst.SimpleString):
        return a.evaluated_value == b.evaluated_value
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value
    if isinstance(a, (cst.Call, cst.BinaryOperation, cst.FormattedString)):
        return _expression_shape(a) == _expression_shape(b) is not None
    return False


def _expression_shape(node: cst.BaseExpression) -> str | None:
    """The expression as Python's parser sees it (layout, parentheses and quotes aside)."""
    try:
        return ast.dump(ast.parse(code_of(node).strip(), mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _attribute_chain_root(expression: cst.BaseExpression) -> cst.Name | None:
    """`args` in `args.device` (or `cfg.train.device`); None for anything but a chain of
    attributes on a name."""
    node = expression
    if not isinstance(node, cst.Attribute):
        return None
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def _rebinds_itself(value: cst.BaseExpression, name: str) -> bool:
    """`model.to(device)`, `model.cuda().eval()`: a method of the module that returns it."""
    node = value
    moved = False
    while (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in MODULE_SELF_METHODS
    ):
        node, moved = node.func.value, True
    return moved and _is_name(node, name)


def _to_host(value: cst.BaseExpression) -> bool:
    """`labels.data.cpu().numpy()`, `x.tolist()`, `t.to("cpu")`: a value brought to the host
    (for NumPy, logging, metrics) is no move to the model's device."""
    return copies_to_host(value) or (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("numpy", "tolist", "item")
    )
