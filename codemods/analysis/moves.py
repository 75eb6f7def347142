"""Moves: `.to(device)`, `.cuda()`, the devices they name, and the names that hold a device.

One answer to "is this call a device move?" (:meth:`Moves.move_of`): a dtype-only `.to`, a move
to the CPU or to `meta` is none; `.to(x)` whose argument is not recognisably a device is a move
of unknown kind (`DeviceMove.kind is None`), which callers that need proof ignore.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import names_a_device
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    has_star_kwargs,
    keyword_argument,
)
from devfix.codemods.analysis.scopes import all_params
from devfix.codemods.analysis.torch_names import (
    ACCELERATORS,
    DEVICE_TYPES,
    LIBRARY_MOVE_HELPERS,
    MODEL_WRAPPERS,
)

#: The helper DF304 inserts once per script; the other passes treat it as a device source.
SELECT_DEVICE = "select_device"
#: Name parts that say a variable holds a device (`device`, `args.gpu`, `local_rank`).
#: Big Model Inference strategies that may spread the model over several devices.
SPREADING_DEVICE_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})
_DEVICE_WORDS = ("device", "dev", "cuda", "gpu", "local_rank", "rank")


def string_device(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal naming a device type, e.g. "cuda:1"; else None."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str) and value.split(":", 1)[0] in DEVICE_TYPES:
            return value
    return None


def cuda_string(node: cst.BaseExpression) -> bool:
    """`"cuda"`, `"cuda:1"`."""
    value = string_device(node)
    return value is not None and value.split(":", 1)[0] == "cuda"


def cuda_type(node: cst.BaseExpression) -> bool:
    """The device type `"cuda"` as a string literal (not `"cuda:1"`)."""
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda"


def is_move_call(node: cst.BaseExpression) -> bool:
    """`<value>.to(...)` / `<value>.cuda(...)` (whatever the argument says)."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("to", "cuda")
    )


def literal_gpu_move(call: cst.Call) -> str | None:
    """`x.cuda()`, `x.cuda(1)`, `x.to("cuda:0")`: the GPU it names, as a message shows it;
    None for any other call."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    if func.attr.value == "cuda" and (
        not call.args or (len(call.args) == 1 and isinstance(call.args[0].value, cst.Integer))
    ):
        return "`.cuda()`" if not call.args else f"`.cuda({code_of(call.args[0].value)})`"
    if func.attr.value == "to" and len(call.args) == 1 and cuda_string(call.args[0].value):
        return code_of(call.args[0].value)
    return None


def device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The device of `x.to(device, ...)` / `x.to(device=...)` (or a dtype: ask `is_dtype`)."""
    return argument(call, "device")


def copies_to_host(node: cst.BaseExpression) -> bool:
    """`t.cpu()` or `t.to("cpu")`: a copy of a tensor in host memory."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    method = node.func.attr.value
    return method == "cpu" or (
        method == "to"
        and len(node.args) == 1
        and isinstance(node.args[0].value, cst.SimpleString)
        and node.args[0].value.evaluated_value == "cpu"
    )


def states_device(call: cst.Call) -> bool:
    """A factory call that says where its tensor goes: `device=`, `out=` or `**kwargs`."""
    return (
        keyword_argument(call, "device") is not None
        or keyword_argument(call, "out") is not None
        or has_star_kwargs(call)
    )


@dataclass(frozen=True)
class DeviceMove:
    """A move: `.to(<expression>)` or `.cuda(<args>)`."""

    method: str
    expression: cst.BaseExpression | None
    cuda_args: tuple[cst.Arg, ...] = ()
    #: The line of the `if` the move sits in (0: the move always happens).
    conditional_line: int = 0
    #: "accelerator" (a CUDA/MPS literal), "device" (chosen at run time), None (not known to be
    #: a device: `.to(x)` with an `x` the analysis cannot place). `.cuda()` is "accelerator".
    kind: str | None = "accelerator"

    @property
    def code(self) -> str:
        if self.method == "to" and self.expression is not None:
            return code_of(self.expression)
        return "cuda(" + ", ".join(code_of(a.value) for a in self.cuda_args) + ")"

    def describe(self) -> str:
        return f"`{self.code}`" if self.method == "to" else "the current CUDA device (`.cuda()`)"

    def apply(self, receiver: cst.BaseExpression) -> cst.Call:
        """`receiver.to(<device>)` or `receiver.cuda(<args>)`."""
        if self.method == "to" and self.expression is not None:
            args = [cst.Arg(self.expression.deep_clone())]
        else:
            args = [cst.Arg(a.value.deep_clone()) for a in self.cuda_args]
            for index in range(len(args) - 1):
                args[index] = args[index].with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                )
        return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(self.method)), args=args)

    def applied(self, receiver: cst.BaseExpression) -> tuple[cst.Call, str]:
        """:meth:`apply`, and the text the move adds after the receiver (`.to(device)`), for a
        finding's message and fix title."""
        moved = self.apply(receiver)
        return moved, code_of(moved)[len(code_of(receiver)) :]

    def as_to_argument(self) -> cst.BaseExpression:
        """The device as one expression for `.to(...)` (BatchEncoding has no `.cuda()`)."""
        if self.method == "to" and self.expression is not None:
            return self.expression.deep_clone()
        if self.cuda_args and isinstance(self.cuda_args[0].value, cst.Integer):
            return cst.SimpleString(f'"cuda:{self.cuda_args[0].value.value}"')
        return cst.SimpleString('"cuda"')


#: Names of argument namespaces and configs: their `.device` may be unset (None).
_SETTINGS_HOLDERS = frozenset({"args", "opt", "opts", "cfg", "config", "hparams", "options"})


def self_name_of(function: cst.FunctionDef | None) -> str | None:
    if function is None:
        return None
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


class Moves(Analysis):
    """Device moves and device values of one file."""

    def device_that_may_be_the_cpu(self, value: cst.BaseExpression) -> bool:
        """`value` (the argument of a `.cuda(...)`) holds a device, never None, that may be
        the CPU: a tensor's or model's `.device`, a `torch.device(...)`, or a parameter named
        for a device (`def __init__(self, device):`) with no `None` default and not rebound."""
        if isinstance(value, cst.Attribute):
            base = value.value
            return (
                value.attr.value == "device"
                and isinstance(base, cst.Name)
                and base.value not in _SETTINGS_HOLDERS
                and base.value != self_name_of(self.scopes.enclosing_function(value))
            )
        if isinstance(value, cst.Call):
            return self.names.qualified_name(value.func) == "torch.device"
        if not isinstance(value, cst.Name) or not names_a_device(value.value):
            return False
        function = self.scopes.enclosing_function(value)
        if function is None:
            return False
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value != value.value:
                continue
            default = param.default
            if isinstance(default, cst.Name) and default.value == "None":
                return False
            table, _ = self.scopes.lookup(value.value, function)
            if not all(b.kind == "param" for b in table.bindings.get(value.value, [])):
                return False
            return not self._always_handed_a_gpu(function, value.value)
        return False

    def _always_handed_a_gpu(self, function: cst.FunctionDef, param: str) -> bool:
        """Every call of `function` in the file passes `param` a GPU: a literal index or
        `"cuda:N"`, or the process's rank (`train(..., args.gpu)` in an `mp.spawn` worker).
        There `.cuda(param)` and `.to(param)` do the same."""
        flow = self.facts.flow
        sites = flow.call_sites(function)
        for call, caller in sites:
            argument = flow.argument_for(call, function, param)
            if argument is None:
                return False
            if self.device_kind(argument, caller) != "accelerator" and (
                flow.rank_of(argument, call) is None
            ):
                return False
        return bool(sites)

    def device_kind(
        self, expr: cst.BaseExpression, function: cst.FunctionDef | None, depth: int = 0
    ) -> str | None:
        """ "cpu", "accelerator" (a CUDA/MPS literal), "device" (chosen at run time) or None."""
        if depth > 4:
            return None
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            text = value.decode() if isinstance(value, bytes) else value
            text = text.lower()
            if text.startswith("cpu"):
                return "cpu"
            if text.startswith(ACCELERATORS):
                return "accelerator"
            return None
        if isinstance(expr, cst.Integer):
            return "accelerator"
        if isinstance(expr, cst.IfExp):
            kinds = {
                self.device_kind(expr.body, function, depth + 1),
                self.device_kind(expr.orelse, function, depth + 1),
            }
            return None if None in kinds else ("cpu" if kinds == {"cpu"} else "device")
        if isinstance(expr, cst.Call):
            if self.names.qualified_name(expr.func) == "torch.device" and expr.args:
                kind = self.device_kind(expr.args[0].value, function, depth + 1)
                return kind or "device"
            return None
        name = dotted_name(expr)
        if name is None or self.names.is_dtype(expr):
            return None
        table, _ = self.scopes.lookup(name, function)
        values = [b.value for b in table.bindings.get(name, []) if b.kind == "assign" and b.value]
        kinds = {self.device_kind(v, function, depth + 1) for v in values}
        if values and None not in kinds:
            return "cpu" if kinds == {"cpu"} else "device"
        tail = name.rsplit(".", 1)[-1].lower().strip("_")
        if tail == "device" or any(
            word == tail or tail.endswith("_" + word) or tail.startswith(word + "_")
            for word in _DEVICE_WORDS
        ):
            return "device"
        return None

    def move_of(self, call: cst.Call, function: cst.FunctionDef | None = None) -> DeviceMove | None:
        """`x.to(<device>)` / `x.cuda(...)` -> the move; moves to the CPU or `meta`, dtype casts
        and argument-less `.to()` -> None."""
        if not isinstance(call.func, cst.Attribute):
            return None
        method = call.func.attr.value
        if method == "cuda":
            if any(a.keyword is not None and a.keyword.value != "device" for a in call.args):
                args = tuple(a for a in call.args if a.keyword is None)
            else:
                args = tuple(call.args)
            return DeviceMove("cuda", None, tuple(cst.Arg(a.value) for a in args))
        if method != "to":
            return None
        device = device_argument(call)
        if device is None or self.names.is_dtype(device):
            return None
        if string_device(device) in ("cpu", "meta"):
            return None
        if (
            isinstance(device, cst.Call)
            and self.names.qualified_name(device.func) == "torch.device"
        ):
            first = device.args[0].value if device.args else None
            if first is not None and string_device(first) in ("cpu", "meta"):
                return None
        kind = self.device_kind(device, function)
        if kind == "cpu":
            return None
        return DeviceMove("to", device, kind=kind)

    def is_move_helper(self, function: cst.FunctionDef) -> bool:
        """A function of this file that moves its first parameter to a device and returns it:
        `def to_var(x): if torch.cuda.is_available(): x = x.cuda(); return Variable(x)`."""
        key = f"moves.helper.{id(function)}"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        params = [*function.params.posonly_params, *function.params.params]
        found = False
        if params:
            name = params[0].name.value
            moved = False
            for node in self.scopes.nodes(function.body):
                if (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value == name
                    and isinstance(node.value, cst.Call)
                    and isinstance(node.value.func, cst.Attribute)
                    and isinstance(node.value.func.value, cst.Name)
                    and node.value.func.value.value == name
                    and self.move_of(node.value) is not None
                ):
                    moved = True
                elif isinstance(node, cst.Return) and node.value is not None and moved:
                    found = name in {
                        n.value for n in self.context.subtree(node.value) if isinstance(n, cst.Name)
                    }
        self.context.shared[key] = found
        return found

    def move_helper(self) -> str | None:
        """The one function of the file that moves a tensor to the device the script uses
        (`def to_var(x): if torch.cuda.is_available(): x = x.cuda(); return x`)."""
        helpers = [
            name
            for name, function in self.scopes.module_functions().items()
            if self.is_move_helper(function)
        ]
        helpers += [
            name for name, body in self._module_lambdas().items() if self._moves_first(body)
        ]
        return helpers[0] if len(helpers) == 1 else None

    def moved_by_helper(self, arg: cst.Arg) -> bool:
        """`to_var(torch.randn(n))`: the first argument of the file's own move helper, a
        function or a lambda bound at module level (`Variable = lambda *a: V(*a).cuda() if
        USE_CUDA else V(*a)`), or of a library's (`move_device_like(torch.arange(n), x)`)."""
        call = self.context.parent(arg)
        if not (isinstance(call, cst.Call) and call.args and call.args[0] is arg):
            return False
        if len(call.args) > 1 and self.names.qualified_name(call.func) in LIBRARY_MOVE_HELPERS:
            return True
        if not isinstance(call.func, cst.Name):
            return False
        helper = self.scopes.module_functions().get(call.func.value)
        if helper is not None:
            return self.is_move_helper(helper)
        body = self._module_lambdas().get(call.func.value)
        return body is not None and self._moves_first(body)

    def _module_lambdas(self) -> dict[str, cst.Lambda]:
        """Module-level `name = lambda ...: ...`, the one binding of its name."""
        cached = self.context.shared.get("moves.lambdas")
        if isinstance(cached, dict):
            return cached
        lambdas: dict[str, cst.Lambda] = {}
        for name, statements in self.scopes.module_bindings().items():
            only = statements[0] if len(statements) == 1 else None
            if isinstance(only, cst.Assign) and isinstance(only.value, cst.Lambda):
                lambdas[name] = only.value
        self.context.shared["moves.lambdas"] = lambdas
        return lambdas

    def _moves_first(self, helper: cst.Lambda) -> bool:
        """The lambda's result is its first argument (or `*args`) moved to a device, at least on
        one branch of a conditional (`V(*a).cuda() if USE_CUDA else V(*a)`): where the other
        branch runs there is no GPU to move to."""
        params = [*helper.params.posonly_params, *helper.params.params]
        star = helper.params.star_arg
        if params:
            first = params[0].name.value
        elif isinstance(star, cst.Param):
            first = star.name.value
        else:
            return False
        branches = (
            [helper.body.body, helper.body.orelse]
            if isinstance(helper.body, cst.IfExp)
            else [helper.body]
        )
        moving = [
            branch
            for branch in branches
            if isinstance(branch, cst.Call)
            and self.move_of(branch) is not None
            and first
            in {n.value for n in self.context.subtree(branch.func) if isinstance(n, cst.Name)}
        ]
        return bool(moving)

    def moved_name(self, call: cst.Call) -> str | None:
        """The plain name a device move moves: `model.to(device)` -> "model"."""
        if not isinstance(call.func, cst.Attribute) or not isinstance(call.func.value, cst.Name):
            return None
        return call.func.value.value if self.move_of(call) is not None else None

    def moved_there_already(self, move: cst.Call) -> str | None:
        """`batch = window.to(device)` then `batch.cuda()`: the device variable (or parameter)
        the moved name was sent to just before, in a block that holds `move`; None otherwise.
        A move to a named device, not to a literal or `self.<attr>`: that one is the choice of
        the code at hand."""
        if not isinstance(move.func, cst.Attribute) or not isinstance(move.func.value, cst.Name):
            return None
        value = self.scopes.value_at(move.func.value.value, move)
        if not (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "to"
            and len(value.args) == 1
        ):
            return None
        device = device_argument(value)
        if not isinstance(device, cst.Name) or self.names.is_dtype(device):
            return None
        return device.value

    def moved_module(self, call: cst.Call) -> tuple[str, bool] | None:
        """The plain name a device move moves, and whether the move wraps it first:
        `model.to(device)` -> ("model", False); `nn.DataParallel(net).cuda()` -> ("net", True)
        (the wrapper shares the module's parameters, so they move all the same)."""
        name = self.moved_name(call)
        if name is not None:
            return name, False
        if not isinstance(call.func, cst.Attribute) or not isinstance(call.func.value, cst.Call):
            return None
        wrap = call.func.value
        wrapped = argument(wrap, "module")
        if (
            isinstance(wrapped, cst.Name)
            and self.names.qualified_name(wrap.func) in MODEL_WRAPPERS
            and self.move_of(call) is not None
        ):
            return wrapped.value, True
        return None

    def first_gpu_move(self) -> cst.Call | None:
        """The first move in the file to a GPU or a device chosen at run time (`.cuda()`,
        `.to(device)`, `.to("cuda:1")`): where the file's tensors may come to live off the
        CPU. None in code that never leaves the CPU."""
        key = "moves.first_gpu_move"
        if key not in self.context.shared:
            self.context.shared[key] = next(
                (
                    call
                    for call in self.context.of_type(self.context.module, cst.Call)
                    if (move := self.move_of(call)) is not None
                    and (move.method == "cuda" or move.kind in ("accelerator", "device"))
                ),
                None,
            )
        found = self.context.shared[key]
        return found if isinstance(found, cst.Call) else None

    def first_device_handoff(self) -> cst.Call | None:
        """The first call handed a device chosen at run time (`convert(self.device, batch)`,
        `extract(model, loader, device=device)`): a file whose tensors a helper elsewhere may
        put on a GPU."""
        key = "moves.first_device_handoff"
        if key not in self.context.shared:
            self.context.shared[key] = next(
                (
                    call
                    for call in self.context.of_type(self.context.module, cst.Call)
                    if any(self._hands_a_device(arg, call) for arg in call.args)
                ),
                None,
            )
        found = self.context.shared[key]
        return found if isinstance(found, cst.Call) else None

    def _hands_a_device(self, arg: cst.Arg, call: cst.Call) -> bool:
        """`device=<a run-time device>`, or a name for one (`self.device`, `dev`)."""
        name = dotted_name(arg.value)
        if arg.star or name is None:
            return False
        tail = name.rsplit(".", 1)[-1].lower().strip("_")
        if arg.keyword is not None and arg.keyword.value != "device":
            return False
        return (
            arg.keyword is not None or tail in ("device", "dev") or tail.endswith("_device")
        ) and self.device_kind(arg.value, self.scopes.enclosing_function(call)) == "device"

    def moved_devices(self, node: cst.CSTNode) -> list[str]:
        """Distinct devices (as source text) that code in `node`'s function and at module level
        moves things to with `.to(<device>)` / `.cuda(...)`; a tensor's own `x.device` is not
        counted."""
        found: list[str] = []
        scope = self.scopes.enclosing_scope(node)
        scopes = [scope] if isinstance(scope, cst.Module) else [scope, self.context.module]
        module = self.context.module
        for current in scopes:
            for inner in self.scopes.statements(current):
                if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)):
                    continue
                move = self.move_of(inner)
                if move is None:
                    continue
                if move.method == "cuda":
                    text = module.code_for_node(inner)
                    text = "." + text[len(module.code_for_node(inner.func.value)) + 1 :]
                else:
                    target = move.expression
                    if (
                        isinstance(target, cst.Attribute) and target.attr.value == "device"
                    ) or not isinstance(
                        target, (cst.Name, cst.Attribute, cst.SimpleString, cst.Call)
                    ):
                        continue
                    text = module.code_for_node(target)
                if text not in found:
                    found.append(text)
        return found

    # -- names that hold a device -------------------------------------------------------------

    def device_valued(self, value: cst.BaseExpression) -> bool:
        """`torch.device(...)`, `select_device()`, a device string, or a conditional of them."""
        if isinstance(value, cst.IfExp):
            return self.device_valued(value.body) and self.device_valued(value.orelse)
        if string_device(value) is not None:
            return True
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value == SELECT_DEVICE:
                return True
            if isinstance(value.func, (cst.Name, cst.Attribute)) and (
                (
                    value.func.attr.value
                    if isinstance(value.func, cst.Attribute)
                    else value.func.value
                )
                == "device"
            ):
                return self.names.qualified_name(value.func) == "torch.device"
        return False

    def _device_assignments(self, scope: cst.CSTNode) -> Iterator[tuple[cst.Assign, str]]:
        for node in self.scopes.statements(scope):
            if (
                isinstance(node, cst.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)
                and self.device_valued(node.value)
            ):
                yield node, node.targets[0].target.value

    def device_names(self, node: cst.CSTNode) -> list[str]:
        """Names holding a device that `node` can read: bound earlier in its own function, or
        at module level (earlier, or anywhere when `node` is in a function that does not rebind
        it)."""
        scope = self.scopes.enclosing_scope(node)
        line = self.scopes.line_of(node)
        found: list[str] = []
        local_bound: set[str] = set()
        if not isinstance(scope, cst.Module):
            for inner in self.scopes.statements(scope):
                if isinstance(inner, cst.AssignTarget):
                    local_bound |= self.scopes.names_bound(inner)
            if isinstance(scope, cst.FunctionDef):
                local_bound |= {p.name.value for p in all_params(scope.params)}
            for assign, name in self._device_assignments(scope):
                if self.scopes.line_of(assign) < line and name not in found:
                    found.append(name)
        for assign, name in self._device_assignments(self.context.module):
            if name in found or name in local_bound:
                continue
            if isinstance(scope, cst.Module) and self.scopes.line_of(assign) >= line:
                continue
            found.append(name)
        return found

    def _bindings(self, name: str, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """Values of `name = value` in `node`'s function and at module level."""
        scopes = [self.scopes.enclosing_scope(node)]
        if scopes[0] is not self.context.module:
            scopes.append(self.context.module)
        return [value for scope in scopes for value in self.scopes.simple_assignments(scope, name)]

    def is_process_device(self, name: str, node: cst.CSTNode) -> bool:
        """`name` is bound from the process's rank or from the portable device helper."""
        for value in self._bindings(name, node):
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
                and value.func.value == SELECT_DEVICE
            ):
                return True
            code = self.context.module.code_for_node(value)
            if isinstance(value, (cst.Call, cst.IfExp)) and "rank" in code.lower():
                return True
        return False

    def is_computed_device(self, name: str, node: cst.CSTNode) -> bool:
        """`name` holds a `torch.device` the script computes (not a fixed string)."""
        values = self._bindings(name, node)
        return bool(values) and all(isinstance(v, (cst.Call, cst.IfExp)) for v in values)

    def device_map_kind(self, value: cst.BaseExpression, node: cst.CSTNode) -> str | None:
        """A `from_pretrained(device_map=...)` value: "spread" (a Big Model Inference strategy),
        "fixed" (a single literal device), else None (computed: not ours to judge)."""
        if isinstance(value, cst.Name):
            bound = self.scopes.latest_binding(value.value, node)
            return None if bound is None else self.device_map_kind(bound, node)
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if text in SPREADING_DEVICE_MAPS:
                return "spread"
            device = string_device(value)
            if device is not None and device.startswith("cuda"):
                return "fixed"
            return None
        if isinstance(value, cst.Integer):
            return "fixed"
        if isinstance(value, cst.Dict) and len(value.elements) == 1:
            element = value.elements[0]
            if (
                isinstance(element, cst.DictElement)
                and isinstance(element.key, cst.SimpleString)
                and element.key.evaluated_value == ""
                and (
                    isinstance(element.value, cst.Integer)
                    or (
                        isinstance(element.value, cst.SimpleString)
                        and (string_device(element.value) or "").startswith("cuda")
                    )
                )
            ):
                return "fixed"
        return None

    def casts_besides_moving(self, move: cst.Call) -> str | None:
        """Why a module's `.to(...)` is more than a device move (a dtype cast, or an argument
        that may be a dtype or a tensor), or None."""
        assert isinstance(move.func, cst.Attribute)
        if move.func.attr.value == "cuda":
            return None
        positional = [a for a in move.args if a.keyword is None]
        keywords = {a.keyword.value for a in move.args if a.keyword is not None}
        if keywords - {"device", "non_blocking"} or len(positional) > 1:
            return "it also casts the submodule's dtype"
        if positional:
            if keywords & {"device"}:
                return "it also casts the submodule's dtype"
            value = positional[0].value
            if not self.is_device_expression(value):
                return f"`{code_of(value)}` may be a dtype or a tensor (a cast), not only a device"
        elif "device" not in keywords:
            return "it names no device"
        return None

    def only_casts(self, move: cst.Call) -> bool:
        """`.to(torch.float16)` / `.to(dtype=...)`: no device is named."""
        assert isinstance(move.func, cst.Attribute)
        if move.func.attr.value != "to":
            return False
        positional = [a for a in move.args if a.keyword is None]
        keywords = {a.keyword.value for a in move.args if a.keyword is not None}
        if "device" in keywords:
            return False
        if not positional:
            return "dtype" in keywords
        first = positional[0].value
        return dotted_name(first) is not None and self.names.is_dtype(first)

    def is_device_expression(self, node: cst.BaseExpression) -> bool:
        """A literal device, `torch.device(...)`, or a name that says it holds a device."""
        if isinstance(node, (cst.SimpleString, cst.Integer)):
            return True
        if isinstance(node, cst.Call):
            return self.names.qualified_name(node.func) == "torch.device"
        dotted = dotted_name(node)
        if dotted is None:
            return False
        if self.names.is_dtype(node):
            return False
        last = dotted.rsplit(".", 1)[-1].lower()
        return "device" in last or last in ("dev", "gpu", "rank", "local_rank")

    def compared_as_string(self, name: str) -> bool:
        """The script compares `name` as a string (`device == "cuda"`, `device.startswith(...)`):
        a `torch.device` in its place would change the comparison."""
        for inner in self.context.subtree(self.context.module):
            if isinstance(inner, cst.Comparison):
                parts = [inner.left, *(target.comparator for target in inner.comparisons)]
                if any(isinstance(p, cst.Name) and p.value == name for p in parts):
                    return True
            if (
                isinstance(inner, cst.Attribute)
                and isinstance(inner.value, cst.Name)
                and inner.value.value == name
                and inner.attr.value
                in ("startswith", "endswith", "split", "replace", "upper", "lower", "format")
            ):
                return True
        return False

    def compared_with_none(self, code: str) -> bool:
        """The file treats the value written `code` as possibly None: compares it (or, for
        `self.x`, any `.x` or a name `x`) with None, or passes `x=None`."""
        tail = code.rsplit(".", 1)[-1]
        spellings = {code, tail} if code.startswith("self.") else {code}

        def spelled(node: cst.CSTNode) -> bool:
            if code_of(node) in spellings:
                return True
            return (
                code.startswith("self.")
                and isinstance(node, cst.Attribute)
                and node.attr.value == tail
            )

        for inner in self.context.subtree(self.context.module):
            if isinstance(inner, cst.Comparison):
                parts = [inner.left, *(target.comparator for target in inner.comparisons)]
                if any(_is_none(p) for p in parts) and any(spelled(p) for p in parts):
                    return True
            elif (
                isinstance(inner, cst.Arg)
                and inner.keyword is not None
                and inner.keyword.value == tail
                and _is_none(inner.value)
            ):
                return True
        return False

    def explicit_gpu_indices(self) -> set[int]:
        """GPU indices the script names: `"cuda:1"`, `.cuda(0)`, `torch.device("cuda", 2)`."""
        cached = self.context.shared.get("moves.gpu_indices")
        if isinstance(cached, set):
            return cached
        indices: set[int] = set()
        for inner in self.context.subtree(self.context.module):
            if isinstance(inner, cst.SimpleString):
                value = string_device(inner)
                if value is not None and value.startswith("cuda:") and value[5:].isdigit():
                    indices.add(int(value[5:]))
            elif isinstance(inner, cst.Call) and call_tail(inner.func) in ("cuda", "device"):
                for arg in inner.args:
                    if isinstance(arg.value, cst.Integer) and (
                        arg.keyword is None or arg.keyword.value in ("device", "index")
                    ):
                        indices.add(int(arg.value.value))
        self.context.shared["moves.gpu_indices"] = indices
        return indices

    def visible_at(self, expression: str, at: cst.CSTNode) -> bool:
        """Every name `expression` reads is bound where `at` can read it."""
        try:
            parsed = cst.parse_expression(expression)
        except cst.ParserSyntaxError:
            return False
        roots = {
            node.value
            for node in free_names(parsed)
            if node.value not in ("torch", "True", "False", "None")
        }
        if "self" in roots:
            roots.discard("self")
            if self.scopes.enclosing_function(at) is None:
                return False
        torch_visible = "torch" not in code_of(parsed) or self.names.torch_alias() == "torch"
        return torch_visible and all(self.scopes.visible_name(root, at) for root in roots)


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def gpu_index(node: cst.BaseExpression) -> int | None:
    """The GPU a literal names: `"cuda:1"` -> 1, `torch.device("cuda", 2)` -> 2, `.cuda(1)`'s
    `1`; None for a bare `"cuda"` or anything else."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.Call):
        if len(node.args) > 1 and isinstance(node.args[1].value, cst.Integer):
            return int(node.args[1].value.value)
        node = node.args[0].value if node.args else node
    value = string_device(node)
    if value is not None and value.startswith("cuda:") and value[5:].isdigit():
        return int(value[5:])
    return None


def free_names(node: cst.CSTNode) -> Iterator[cst.Name]:
    """Names an expression reads (attribute names and keywords are not)."""
    if isinstance(node, cst.Name):
        yield node
        return
    if isinstance(node, cst.Attribute):
        yield from free_names(node.value)
        return
    if isinstance(node, cst.Arg):
        yield from free_names(node.value)
        return
    for child in node.children:
        yield from free_names(child)
