"""What a call with `return_tensors="pt"` returns when it runs the file's own code: a plain
dict (no `.to()`), an object with `.to()`, or something not known; and models whose device map
offloads layers to the CPU or disk."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import method
from devfix.codemods.analysis.moves import device_argument
from devfix.codemods.analysis.names import (
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
    receiver_root,
)
from devfix.codemods.analysis.scopes import all_params
from devfix.codemods.analysis.torch_names import ENCODING_FIELDS

#: Methods a loaded model is often chained with that leave its placement as it was.
_KEEPS_PLACEMENT = frozenset({"eval", "train", "half", "float", "bfloat16", "requires_grad_"})


class TokenizerOutputs(Analysis):
    """The kind of value the file's own tokenizers return."""

    def output_kind(self, node: cst.Call) -> str | None:
        """What the call returns when it runs this file's own code: "dict" (a plain dict, which
        has no `.to()`), a reason when that is not known, None for a library's tokenizer or
        processor (a `BatchEncoding`, `BatchFeature` or tensor: all have `.to()`)."""
        if keyword_argument(node, "return_tensors") is None:
            return None  # token ids made into a tensor (by the file's helper or by hand)
        function = self._own_callable(node.func, node)
        if function is None or self.facts.modules.returns_tensor(function):
            return None
        values = [
            statement.value
            for statement in self.scopes.nodes(function.body)
            if isinstance(statement, cst.Return)
        ]
        if values and all(self._is_plain_dict(value) for value in values):
            return "dict"
        if values and all(self._has_to(value) for value in values):
            return None  # hands on a library tokenizer's output, or an object with `.to()`
        return (
            f"`{code_of(node.func)}` is this file's own code and what it returns is not known to "
            "have `.to()` (a plain dict has none)"
        )

    def sibling_move(self, node: cst.Call) -> tuple[cst.BaseExpression, str] | None:
        """The device another statement of the same function moves the same tokenizer's
        output to before the same model call (`ids = tokenize(t).to(dev)`, then
        `clip.embed_text(ids)` in the training loop, where the validation loop forgets the
        move), and the model call's text; None when there is none."""
        name = self.scopes.assigned_name(node)
        function = self.scopes.enclosing_function(node)
        tokenizer = code_of(node.func)
        if name is None or function is None:
            return None
        calls = list(self.scopes.find(function.body, cst.Call))
        start = self.context.order(node)[1]
        consumer = next(
            (
                call
                for call in calls
                if self.context.order(call)[0] > start
                and any(
                    isinstance(arg.value, cst.Name) and arg.value.value == name for arg in call.args
                )
            ),
            None,
        )
        if consumer is None:
            return None
        model = code_of(consumer.func)
        for call in calls:
            if call is consumer or code_of(call.func) != model:
                continue
            for arg in call.args:
                if not isinstance(arg.value, cst.Name):
                    continue
                value = self.scopes.value_at(arg.value.value, call)
                if (
                    isinstance(value, cst.Call)
                    and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "to"
                    and isinstance(value.func.value, cst.Call)
                    and code_of(value.func.value.func) == tokenizer
                    and value.args
                ):
                    device = value.args[0].value
                    if self.facts.moves.visible_at(code_of(device), node):
                        return device, model
        return None

    def field_moved_alone(self, output: cst.Call) -> tuple[cst.Assign, cst.Call] | None:
        """`enc = processor(...)`, then `enc["input_ids"] = enc.input_ids.to(dev)` as the only
        move of it, and `model.generate(**enc)` after that: the statement and its move; the
        other fields (the attention mask, audio or pixel features) reach the model unmoved."""
        name = self.scopes.assigned_name(output)
        function = self.scopes.enclosing_function(output)
        if name is None or function is None:
            return None
        moves: list[tuple[cst.Assign, cst.Call]] = []
        for assign in self.scopes.find(function.body, cst.Assign, own_scope=True):
            target = assign.targets[0].target if len(assign.targets) == 1 else None
            value = assign.value
            if not (
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Name)
                and target.value.value == name
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "to"
                and receiver_root(value.func.value) == name
            ):
                continue
            device = device_argument(value)
            if device is None or self.facts.moves.device_kind(device, function) not in (
                "accelerator",
                "device",
            ):
                continue  # `enc["pixel_values"] = enc["pixel_values"].to(torch.float16)`
            moves.append((assign, value))
        if len(moves) != 1:
            return None
        after = self.context.order(moves[0][0])[1]
        splatted = any(
            arg.star == "**"
            and isinstance(arg.value, cst.Name)
            and arg.value.value == name
            and self.context.order(arg)[0] > after
            for arg in self.scopes.find(function.body, cst.Arg, own_scope=True)
        )
        return moves[0] if splatted else None

    def unmoved_siblings(self, call: cst.Call) -> tuple[cst.BaseExpression, list[cst.Arg]] | None:
        """A model call given one field of an encoding moved (`input_ids=ids.to(dev)`, `ids =
        enc["input_ids"]`) and another field of the same encoding as it is
        (`attention_mask=mask`, `mask = enc.get("attention_mask")`): the device, and the
        arguments left behind."""
        moved: dict[str, cst.BaseExpression] = {}
        plain: list[tuple[cst.Arg, str]] = []
        for arg in call.args:
            if arg.star:
                continue  # `**generate_kwargs`: options, not the encoding
            value = arg.value
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "to"
                and value.args
            ):
                source = self._encoding_field(value.func.value, call)
                if source is not None:
                    moved[source[0]] = value.args[0].value
                continue
            source = self._encoding_field(value, call)
            if source is not None and source[1] in ENCODING_FIELDS:
                plain.append((arg, source[0]))
        if len(set(map(code_of, moved.values()))) != 1:
            return None
        device = next(iter(moved.values()))
        left = [arg for arg, container in plain if container in moved]
        return (device, left) if left else None

    def may_be_none(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`mask = enc.get("attention_mask")`, or `mask = None` on some path."""
        values = (
            self.scopes.assigned_values(value.value, at) if isinstance(value, cst.Name) else [value]
        )
        return any(
            (isinstance(v, cst.Name) and v.value == "None")
            or (isinstance(v, cst.Call) and call_tail(v.func) == "get")
            for v in values
        )

    def _encoding_field(self, value: cst.BaseExpression, at: cst.CSTNode) -> tuple[str, str] | None:
        """(container, field) for `enc["mask"]`, `enc.get("mask")`, `enc.mask`, or a name
        bound to one of these."""
        if isinstance(value, cst.Name):
            # Every value the name is given, `None` aside (`mask = None` for an empty prompt).
            values = [
                v
                for v in self.scopes.assigned_values(value.value, at)
                if not (isinstance(v, cst.Name) and v.value == "None")
            ]
            if not values or any(isinstance(v, cst.Name) for v in values):
                return None  # unbound here, or another name's value
            fields = {self._encoding_field(v, at) for v in values}
            return fields.pop() if len(fields) == 1 else None
        if isinstance(value, cst.Subscript) and len(value.slice) == 1:
            index = value.slice[0].slice
            key = (
                index.value.evaluated_value
                if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)
                else None
            )
            container = dotted_name(value.value)
        elif isinstance(value, cst.Call) and call_tail(value.func) == "get" and value.args:
            first = value.args[0].value
            key = first.evaluated_value if isinstance(first, cst.SimpleString) else None
            container = (
                dotted_name(value.func.value) if isinstance(value.func, cst.Attribute) else None
            )
        elif isinstance(value, cst.Attribute) and value.attr.value in ENCODING_FIELDS:
            key, container = value.attr.value, dotted_name(value.value)
        else:
            return None
        if not isinstance(key, str) or container is None:
            return None
        return container, key

    def _own_callable(self, func: cst.BaseExpression, at: cst.CSTNode) -> cst.FunctionDef | None:
        """The definition a call of `func` runs when it is this file's own: a module-level
        function, or the `__call__` of a module-level class whose instance `func` names
        (`proc = TextProcessor(); proc(text)`); None for anything else."""
        if not isinstance(func, cst.Name):
            return None
        scopes = self.facts.scopes
        function = scopes.module_functions().get(func.value)
        if function is not None:
            return function
        values = scopes.assigned_values(func.value, at)
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return None
        built = values[0].func
        classdef = scopes.module_classes().get(built.value) if isinstance(built, cst.Name) else None
        return method(classdef, "__call__") if classdef is not None else None

    def _has_to(self, value: cst.BaseExpression | None) -> bool:
        """A library tokenizer's output (a call with `return_tensors=`), a `BatchEncoding` or
        `BatchFeature`, or an instance of a class of this file that defines `to`."""
        if not isinstance(value, cst.Call):
            return False
        if keyword_argument(value, "return_tensors") is not None:
            return True
        qualified = self.names.qualified_name(value.func) or ""
        if qualified.rsplit(".", 1)[-1] in ("BatchEncoding", "BatchFeature") and (
            qualified.startswith("transformers.")
        ):
            return True
        classdef = (
            self.scopes.module_classes().get(value.func.value)
            if isinstance(value.func, cst.Name)
            else None
        )
        return classdef is not None and method(classdef, "to") is not None

    def _is_plain_dict(self, value: cst.BaseExpression | None) -> bool:
        if isinstance(value, (cst.Dict, cst.DictComp)):
            return True
        return isinstance(value, cst.Call) and self.names.qualified_name(value.func) in (
            "dict",
            "builtins.dict",
        )

    def is_tokenizer_output(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """A call with `return_tensors="pt"`, or a plain name last bound to one before `at` (a
        parameter too, rebound to one: `inputs = tokenizer(inputs, return_tensors="pt")`)."""
        if isinstance(value, cst.Name):
            value = (
                self.scopes.latest_binding(value.value, at)
                or self.scopes.value_at(value.value, at)
                or value
            )
        if not isinstance(value, cst.Call):
            return False
        argument = keyword_argument(value, "return_tensors")
        return (
            argument is not None
            and isinstance(argument.value, cst.SimpleString)
            and argument.value.evaluated_value == "pt"
        )

    def offloads(self, model: str, at: cst.CSTNode) -> str | None:
        """How `model`'s device map offloads layers to the CPU or disk: "first" when a literal
        map's first entry does (`model.device`, the device of the first parameter, is then
        `meta`), "some" for other offloading entries or an `offload_folder=`, else None. With
        any of them accelerate's hook on the whole model moves its inputs to the execution
        device."""
        call = self.facts.flow.built_by(model, at)
        if call is None or not (
            isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"
        ):
            return None
        device_map = keyword_argument(call, "device_map")
        chosen = self._literal(device_map.value, call) if device_map is not None else None
        # `placement if torch.cuda.device_count() > 1 else None`: either map may be the one.
        maps = (
            [self._literal(chosen.body, call), self._literal(chosen.orelse, call)]
            if isinstance(chosen, cst.IfExp)
            else [chosen]
        )
        offloaded = [
            [
                isinstance(element, cst.DictElement)
                and isinstance(element.value, cst.SimpleString)
                and element.value.evaluated_value in ("cpu", "disk")
                for element in found.elements
            ]
            for found in maps
            if isinstance(found, cst.Dict)
        ]
        if any(entries and entries[0] for entries in offloaded):
            return "first"
        if any(map(any, offloaded)) or keyword_argument(call, "offload_folder") is not None:
            return "some"
        return None

    def map_chosen_elsewhere(self, model: str, at: cst.CSTNode) -> bool:
        """`model` was loaded with a `device_map` the code does not spell (a parameter, an
        option read as `kwargs.get("device_map", "auto")`), or else is a model the caller
        handed over (`self.model = model`): where its first layer lands is the caller's
        choice either way."""
        table, _ = self.scopes.lookup(model, self.scopes.enclosing_function(at))
        loaded = False
        for binding in table.bindings.get(model, []):
            value = binding.value
            if binding.kind == "unpack" and self._helper_call(value):
                continue  # `self.lm, self.tok = self._merged(path)`: what the other loads placed
            if binding.kind != "assign" or value is None:
                return False
            if isinstance(value, cst.Name) and self._is_parameter(value):
                continue
            while (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in _KEEPS_PLACEMENT
                and isinstance(value.func.value, cst.Call)
            ):
                value = value.func.value  # `from_pretrained(...).eval()`
            if not (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "from_pretrained"
            ):
                return False
            device_map = keyword_argument(value, "device_map")
            chosen = self._literal(device_map.value, value) if device_map is not None else None
            if device_map is None or isinstance(
                chosen, (cst.SimpleString, cst.Dict, cst.Integer, cst.Name)
            ):
                return False
            loaded = True
        return loaded

    def _helper_call(self, value: cst.BaseExpression | None) -> bool:
        """A call of a method of this class (`self._load(...)`) or of a function of the file."""
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if isinstance(func, cst.Name):
            return func.value in self.scopes.module_functions()
        return isinstance(func, cst.Attribute) and dotted_name(func.value) == "self"

    def _is_parameter(self, name: cst.Name) -> bool:
        function = self.scopes.enclosing_function(name)
        return function is not None and name.value in {
            p.name.value for p in all_params(function.params)
        }

    def _literal(self, value: cst.BaseExpression, at: cst.CSTNode) -> cst.BaseExpression | None:
        """`value`, or the value a plain name was last bound to before `at`."""
        if isinstance(value, cst.Name):
            return self.scopes.latest_binding(value.value, at)
        return value
