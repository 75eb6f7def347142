"""Model placement: which device a model called at some point was moved to (through
assignments, attributes, parameters and callers, and the file's own functions that load, move
and return it: `model, tokenizer = load(name)`), and how that device can be written where it is
needed, or why it cannot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import libcst as cst

from devfix.codemods.analysis.flow.calls import MOVES, CallSites, is_move_call, is_name
from devfix.codemods.analysis.moves import DeviceMove
from devfix.codemods.analysis.names import (
    argument,
    code_of,
    dotted_name,
    keyword_argument,
    string_value,
)
from devfix.codemods.analysis.scopes import Binding, ScopeTable, all_params
from devfix.codemods.analysis.torch_names import (
    ACCELERATOR_CLASSES,
    CLIP_LOADERS,
    DEVICE_CARRYING_MODEL_TYPES,
    MODEL_WRAPPERS,
    MODULE_SELF_METHODS,
)

if TYPE_CHECKING:
    pass


#: Where a model's device comes from: its move (None when only `from_pretrained` placed it), the
#: function the move's device is written in, and whether `from_pretrained` loaded it onto a
#: device (a device map, or an adapter over a placed model).
FoundMove = tuple[Optional[DeviceMove], Optional[cst.FunctionDef], bool]
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
class _CandidateMoves:
    """The bindings and moves of a model's name that may reach a point."""

    #: (position, what it gives the model), in the order they were found.
    found: list[tuple[int, FoundMove]] = field(default_factory=list)
    #: An assigned value loaded the model with `from_pretrained` onto a device.
    pretrained: bool = False
    #: The positions of moves written on the name itself (`model.to(d)`, `model = model.to(d)`).
    direct_moves: dict[int, cst.CSTNode] = field(default_factory=dict)


def _attribute_chain_root(expression: cst.BaseExpression) -> cst.Name | None:
    """`args` in `args.device` (or `cfg.train.device`); None for anything but a chain of
    attributes on a name."""
    node = expression
    if not isinstance(node, cst.Attribute):
        return None
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


class ModelPlacement(CallSites):
    """Where models are moved, and how their device is written at a given place."""

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

    def loaded_from_pretrained(
        self, name: str, function: cst.FunctionDef | None, depth: int = 0
    ) -> bool:
        """Every value `name` holds in `function` is loaded with `from_pretrained` (through the
        module's own methods: `.to(device)`, `.eval()`), also as a parameter every caller of
        the file fills with such a model: a Hugging Face model, whose `.device` tells where it
        is wherever it went."""
        table, _ = self.scopes.lookup(name, function)
        bindings = table.bindings.get(name, [])
        if not bindings or depth > 3:
            return False
        for binding in bindings:
            if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
                sites = self.call_sites(table.node)
                passed = [
                    (self.argument_for(call, table.node, name), caller) for call, caller in sites
                ]
                if not passed or not all(
                    argument is not None
                    and (argument_name := dotted_name(argument)) is not None
                    and self.loaded_from_pretrained(argument_name, caller, depth + 1)
                    for argument, caller in passed
                ):
                    return False
                continue
            value = binding.value if binding.kind in ("assign", "unpack") else None
            if binding.kind == "unpack" and isinstance(value, cst.Call):
                index = self._unpacked_position(name, value)
                value = self._returned_element(value, index) if index is not None else None
                inner = dotted_name(value) if value is not None else None
                helper = self.scopes.enclosing_function(value) if value is not None else None
                if inner is not None and "." not in inner:
                    if not self.loaded_from_pretrained(inner, helper, depth + 1):
                        return False
                    continue
            while (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in MODULE_SELF_METHODS
            ):
                value = value.func.value
            if not (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "from_pretrained"
            ):
                return False
        return True

    def handed_model(self, model: cst.BaseExpression, at: cst.CSTNode) -> ModelDevice | None:
        """A model that is a parameter of the function calling it, which nothing in this file
        calls (a library's `def evaluate(model, dataset)`): the caller chooses its device. Its
        first parameter's device where the function shows it is a module (annotated as one, or
        it calls `.eval()`, `.train()` or `.parameters()` on it), else the reason no device is
        known. None where the model is anything else."""
        function = self.scopes.enclosing_function(at)
        if not isinstance(model, cst.Name) or function is None or self.call_sites(function):
            return None
        name = model.value
        params = {
            p.name.value: p
            for p in all_params(function.params)
            if p.name.value not in ("self", "cls")
        }
        if name not in params:
            return None
        annotation = params[name].annotation
        kind = self.names.qualified_name(annotation.annotation) if annotation else None
        shown = function.name.value
        if (kind is not None and kind.startswith("torch.nn.")) or any(
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and is_name(node.func.value, name)
            and node.func.attr.value in ("eval", "train", "parameters")
            for node in self.context.subtree(function.body)
        ):
            device = cst.parse_expression(f"next({name}.parameters()).device")
            return ModelDevice(name, DeviceMove("to", device))
        return ModelDevice(
            name,
            None,
            f"`{name}` is a parameter of `{shown}`, which nothing in this file calls: where its "
            f"caller hands a model on a GPU, the inputs must go to that model's device "
            f"(`next({name}.parameters()).device` for a module), and nothing here says what "
            f"`{name}` is",
        )

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
        candidates = self._candidate_moves(name, table, table_function, limit, depth)
        if not candidates.found and "." in name:
            return self._attribute_of_parameter_move(name, function, depth)
        if not candidates.found:
            return None
        candidates.found.sort(key=lambda item: item[0])
        position, (move, origin, was_pretrained) = candidates.found[-1]
        pretrained = candidates.pretrained
        if move is None and not (pretrained or was_pretrained):
            if self._handed_to_trainer(name, table.node, position, limit):
                return None, table_function, True
            return None
        direct = candidates.direct_moves.get(position)
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

    def _candidate_moves(
        self,
        name: str,
        table: ScopeTable,
        table_function: cst.FunctionDef | None,
        limit: int | None,
        depth: int,
    ) -> _CandidateMoves:
        """What each binding of `name` in `table`, and each statement moving it, before
        `limit` gives the model."""
        candidates = _CandidateMoves()
        for binding in table.bindings.get(name, []):
            if limit is not None and binding.position >= limit:
                continue
            if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
                found = self._move_from_callers(table.node, name, binding, depth)
                if found is None and self._receives_device_carrying_model(table.node, name):
                    found = (None, table_function, True)
                if found is not None:
                    candidates.found.append((binding.position, found))
                continue
            prepared = self._prepared_by_accelerator(
                binding.value, table_function
            ) or self._loaded_by_clip(name, binding)
            if prepared is not None:
                candidates.found.append((binding.position, (prepared, table_function, False)))
                continue
            if binding.kind == "unpack" and isinstance(binding.value, cst.Call):
                # `model, tokenizer = load_model(name)`: that element of what it returns.
                index = self._unpacked_position(name, binding.value)
                returned = (
                    self._returned_by_helper(binding.value, index, depth)
                    if index is not None
                    else None
                )
                if returned is not None and returned[2]:
                    candidates.pretrained = True
                candidates.found.append(
                    (binding.position, returned or (None, table_function, False))
                )
                continue
            if binding.kind != "assign" or binding.value is None:
                candidates.found.append((binding.position, (None, table_function, False)))
                continue
            received = self._stored_parameter(table, binding.value, depth)
            if received is not None:
                candidates.found.append((binding.position, received))
                continue
            result = self._move_in_value(binding.value, table_function, binding.position, depth)
            if result is not None and result[2]:
                candidates.pretrained = True
            if is_move_call(binding.value):
                candidates.direct_moves[binding.position] = binding.value
            candidates.found.append((binding.position, result or (None, table_function, False)))
        for position, call in table.statement_moves.get(name, []):
            if limit is not None and position >= limit:
                continue
            move = self.device_move(call, table_function)
            candidates.direct_moves[position] = call
            candidates.found.append((position, (move, table_function, candidates.pretrained)))
        return candidates

    def _prepared_by_accelerator(
        self, value: cst.BaseExpression | None, function: cst.FunctionDef | None
    ) -> DeviceMove | None:
        """`model, opt = accelerator.prepare(model, opt)` (or `prepare_model`): the model is
        on `accelerator.device` from there on, the `Accelerator` being one the code builds."""
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("prepare", "prepare_model")
        ):
            return None
        owner = dotted_name(value.func.value)
        if owner is None:
            return None
        table, _ = self.scopes.lookup(owner, function)
        built = [b.value for b in table.bindings.get(owner, [])]
        if not built or not all(
            isinstance(b, cst.Call) and self.names.qualified_name(b.func) in ACCELERATOR_CLASSES
            for b in built
        ):
            return None
        return DeviceMove("to", cst.parse_expression(f"{owner}.device"), kind="device")

    def _loaded_by_clip(self, name: str, binding: Binding) -> DeviceMove | None:
        """`model, preprocess = clip.load("ViT-B/32", device=device)` (or open_clip's
        `create_model_and_transforms(..., device=device)`): the model is on `device`."""
        value = binding.value
        if not isinstance(value, cst.Call) or self.names.qualified_name(value.func) not in (
            CLIP_LOADERS
        ):
            return None
        statement = self.context.parent(value)
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
            return None
        target = statement.targets[0].target
        first = target.elements[0].value if isinstance(target, (cst.Tuple, cst.List)) else target
        if not (isinstance(first, cst.Name) and first.value == name):
            return None
        device = keyword_argument(value, "device")
        if device is None:
            return None
        kind = self.facts.moves.device_kind(device.value, self.scopes.enclosing_function(value))
        return (
            DeviceMove("to", device.value, kind=kind) if kind in ("accelerator", "device") else None
        )

    def _handed_to_trainer(
        self, name: str, scope: cst.CSTNode, after: int, before: int | None
    ) -> bool:
        """`Trainer(model=model, ...)` (transformers' or TRL's) between the model's binding and
        `before`: the Trainer moves the model onto its device when it is built, so the model
        carries its device from there on (`model.device`)."""
        for call in self.scopes.find(scope, cst.Call):
            start = self.context.order(call)[0]
            if start <= after or (before is not None and start >= before):
                continue
            qualified = self.names.qualified_name(call.func) or ""
            if not (
                qualified.startswith(("transformers.", "trl.")) and qualified.endswith("Trainer")
            ):
                continue
            given = next(
                (a.value for a in call.args if a.keyword and a.keyword.value == "model"),
                call.args[0].value if call.args and call.args[0].keyword is None else None,
            )
            if given is not None and dotted_name(given) == name:
                return True
        return False

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
        Hugging Face model that no call in this file fills (the model carries its device), or
        a local the method assigned (where it was last moved before the store)."""
        if not isinstance(table.node, cst.ClassDef) or not isinstance(value, cst.Name):
            return None
        method = self.scopes.enclosing_function(value)
        if method is None or self.scopes.class_of(method) is not table.node:
            return None
        bindings = self.scopes.table(method).bindings.get(value.value, [])
        if not bindings or depth > 4:
            return None
        if all(binding.kind == "assign" for binding in bindings):
            # `model = GDN(...).to(self.device)` then `self.model = model`: where the local is.
            return self._find_move(value.value, method, self.context.order(value)[0], depth + 1)
        if (
            len(bindings) == 1
            and bindings[0].kind == "param"
            and self._receives_device_carrying_model(method, value.value)
        ):
            return (None, None, True)
        return None

    def _device_map_in_kwargs(
        self, call: cst.Call, function: cst.FunctionDef | None
    ) -> cst.BaseExpression | None:
        """The device map a `**kwargs` dict handed to `call` is given in `function`:
        `kwargs["device_map"] = "cuda"` (also under an `if`), `kwargs.setdefault("device_map",
        "auto")`."""
        names = {
            arg.value.value
            for arg in call.args
            if arg.star == "**" and isinstance(arg.value, cst.Name)
        }
        function = function or self.scopes.enclosing_function(call)  # `self.model = ...`
        if not names or function is None:
            return None
        for node in self.context.subtree(function.body):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    subscript = target.target
                    if (
                        isinstance(subscript, cst.Subscript)
                        and isinstance(subscript.value, cst.Name)
                        and subscript.value.value in names
                        and len(subscript.slice) == 1
                        and isinstance(subscript.slice[0].slice, cst.Index)
                        and string_value(subscript.slice[0].slice.value) == "device_map"
                    ):
                        return node.value
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "setdefault"
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value in names
                and len(node.args) == 2
                and string_value(node.args[0].value) == "device_map"
            ):
                return node.args[1].value
        return None

    def _move_in_value(
        self,
        value: cst.BaseExpression,
        function: cst.FunctionDef | None,
        position: int,
        depth: int,
    ) -> FoundMove | None:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value in MOVES:
                move = self.device_move(value, function)
                inner = self._move_in_value(value.func.value, function, position, depth)
                pretrained = bool(inner and inner[2])
                return (move, function, pretrained) if move or pretrained else None
            if value.func.attr.value == "from_pretrained":
                # Loaded with a device map: on a device, reachable only through `model.device`.
                device_map = next(
                    (a.value for a in value.args if a.keyword and a.keyword.value == "device_map"),
                    None,
                ) or self._device_map_in_kwargs(value, function)
                wrapped = self._wrapped_by_adapter(value, function, position, depth)
                if device_map is None and wrapped is not None:
                    return wrapped
                if device_map is None and _loads_quantized(value):
                    # bitsandbytes places a 4/8-bit model on the current GPU when no
                    # device map is given (`{"": torch.cuda.current_device()}`).
                    return (None, function, True)
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
            return self._returned_by_helper(value, None, depth)
        inner_name = dotted_name(value)
        if inner_name is not None:
            return self._find_move(inner_name, function, position, depth + 1)
        return None

    def _returned_by_helper(
        self, call: cst.Call, index: int | None, depth: int
    ) -> FoundMove | None:
        """Where the model a function of the file returns was moved (`return model` after
        `model = Net().to(device)`, or `return lm, tok`: element `index`), as written in that
        function, when its every `return` gives it back the same way."""
        if depth > _MAX_CALLER_DEPTH:
            return None
        value = self._returned_element(call, index)
        helper = self.scopes.enclosing_function(value) if value is not None else None
        if value is None or helper is None:
            return None
        end = self.context.order(helper)[1] + 1
        inner_name = dotted_name(value)
        if inner_name is not None and "." not in inner_name:
            return self._find_move(inner_name, helper, end, depth + 1)
        return self._move_in_value(value, helper, end, depth + 1)

    def _returned_element(self, call: cst.Call, index: int | None) -> cst.BaseExpression | None:
        """What the one `return` of the file's function `call` calls gives back (element
        `index` of a returned tuple, when `index` is not None), or None."""
        helper = (
            self.scopes.module_functions().get(call.func.value)
            if isinstance(call.func, cst.Name)
            else None
        )
        if helper is None or not isinstance(helper.body, cst.IndentedBlock):
            return None
        returns = [
            node.value
            for node in self.scopes.find(helper.body, cst.Return, own_scope=True)
            if node.value is not None
        ]
        if len(returns) != 1:
            return None
        value: cst.BaseExpression = returns[0]
        if index is None:
            return value
        if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements):
            return None
        return value.elements[index].value

    def _unpacked_position(self, name: str, value: cst.Call) -> int | None:
        """The index of `name` in the tuple target that `value` is unpacked into."""
        assign = self.context.parent(value)
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
            return None
        target = assign.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        for position, element in enumerate(target.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return position
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
            argument = self.argument_for(call, function, param)
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
        # `self.device = device` (or `torch.device(device)`) in the class: use the attribute.
        owner = self.scopes.class_of(target)
        if owner is not None:
            table = self.scopes.table(owner)
            for attr, bindings in table.bindings.items():
                if any(
                    b.value is not None and code_of(b.value) in (code, f"torch.device({code})")
                    for b in bindings
                ):
                    return DeviceMove("to", cst.parse_expression(attr))
        # A parameter of `target` that every caller fills with the same expression.
        if target is not None:
            params = [p.name.value for p in (*target.params.posonly_params, *target.params.params)]
            sites = self.call_sites(target)
            for param in params:
                if sites and all(
                    (arg := self.argument_for(call, target, param)) is not None
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
                        isinstance(arg := self.argument_for(call, target, param), cst.Name)
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


def _loads_quantized(call: cst.Call) -> bool:
    """`from_pretrained(..., quantization_config=...)`, `load_in_4bit=True`, `load_in_8bit=True`."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "quantization_config" and not is_name(arg.value, "None"):
            return True
        if keyword in ("load_in_4bit", "load_in_8bit") and is_name(arg.value, "True"):
            return True
    return False
