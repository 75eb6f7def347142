"""Inputs sent to a literal GPU for a model that the code was handed.

`input_ids = input_ids.to("cuda")` (or `.cuda()`) in a function that then runs a model it
received, as a parameter (`def generate(model, tokenizer, prompt):`) or from its constructor
(`self.model = model`), puts the inputs on the current GPU whatever device the caller chose for
the model: a model the caller kept on the CPU, put on another GPU or sharded with a device map
then meets inputs on `cuda:0`. The model's own device is the one meant: `model.device` for a
model that generates (a Hugging Face model), else `next(model.parameters()).device`.

The inputs reach the model when the name the move is bound to (`ids = ids.cuda()`, `batch =
{k: v.cuda() for ...}`) or a name computed from it later (`x = normalize(x / 255)`), or the
move itself, is an argument of a call that runs the model
(`model(ids)`, `model.generate(ids)`, `model.predict(batch["input_ids"])`), of a helper of
the file handed both (`greedy_generate(model, tokenizer, ids)`) that runs it, or of a method
of the class's family (the class, the classes of the file it derives from, those deriving from
it) that runs `self.model` on one of its parameters (`self.training_step(batch)`). The other
tensors such a function makes on a literal GPU (targets, a vector it optimises through the
model) meet that model's work too (`run_by`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import method, names_a_loss, self_attribute
from devfix.codemods.analysis.moves import DeviceMove, copies_to_host
from devfix.codemods.analysis.names import code_of, dotted_name
from devfix.codemods.analysis.torch_names import MOVE_METHODS

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts

#: Methods of a model that run it on the inputs they are given.
_RUNS = frozenset({"generate", "forward", "predict", "sample", "encode", "decode"})


@dataclass(frozen=True)
class HandedModel:
    #: `model`, `self.model`: how the function reaches the model.
    model: str
    #: `model.device` or `next(model.parameters()).device`.
    device: str
    #: The call that runs the model on the moved inputs.
    run: cst.Call


class HandedModels(Analysis):
    """The model a move to a literal GPU feeds, when the code was handed that model."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._runs_by: dict[tuple[int, frozenset[str]], HandedModel | None] = {}
        self._family_models: dict[tuple[str, int], bool] = {}

    def fed_by(self, move: cst.Call) -> HandedModel | None:
        function = self.scopes.enclosing_function(move)
        if function is None:
            return None
        info = self.facts.modules.function_info(function)
        if info.is_model_code or self.facts.flow.in_data_pipeline(move):
            return None  # DF102's and DF201's
        fed = self._fed_names(move)
        start, end = self.context.order(move)
        for call in self.context.of_type(function.body, cst.Call):
            if start <= self.context.order(call)[0] <= end:
                continue  # what the move moves (`tokenizer.encode(text).cuda()`), not a consumer
            holds = self._holds(call, move)
            if self.context.order(call)[0] < start and not holds:
                continue
            if not (holds or any(self._passes(call, name) for name in fed)):
                continue
            found = self._run_model(call, function, self.tests_around(move))
            if found is None or self._fed_output(call, move, fed, function):
                continue
            return _handed(*found, call)
        return None

    def made_for_placed_model(self, call: cst.Call) -> list[tuple[DeviceMove, cst.Call]]:
        """`model(torch.tensor(X).float())` in a function handed `model` (not a loss, whose
        extra arguments, CTC's lengths, may belong on the CPU), which the file moved to a
        device before handing it over: each CPU factory among its inputs, with that move, but
        for one its `forward` needs on the CPU (the lengths it packs by)."""
        function = self.facts.modules.enclosing_function(call)
        if not isinstance(call.func, cst.Name) or function is None or function.is_model_code:
            return []
        if call.func.value not in function.params or names_a_loss(call.func.value):
            return []
        placed = self.facts.flow.model_device(call.func, call)
        move = placed.move if placed is not None else None
        if move is None or move.method != "to":
            return []
        made = (
            (self.facts.devices.cpu_factory_of(a.value, call), a.value)
            for a in call.args
            if not a.keyword
        )
        return [
            (move, factory)
            for factory, value in made
            if factory is not None
            # `model(ids, torch.LongTensor(lengths))` whose `forward` packs by the lengths
            and self.facts.cpu_only.use_of(None, value, call) is None
        ]

    def run_by(self, function: cst.FunctionDef, at: cst.CSTNode) -> HandedModel | None:
        """The first model the code was handed that `function` runs, directly or through a
        helper of the file: where the function's own tensors (targets, a vector it optimises
        through the model) meet that model's work. `at`: the tensor's move, whose tests
        (`if args.cuda:`) a model the file places under the same test shares."""
        tests = self.tests_around(at)
        key = (id(function), tests)
        if key not in self._runs_by:
            self._runs_by[key] = self._first_run(function, tests)
        return self._runs_by[key]

    def _first_run(self, function: cst.FunctionDef, tests: frozenset[str]) -> HandedModel | None:
        for call in self.context.of_type(function.body, cst.Call):
            found = self._run_model(call, function, tests)
            # `tok.decode(ids)` runs no model: a name the function itself treats as one
            if found is not None and (
                self._helper(call) is not None or self._treated_as_model(found[0], function)
            ):
                if self._moved_by(found[0], function):
                    return None  # the function places the model: its literal is the choice
                return _handed(*found, call)
        return None

    def _moved_by(self, model: str, function: cst.FunctionDef) -> bool:
        return any(
            _is_move(call)
            and isinstance(call.func, cst.Attribute)
            and dotted_name(call.func.value) == model
            for call in self.context.of_type(function.body, cst.Call)
        )

    def _fed_output(
        self, run: cst.Call, move: cst.Call, fed: set[str], function: cst.FunctionDef
    ) -> bool:
        """`criterion(output, labels)` after `output = model(images)`: besides the moved
        inputs, `run` is handed what a callable the function was given returned (a loss or a
        metric, not a model)."""
        params = set(_parameters(function))
        values: list[cst.CSTNode] = []
        for arg in run.args:
            if self._holds_move(arg, move) or self._passes_name(arg, fed):
                continue
            values.append(arg.value)
            values.extend(
                value
                for name in self.context.of_type(arg.value, cst.Name)
                for value in self.scopes.assigned_values(name.value, run)
            )
        return any(
            dotted_name(call.func) in params
            for value in values
            for call in self.context.of_type(value, cst.Call)
        )

    def _fed_names(self, move: cst.Call) -> set[str]:
        """The plain names the moved value is bound to: `ids = ids.cuda()`, or a dict or list
        built of such moves (`batch = {k: v.cuda() for k, v in batch.items()}`)."""
        node: cst.CSTNode = move
        parent = self.context.parent(node)
        while isinstance(parent, (cst.DictComp, cst.ListComp, cst.DictElement, cst.Element)):
            node, parent = parent, self.context.parent(parent)
        if isinstance(parent, (cst.Dict, cst.List, cst.Tuple)):
            node, parent = parent, self.context.parent(parent)
        if not isinstance(parent, cst.Assign) or parent.value is not node:
            return set()
        fed = {
            target.target.value for target in parent.targets if isinstance(target.target, cst.Name)
        }
        function = self.scopes.enclosing_function(move)
        if fed and function is not None:
            fed |= self._derived_names(fed, function, self.context.order(parent)[1])
        return fed

    def _derived_names(self, fed: set[str], function: cst.FunctionDef, after: int) -> set[str]:
        """The names `function` binds, after position `after`, to what it computes from the
        fed names: `x = ids`, `x = x / 255.0`, `x = normalize(x)` (a transform handed the
        tensor), `x = x.unsqueeze(0)`; a copy to the host (`x.cpu()`) ends the chain."""
        derived: set[str] = set()
        for assign in self.context.of_type(function.body, cst.Assign):
            if self.context.order(assign)[0] <= after or len(assign.targets) != 1:
                continue
            target = assign.targets[0].target
            if not isinstance(target, cst.Name) or not self._computed_from(
                assign.value, fed | derived
            ):
                continue
            derived.add(target.value)
        return derived - fed

    def _computed_from(self, value: cst.BaseExpression, names: set[str]) -> bool:
        """`value` computes on one of `names`: arithmetic, a method chain, or a call handed it
        first."""
        while True:
            if isinstance(value, cst.Name):
                return value.value in names
            if isinstance(value, cst.BinaryOperation):
                return self._computed_from(value.left, names) or self._computed_from(
                    value.right, names
                )
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                if copies_to_host(value) or value.func.attr.value in MOVE_METHODS:
                    return False
                value = value.func.value
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                if not value.args or value.args[0].keyword is not None:
                    return False
                value = value.args[0].value
            else:
                return False

    def _holds(self, call: cst.Call, move: cst.Call) -> bool:
        return any(self._holds_move(arg, move) for arg in call.args)

    def _holds_move(self, arg: cst.Arg, move: cst.Call) -> bool:
        return any(move is node for node in self.context.subtree(arg.value))

    def _passes(self, call: cst.Call, name: str) -> bool:
        """`name` (or a field of it: `batch["ids"]`, `enc.input_ids`, `**batch`) is an
        argument of `call`."""
        return any(self._passes_name(arg, {name}) for arg in call.args)

    def _passes_name(self, arg: cst.Arg, names: set[str]) -> bool:
        value = arg.value
        while isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        return isinstance(value, cst.Name) and value.value in names

    def _run_model(
        self, call: cst.Call, function: cst.FunctionDef, tests: frozenset[str] = frozenset()
    ) -> tuple[str, bool] | None:
        """(the model, whether it generates) when `call` runs a model the code was handed:
        directly (`model(x)`, `self.model.generate(x)`), or through a helper of the file it is
        handed to beside the inputs."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _RUNS:
            func = func.value
        model = dotted_name(func)
        if model is not None and self._handed_in(model, function):
            if self._placed_by_the_file(model, function, tests) or not (
                func is not call.func
                or self._treated_as_model(model, function)
                or self._treated_by_a_caller(model, function)
            ):
                return None  # placed by this file, or nothing says it is a model
            return model, self._generates(model, function)
        helper = self._helper(call)
        if helper is None:
            return self._run_by_a_method(call, function)
        for index, arg in enumerate(call.args):
            name = dotted_name(arg.value)
            if arg.keyword is not None or arg.star or name is None:
                continue
            if not self._handed_in(name, function) or self._placed_by_the_file(
                name, function, tests
            ):
                continue
            inner = _parameter(helper, index)
            if (
                inner is not None
                and self._runs(inner, helper)
                and (
                    self.facts.modules.treated_as_model(inner, helper)
                    or self.facts.modules.treated_as_model(name, function)
                )
            ):
                return name, self._generates(inner, helper)
        return None

    def _run_by_a_method(
        self, call: cst.Call, function: cst.FunctionDef
    ) -> tuple[str, bool] | None:
        """`self.inference_step(batch, i)` where that method (of the class, of a class it
        derives from, or of a subclass in the file that overrides it) runs `self.model`, which
        the code was handed, on one of its own parameters."""
        func = call.func
        classdef = self.scopes.class_of(function)
        if not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
            and classdef is not None
        ):
            return None
        for helper in self._methods_named(classdef, func.attr.value):
            params = _parameters(helper)[1:]
            for inner in self.context.of_type(helper.body, cst.Call):
                callee = inner.func
                if isinstance(callee, cst.Attribute) and callee.attr.value in _RUNS:
                    callee = callee.value
                model = dotted_name(callee)
                if (
                    model is None
                    or not model.startswith("self.")
                    or not any(self._passes(inner, param) for param in params)
                    or not self._handed_in(model, helper)
                    or self._placed_by_the_file(model, helper)
                ):
                    continue
                if self._treated_as_model(model, helper):
                    return model, self._generates(model, helper)
        return None

    def _treated_as_model(self, model: str, function: cst.FunctionDef) -> bool:
        """`function` treats `model` as a model, or, for `self.<attr>`, any method of its
        class's family does (`self.model.eval()` in one, `self.model(batch)` in another)."""
        if self.facts.modules.treated_as_model(model, function):
            return True
        classdef = self.scopes.class_of(function)
        if not model.startswith("self.") or classdef is None:
            return False
        # Asked for every call a function makes: the family's answer is worked out once.
        key = (model, id(classdef))
        if key not in self._family_models:
            self._family_models[key] = any(
                self.facts.modules.treated_as_model(model, member)
                for cls in (*self._lineage(classdef), *self._subclasses(classdef))
                if isinstance(cls.body, cst.IndentedBlock)
                for member in cls.body.body
                if isinstance(member, cst.FunctionDef)
            )
        return self._family_models[key]

    def _methods_named(self, classdef: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
        """The methods `name` of `classdef`, of the classes of the file it derives from, and
        of the classes of the file that derive from it."""
        related = [*self._lineage(classdef), *self._subclasses(classdef)]
        return [found for cls in related if (found := method(cls, name)) is not None]

    def _lineage(self, classdef: cst.ClassDef) -> list[cst.ClassDef]:
        """`classdef` and the classes of the file it derives from, nearest first."""
        classes = self.scopes.module_classes()
        chain = [classdef]
        while len(chain) < 8:
            bases = [
                classes[arg.value.value]
                for arg in chain[-1].bases
                if isinstance(arg.value, cst.Name) and arg.value.value in classes
            ]
            if not bases or bases[0] in chain:
                break
            chain.append(bases[0])
        return chain

    def _subclasses(self, classdef: cst.ClassDef) -> list[cst.ClassDef]:
        return [
            cls
            for cls in self.scopes.module_classes().values()
            if cls is not classdef and classdef in self._lineage(cls)
        ]

    def _handed_in(self, model: str, function: cst.FunctionDef) -> bool:
        """`model` is a parameter of `function` (not `self`), or `self.<attr>` set in the
        `__init__` of the class (or of the nearest class of the file it derives from that
        sets it) from one of its parameters."""
        params = _parameters(function)
        if model in params[1:] or (model in params and params[0] not in ("self", "cls")):
            return True
        attribute = self_attribute(cst.parse_expression(model)) if "." in model else None
        classdef = self.scopes.class_of(function)
        if attribute is None or classdef is None:
            return False
        for cls in self._lineage(classdef):
            init = method(cls, "__init__")
            if init is None:
                continue
            values = [
                assign.value
                for assign in self.context.of_type(init.body, cst.Assign)
                if len(assign.targets) == 1
                and self_attribute(assign.targets[0].target) == attribute
            ]
            if values:
                return len(values) == 1 and dotted_name(values[0]) in _parameters(init)[1:]
        return False

    def _placed_by_the_file(
        self,
        model: str,
        function: cst.FunctionDef,
        tests: frozenset[str] = frozenset(),
        depth: int = 0,
    ) -> bool:
        """A caller in this file hands `function` a model it placed itself (moved, or loaded
        with a `device_map`), or hands on its own parameter that its callers placed: the
        literal GPU is then the file's own choice, which DF304 leaves to the script."""
        for name, caller, call in self._passed_as(model, function):
            if (
                caller is not None
                and depth < 3
                and name in _parameters(caller)
                and self._placed_by_the_file(name, caller, tests, depth + 1)
            ):
                return True
            table, _ = self.scopes.lookup(name, caller)
            if any(
                self._placing(binding.value)
                and (
                    binding.position not in table.conditional
                    or self._placed_on_every_path(binding.value, name, call, tests)
                )
                for binding in table.bindings.get(name, [])
                if binding.value is not None
            ):
                return True
            if any(
                _is_move(self.context.parent(parent))
                and self._placed_on_every_path(parent, name, call, tests)
                for use in self.scopes.names_in(caller or self.context.module, name)
                if (parent := self.context.parent(use)) is not None
            ):
                return True  # `model.cuda()` as a statement: moved in place
        return False

    def _placed_on_every_path(
        self, node: cst.CSTNode, name: str, call: cst.Call, tests: frozenset[str]
    ) -> bool:
        """Placed on every path to `call`, not only under `if args.cuda:`, a test the
        literal GPU of the inputs ignores; or under one of `tests`, the tests the inputs'
        move itself is under (`if args.cuda:` around both)."""
        return self.scopes.on_every_path(
            node, lambda line: self._places_in(line, name), toward=call
        ) or bool(self.tests_around(node) & tests)

    def tests_around(self, node: cst.CSTNode) -> frozenset[str]:
        """The code of the tests of the `if`s around `node` in its function."""
        tests: set[str] = set()
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                break
            if isinstance(ancestor, cst.If):
                tests.add(code_of(ancestor.test))
        return frozenset(tests)

    def _places_in(self, statement: cst.BaseStatement, name: str) -> bool:
        """`statement` moves `name` (`model.cuda()`) or binds it to a placing value."""
        return any(
            _is_move(call)
            and isinstance(call.func, cst.Attribute)
            and dotted_name(call.func.value) == name
            for call in self.context.of_type(statement, cst.Call)
        ) or any(
            self._placing(assign.value)
            and any(dotted_name(target.target) == name for target in assign.targets)
            for assign in self.context.of_type(statement, cst.Assign)
        )

    def _passed_as(
        self, param: str, function: cst.FunctionDef
    ) -> Iterator[tuple[str, cst.FunctionDef | None, cst.Call]]:
        """(the dotted name, the calling function, the call) of what each call of `function`
        in this file passes as its parameter `param`."""
        params = _parameters(function)
        if param not in params:
            return
        index = params.index(param)
        for call, caller in self.facts.flow.call_sites(function):
            positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
            passed = [arg.value for arg in call.args if arg.keyword and arg.keyword.value == param]
            if index < len(positional):
                passed.append(positional[index].value)
            for value in passed:
                yield dotted_name(value) or "", caller, call

    def _treated_by_a_caller(self, param: str, function: cst.FunctionDef, depth: int = 0) -> bool:
        """A caller of `function` in this file hands it, as `param`, a name the caller treats
        as a model (`model.eval()` before `predict(model, img)`), or hands on its own
        parameter that its callers do."""
        return any(
            caller is not None
            and (
                self.facts.modules.treated_as_model(name, caller)
                or (depth < 3 and self._treated_by_a_caller(name, caller, depth + 1))
            )
            for name, caller, _ in self._passed_as(param, function)
        )

    def _placing(self, value: cst.BaseExpression | None) -> bool:
        """`Model(...).to(device)`, `model.cuda()`, `from_pretrained(..., device_map=...)`,
        or a helper of the file that returns what it moved (`model, loss = set_model(opt)`)."""
        if not isinstance(value, cst.Call):
            return False
        if _is_move(value) or any(
            arg.keyword is not None and arg.keyword.value == "device_map" for arg in value.args
        ):
            return True
        helper = self._helper(value)
        if helper is None:
            return False
        returned = {
            name.value
            for ret in self.context.of_type(helper.body, cst.Return)
            if ret.value is not None
            for name in self.context.of_type(ret.value, cst.Name)
        }
        return any(
            _is_move(call)
            and isinstance(call.func, cst.Attribute)
            and dotted_name(call.func.value) in returned
            for call in self.context.of_type(helper.body, cst.Call)
        )

    def _helper(self, call: cst.Call) -> cst.FunctionDef | None:
        if not isinstance(call.func, cst.Name):
            return None
        defined = [
            node
            for node in self.context.module.body
            if isinstance(node, cst.FunctionDef) and node.name.value == call.func.value
        ]
        return defined[0] if len(defined) == 1 else None

    def _runs(self, model: str, function: cst.FunctionDef) -> bool:
        """`function` calls `model` (or one of its running methods)."""
        for call in self.context.of_type(function.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _RUNS:
                func = func.value
            if dotted_name(func) == model:
                return True
        return False

    def _generates(self, model: str, function: cst.FunctionDef) -> bool:
        """`model.generate(...)` in `function`, or a parameter annotated with a `transformers`
        class: a Hugging Face model, which has `.device`."""
        for param in (*function.params.posonly_params, *function.params.params):
            if param.name.value == model and param.annotation is not None:
                qualified = self.names.qualified_name(param.annotation.annotation) or ""
                if qualified.startswith("transformers."):
                    return True
        return any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "generate"
            and dotted_name(call.func.value) == model
            for call in self.context.of_type(function.body, cst.Call)
        )


def _handed(model: str, generates: bool, run: cst.Call) -> HandedModel:
    device = f"{model}.device" if generates else f"next({model}.parameters()).device"
    return HandedModel(model=model, device=device, run=run)


def _parameters(function: cst.FunctionDef) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def _parameter(function: cst.FunctionDef, index: int) -> str | None:
    """The name of the positional parameter at `index`."""
    positional = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    return positional[index] if index < len(positional) else None


def _is_move(node: cst.CSTNode | None) -> bool:
    """`<value>.to(...)` or `<value>.cuda(...)`."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("to", "cuda")
    )
