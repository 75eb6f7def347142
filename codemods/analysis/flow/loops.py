"""DataLoader and batch-loop plans: which DataLoaders a loop iterates (through helpers,
attributes and `next(iter(loader))`), which batch names reach a model on a device unmoved,
and the statement that moves them, or why none can be written.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import libcst as cst

from devfix.codemods.analysis.flow.calls import MOVES, is_move_call, is_name, method_of
from devfix.codemods.analysis.flow.placement import ModelDevice, ModelPlacement
from devfix.codemods.analysis.moves import DeviceMove, copies_to_host
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
    receiver_root,
)
from devfix.codemods.analysis.scopes import Binding, ScopeTable
from devfix.codemods.analysis.torch_names import (
    CPU_BATCH_MAKERS,
    DATALOADERS,
    ITERATION_WRAPPERS,
    LIGHTNING_MODULES,
    TENSOR_DATASETS,
)
from devfix.context import FileContext
from devfix.types import Edit

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


INSPECTING_CALLS = frozenset({"print", "len", "isinstance", "type", "str", "repr", "id", "range"})
_INSPECTING_BUILTINS = frozenset({"len", "print", "isinstance", "type", "str", "repr", "id"})


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


#: Libraries whose iterables devfix knows: torch's and NumPy's own, and the trainers and
#: launchers that place batches themselves (`accelerator.prepare`, Lightning, `Trainer`).
_YIELDS_KNOWN = (
    "torch.",
    "numpy.",
    "builtins.",
    "accelerate.",
    "lightning.",
    "pytorch_lightning.",
    "transformers.",
    "ignite.",
)


def tensor_roots(expr: cst.BaseExpression) -> set[str]:
    """Names whose tensor `expr` is, unmoved: `x`, `batch[0]`, `x.float().view(-1)`, `x * 2`;
    nothing for `x.to(d)` or for values passed through other calls (`tokenizer(texts)`)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, (cst.Subscript, cst.Attribute)):
        return tensor_roots(expr.value)
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value not in MOVES:
            return tensor_roots(expr.func.value)
        return set()
    if isinstance(expr, cst.BinaryOperation):
        return tensor_roots(expr.left) | tensor_roots(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return tensor_roots(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return {r for e in expr.elements for r in tensor_roots(e.value)}
    return set()


def _string_literal(text: str) -> str:
    """`text` as a string literal in double quotes where it can be (as black writes them)."""
    return f'"{text}"' if text.isprintable() and not set(text) & {'"', "\\"} else repr(text)


def string_key(expr: cst.BaseExpression, name: str) -> str | None:
    """`batch["lengths"]` (or `batch["lengths"].long()`) -> "lengths", for the dict `name`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value
    if not (isinstance(expr, cst.Subscript) and is_name(expr.value, name)):
        return None
    index = expr.slice[0].slice if len(expr.slice) == 1 else None
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        value = index.value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _unpacking(statement: cst.BaseStatement, name: str) -> list[str] | None:
    """`x, y = batch` as the first statement of the loop: the names it binds."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not is_name(assign.value, name) or not isinstance(target, (cst.Tuple, cst.List)):
        return None
    if not all(
        isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements
    ):
        return None
    return [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]


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
        if is_name(element.value, name):
            return index
    return None


#: Methods whose result a loop walks key by key or tensor by tensor: a dict's views and a
#: module's own parameters, buffers and submodules.
COLLECTION_WALKS = frozenset(
    {
        "items", "keys", "values", "named_parameters", "parameters", "named_buffers",
        "buffers", "named_modules", "modules", "named_children", "children",
    }
)  # fmt: skip


def _names_an_iterator(func: cst.BaseExpression) -> bool:
    """A project's own progress-bar or iterator wrapper (`_build_tqdm_iterator(loader)`,
    `make_iter(loader)`), named as one: it yields what its first argument yields."""
    tail = (call_tail(func) or "").lower()
    return (
        isinstance(func, (cst.Name, cst.Attribute))
        and any(word in tail for word in ("tqdm", "iter", "progress"))
        and tail not in ("iter", "next")
    )


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


def _to_host(value: cst.BaseExpression) -> bool:
    """`labels.data.cpu().numpy()`, `x.tolist()`, `t.to("cpu")`: a value brought to the host
    (for NumPy, logging, metrics) is no move to the model's device."""
    return copies_to_host(value) or (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("numpy", "tolist", "item")
    )


class BatchLoops(ModelPlacement):
    """The DataLoader calls a loop iterates, and the plan that moves its batch."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._plans: dict[int, LoopPlan | None] = {}

    def dataloader_calls(
        self, expr: cst.BaseExpression, function: cst.FunctionDef | None, depth: int = 0
    ) -> list[cst.Call]:
        """The `DataLoader(...)` calls an iterable comes from; [] if anything else may feed it."""
        if depth > 6:
            return []
        if isinstance(expr, cst.IfExp):
            # `None if val is None else DataLoader(...)`: a `None` is never iterated.
            branches = [b for b in (expr.body, expr.orelse) if not is_name(b, "None")]
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
            if self._passes_itself_through(binding, name):
                continue  # `loader = tqdm(loader)`: what the other bindings give it
            calls = self._bound_loaders(binding, name, table, table_function, depth)
            if not calls:
                return []
            found.extend(calls)
        return found

    def _passes_itself_through(self, binding: Binding, name: str) -> bool:
        """`loader = tqdm(loader)`: a progress bar (or `enumerate`) around the name itself."""
        value = binding.value
        return (
            binding.kind == "assign"
            and isinstance(value, cst.Call)
            and bool(value.args)
            and value.args[0].keyword is None
            and dotted_name(value.args[0].value) == name
            and (
                self.names.qualified_name(value.func) in ITERATION_WRAPPERS
                or _names_an_iterator(value.func)
            )
        )

    def _bound_loaders(
        self,
        binding: Binding,
        name: str,
        table: ScopeTable,
        table_function: cst.FunctionDef | None,
        depth: int,
    ) -> list[cst.Call]:
        """The DataLoaders one binding of `name` gives it; [] if it may give anything else."""
        if binding.kind == "param" and isinstance(table.node, cst.FunctionDef):
            return self._passed_loaders(table.node, name, depth)
        if binding.kind == "unpack" and isinstance(binding.value, cst.Call):
            # `train_loader, test_loader = load_data()`: that element of what it returns.
            index = _unpacked_index(self.context, binding.value, name)
            return self._returned_loaders(binding.value, index, depth) if index is not None else []
        if binding.kind != "assign" or binding.value is None:
            return []
        return self.dataloader_calls(binding.value, table_function, depth + 1)

    def _passed_loaders(self, function: cst.FunctionDef, name: str, depth: int) -> list[cst.Call]:
        """The DataLoaders the callers of `function` pass as its parameter `name`; [] when a
        caller passes anything else, or nothing calls it."""
        sites = self.call_sites(function)
        if not sites:
            return []
        found: list[cst.Call] = []
        for call, caller in sites:
            argument = self.argument_for(call, function, name)
            if argument is None:
                return []
            calls = self.dataloader_calls(argument, caller, depth + 1)
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
        # A loop over something not known to be a DataLoader counts only by its own moves,
        # unless what it iterates comes from a library the file only calls: there is nothing to
        # read, and a move of a batch already on the device is the same tensor.
        outside = (
            not loaders
            and not self._typed_loader(loop.iter, function)
            and self._from_outside(loop.iter, function)
        )
        untyped = not loaders and not outside and not self._typed_loader(loop.iter, function)
        if untyped and self._iterates_a_collection(loop.iter):
            return None  # `for name, param in pending.items()`: keys and values, no batches
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
        model_calls = [] if untyped else self._fed_models(calls, names, loaders, function)
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
        plan.unmoved = [
            n
            for n in names
            if n in bound
            and not self._is_moved(loop.body, n)
            # What a library yields may move in place (PyG's `batch.to(device)`); a tensor's
            # discarded move is DF206's.
            and not (outside and self._moved_in_place(loop.body, n))
        ]
        self._keep_on_cpu(plan, loop.body, fed, single)
        if one_line and not plan.reason:
            plan.reason = "the loop body is on the `for` line"
        if not plan.unmoved or plan.reason or (plan.move is None and not plan.helper):
            return plan
        anchor = body[0]
        new_line = self._move_line(loop.body, plan, single)
        if new_line is None:
            return plan
        group = [anchor, *new_line] if after_anchor else [*new_line, anchor]
        plan.edit = Edit(anchor, cst.FlattenSentinel(group))
        return plan

    def _keep_on_cpu(
        self, plan: LoopPlan, body: cst.CSTNode, fed: list[cst.Call], single: str | None
    ) -> None:
        """Leave out of `plan` the batch names (or, for a dict batch `single`, the keys) whose
        values reach an argument that must stay on the CPU (`pack_padded_sequence` lengths)."""
        for use in self.facts.cpu_only.uses(body, fed):
            if single is not None:
                key = string_key(use.expr, single)
                if key is not None and key not in plan.cpu_keys:
                    plan.cpu_keys[key] = use.reason
                    continue
            for name in tensor_roots(use.expr) & set(plan.unmoved):
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
        fed_inline: list[cst.Call] = []
        for node in self._scope_nodes(body):
            inline = self._moved_inline(node, names)
            if inline is not None:
                # `self.model(data.to(self.device))`: moved where it is handed to the model.
                name, moved, call = inline
                move = self.device_move(moved, function)
                if move is None or move.conditional_line:
                    return None
                moves[name] = move
                fed_inline.append(call)
                continue
            if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
                continue
            target, value = node.targets[0].target, node.value
            if (
                isinstance(target, cst.Name)
                and target.value in names
                and is_move_call(value)
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and is_name(value.func.value, target.value)
            ):
                move = self.device_move(value, function)
                if move is None or move.conditional_line:
                    return None
                moves[target.value] = move
        if not moves or len({move.code for move in moves.values()}) != 1:
            return None
        move = next(iter(moves.values()))
        if fed_inline:
            return fed_inline, code_of(fed_inline[0].func), move, ""
        for call in calls:
            model = dotted_name(call.func)
            if model is None or model.split(".", 1)[0] in names:
                continue
            if (self.names.qualified_name(call.func) or "").startswith(("torch.", "builtins.")):
                continue
            if any(tensor_roots(arg.value) & set(moves) for arg in call.args):
                return [call], model, move, ""
        return None

    def _moved_inline(
        self, node: cst.CSTNode, names: list[str]
    ) -> tuple[str, cst.Call, cst.Call] | None:
        """`model(x.to(device))`: the batch name moved, the move, and the call it is handed to
        (a call of a dotted name that is no batch name and not torch's); None otherwise."""
        if not (
            isinstance(node, cst.Call)
            and is_move_call(node)
            and isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value in names
        ):
            return None
        arg = self.context.parent(node)
        call = self.context.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return None
        model = dotted_name(call.func)
        if model is None or model.split(".", 1)[0] in names:
            return None
        if (self.names.qualified_name(call.func) or "").startswith(("torch.", "builtins.")):
            return None
        return node.func.value.value, node, call

    def _batch_target(self, loop: cst.For) -> cst.BaseExpression | None:
        """What a loop binds each batch to: its target, or the second of `for i, batch in
        enumerate(...)`; None when an `enumerate` loop does not unpack a pair."""
        target = loop.target
        if self._enumerates(loop.iter, loop):
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                return None
            return target.elements[1].value
        return target

    def _enumerates(self, iterable: cst.BaseExpression, loop: cst.For) -> bool:
        """`enumerate(loader)`, also inside a progress bar or through a name bound to one
        (`pbar = tqdm(enumerate(loader))`, then `for i, batch in pbar`)."""
        expr: cst.BaseExpression | None = iterable
        for _ in range(4):
            if isinstance(expr, cst.Name):
                bound = self.scopes.binding_before(expr.value, loop)
                expr = bound[1] if bound is not None and bound[0] == "assign" else None
            if not isinstance(expr, cst.Call):
                return False
            qualified = self.names.qualified_name(expr.func)
            if qualified in ("enumerate", "builtins.enumerate"):
                return True
            if not (qualified in ITERATION_WRAPPERS or _names_an_iterator(expr.func)):
                return False
            if not expr.args or expr.args[0].keyword is not None:
                return False
            expr = expr.args[0].value
        return False

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

    def _fed_models(
        self,
        calls: list[cst.Call],
        names: list[str],
        loaders: list[cst.Call],
        function: cst.FunctionDef | None,
    ) -> list[tuple[cst.Call, ModelDevice]]:
        """The model calls the loop's batch may reach whose device is known or explained; a
        model the function is handed counts where the function builds its DataLoaders."""
        found = [
            (call, model)
            for call, model in self._model_calls(calls, names)
            if model.move is not None or model.reason
        ]
        if (
            not found
            and loaders
            and all(self.scopes.enclosing_function(loader) is function for loader in loaders)
        ):
            found = list(self._handed_model_calls(calls, names))
        return found

    def _handed_model_calls(
        self, calls: list[cst.Call], batch_names: list[str]
    ) -> Iterator[tuple[cst.Call, ModelDevice]]:
        """Calls of a model the function is handed by a caller outside the file, given the
        batch (`model(**batch)`, `model(x)`), where the function builds the DataLoader itself."""
        for call in calls:
            handed = not isinstance(self.context.parent(call), cst.Expr) and any(
                receiver_root(arg.value) in batch_names for arg in call.args
            )  # a model's output is used: `step(batch)` alone is a callback
            found = self.handed_model(call.func, call) if handed else None
            if found is not None:
                yield call, found

    def _move_line(
        self, body: cst.BaseSuite, plan: LoopPlan, single: str | None
    ) -> list[cst.BaseStatement] | None:
        """The statements that move `plan.unmoved` (their code kept in
        `plan.statement_code`); None, with the reason in `plan`, when the batch's shape cannot
        be told."""
        statement = self._move_statement(body, plan, single)
        if statement is None:
            plan.reason = f"cannot tell whether `{single}` is a tensor, a sequence or a dict"
            return None
        plan.statement_code = statement.replace("\n", "; ")
        config = self.context.module.config_for_parsing
        return [cst.parse_statement(line + "\n", config=config) for line in statement.split("\n")]

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
        dicts: list[str] = []
        for name in plan.unmoved:
            uses = self._batch_uses(body, name)
            if uses is not None and "dict" in uses:
                # `inputs, labels = data` with `model(**inputs)`: a dict (or an encoding) of
                # tensors, moved value by value on a line of its own (a dict has no `.to()`).
                single_move = self._single_move(body, name, plan.move)
                if single_move is None:
                    return None
                dicts.append(single_move)
        rest = [name for name in plan.unmoved if not any(d.startswith(f"{name} = ") for d in dicts)]
        if not rest:
            return "\n".join(dicts)
        moved = ", ".join(code_of(plan.move.apply(cst.Name(n))) for n in rest)
        return "\n".join([*dicts, f"{', '.join(rest)} = {moved}"])

    def hand_drawn_lightning_batch(
        self, assign: cst.Assign
    ) -> tuple[str, cst.SimpleStatementLine] | None:
        """`batch = next(iter(self.trainer.val_dataloaders))` in a method of a LightningModule
        (a hook such as `on_train_start`), then `self.compute_metrics(batch, 0)`: the trainer
        moves only the batches it hands its steps. The name, and the first statement of
        the method's body that hands it to the module (`self(...)`, `self.<method>(...)`)."""
        value = assign.value
        if not (
            len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(value, cst.Call)
            and self.names.qualified_name(value.func) == "builtins.next"
            and len(value.args) == 1
            and isinstance(value.args[0].value, cst.Call)
            and self.names.qualified_name(value.args[0].value.func) == "builtins.iter"
        ):
            return None
        name = assign.targets[0].target.value
        function = self.scopes.enclosing_function(assign)
        owner = self.scopes.class_of(function)
        if function is None or owner is None:
            return None
        bases = {q.name for base in owner.bases for q in self.context.qualified_names(base.value)}
        if not bases & LIGHTNING_MODULES:
            return None
        own = {m.name.value for m in owner.body.body if isinstance(m, cst.FunctionDef)}
        drawn_at = self.context.order(assign)[0]
        for statement in function.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            if self.context.order(statement)[1] <= drawn_at:
                continue  # before the draw: another value of the name
            for call in self.context.of_type(statement, cst.Call):
                receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
                handed = any(is_name(arg.value, name) for arg in call.args)
                if handed and (
                    is_name(call.func, "self")
                    or (
                        receiver is not None
                        and is_name(receiver, "self")
                        and call_tail(call.func) in own
                    )
                ):
                    return name, statement
                if handed or (receiver is not None and is_name(receiver, name)):
                    return None  # moved or handed on first: decided there
        return None

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
        plan.edit = Edit(line, cst.FlattenSentinel([line, *new_line]))
        return plan

    def _iterates_a_collection(self, expr: cst.BaseExpression) -> bool:
        """`pending.items()`, `model.named_parameters()`, `range(n)`: the loop walks a dict's
        keys and values, a module's own tensors or numbers, not batches a loader yields."""
        while (
            isinstance(expr, cst.Call)
            and expr.args
            and self.names.qualified_name(expr.func) in ITERATION_WRAPPERS
        ):
            expr = expr.args[0].value
        if not isinstance(expr, cst.Call):
            return False
        if isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in COLLECTION_WALKS
        return self.names.qualified_name(expr.func) in ("range", "builtins.range")

    def _from_outside(self, expr: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """`expr` (through `enumerate`/`tqdm`) is a name every binding of which is the result of
        a call of code the file does not hold (`train_loader, valid_loader =
        processer.data_processer()`, `loader = make_loader(cfg)` imported): not a parameter, a
        literal or a comprehension the file builds, nor a call of torch, NumPy or a builtin."""
        while (
            isinstance(expr, cst.Call)
            and expr.args
            and (
                self.names.qualified_name(expr.func) in ITERATION_WRAPPERS
                or _names_an_iterator(expr.func)
            )
        ):
            expr = expr.args[0].value
        if not isinstance(expr, cst.Name):
            return False
        table, _ = self.scopes.lookup(expr.value, function)
        bindings = table.bindings.get(expr.value, [])
        return bool(bindings) and all(
            b.kind in ("assign", "unpack")
            and isinstance(b.value, cst.Call)
            and self._calls_outside(b.value, function)
            for b in bindings
        )

    def _calls_outside(self, call: cst.Call, function: cst.FunctionDef | None) -> bool:
        """A call of code the file does not hold that is not handed a DataLoader or a device:
        a wrapper such as `accelerator.prepare(loader)` or `DeviceLoader(loader, device=d)`
        may move what it yields."""
        root = receiver_root(call.func)
        if root is None or root in ("self", "cls"):
            return False
        for arg in call.args:
            if (arg.keyword is not None and arg.keyword.value == "device") or (
                self.dataloader_calls(arg.value, function)
            ):
                return False
        if isinstance(call.func, cst.Name) and (
            call.func.value in self.scopes.module_functions()
            or call.func.value in self.scopes.module_classes()
            or hasattr(builtins, call.func.value)
        ):
            return False
        qualified = self.names.qualified_name(call.func) or ""
        return not qualified.startswith(_YIELDS_KNOWN)

    def _typed_loader(self, expr: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """`expr` is a parameter annotated as a DataLoader (`loader: DataLoader`), or an
        attribute `__init__` sets from one (`self.valid_dataloader = valid_dataloader`)."""
        for _ in range(4):
            if isinstance(expr, cst.Call) and self._serves_cpu_tensors(expr):
                return True
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
            bound = (
                self.scopes.binding_before(name, expr)
                if "." not in name and function is not None
                else None
            )
            # `batches = BatchIterator(data, 32)`, then `for x, y in batches`.
            if (
                bound is not None
                and bound[0] == "assign"
                and isinstance(bound[1], cst.Call)
                and self._serves_cpu_tensors(bound[1])
            ):
                return True
            if name.startswith("self.") and function is not None:
                owner = self.scopes.class_of(function)
                init = method_of(owner, "__init__") if owner is not None else None
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

    def _serves_cpu_tensors(self, call: cst.Call) -> bool:
        """`call` builds an iterator class of this file (it defines `__iter__` or `__next__`)
        that makes its batches with torch on the CPU and moves nothing: `torch.LongTensor(rows)`
        in `__next__`, with no `.to(...)`, `.cuda()` or `device=` anywhere in the class."""
        if not isinstance(call.func, cst.Name):
            return False
        classdef = self.scopes.module_classes().get(call.func.value)
        if classdef is None or not any(
            method_of(classdef, dunder) is not None for dunder in ("__iter__", "__next__")
        ):
            return False
        makes = False
        for inner in self.context.of_type(classdef.body, cst.Call):
            if is_move_call(inner) or keyword_argument(inner, "device") is not None:
                return False
            qualified = self.names.qualified_name(inner.func) or ""
            makes |= qualified in CPU_BATCH_MAKERS
        return makes

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
            if isinstance(first.func, cst.Attribute) and first.func.attr.value in MOVES:
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
                and is_name(first.args[0].value, cast(cst.Name, targets[0]).value)
            ):
                return moved, None, code_of(first.func)
        return None

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
            if arg.star or not is_move_call(value):
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
            if isinstance(node, cst.Assign) and is_move_call(node.value):
                for target in node.targets:
                    if isinstance(target.target, cst.Attribute) and is_name(
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
            if is_move_call(value) and isinstance(value, cst.Call):
                if self.device_move(value, function) is not None:
                    return True
                # `labels.to(torch.long)`: a dtype, not a device; where is `labels`?
                assert isinstance(value.func, cst.Attribute)
                return moved(value.func.value, at)
            if isinstance(value, cst.Attribute) and is_name(value.value, "self"):
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
        uses = self._batch_uses(body, name)
        if uses is None or len(uses) != 1 or (cpu_keys and "dict" not in uses):
            return None
        as_dict = "dict" in uses
        as_sequence = "sequence" in uses
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

    def _batch_uses(self, body: cst.CSTNode, name: str) -> set[str] | None:
        """How `body` uses `name`: as a "dict" (`**name`, `name["key"]`, `name.items()`), a
        "sequence" (`name[0]`) or a "tensor" (any other attribute, a slice, an argument); None
        when another index reads it (`name[i]`: a dict or a sequence)."""
        uses: set[str] = set()
        for node in self._scope_nodes(body):
            if isinstance(node, cst.Arg) and node.star == "**" and is_name(node.value, name):
                uses.add("dict")
            elif isinstance(node, cst.Subscript) and is_name(node.value, name):
                index = node.slice[0].slice if len(node.slice) == 1 else None
                if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                    uses.add("dict")
                elif isinstance(index, cst.Index) and isinstance(
                    index.value, (cst.Integer, cst.UnaryOperation)
                ):
                    uses.add("sequence")
                elif isinstance(index, cst.Index):
                    return None
                else:
                    uses.add("tensor")
            elif isinstance(node, cst.Attribute) and is_name(node.value, name):
                uses.add("dict" if node.attr.value in ("items", "keys", "values") else "tensor")
            elif isinstance(node, cst.Arg) and node.star == "" and is_name(node.value, name):
                call = self.context.parent(node)
                if not (
                    isinstance(call, cst.Call)
                    and isinstance(call.func, cst.Name)
                    and call.func.value in _INSPECTING_BUILTINS
                ):
                    uses.add("tensor")
        return uses

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
        assigns = [n for n in nodes if isinstance(n, cst.Assign)]
        aliases = self._unmoved_aliases(assigns, names)

        def batch_of(node: cst.BaseExpression) -> set[str]:
            return {b for r in tensor_roots(node) for b in aliases.get(r, ())}

        bound: set[str] = set()
        for call in model_calls:
            for arg in call.args:
                # `net(x.to(device))`: moved where the model gets it; the loop's other uses of
                # `x` may need it where it is (`x[0] - out.cpu()`).
                root = receiver_root(arg.value)
                if not (is_move_call(arg.value) and root and _moved_whole(arg.value, root)):
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
        for part in self._meeting_model_output(nodes, model_ids, from_model, torch_calls_only):
            bound |= batch_of(part)
        return bound

    def _unmoved_aliases(self, assigns: list[cst.Assign], names: list[str]) -> dict[str, set[str]]:
        """`x = batch[0]`, `inp = x.float()`: the names that hold (part of) a batch name
        unmoved, each with the batch names it holds."""
        wanted = set(names)
        aliases: dict[str, set[str]] = {n: {n} for n in names}
        for _ in range(3):
            for assign in assigns:
                origin = {b for r in tensor_roots(assign.value) for b in aliases.get(r, ())}
                if not origin:
                    continue
                for target in assign.targets:
                    for bound_name in self.scopes.names_read(target.target) - wanted:
                        aliases.setdefault(bound_name, set()).update(origin)
        # `img = img_list[j]` then `img = img.cuda()`: the alias is moved before it is used.
        for assign in assigns:
            if is_move_call(assign.value) and len(assign.targets) == 1:
                target_node = assign.targets[0].target
                if (
                    isinstance(target_node, cst.Name)
                    and target_node.value not in wanted
                    and _moved_whole(assign.value, target_node.value)
                ):
                    aliases.pop(target_node.value, None)
        return aliases

    def _meeting_model_output(
        self,
        nodes: list[cst.CSTNode],
        model_ids: set[int],
        from_model: Callable[[cst.CSTNode], bool],
        torch_calls_only: bool,
    ) -> Iterator[cst.BaseExpression]:
        """The operands, not computed from the model's output, of the calls (other than the
        model's), operations and comparisons in `nodes` that have an operand that is (what
        a function of another library makes of the output is not)."""
        for node in nodes:
            parts = self._operands(node, model_ids, from_model, torch_calls_only)
            if len(parts) < 2:
                continue
            # `x[0] - out.cpu()`: a host copy of the output puts nothing on the device.
            flags = [
                from_model(p)
                and not _to_host(p)
                and not self._unknown_function_of(p, model_ids, from_model)
                for p in parts
            ]
            if not any(flags):
                continue
            for part, is_model in zip(parts, flags):
                if not is_model:
                    yield part

    def _unknown_function_of(
        self,
        part: cst.BaseExpression,
        model_ids: set[int],
        from_model: Callable[[cst.CSTNode], bool],
    ) -> bool:
        """`spikes.decode(output)`: what a function of another library makes of the model's
        output, which may be on any device (not torch's functions, nor the output's methods)."""
        if not isinstance(part, cst.Call) or id(part) in model_ids:
            return False
        if isinstance(part.func, cst.Attribute) and from_model(part.func.value):
            return False  # `outputs.argmax(1)`: a method of the output
        qualified = self.names.qualified_name_through_star(part.func) or ""
        return bool(qualified) and not qualified.startswith(("torch.", "builtins."))

    def _operands(
        self,
        node: cst.CSTNode,
        model_ids: set[int],
        from_model: Callable[[cst.CSTNode], bool],
        torch_calls_only: bool,
    ) -> list[cst.BaseExpression]:
        """What `node` brings together: a call's receiver and arguments (not the model's call,
        nor with `torch_calls_only` a call other than torch's), an operation's operands."""
        parts: list[cst.BaseExpression] = []
        if isinstance(node, cst.Call) and id(node) not in model_ids:
            if torch_calls_only and not self._torch_call(node, from_model):
                return []
            if isinstance(node.func, cst.Attribute):
                parts.append(node.func.value)
            parts.extend(arg.value for arg in node.args)
        elif isinstance(node, cst.BinaryOperation):
            parts = [node.left, node.right]
        elif isinstance(node, cst.Comparison):
            parts = [node.left, *(c.comparator for c in node.comparisons)]
        return parts

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

    def hands_batch_on(self, loop: cst.For) -> bool:
        """Whether the loop passes one of its target names to a call (other than `print`, `len`)."""
        targets = {n.value for n in self.context.subtree(loop.target) if isinstance(n, cst.Name)}
        for node in self.context.subtree(loop.body):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Name) and node.func.value in INSPECTING_CALLS:
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

    def _root_names_of_move(self, move: DeviceMove) -> set[str]:
        if move.expression is not None:
            return self._root_names(move.expression)
        return set()

    def _moved_in_place(self, body: cst.CSTNode, name: str) -> bool:
        """The loop moves `name` with a statement of its own whose result it drops
        (`batch.to(device)`)."""
        return any(
            isinstance(node, cst.Expr)
            and isinstance(node.value, cst.Call)
            and isinstance(node.value.func, cst.Attribute)
            and node.value.func.attr.value in MOVES
            and _moved_whole(node.value.func.value, name)
            for node in self._scope_nodes(body)
        )

    def _is_moved(self, body: cst.CSTNode, name: str) -> bool:
        """Whether the loop moves `name` itself (`.to`, `.cuda`, a device helper, a comprehension)
        or rebinds it from something that may have moved it."""
        for node in self._scope_nodes(body):
            if isinstance(node, cst.Call):
                if (
                    isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in MOVES
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
                    and n.func.attr.value in MOVES
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
                    and node.func.attr.value not in MOVES
                ):
                    continue  # `batch[0].float()`; but `data[0].to(d)` moves
                qualified = self.names.qualified_name(node.func)
                if qualified is not None and qualified.startswith("torch."):
                    continue
                if isinstance(node.func, cst.Attribute) and node.func.attr.value not in MOVES:
                    # `x.view(...)`, `x.float()`: a tensor method keeps the device.
                    receiver = dotted_name(node.func.value)
                    if receiver is not None and "." not in receiver:
                        continue
                return False
        return True
