"""Script flow: what a training script does around its model. Which device the model called
at some point was moved to (and how that device can be written there), which DataLoaders a loop
iterates, which batch names reach the model unmoved, which functions prepare data, and whether
the script runs as one process of several.

Only what the code states is used. When the device is known but cannot be written where it is
needed, the answer carries the reason, and the passes report instead of guessing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import libcst as cst

from devfix.codemods.analysis.modules import ModuleFacts
from devfix.codemods.analysis.moves import DeviceMove, Moves
from devfix.codemods.analysis.names import (
    Names,
    argument,
    call_tail,
    code_of,
    dotted_name,
    root_name,
)
from devfix.codemods.analysis.scopes import Binding, Scopes
from devfix.codemods.analysis.torch_names import (
    DATA_KEYWORDS,
    DATALOADERS,
    DISTRIBUTED_MARKERS,
    GRAD_SCALERS,
    ITERATION_WRAPPERS,
    MAPPING_METHODS,
    MODEL_WRAPPERS,
    OTHER_OPTIMIZERS,
    PER_ITEM_METHODS,
    PLACEMENT_NAMES,
    PLACEMENT_WORDS,
    SELF_MOVING_TRAINERS,
    SPLIT_MODEL_BASES,
)
from devfix.context import FileContext
from devfix.types import Edit

_MOVES = ("to", "cuda")
#: Checkpoint keys that conventionally hold Python numbers or configuration, not tensors.
METADATA_KEY = re.compile(
    r"^(epoch|epochs|start_epoch|step|steps|global_step|iteration|iter|it|best\w*|acc\w*|lr|"
    r"args|config|cfg|hparams|hyper_parameters|version|arch|meta|metadata|n_\w+|num_\w+)$"
)


_INSPECTING_CALLS = frozenset({"print", "len", "isinstance", "type", "str", "repr", "id", "range"})
_MARKER_TAILS = frozenset(name.rsplit(".", 1)[1] for name in DISTRIBUTED_MARKERS)
_INSPECTING_BUILTINS = frozenset({"len", "print", "isinstance", "type", "str", "repr", "id"})


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


@dataclass
class DataFunction:
    """A function (or lambda) that prepares data, the role it plays, and the DataLoaders that
    consume it; `preloads`: it runs once when the dataset is built (`__init__`)."""

    node: cst.FunctionDef | cst.Lambda
    role: str
    #: DataLoader calls that consume it (empty: none found).
    loaders: list[cst.Call] = field(default_factory=list)
    preloads: bool = False


@dataclass
class LoopPlan:
    """What DF204 (and DF201) make of one `for` loop over a DataLoader."""

    loop: cst.For
    loaders: list[cst.Call]
    model: str | None = None
    move: DeviceMove | None = None
    #: Batch names that reach the model unmoved, in target order.
    unmoved: list[str] = field(default_factory=list)
    #: The statement that moves them, and where it goes; None when the plan has a reason.
    edit: Edit | None = None
    statement_code: str = ""
    #: Why no edit can be made although names are unmoved.
    reason: str = ""


class ScriptFlow:
    """Where models are moved, what loops iterate and feed, of one file; built on first use."""

    def __init__(
        self,
        context: FileContext,
        names: Names,
        scopes: Scopes,
        moves: Moves,
        modules: ModuleFacts,
    ) -> None:
        self.context = context
        self.names = names
        self.scopes = scopes
        self.moves = moves
        self.modules = modules
        self._call_sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] | None = None
        self._plans: dict[int, LoopPlan | None] = {}
        self._distributed: str | None = None
        self._callbacks: frozenset[str] | None = None
        self._module_objects: dict[str, TrainingObject] | None = None
        self._multi_device: bool | None = None
        self._one_device: bool | None = None
        self._data: dict[int, DataFunction] | None = None

    def device_move(self, call: cst.Call, function: cst.FunctionDef | None) -> DeviceMove | None:
        """A move to a device known to be one (a literal, `.cuda()`, a device variable)."""
        move = self.moves.move_of(call, function)
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
            return []
        return self._call_sites.get(function.name.value, [])

    def _argument_for(
        self, call: cst.Call, function: cst.FunctionDef, param: str
    ) -> cst.BaseExpression | None:
        if any(arg.star for arg in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param:
                return arg.value
        names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
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
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
        """(move, the function the move's device is written in, loaded by from_pretrained)."""
        table, table_function = self.scopes.lookup(name, function)
        same_scope = table_function is function and not name.startswith("self.")
        limit = before if same_scope else None
        candidates: list[tuple[int, tuple[DeviceMove | None, cst.FunctionDef | None, bool]]] = []
        pretrained = False
        direct_moves: set[int] = set()
        for binding in table.bindings.get(name, []):
            if limit is not None and binding.position >= limit:
                continue
            if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
                found = self._move_from_callers(table.node, name, binding, depth)
                if found is not None:
                    candidates.append((binding.position, found))
                continue
            if binding.kind != "assign" or binding.value is None:
                candidates.append((binding.position, (None, table_function, False)))
                continue
            result = self._move_in_value(binding.value, table_function, binding.position, depth)
            if result is not None and result[2]:
                pretrained = True
            if _is_move_call(binding.value):
                direct_moves.add(binding.position)
            candidates.append((binding.position, result or (None, table_function, False)))
        for position, call in table.statement_moves.get(name, []):
            if limit is not None and position >= limit:
                continue
            move = self.device_move(call, table_function)
            direct_moves.add(position)
            candidates.append((position, (move, table_function, pretrained)))
        if not candidates:
            return None
        candidates.sort(key=lambda item: item[0])
        position, (move, origin, was_pretrained) = candidates[-1]
        if move is None and not (pretrained or was_pretrained):
            return None
        direct = position in direct_moves
        if direct and move is not None and position in table.conditional:
            move = dataclasses.replace(move, conditional_line=table.conditional[position])
        return move, origin, pretrained or was_pretrained

    def _move_in_value(
        self,
        value: cst.BaseExpression,
        function: cst.FunctionDef | None,
        position: int,
        depth: int,
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
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
                if device_map is None or self.moves.device_kind(device_map, function) == "cpu":
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

    def _move_from_callers(
        self, function: cst.FunctionDef, param: str, binding: Binding, depth: int
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
        sites = self.call_sites(function)
        if not sites:
            return None
        results = []
        for call, caller in sites:
            argument = self._argument_for(call, function, param)
            if argument is None or dotted_name(argument) is None:
                return None
            found = self._find_move(
                dotted_name(argument) or "", caller, self.context.order(call)[0], depth + 1
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
        if depth > 4:
            return []
        if isinstance(expr, cst.Call):
            qualified = self.names.qualified_name(expr.func)
            if qualified in DATALOADERS:
                return [expr]
            if qualified in ITERATION_WRAPPERS and expr.args and expr.args[0].keyword is None:
                return self.dataloader_calls(expr.args[0].value, function, depth + 1)
            return []
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
            if binding.kind != "assign" or binding.value is None:
                return []
            calls = self.dataloader_calls(binding.value, table_function, depth + 1)
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
        if not loaders:
            return None
        target: cst.BaseExpression = loop.target
        if isinstance(loop.iter, cst.Call) and self.names.qualified_name(loop.iter.func) in (
            "enumerate",
            "builtins.enumerate",
        ):
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                return None
            target = target.elements[1].value
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
        model_calls: list[tuple[cst.Call, ModelDevice]] = []
        for call in calls:
            callee = call.func
            if isinstance(callee, cst.Attribute) and callee.attr.value == "forward":
                callee = callee.value
            if dotted_name(callee) is None or dotted_name(callee) in names:
                continue
            found = self.model_device(callee, call)
            if found is not None and (found.move is not None or found.reason):
                model_calls.append((call, found))
        if not model_calls:
            return None
        plan = LoopPlan(loop, loaders)
        devices = {(m.move.code if m.move else m.reason) for _, m in model_calls}
        first = model_calls[0][1]
        plan.model = first.model
        if len(devices) > 1:
            plan.reason = "the loop feeds models on different devices"
        elif first.move is None:
            plan.reason = first.reason
        else:
            plan.move = first.move
        bound = self._device_bound(loop, names, [c for c, _ in model_calls])
        plan.unmoved = [n for n in names if n in bound and not self._is_moved(loop.body, n)]
        if one_line and not plan.reason:
            plan.reason = "the loop body is on the `for` line"
        if not plan.unmoved or plan.reason or plan.move is None:
            return plan
        anchor = body[0]
        if single is not None:
            statement = self._single_move(loop.body, single, plan.move)
            if statement is None:
                plan.reason = f"cannot tell whether `{single}` is a tensor, a sequence or a dict"
                return plan
        else:
            moved = ", ".join(code_of(plan.move.apply(cst.Name(n))) for n in plan.unmoved)
            statement = f"{', '.join(plan.unmoved)} = {moved}"
        plan.statement_code = statement
        new_line = cst.parse_statement(
            statement + "\n", config=self.context.module.config_for_parsing
        )
        group = [anchor, new_line] if after_anchor else [new_line, anchor]
        plan.edit = Edit(anchor, cst.FlattenSentinel(group))
        return plan

    def _single_move(self, body: cst.BaseSuite, name: str, move: DeviceMove) -> str | None:
        """`batch = batch.to(d)` / `{k: v.to(d) ...}` / `[t.to(d) ...]` by how `batch` is used."""
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
        if as_dict + as_sequence + as_tensor != 1:
            return None
        if as_dict:
            key, value = (
                ("k", "v") if not {"k", "v"} & self._root_names_of_move(move) else ("key", "value")
            )
            moved = code_of(move.apply(cst.Name(value)))
            return f"{name} = {{{key}: {moved} for {key}, {value} in {name}.items()}}"
        if as_sequence:
            item = "t" if "t" not in self._root_names_of_move(move) else "item"
            return f"{name} = [{code_of(move.apply(cst.Name(item)))} for {item} in {name}]"
        return f"{name} = {code_of(move.apply(cst.Name(name)))}"

    def _device_bound(
        self, loop: cst.For, names: list[str], model_calls: list[cst.Call]
    ) -> set[str]:
        """Batch names passed to the model, or meeting its output in a call or an operation."""
        wanted = set(names)
        assigns = [n for n in self._scope_nodes(loop.body) if isinstance(n, cst.Assign)]
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
        for node in self._scope_nodes(loop.body):
            parts: list[cst.BaseExpression] = []
            if isinstance(node, cst.Call) and id(node) not in model_ids:
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
            if self.modules.enclosing_class(node) is not None:
                continue
            function_info = self.modules.enclosing_function(node)
            if function_info is not None and function_info.is_model_code:
                continue  # model code: the moves under judgement, not the script's choice
            move = self.moves.move_of(node)
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
                info = self.modules.function_info(ancestor)
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
        for statement in self.scopes.statements(scope):
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
            obj = TrainingObject(kind, qualified)
            reads = set().union(*(self.scopes.names_read(arg.value) for arg in call.args))
            if kind == "optimizer":
                # Modules whose parameters it trains: `model.parameters()`,
                # `model.head.named_parameters()`; a plain tensor's `.to()` is not in place.
                obj.models = {
                    name
                    for inner in self.context.subtree(call)
                    if isinstance(inner, cst.Call)
                    and isinstance(inner.func, cst.Attribute)
                    and inner.func.attr.value in ("parameters", "named_parameters")
                    and (name := root_name(inner.func.value)) is not None
                }
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
        return None, None

    # -- values fed to a model ----------------------------------------------------------------

    def model_call_fed(self, node: cst.BaseExpression) -> tuple[cst.Call, ModelDevice] | None:
        """The call of a model on a device that the value of `node` reaches without a move
        (directly, through attributes and subscripts, or through names bound to it), and the
        model's device."""
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
                return self._as_model_call(call, flow)
            return None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                return self._follow(target.value, parent, flow, depth=0)
        return None

    def _follow(
        self, name: str, assign: cst.CSTNode, flow: ScriptFlow, depth: int
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
                    result = self._as_model_call(call, flow)
            elif (
                isinstance(parent, cst.Assign)
                and depth == 0
                and expression is not use
                and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)
            ):
                derived = self._follow(parent.targets[0].target.value, parent, flow, depth + 1)
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
        self, call: cst.Call, flow: ScriptFlow
    ) -> tuple[cst.Call, ModelDevice] | None:
        callee = call.func
        if isinstance(callee, cst.Attribute) and callee.attr.value in ("generate", "forward"):
            callee = callee.value
        if dotted_name(callee) is None:
            return None
        model = flow.model_device(callee, call)
        if model is None or (model.move is None and not model.pretrained and not model.reason):
            return None
        return call, model

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
                and self.moves.moved_name(call) == name
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

    def _mentions_cuda_check(self, test: cst.CSTNode) -> bool:
        for inner in self.context.subtree(test):
            if isinstance(inner, (cst.Attribute, cst.Name)) and call_tail(inner) in (
                "is_available",
                "device_count",
            ):
                name = self.names.qualified_name(inner)
                if name in ("torch.cuda.is_available", "torch.cuda.device_count"):
                    return True
        return False

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
                self._placement_evidence(node) for node in self.context.subtree(self.context.module)
            )
        return self._multi_device

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
            return any(
                self.names.qualified_name(base.value) in SPLIT_MODEL_BASES for base in node.bases
            )
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
        code = self.modules
        flow = self
        # Every spelling of a DataLoader (an alias, `data.DataLoader`) contains the word.
        loaders = [
            n
            for n in (self.context.subtree(module) if "DataLoader" in self.context.text else ())
            if isinstance(n, cst.Call)
            and dotted_name(n.func) is not None
            and self.names.qualified_name(n.func) in DATALOADERS
        ]

        def add(node: cst.FunctionDef | cst.Lambda, role: str, consumers: list[cst.Call]) -> None:
            entry = found.get(id(node))
            if entry is None:
                entry = found[id(node)] = DataFunction(node, role)
            entry.loaders.extend(c for c in consumers if c not in entry.loaders)

        # Dataset classes and the loaders built on their instances.
        for name, cls in classes.items():
            if not code.class_info(cls).is_dataset:
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
        for call in (n for n in self.context.subtree(module) if isinstance(n, cst.Call)):
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

        # Module functions those call, one level down.
        for entry in list(found.values()):
            for inner in (n for n in self.context.subtree(entry.node) if isinstance(n, cst.Call)):
                if isinstance(inner.func, cst.Name) and inner.func.value in functions:
                    helper = functions[inner.func.value]
                    if id(helper) not in found:
                        add(
                            helper, f"`{helper.name.value}` (called by {entry.role})", entry.loaders
                        )
        self._data = found
        return found

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
        instance = value
        if isinstance(value, cst.Name):
            values = self.scopes.assigned_values(value.value, at)
            if len(values) == 1:
                instance = values[0]
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

    def _is_moved(self, body: cst.BaseSuite, name: str) -> bool:
        """Whether the loop moves `name` itself (`.to`, `.cuda`, a device helper, a comprehension)
        or rebinds it from something that may have moved it."""
        for node in self._scope_nodes(body):
            if isinstance(node, cst.Call):
                if (
                    isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in _MOVES
                    and _moved_whole(node.func.value, name)
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
            ):
                return True
        return False

    def _keeps_device(self, value: cst.BaseExpression) -> bool:
        """A rebinding computed by tensor methods and torch functions only (it stays where it
        was)."""
        for node in self.context.subtree(value):
            if isinstance(node, cst.Call):
                if isinstance(node.func, cst.Attribute) and not dotted_name(node.func):
                    continue
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


# -- small helpers ----------------------------------------------------------------------------


def _is_move_call(value: cst.BaseExpression) -> bool:
    """`x.to(...)`, `x.cuda()`, also under `.eval()`/`.train()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in _MOVES:
            return True
        value = value.func.value
    return False


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
