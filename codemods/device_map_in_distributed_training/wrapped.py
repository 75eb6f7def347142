"""A module of the file that holds a model spread over GPUs by its device map and is handed to a
Hugging Face `Trainer`: the Trainer reads the spread from the model's `hf_device_map`, which the
wrapper lacks."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.calls import method_of
from devfix.codemods.analysis.moves import SPREADING_DEVICE_MAPS
from devfix.codemods.analysis.names import call_tail, keyword_argument
from devfix.codemods.analysis.scopes import param_names
from devfix.codemods.analysis.torch_names import SELF_MOVING_TRAINERS

#: What a Trainer reads to see a model split over the GPUs of one process.
_PARALLEL_MARKS = ("hf_device_map", "is_parallelizable", "model_parallel")
#: Wrappers that keep the model they are given in place (PEFT adapters).
_WRAPPERS = frozenset({"get_peft_model", "prepare_model_for_kbit_training"})
_TRAINER_TAILS = frozenset(name.rsplit(".", 1)[-1] for name in SELF_MOVING_TRAINERS)


@dataclass(frozen=True)
class HiddenDeviceMap:
    """`self.<attribute> = <parameter>` in the wrapper's `__init__`, and the wrapper's name."""

    statement: cst.SimpleStatementLine
    parameter: str
    wrapper: str
    #: the name the script passes for the parameter (`encoder` in `Wrapper(encoder)`)
    argument: str
    #: the wrapper already says it is split (`hf_device_map`, `is_parallelizable`)
    marked: bool

    @property
    def code(self) -> str:
        return f"self.hf_device_map = {self.parameter}.hf_device_map"

    def line(self) -> cst.BaseStatement:
        return cst.parse_statement(self.code)

    def message(self) -> str:
        return (
            f"`{self.wrapper}` holds `{self.parameter}`, spread over GPUs by its device map, but "
            f"has no `hf_device_map` of its own: `Trainer` takes it for a model on one device, "
            f"moves it whole to the first GPU (and wraps it in DataParallel on several) while "
            f"accelerate's hooks still send activations to the other shards; give it the map of "
            f"the model it holds: `{self.code}`"
        )


class WrappedDeviceMaps(Analysis):
    """Trainer models that wrap a device-mapped model without its `hf_device_map`."""

    def wrapped(self, name: str) -> bool:
        """The model `name` is handed to a `Trainer` inside a wrapper that hides its map (the
        wrapper gets the map; the map itself is meant)."""
        return any(
            (held := self._held(call)) is not None and held.argument == name
            for call in self.context.of_type(self.context.module, cst.Call)
            if call_tail(call.func) in _TRAINER_TAILS
        )

    def hidden_map(self, trainer: cst.Call) -> HiddenDeviceMap | None:
        """The wrapper `trainer` is given, when it holds a spread model and lacks its map."""
        held = self._held(trainer)
        return held if held is not None and not held.marked else None

    def _held(self, trainer: cst.Call) -> HiddenDeviceMap | None:
        if call_tail(trainer.func) not in _TRAINER_TAILS:
            return None  # most calls: no name to resolve
        if self.names.qualified_name(trainer.func) not in SELF_MOVING_TRAINERS:
            return None
        model = keyword_argument(trainer, "model")
        if model is None:
            return None
        built = (
            self.facts.flow.built_by(model.value.value, trainer)
            if isinstance(model.value, cst.Name)
            else model.value
        )
        if not isinstance(built, cst.Call) or not isinstance(built.func, cst.Name):
            return None
        classdef = self.scopes.module_classes().get(built.func.value)
        if classdef is None or not self.facts.modules.class_info(classdef).is_module:
            return None
        marked = any(self.scopes.mentions(classdef, mark) for mark in _PARALLEL_MARKS)
        init = method_of(classdef, "__init__")
        if init is None:
            return None
        for index, parameter in enumerate(param_names(init)[1:]):
            passed = keyword_argument(built, parameter)
            positional = [arg for arg in built.args if arg.keyword is None]
            value = (
                passed.value
                if passed
                else (positional[index].value if index < len(positional) else None)
            )
            if not isinstance(value, cst.Name) or not self._spread(value.value, built, 0):
                continue
            statement = self._stored(init, parameter)
            if statement is not None:
                return HiddenDeviceMap(
                    statement, parameter, classdef.name.value, value.value, marked
                )
        return None

    def _spread(self, name: str, at: cst.CSTNode, depth: int) -> bool:
        """`name` holds a model loaded with a device map over several devices, maybe under
        a PEFT adapter (`get_peft_model(base, config)`)."""
        value = self.scopes.latest_binding(name, at)
        if not isinstance(value, cst.Call) or depth > 3:
            return False
        tail = call_tail(value.func)
        if tail in _WRAPPERS and value.args and isinstance(value.args[0].value, cst.Name):
            return self._spread(value.args[0].value.value, value, depth + 1)
        device_map = keyword_argument(value, "device_map") if tail == "from_pretrained" else None
        return device_map is not None and self._several_devices(device_map.value, value)

    def _several_devices(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        if isinstance(value, cst.Name):
            value = self.scopes.latest_binding(value.value, at) or value
        if isinstance(value, cst.IfExp):
            # `two_shards if torch.cuda.device_count() > 1 else {"": "cpu"}`
            return self._several_devices(value.body, at) or self._several_devices(value.orelse, at)
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value in SPREADING_DEVICE_MAPS
        if not isinstance(value, cst.Dict):
            return False
        devices = {
            self.context.module.code_for_node(element.value)
            for element in value.elements
            if isinstance(element, cst.DictElement)
        }
        return len(devices) > 1

    def _stored(self, init: cst.FunctionDef, parameter: str) -> cst.SimpleStatementLine | None:
        """The statement `self.<attribute> = <parameter>` of `__init__`'s own body."""
        if not isinstance(init.body, cst.IndentedBlock):
            return None
        for line in init.body.body:
            if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
                continue
            assign = line.body[0]
            if (
                isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Attribute)
                and isinstance(assign.value, cst.Name)
                and assign.value.value == parameter
            ):
                return line
        return None
