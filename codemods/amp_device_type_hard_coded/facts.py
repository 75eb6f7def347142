"""DF308's facts: the AMP objects of a file (autocast, GradScaler) and the device type they
must use. Which calls are hard-coded to CUDA and how their arguments read, the device type the
script's device gives at some node and how to write it, hand-made device types that know only
CUDA and the CPU, and whether an AMP object runs in training code and off CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.moves import cuda_type, string_device
from devfix.codemods.analysis.names import (
    argument,
    argument_of,
    call_tail,
    dotted_name,
    keyword_argument,
    parsed_expression,
    string_value,
)
from devfix.codemods.analysis.scopes import param_names
from devfix.codemods.analysis.torch_names import (
    AUTOCASTS,
    DEPRECATED_CUDA_AMP,
    GRAD_SCALER_DEFAULTS,
)
from devfix.context import FileContext


@dataclass(frozen=True)
class AmpDevice:
    """The device type the AMP objects at some node must use."""

    #: Source text of the device type (`device.type`, `device_type`,
    #: `torch.device(device).type`), or None when the script's device is always CUDA.
    expression: str | None
    #: The device it comes from (for messages).
    device: str = ""
    #: The device is fixed to CUDA by the script (a literal, `.cuda()`): only the deprecated
    #: spelling is wrong.
    cuda_only: bool = False


#: `torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`: the old API's positional order.
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
#: Where `enabled` sits among the positional arguments of each GradScaler spelling.
_SCALER_ENABLED_INDEX = {"deprecated": 4, "generic": 5}


@dataclass(frozen=True)
class AmpCall:
    """An autocast or GradScaler call hard-coded to CUDA, read from its arguments."""

    scaler: bool
    #: `torch.cuda.amp.*`: deprecated, and CUDA by its name.
    deprecated: bool
    #: The argument that names the device type (`"cuda"`); None for the deprecated spellings
    #: and `torch.amp.GradScaler()` (CUDA by default).
    device: cst.Arg | None
    #: The value of `enabled`, if given where a fix can read it.
    enabled: cst.BaseExpression | None
    #: A GradScaler that gets `enabled` by position, and the autocast of the old API with more
    #: positional arguments than it takes: a fix cannot follow them.
    by_position: bool


class AmpObjects(Analysis):
    """The autocasts and GradScalers of one file, and the device type each must use."""

    def amp_device(self, at: cst.CSTNode) -> AmpDevice | None:
        """The device type the AMP objects at `at` must use: a device-type variable the
        script keeps, else the type of the device the script moves its model and data to;
        None when the script names no device."""
        typed = self._device_type_variable(at)
        if typed is not None:
            return AmpDevice(typed, typed)
        devices = self.facts.moves.moved_devices(at)
        names = [d for d in devices if not d.startswith(".")]
        literal_cuda = [
            d
            for d in devices
            if d.startswith(".cuda(")
            or (string_device(parsed_expression(d)) or "").startswith("cuda")
            or self._cuda_device_call(d)
        ]
        candidates = [d for d in names if d not in literal_cuda]
        if not candidates:
            candidates = [
                n for n in self.facts.moves.device_names(at) if not self._cuda_only_name(n, at)
            ]
            if not candidates:
                function = self.scopes.enclosing_function(at)
                if function is not None:
                    candidates = [
                        p
                        for p in param_names(function)
                        if self.facts.moves.device_kind(cst.Name(p), function) == "device"
                    ]
        # A process's GPU index (`gpu` from `mp.spawn`, `local_rank`) is an int, or None where
        # the script spreads one process over every GPU: not a device to take `.type` of.
        candidates = [
            c
            for c in candidates
            if not self._cuda_only_name(c, at)
            and self.facts.flow.rank_of(parsed_expression(c), at) is None
        ]
        if len(set(candidates)) == 1:
            device = candidates[0]
            if not self.facts.moves.visible_at(device, at):
                return None
            return AmpDevice(self.device_type_of(device, at), device)
        if not candidates and (literal_cuda or self._all_cuda_names(at)):
            return AmpDevice(None, "cuda", cuda_only=True)
        return None

    def _cuda_device_call(self, text: str) -> bool:
        parsed = parsed_expression(text)
        return (
            isinstance(parsed, cst.Call)
            and self.names.qualified_name(parsed.func) == "torch.device"
            and bool(parsed.args)
            and (string_device(parsed.args[0].value) or "").startswith("cuda")
        )

    def _cuda_only_name(self, name: str, at: cst.CSTNode, depth: int = 0) -> bool:
        """Every binding of `name` is a CUDA device (`"cuda"`, `f"cuda:{rank}"`,
        `torch.device("cuda", rank)`), or, for a parameter, every caller passes one: the
        script runs on CUDA only."""
        if "." in name:
            return False
        if self._used_as_cuda_index(name, at):
            return True
        scopes = [self.scopes.enclosing_scope(at), self.context.module]
        values = [v for scope in scopes for v in self.scopes.simple_assignments(scope, name)]
        if not values:
            function = self.scopes.enclosing_function(at)
            return function is not None and self._callers_pass_cuda(function, name, depth)
        return all(self._cuda_value(v) for v in values)

    def _used_as_cuda_index(self, name: str, at: cst.CSTNode) -> bool:
        """The code around `at` gives `name` to `.cuda(name)` or `torch.cuda.set_device(name)`:
        a GPU index, so the device it names is CUDA (`.to(rank)` with an int is too)."""
        scope = self.scopes.enclosing_scope(at)
        for use in self.scopes.names_in(scope, name):
            arg = self.context.parent(use)
            call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
            if not (isinstance(call, cst.Call) and call.args and call.args[0] is arg):
                continue
            func = call.func
            if (isinstance(func, cst.Attribute) and func.attr.value == "cuda") or (
                self.names.qualified_name(func) == "torch.cuda.set_device"
            ):
                return True
        return False

    def _callers_pass_cuda(self, function: cst.FunctionDef, param: str, depth: int) -> bool:
        names = param_names(function)
        if param not in names or depth > 3:
            return False
        sites = self.facts.flow.call_sites(function)
        if not sites:
            return False
        for call, _caller in sites:
            value = argument(call, param, names.index(param))
            if any(arg.star for arg in call.args) or not isinstance(value, cst.Name):
                return False
            if not self._cuda_only_name(value.value, call, depth + 1):
                return False
        return True

    def _all_cuda_names(self, at: cst.CSTNode) -> bool:
        names = self.facts.moves.device_names(at)
        return bool(names) and all(self._cuda_only_name(n, at) for n in names)

    def _cuda_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.SimpleString):
            return (string_device(value) or "").startswith("cuda")
        if isinstance(value, cst.FormattedString):
            text = "".join(p.value for p in value.parts if isinstance(p, cst.FormattedStringText))
            return text.startswith("cuda")
        if isinstance(value, cst.Call) and self.names.qualified_name(value.func) == "torch.device":
            return bool(value.args) and self._cuda_value(value.args[0].value)
        return False

    def device_type_of(self, device: str, at: cst.CSTNode) -> str:
        """How to write the type of the device `device` at `at`: `device.type` for a
        `torch.device`, `torch.device(device).type` for a string or a value of unknown kind."""
        if self.is_torch_device(device, at):
            return f"{device}.type"
        torch = self.names.torch_alias() or "torch"
        return f"{torch}.device({device}).type"

    def is_torch_device(self, device: str, at: cst.CSTNode) -> bool:
        """`device` holds a `torch.device`: bound from `torch.device(...)` (or the portable
        helper), or the file reads its `.type` / `.index`."""
        if "." not in device:
            scopes = [self.scopes.enclosing_scope(at), self.context.module]
            values = [v for s in scopes for v in self.scopes.simple_assignments(s, device)]
            if values and all(self._torch_device_value(v) for v in values):
                return True
            if values and any(
                isinstance(v, (cst.SimpleString, cst.FormattedString, cst.IfExp)) for v in values
            ):
                return False
        for node in self.context.subtree(self.context.module):
            if (
                isinstance(node, cst.Attribute)
                and node.attr.value in ("type", "index")
                and dotted_name(node.value) == device
            ):
                return True
        return False

    def _torch_device_value(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.IfExp):  # `torch.device(...) if ... else torch.device("cpu")`
            return self._torch_device_value(value.body) and self._torch_device_value(value.orelse)
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value == "select_device":
                return True
            return self.names.qualified_name(value.func) == "torch.device"
        return False

    def _device_type_variable(self, at: cst.CSTNode) -> str | None:
        """A name bound before `at` to the script's device type: `device_type = device.type`,
        `torch.device(device).type`, or a hand-made `"cuda" if ... else "cpu"` (which the pass
        fixes where it is bound)."""
        scopes = [self.scopes.enclosing_scope(at)]
        if scopes[0] is not self.context.module:
            scopes.append(self.context.module)
        for scope in scopes:
            for node in self.scopes.statements(scope):
                if not (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                ):
                    continue
                if scope is scopes[0] and not self.scopes.starts_before(node, at):
                    continue
                if self.is_device_type_value(node.value):
                    name = node.targets[0].target.value
                    if self.scopes.visible_name(name, at):
                        return name
        return None

    def is_device_type_value(self, value: cst.BaseExpression) -> bool:
        """`x.type` of a device, `torch.device(x).type`, or `"cuda" if ... else "cpu"`."""
        if isinstance(value, cst.Attribute) and value.attr.value == "type":
            inner = value.value
            name = dotted_name(inner)
            if name is not None and "dev" in name.rsplit(".", 1)[-1].lower():
                return True
            return (
                isinstance(inner, cst.Call)
                and self.names.qualified_name(inner.func) == "torch.device"
            )
        return self.hand_made_device_type(value) is not None

    def hand_made_device_type(self, value: cst.BaseExpression) -> str | None:
        """`"cuda" if "cuda" in device else "cpu"` (and `device.startswith("cuda")`,
        `device == "cuda"`, `device.type == "cuda"`): a device type that knows only CUDA and
        the CPU. Returns the device it is computed from."""
        if not isinstance(value, cst.IfExp):
            return None
        branches = {string_value(value.body), string_value(value.orelse)}
        if branches != {"cuda", "cpu"}:
            return None
        for node in self.context.subtree(value.test):
            name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            if name is None or name in ("torch", "self"):
                continue
            tail = name.rsplit(".", 1)[-1].lower()
            if name.endswith(".type"):
                name = name[: -len(".type")]
                tail = name.rsplit(".", 1)[-1].lower()
            if "dev" in tail or tail in ("gpu", "accelerator"):
                parent = self.context.parent(node)
                if (
                    isinstance(parent, cst.Attribute)
                    and parent.value is node
                    and (parent.attr.value not in ("type", "startswith"))
                ):
                    continue
                return name
        return None

    def cuda_amp_call(self, node: cst.Call) -> AmpCall | None:
        """`torch.autocast("cuda")`, `torch.cuda.amp.autocast()`, `torch.amp.GradScaler()`, ...:
        an AMP object hard-coded to CUDA; None for another device type, a CPU autocast, and
        `torch.autocast(*args)`, whose device type is not in sight (it has no default)."""
        qualified = self.names.qualified_name(node.func)
        if qualified in GRAD_SCALER_DEFAULTS:
            scaler = True
        elif qualified in AUTOCASTS and AUTOCASTS[qualified] != "cpu":
            scaler = False
        else:
            return None
        deprecated = qualified in DEPRECATED_CUDA_AMP
        device = None if deprecated else argument_of(node, "device" if scaler else "device_type")
        if device is None and not (deprecated or scaler):
            return None
        if device is not None and not cuda_type(device.value):
            return None
        positional = len([arg for arg in node.args if arg.keyword is None])
        if scaler:
            enabled_index = _SCALER_ENABLED_INDEX["deprecated" if deprecated else "generic"]
            by_position = positional > enabled_index and not keyword_argument(node, "enabled")
        else:
            by_position = deprecated and positional > len(AUTOCAST_POSITIONAL)
        # The deprecated autocast takes `enabled` first; the others by keyword only.
        enabled = argument(node, "enabled", 0 if deprecated and not scaler else len(node.args))
        return AmpCall(scaler, deprecated, device, enabled, by_position)

    def amp_device_for(
        self, node: cst.Call, enabled: cst.BaseExpression | None
    ) -> AmpDevice | None:
        """`amp_device` for an AMP object; CUDA only (the deprecation alone) when the object is
        already enabled on CUDA alone (`enabled=` mentions a device type) or runs under a CUDA
        check."""
        amp = self.amp_device(node)
        if amp is None:
            return None
        if not amp.cuda_only and (
            (enabled is not None and self._enabled_by_a_device_test(enabled, node))
            or self.facts.flow.guarded_by_cuda_check(node)
            or self.under_cuda_test(node)
        ):
            return AmpDevice(None, "cuda", cuda_only=True)
        return amp

    def _enabled_by_a_device_test(self, enabled: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`enabled=` mentions a device type (`device.type == "cuda"`,
        `torch.cuda.is_available()`), itself or through a name bound to one: a local, or a
        parameter every caller of the function fills with one."""
        if _mentions_device_type(self.context, enabled):
            return True
        if not isinstance(enabled, cst.Name):
            return False
        values = self.scopes.assigned_before(enabled.value, at)
        function = self.scopes.enclosing_function(at)
        if not values and function is not None and enabled.value in param_names(function):
            sites = self.facts.flow.call_sites(function)
            passed = [
                self.facts.flow.argument_for(call, function, enabled.value) for call, _ in sites
            ]
            values = [
                inner
                for argument, (call, _) in zip(passed, sites)
                for inner in (
                    self.scopes.assigned_before(argument.value, call)
                    if isinstance(argument, cst.Name)
                    else [argument]
                    if argument is not None
                    else []
                )
            ]
            if None in passed or not sites:
                return False
        return bool(values) and all(_mentions_device_type(self.context, v) for v in values)

    def in_training_code(self, node: cst.CSTNode) -> bool:
        """Neither model code (the methods of a module, where AMP blocks are part of the model)
        nor a data pipeline (a Dataset, a collate function)."""
        if self.facts.modules.in_model_method(node):
            return False
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, cst.ClassDef)
                and self.facts.modules.class_info(ancestor).is_dataset
            ):
                return False
        return not self.facts.flow.in_data_pipeline(node)

    def under_cuda_test(self, node: cst.CSTNode) -> bool:
        """`if device.type == "cuda":` / `... if device_type == "cuda" else ...` around `node`
        (in its function): it runs on CUDA only."""
        current: cst.CSTNode = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, (cst.If, cst.IfExp))
                and current is ancestor.body
                and _holds_only_on_cuda(self.context, ancestor.test)
            ):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            current = ancestor
        return False

    def chosen_by_torch_version(self, node: cst.CSTNode) -> bool:
        """`node` is in a branch of an `if` on torch's version (`if version.parse(
        torch.__version__) >= version.parse("2.4"): ... else: torch.cuda.amp.GradScaler()`):
        the spelling is the one that release has, on purpose."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(ancestor, (cst.If, cst.IfExp)) and any(
                isinstance(inner, cst.Attribute)
                and inner.attr.value == "__version__"
                and self.names.qualified_name(inner) == "torch.__version__"
                for inner in self.context.subtree(ancestor.test)
            ):
                return True
        return False

    def only_cuda_or_cpu(self, device: str, at: cst.CSTNode) -> bool:
        """Every value the device name `device` holds at `at` is CUDA or the CPU, as written
        (`"cuda" if torch.cuda.is_available() else "cpu"`, `torch.device("cuda:0")`): a device
        type that knows only those two is then exactly `torch.device(device).type`."""
        values = self.scopes.assigned_values(device, at) if "." not in device else []
        if not values or self._rebinds_globals():
            return False
        return all(self._cuda_or_cpu(value, 0) for value in values)

    def _rebinds_globals(self) -> bool:
        """`exec(open("configurator.py").read())` (nanoGPT) or `globals().update(...)`: any
        module-level name may hold what a configuration file or the command line says."""
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.Call) and self.names.qualified_name(node.func) in (
                "exec",
                "builtins.exec",
                "globals",
                "builtins.globals",
            ):
                return True
        return False

    def _cuda_or_cpu(self, value: cst.BaseExpression, depth: int) -> bool:
        if depth > 3:
            return False
        if isinstance(value, cst.IfExp):
            return self._cuda_or_cpu(value.body, depth + 1) and self._cuda_or_cpu(
                value.orelse, depth + 1
            )
        if (
            isinstance(value, cst.Call)
            and self.names.qualified_name(value.func) in ("torch.device", "builtins.str", "str")
            and len(value.args) == 1
        ):
            return self._cuda_or_cpu(value.args[0].value, depth + 1)
        device = string_device(value)
        return device is not None and device.split(":", 1)[0] in ("cuda", "cpu")

    def amp_uses_hand_made_type(self, node: cst.IfExp) -> bool:
        """The hand-made device type (`hand_made_device_type`) reaches an autocast or a
        GradScaler (directly, or through the name it is bound to) that may run off CUDA: one
        behind `if device_type == "cuda"` is CUDA-only on purpose, and the other devices' type
        does not matter to it."""
        parent = self.context.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            return isinstance(call, cst.Call) and self._amp_off_cuda(call)
        name = self.scopes.assigned_name(node)
        if name is None:
            return False
        for inner in self.context.subtree(self.context.module):
            if not (isinstance(inner, cst.Name) and inner.value == name):
                continue
            parent = self.context.parent(inner)
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and self._amp_off_cuda(call):
                    return True
            elif self._chooses_amp(inner):
                return True
        return False

    def _chooses_amp(self, use: cst.Name) -> bool:
        """`nullcontext() if device_type == "cpu" else torch.cuda.amp.autocast()`: the device
        type decides whether an AMP object is used at all."""
        current: cst.CSTNode = use
        for ancestor in self.context.ancestors(use):
            if isinstance(ancestor, (cst.IfExp, cst.If)) and current is ancestor.test:
                return any(
                    isinstance(call, cst.Call) and self._amp_off_cuda(call)
                    for branch in (ancestor.body, ancestor.orelse)
                    if branch is not None
                    for call in self.context.subtree(branch)
                )
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
            current = ancestor
        return False

    def _amp_off_cuda(self, call: cst.Call) -> bool:
        return (
            call_tail(call.func) in ("autocast", "GradScaler")
            and not self.under_cuda_test(call)
            and not self.facts.flow.guarded_by_cuda_check(call)
        )


def _holds_only_on_cuda(context: FileContext, test: cst.BaseExpression) -> bool:
    """A test that holds only on CUDA: `x == "cuda"`, `"cuda" in x`, `is_available()` (not
    a negated one: `x != "cuda"` holds everywhere else)."""
    for inner in context.subtree(test):
        if isinstance(inner, (cst.NotEqual, cst.NotIn, cst.IsNot, cst.Not)):
            return False
        if isinstance(inner, cst.SimpleString) and (string_device(inner) or "").startswith("cuda"):
            return True
        if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
            "is_available",
            "is_cuda",
        ):
            return True
    return False


def _mentions_device_type(context: FileContext, value: cst.BaseExpression) -> bool:
    for inner in context.subtree(value):
        if isinstance(inner, cst.SimpleString) and string_device(inner) is not None:
            return True
        if isinstance(inner, (cst.Name, cst.Attribute)) and call_tail(inner) in (
            "is_available",
            "type",
            "device_type",
            "is_cuda",
        ):
            return True
    return False
