"""The script's device: the CUDA device a training script hard-codes, the variable that holds
its device, and where such a choice is the script's own (not model code, not a data pipeline).

Literal shapes (`torch.device("cuda", 1)`, `f"cuda:{gpu}"`) are read here; the names that hold
a device come from `moves`, the program's shape (trains, several GPUs, a notebook) from `flow`.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.calls import MOVES
from devfix.codemods.analysis.modules import names_a_device
from devfix.codemods.analysis.moves import cuda_string, free_names, gpu_index, string_device
from devfix.codemods.analysis.names import argument_of, call_tail, dotted_name

#: Module-level calls a library module makes as well as a script (not work of its own).
_SETUP_MODULES = frozenset({"logging", "typing", "collections", "warnings", "os", "re", "sys"})
_SETUP_CALLS = frozenset(
    {"getLogger", "get_logger", "TypeVar", "namedtuple", "NamedTuple", "compile", "register"}
)


#: Checks that a device selection falls back on: what a device variable set by them may be.
_AVAILABILITY_CHECKS = frozenset({"torch.accelerator.is_available", "torch.cuda.is_available"})


class ScriptDevice(Analysis):
    """Where a script picks its device, and the variable it keeps it in."""

    def gpu_default(self, helper: cst.FunctionDef) -> tuple[str, int, cst.BaseExpression] | None:
        """(name, position, default) of a parameter of `helper` that defaults to a literal GPU
        (`device=torch.device("cuda:0")`, `device="cuda"`) and that `helper` moves values to
        (`batch[key].to(device)`): calls that leave it out send their data to that GPU."""
        positional = [*helper.params.posonly_params, *helper.params.params]
        for param in (*positional, *helper.params.kwonly_params):
            default = param.default
            if default is None or not (
                cuda_string(default)
                or (isinstance(default, cst.Call) and literal_cuda_device(default))
            ):
                continue
            name = param.name.value
            if any(
                call_tail(call.func) == "to"
                and (target := argument_of(call, "device")) is not None
                and dotted_name(target.value) == name
                for call in self.context.of_type(helper.body, cst.Call)
            ):
                index = positional.index(param) if param in positional else len(positional)
                return name, index, default
        return None

    def in_script_code(self, node: cst.CSTNode, *, any_program: bool = False) -> bool:
        """`node` is the script's own code in a program that trains or uses several GPUs (with
        `any_program`, in any program or notebook): not model code (a module's methods, a
        function of tensors), not a Dataset's method or a data pipeline."""
        flow = self.facts.flow
        if not any_program and (
            flow.is_notebook() or not (flow.runs_on_several_gpus() or flow.trains())
        ):
            return False
        code = self.facts.modules
        function = code.enclosing_function(node)
        if function is not None and function.is_model_code:
            return False
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = code.function_info(ancestor)
                if info.owner is not None and (info.owner.is_module or info.owner.is_dataset):
                    return False
            if isinstance(ancestor, cst.ClassDef) and code.class_info(ancestor).is_module:
                return False
        return not flow.in_data_pipeline(node)

    def ignored_device_parameter(self, node: cst.CSTNode) -> str | None:
        """`def infer(model, prompt, device):` that never reads `device` but moves to a CUDA
        literal at `node`: the parameter its callers name the device with."""
        info = self.facts.modules.enclosing_function(node)
        if info is None or info.is_model_code:
            return None  # model code is DF102's
        function = info.node
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if not names_a_device(name):
                continue
            read = any(found.value == name for found in free_names(function.body))
            return None if read else name
        return None

    def assignment_of(self, value: cst.CSTNode) -> cst.Assign | None:
        """`name = <value>`: the assignment of `value` to a single plain name."""
        parent = self.context.parent(value)
        if self.scopes.assigned_name(value) is None or not isinstance(parent, cst.Assign):
            return None
        return parent

    def variable(self, node: cst.CSTNode) -> str | None:
        """A name in scope at `node` holding the script's device: a `torch.device(...)` or
        helper call (not one naming the CPU or MPS), a conditional that may pick CUDA, or a
        CUDA string in a `dev...` name that is not compared as a string (a hard-coded device
        that a fix turns into `select_device()`). Not the name `node` itself is assigned to."""
        own = self.scopes.assigned_name(node)
        for name in self.facts.moves.device_names(node):
            if name == own:
                continue
            value = self.scopes.latest_binding(name, node)
            if value is None:
                values = self.scopes.simple_assignments(self.context.module, name)
                value = values[0] if values else None
            if value is None:
                continue
            if isinstance(value, cst.Call) and not _names_other_device(value):
                return name
            if isinstance(value, cst.IfExp) and any(
                cuda_string(n)
                for n in self.context.subtree(value)
                if isinstance(n, cst.SimpleString)
            ):
                return name
            if (
                isinstance(value, cst.IfExp)
                and isinstance(value.test, cst.Call)
                and self.names.qualified_name(value.test.func) in _AVAILABILITY_CHECKS
            ):
                return name  # `... if torch.accelerator.is_available() else "cpu"`
            if (
                cuda_string(value)
                and "dev" in name.lower()
                and not self.facts.moves.compared_as_string(name)
            ):
                return name
        return None

    def chosen_by_hand(self, assign: cst.Assign | None) -> str | None:
        """Why the script's hard-coded CUDA device is its own choice, which a portable device
        would undo (said as the reason of a finding): it places work on several GPUs, or the
        device string it assigns (`assign`) is compared as a string."""
        indices = self.gpus_used()
        if len(indices) > 1:
            shown = ", ".join(f"cuda:{i}" for i in sorted(indices))
            return (
                f"the script places work on several GPUs on purpose ({shown}); choose its "
                "devices by hand"
            )
        if assign is not None and cuda_string(assign.value):
            name = assign.targets[0].target
            assert isinstance(name, cst.Name)
            if self.facts.moves.compared_as_string(name.value):
                return f"`{name.value}` is compared as a string; a `torch.device` would not match"
        return None

    def gpus_used(self) -> set[int]:
        """GPU indices the file places work on: those it names (`"cuda:1"`, `.cuda(0)`), and
        0 for a bare `"cuda"` / `.cuda()` (the current device, GPU 0 unless the file calls
        `torch.cuda.set_device`)."""
        used = set(self.facts.moves.explicit_gpu_indices())
        if used and not self.facts.flow.sets_current_device() and self._uses_bare_cuda():
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
                    and value.func.attr.value in MOVES
                    and len(value.args) == 1
                    and isinstance(value.args[0].value, cst.Name)
                    and value.args[0].value.value in sources
                ):
                    found.add(attr.split(".", 1)[1])
        return found.pop() if len(found) == 1 else None

    def runs_only_on_rank(self, node: cst.CSTNode, index: int) -> bool:
        """`node` runs only in the process of rank `index` of a script that gives each process
        its GPU (`torch.cuda.set_device(rank)`): under `if rank == index:`, or in a function
        every call of which is. Its literal `cuda:<index>` is that process's own GPU."""
        ranks = self._rank_names
        return bool(ranks) and self._under_rank_test(node, ranks, index, 0)

    @functools.cached_property
    def _rank_names(self) -> set[str]:
        """What the script gives to `torch.cuda.set_device(...)`: the names of its rank."""
        if "set_device" not in self.context.text:
            return set()
        return {
            name
            for call in self.context.of_type(self.context.module, cst.Call)
            if self.names.qualified_name(call.func) == "torch.cuda.set_device"
            and call.args
            and (name := dotted_name(call.args[0].value)) is not None
        }

    def _under_rank_test(self, node: cst.CSTNode, ranks: set[str], index: int, depth: int) -> bool:
        current = node
        for ancestor in self.context.ancestors(node):
            if (
                isinstance(ancestor, cst.If)
                and current is ancestor.body
                and _tests_rank(ancestor.test, ranks, index)
            ):
                return True
            if isinstance(ancestor, cst.FunctionDef):
                sites = self.facts.flow.call_sites(ancestor)
                return (
                    depth < 3
                    and bool(sites)
                    and all(
                        self._under_rank_test(call, ranks, index, depth + 1) for call, _ in sites
                    )
                )
            current = ancestor
        return False

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

    def fallback_variable(self, node: cst.CSTNode) -> Fallback | None:
        """A name `node` can read that holds the script's own selection falling back to the CPU:
        `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, `"cpu" if
        args.cpu else "cuda"`, or such values assigned in the branches of an `if`."""
        scope = self.scopes.enclosing_scope(node)
        for name in self.facts.moves.device_names(node):
            values = self.scopes.simple_assignments(scope, name) or (
                self.scopes.simple_assignments(self.context.module, name)
            )
            branches = [branch for value in values for branch in _selected(value)]
            kinds = [self.facts.moves.device_kind(branch, None) for branch in branches]
            if "cpu" not in kinds or "accelerator" not in kinds:
                continue
            gpus = {gpu_index(b) for b, kind in zip(branches, kinds) if kind == "accelerator"}
            tests = [test for value in values for test in self._selection_tests(value)]
            switches = {path for test in tests for path in self.scopes.read_paths(test)}
            return Fallback(name, frozenset(gpus), frozenset(switches))
        return None

    def _selection_tests(self, value: cst.BaseExpression) -> list[cst.BaseExpression]:
        tests = [n.test for n in self.context.subtree(value) if isinstance(n, cst.IfExp)]
        return tests + self.scopes.conditions(value)

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


class Fallback(NamedTuple):
    """A device variable whose selection falls back to the CPU."""

    name: str
    #: The GPUs it may name: an index, None for the bare current GPU (`"cuda"`).
    gpus: frozenset[int | None]
    #: What its selection tests (`args.cpu`, `use_gpu`).
    switches: frozenset[str]


def _selected(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The devices a selection may give: each branch of a conditional, also inside
    `torch.device(...)` of one argument."""
    if isinstance(value, cst.IfExp):
        return [*_selected(value.body), *_selected(value.orelse)]
    if isinstance(value, cst.Call) and call_tail(value.func) == "device" and len(value.args) == 1:
        inner = value.args[0].value
        return _selected(inner) if isinstance(inner, cst.IfExp) else [value]
    return [value]


def literal_cuda_device(call: cst.Call) -> bool:
    """The arguments of `torch.device("cuda:0")`, `torch.device("cuda")`,
    `torch.device("cuda", 1)`: a literal CUDA device."""
    if not call.args or any(arg.star for arg in call.args):
        return False
    first = call.args[0]
    if first.keyword is not None and first.keyword.value != "type":
        return False
    if not cuda_string(first.value):
        return False
    return all(isinstance(arg.value, cst.Integer) for arg in call.args[1:])


def cuda_fstring(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`f"cuda:{expr}"` (or `"cuda:{}".format(expr)`) -> `expr`."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
        and isinstance(node.func.value, cst.SimpleString)
        and node.func.value.evaluated_value == "cuda:{}"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return node.args[0].value
    if not isinstance(node, cst.FormattedString) or len(node.parts) != 2:
        return None
    text, expression = node.parts
    if (
        isinstance(text, cst.FormattedStringText)
        and text.value == "cuda:"
        and isinstance(expression, cst.FormattedStringExpression)
        and expression.format_spec is None
        and expression.conversion is None
    ):
        return expression.expression
    return None


def _names_other_device(call: cst.Call) -> bool:
    """`torch.device("cpu")`, `torch.device("mps")`: not the script's accelerator."""
    first = call.args[0].value if call.args else None
    value = string_device(first) if first is not None else None
    return value is not None and not value.startswith("cuda")


def _tests_rank(test: cst.BaseExpression, ranks: set[str], index: int) -> bool:
    """`rank == 0` (either side) for one of `ranks`."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    (comparison,) = test.comparisons
    if not isinstance(comparison.operator, cst.Equal):
        return False
    sides = (test.left, comparison.comparator)
    return any(dotted_name(side) in ranks for side in sides) and any(
        isinstance(side, cst.Integer) and int(side.value) == index for side in sides
    )


def release_at_least(version: str, minimum: tuple[int, int]) -> bool:
    """`"2.6.0+cpu"` is at least (2, 6); an empty or unreadable version is not."""
    found = re.match(r"\s*(\d+)\.(\d+)", version)
    return found is not None and (int(found.group(1)), int(found.group(2))) >= minimum
