"""Model calls: the model call a value is fed to (through names, helpers and methods), the
call a name was built by, and whether a tensor holds token ids.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.calls import MOVES, is_name
from devfix.codemods.analysis.flow.placement import ModelDevice, ModelPlacement
from devfix.codemods.analysis.modules import self_attribute
from devfix.codemods.analysis.moves import device_argument
from devfix.codemods.analysis.names import (
    code_of,
    dotted_name,
    keyword_argument,
)
from devfix.codemods.analysis.torch_names import (
    CLIP_ENCODERS,
    CLIP_TOKENIZERS,
    DATA_FACTORIES,
    LEGACY_CONSTRUCTORS,
    MODULE_SELF_METHODS,
    NON_TENSOR_MEMBERS,
    SAME_DEVICE_METHODS,
    TOKEN_ID_METHODS,
)

if TYPE_CHECKING:
    pass


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
    return moved and is_name(node, name)


def _reshaped_from(value: cst.BaseExpression, *, fields: bool) -> cst.BaseExpression:
    """What `value` slices or reshapes (`ids[:, 1:-1]`, `ids.unsqueeze(0)`; with `fields`,
    also a field of it: `enc.input_ids`)."""
    while True:
        if isinstance(value, cst.Subscript) or (fields and isinstance(value, cst.Attribute)):
            value = value.value
        elif (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("unsqueeze", "view", "reshape", "long", "flatten")
        ):
            value = value.func.value
        else:
            return value


class ModelCalls(ModelPlacement):
    """The model calls values reach, and the token-id tensors fed to them."""

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
                if parent.attr.value in MOVES:
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
        flow: ModelCalls,
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
            if self.scopes.rebinds_afresh(use):
                break
            expression: cst.CSTNode = use
            parent = self.context.parent(use)
            while (
                isinstance(parent, (cst.Attribute, cst.Subscript))
                and parent.value is expression
                and not (isinstance(parent, cst.Attribute) and parent.attr.value in MOVES)
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
        flow: ModelCalls,
        submodules: bool = False,
        arg: cst.Arg | None = None,
    ) -> tuple[cst.Call, ModelDevice] | None:
        found = self._as_direct_model_call(call, flow, submodules)
        if found is None and arg is not None:
            found = self._through_a_method(call, arg, flow)
        if found is None and self.names.qualified_name(call.func) in ("dict", "builtins.dict"):
            found = self._through_a_thread(call, flow)
        return found

    def _through_a_thread(
        self, keywords: cst.Call, flow: ModelCalls
    ) -> tuple[cst.Call, ModelDevice] | None:
        """`kwargs = dict(input_ids=ids, streamer=streamer)`, then `Thread(target=
        model.generate, kwargs=kwargs)`: the streaming idiom runs the model on those keywords
        in another thread; the thread's call stands for the model's."""
        parent = self.context.parent(keywords)
        bound = parent.targets[0].target if isinstance(parent, cst.Assign) else None
        scope = self.scopes.enclosing_function(keywords) or self.context.module
        for thread in self.scopes.find(scope, cst.Call):
            if self.names.qualified_name(thread.func) != "threading.Thread":
                continue
            handed = keyword_argument(thread, "kwargs")
            target = keyword_argument(thread, "target")
            if handed is None or target is None or not isinstance(target.value, cst.Attribute):
                continue
            if target.value.attr.value not in ("generate", "forward"):
                continue
            if handed.value is keywords or (
                isinstance(bound, cst.Name) and is_name(handed.value, bound.value)
            ):
                callee = target.value.value
                model = flow.model_device(callee, thread) or flow.handed_model(callee, thread)
                if model is not None and (model.move is not None or model.pretrained):
                    return thread, model
        return None

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
                argument = self.argument_for(call, table.node, name)
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
        self, call: cst.Call, arg: cst.Arg, flow: ModelCalls
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
        attrs = [
            attr
            for inner in self.context.of_type(method.body, cst.Call)
            if (attr := self_attribute(inner.func)) is not None
            and attr in held
            and any(is_name(a.value, param) for a in inner.args if not a.star)
        ]
        attrs += self._meeting_held_output(method, param, held)
        for attr in attrs:
            target = cst.parse_expression(f"{dotted_name(func.value)}.{attr}")
            model = flow.model_device(target, call)
            if model is not None and (model.move is not None or model.pretrained):
                return call, dataclasses.replace(model, model=code_of(target))
        return None

    def _meeting_held_output(
        self, method: cst.FunctionDef, param: str, held: frozenset[str]
    ) -> list[str]:
        """The held modules whose output `param` meets in `method`: an argument of a method
        of that output (`self.q(s).gather(1, actions.unsqueeze(1))`), or an operand beside it
        (`rewards + gamma * next_q` with `next_q = self.target(s2).max(1)[0]`)."""
        found: list[str] = []
        for use in self.context.of_type(method.body, cst.Name):
            if use.value != param:
                continue
            value: cst.BaseExpression = use
            parent = self.context.parent(value)
            # `actions.unsqueeze(1)`, `dones.float()`: the same tensor, reshaped or cast.
            while (
                isinstance(parent, cst.Attribute)
                and parent.value is value
                and parent.attr.value in SAME_DEVICE_METHODS
                and isinstance(call := self.context.parent(parent), cst.Call)
            ):
                value = call
                parent = self.context.parent(value)
            others: list[cst.BaseExpression] = []
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                    others = [call.func.value]
            elif isinstance(parent, cst.BinaryOperation):
                # `r + gamma * next_q * (1 - done)`: the whole arithmetic the value is part of.
                while isinstance(grand := self.context.parent(parent), cst.BinaryOperation):
                    parent = grand
                others = [parent]
            for other in others:
                attr = self._held_output(other, method, held)
                if attr is not None:
                    found.append(attr)
        return found

    def _held_output(
        self,
        node: cst.BaseExpression,
        method: cst.FunctionDef,
        held: frozenset[str],
        depth: int = 0,
    ) -> str | None:
        """The held module whose output `node` is computed from (through methods, subscripts,
        arithmetic and the locals of `method` bound to such values)."""
        if depth > 4:
            return None
        while True:
            if isinstance(node, cst.Call):
                attr = self_attribute(node.func)
                if attr is not None and attr in held:
                    return attr
                if not isinstance(node.func, cst.Attribute):
                    return None
                node = node.func.value
            elif isinstance(node, (cst.Subscript, cst.Attribute)):
                node = node.value
            elif isinstance(node, cst.BinaryOperation):
                return self._held_output(node.left, method, held, depth + 1) or self._held_output(
                    node.right, method, held, depth + 1
                )
            elif isinstance(node, cst.Name):
                binding = self.scopes.binding_before(node.value, node, statement=True)
                value = binding[1] if binding and binding[0] in ("assign", "unpack") else None
                if value is None or self.scopes.enclosing_function(value) is not method:
                    return None
                return self._held_output(value, method, held, depth + 1)
            else:
                return None

    def _as_direct_model_call(
        self, call: cst.Call, flow: ModelCalls, submodules: bool = False
    ) -> tuple[cst.Call, ModelDevice] | None:
        callee = call.func
        if isinstance(callee, cst.Attribute) and (
            callee.attr.value in ("generate", "forward") or callee.attr.value in CLIP_ENCODERS
        ):
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
        if model is None:
            model = flow.handed_model(callee, call)  # `def top_n(model, text, tokenizer)`
        if model is None or (model.move is None and not model.pretrained and not model.reason):
            return None
        return call, model

    def token_id_tensor(self, call: cst.Call, _depth: int = 0) -> bool:
        """`call` makes a CPU tensor of token ids: `torch.tensor(ids)` / `torch.LongTensor([ids])`
        (no `device=`) of a list a tokenizer's `encode` returned, or a call of a function of this
        file that returns such a tensor (`def text_to_ids(text, tok): ...; return tensor`)."""
        qualified = self.names.qualified_name(call.func)
        if qualified in CLIP_TOKENIZERS:
            return True
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
        value = _reshaped_from(value, fields=False)
        if isinstance(value, cst.Call):
            return self.token_id_tensor(value, depth)
        if isinstance(value, cst.Name):
            assigned = self.scopes.assigned_values(value.value, value)
            return len(assigned) == 1 and self._token_tensor_value(assigned[0], depth)
        return False

    def placed_model_field(self, value: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """The model whose attribute `value` reads (`self.model.learned_graph[i]`), when that
        model was moved to a device: state it keeps, or set in `forward` from what it computed,
        is on that device (or on the CPU, where a copy to the host is a no-op)."""
        node = _reshaped_from(value, fields=False)
        if not isinstance(node, cst.Attribute) or node.attr.value in NON_TENSOR_MEMBERS:
            return None
        model = self.model_device(node.value, at) if dotted_name(node.value) else None
        if model is None or (model.move is None and not model.pretrained):
            return None
        return model.model

    def tokenized_on_the_host(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`value` (a name bound once before `at`, possibly sliced or reshaped) holds what a
        tokenizer returned as tensors (`tok.encode(s, return_tensors="pt")[:, 1:-1]`,
        `tok(s, return_tensors="pt").input_ids`), which is always on the CPU."""
        value = _reshaped_from(value, fields=True)
        while isinstance(value, cst.Name):
            assigned = self.scopes.assigned_before(value.value, at)
            if len(assigned) != 1 or assigned[0] is value:
                return False
            value = _reshaped_from(assigned[0], fields=True)
        returned_as = (
            keyword_argument(value, "return_tensors") if isinstance(value, cst.Call) else None
        )
        return (
            returned_as is not None
            and isinstance(returned_as.value, cst.SimpleString)
            and returned_as.value.evaluated_value == "pt"
        ) or (isinstance(value, cst.Call) and self.token_id_tensor(value))

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
        self, call: cst.Call, flow: ModelCalls
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
            isinstance(node, cst.Call) and is_name(node.func, param)
            for node in self.context.subtree(function.body)
        )

    def _casts_only(self, method: cst.Attribute) -> bool:
        """`x.to(torch.float16)` / `x.to(dtype=...)`: a cast, which keeps the device."""
        call = self.context.parent(method)
        if not (isinstance(call, cst.Call) and call.func is method and method.attr.value == "to"):
            return False
        device = device_argument(call)
        return (device is None and keyword_argument(call, "dtype") is not None) or (
            device is not None and self.names.is_dtype(device)
        )

    def _moved_on_the_way(self, use: cst.Name) -> bool:
        """`inputs.to(d)`, `inputs["x"].to(d)`, `{k: v.to(d) for k, v in inputs.items()}`,
        `to_device(inputs)`: the output is moved somewhere on the way."""
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, cst.Attribute) and ancestor.value is current:
                if ancestor.attr.value in MOVES and not self._casts_only(ancestor):
                    return True
            elif isinstance(ancestor, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
                return any(
                    isinstance(n, cst.Attribute) and n.attr.value in MOVES
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
