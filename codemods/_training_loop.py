"""What the passes know about a script's top level: models moved to a device, DataLoaders, loops.

Shared by DF201 (device moves in the data pipeline), DF202 (tokenizer outputs), DF203 (NumPy of
device tensors) and DF204 (batches not moved to the model's device).

The questions answered here:

* Which device was the model called at some point moved to, and how can that device be written
  at that point? (`model = Net().to(device)`, `model.cuda()`, `self.model = model.to(self.device)`,
  `model = nn.DataParallel(model)`, a `model` parameter whose every caller passes a moved model.)
* Which `DataLoader(...)` calls does a `for` loop iterate (through `enumerate`, `tqdm`, names,
  attributes and function parameters)?
* In a loop over a DataLoader, which batch names reach the moved model (or meet its output)
  without a `.to(...)`, and which statement moves them in the batch's own shape?

Only what the code states is used. When the device is known but cannot be written where it is
needed, the answer carries the reason, and the passes report instead of guessing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Union, cast

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import dotted_name
from devfix.codemods._tree import walk
from devfix.context import children_view
from devfix.types import Edit

Scope = Union[cst.Module, cst.FunctionDef]

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: Calls that wrap a model and keep it on the device it was moved to.
MODEL_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.compile",
    }
)
#: Calls that pass an iterable through: `enumerate(loader)`, `tqdm(loader)`.
ITERATION_WRAPPERS = frozenset(
    {
        "enumerate",
        "builtins.enumerate",
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.notebook.tqdm",
        "tqdm.std.tqdm",
        "tqdm",
    }
)
#: Trainers that move every batch to the model's device themselves.
SELF_MOVING_TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "trl.SFTTrainer",
        "trl.DPOTrainer",
        "trl.RewardTrainer",
        "pytorch_lightning.Trainer",
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
    }
)
_TORCH_DTYPES = frozenset(
    f"torch.{name}"
    for name in (
        "float",
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "half",
        "double",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "long",
        "short",
        "uint8",
        "bool",
        "complex64",
        "complex128",
        "cfloat",
        "cdouble",
        "float8_e4m3fn",
        "float8_e5m2",
    )
)
_ACCELERATORS = ("cuda", "mps", "xpu", "npu", "hpu", "xla", "gpu")
_DEVICE_WORDS = ("device", "dev", "cuda", "gpu", "local_rank", "rank")
_MOVES = ("to", "cuda")
_INSPECTING_BUILTINS = frozenset({"len", "print", "isinstance", "type", "str", "repr", "id"})


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


# -- devices ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceMove:
    """How a model was moved: `.to(<expression>)` or `.cuda(<args>)`."""

    method: str
    expression: cst.BaseExpression | None
    cuda_args: tuple[cst.Arg, ...] = ()
    #: The line of the `if` the move sits in (0: the move always happens).
    conditional_line: int = 0

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

    def as_to_argument(self) -> cst.BaseExpression:
        """The device as one expression for `.to(...)` (BatchEncoding has no `.cuda()`)."""
        if self.method == "to" and self.expression is not None:
            return self.expression.deep_clone()
        if self.cuda_args and isinstance(self.cuda_args[0].value, cst.Integer):
            return cst.SimpleString(f'"cuda:{self.cuda_args[0].value.value}"')
        return cst.SimpleString('"cuda"')


@dataclass(frozen=True)
class ModelDevice:
    """A model moved to a device: `move` as written where it was asked for, else `reason`."""

    model: str
    move: DeviceMove | None
    reason: str = ""
    #: The model was loaded with `from_pretrained(...)` (it has a `.device`).
    pretrained: bool = False


@dataclass
class _Binding:
    kind: str  # "assign" | "param" | "other"
    value: cst.BaseExpression | None
    position: tuple[int, int]
    index: int = 0  # for params: position in the signature


@dataclass
class _Table:
    node: cst.CSTNode
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    #: `name.to(device)` / `name.cuda()` as statements: dotted name -> (position, call).
    statement_moves: dict[str, list[tuple[tuple[int, int], cst.Call]]] = field(default_factory=dict)
    #: Positions of bindings and moves that sit inside an `if`: position -> line of the `if`.
    conditional: dict[tuple[int, int], int] = field(default_factory=dict)


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
    """Binding tables of one file, built on first use and shared by the passes."""

    def __init__(self, checker: DevicePass) -> None:
        self.checker = checker
        self.context = checker.context
        self._tables: dict[int, _Table] = {}
        self._call_sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] | None = None
        self._plans: dict[int, LoopPlan | None] = {}
        self._functions: dict[str, cst.FunctionDef] | None = None

    @classmethod
    def of(cls, checker: DevicePass) -> ScriptFlow:
        shared = checker.context.shared.get("script_flow")
        if not isinstance(shared, ScriptFlow):
            shared = ScriptFlow(checker)
            checker.context.shared["script_flow"] = shared
        shared.checker = checker
        return shared

    # -- scopes ----------------------------------------------------------------------------

    def function_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
            if isinstance(ancestor, cst.Lambda):
                return None
        return None

    def class_of(self, function: cst.FunctionDef | None) -> cst.ClassDef | None:
        if function is None:
            return None
        parent = self.context.parent(function)
        grandparent = self.context.parent(parent) if parent is not None else None
        return grandparent if isinstance(grandparent, cst.ClassDef) else None

    def module_functions(self) -> dict[str, cst.FunctionDef]:
        if self._functions is None:
            self._functions = {
                s.name.value: s for s in self.context.module.body if isinstance(s, cst.FunctionDef)
            }
        return self._functions

    def _table(self, scope: cst.CSTNode) -> _Table:
        table = self._tables.get(id(scope))
        if table is None:
            table = _Table(scope)
            if isinstance(scope, cst.ClassDef):
                for statement in scope.body.body:
                    if isinstance(statement, cst.FunctionDef):
                        self._fill(table, statement.body, self_only=True)
            else:
                if isinstance(scope, cst.FunctionDef):
                    params = scope.params
                    for index, param in enumerate(
                        (*params.posonly_params, *params.params, *params.kwonly_params)
                    ):
                        table.bindings.setdefault(param.name.value, []).append(
                            _Binding("param", None, self._pos(param), index)
                        )
                    self._fill(table, scope.body, self_only=False)
                else:
                    self._fill(table, scope, self_only=False)
            self._tables[id(scope)] = table
        return table

    def _pos(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.context.position(node).start
        return (start.line, start.column)

    def _condition_line(self, node: cst.CSTNode) -> int:
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.If):
                return self.context.position(ancestor).start.line
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                return 0
        return 0

    def _fill(self, table: _Table, root: cst.CSTNode, *, self_only: bool) -> None:
        for node in _scope_nodes(root):
            if isinstance(node, (cst.Assign, cst.Expr)):
                line = self._condition_line(node)
                if line:
                    table.conditional[self._pos(node)] = line
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind_target(table, target.target, node.value, node, self_only)
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                value = node.value if isinstance(node, cst.AnnAssign) else None
                kind_value = value if isinstance(node, cst.AnnAssign) else None
                self._bind_target(table, node.target, kind_value, node, self_only)
            elif isinstance(node, cst.For):
                self._bind_target(table, node.target, None, node, self_only)
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                self._bind_target(table, node.asname.name, None, node, self_only)
            elif isinstance(node, (cst.Import, cst.ImportFrom)) and not self_only:
                if isinstance(node.names, cst.ImportStar):
                    continue
                for alias in node.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    name = (
                        dotted_name(bound) if isinstance(bound, (cst.Name, cst.Attribute)) else None
                    )
                    if name:
                        table.bindings.setdefault(name.split(".")[0], []).append(
                            _Binding("other", None, self._pos(node))
                        )
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)) and not self_only:
                table.bindings.setdefault(node.name.value, []).append(
                    _Binding("other", None, self._pos(node))
                )
            elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
                call = node.value
                if isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
                    name = dotted_name(call.func.value)
                    if name and (not self_only or name.startswith("self.")):
                        table.statement_moves.setdefault(name, []).append((self._pos(node), call))

    def _bind_target(
        self,
        table: _Table,
        target: cst.BaseExpression,
        value: cst.BaseExpression | None,
        node: cst.CSTNode,
        self_only: bool,
        *,
        unpacked: bool = False,
    ) -> None:
        """Bind `target`; names unpacked from a tuple get kind "unpack" and the whole value."""
        name = dotted_name(target)
        if name is not None:
            if self_only and not name.startswith("self."):
                return
            if not self_only and "." in name:
                return
            kind = "assign" if value is not None else "other"
            if unpacked and value is not None:
                kind = "unpack"
            table.bindings.setdefault(name, []).append(_Binding(kind, value, self._pos(node)))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind_target(table, element.value, value, node, self_only, unpacked=True)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(table, target.value, value, node, self_only, unpacked=True)

    def _lookup(
        self, name: str, function: cst.FunctionDef | None
    ) -> tuple[_Table, cst.FunctionDef | None]:
        """The table that binds `name` as seen from `function`, and that table's function."""
        if name.startswith("self."):
            owner = self.class_of(function)
            if owner is not None:
                return self._table(owner), None
        root = name.split(".")[0]
        if function is not None and root in self._table(function).bindings:
            return self._table(function), function
        return self._table(self.context.module), None

    def assigned_values(self, name: str, at: cst.CSTNode) -> list[cst.BaseExpression]:
        """Values plainly assigned to `name` (`name = value`) in the scope that binds it at `at`;
        [] when it is also bound another way (a parameter, a loop target, unpacking)."""
        table, _ = self._lookup(name, self.function_of(at))
        bindings = table.bindings.get(name, [])
        if any(b.kind != "assign" or b.value is None for b in bindings):
            return []
        return [b.value for b in bindings if b.value is not None]

    def binding_before(
        self, name: str, at: cst.CSTNode
    ) -> tuple[str, cst.BaseExpression | None] | None:
        """(kind, value) of the last binding of `name` before `at` in its scope (any binding if
        the scope is an enclosing one)."""
        function = self.function_of(at)
        table, table_function = self._lookup(name, function)
        bindings = table.bindings.get(name, [])
        if table_function is function and not name.startswith("self."):
            position = self._pos(at)
            bindings = [b for b in bindings if b.position < position] or bindings
        if not bindings:
            return None
        last = bindings[-1]
        return last.kind, last.value

    def bound_in(self, name: str, function: cst.FunctionDef | None) -> bool:
        return function is not None and name in self._table(function).bindings

    # -- call sites ------------------------------------------------------------------------

    def call_sites(
        self, function: cst.FunctionDef
    ) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
        """Calls `f(...)` of a module-level function, with the function each call is in."""
        if self._call_sites is None:
            sites: dict[str, list[tuple[cst.Call, cst.FunctionDef | None]]] = {}
            functions = self.module_functions()
            for node in _walk(self.context.module):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Name)
                    and node.func.value in functions
                ):
                    sites.setdefault(node.func.value, []).append((node, self.function_of(node)))
            self._call_sites = sites
        if self.module_functions().get(function.name.value) is not function:
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

    # -- devices ---------------------------------------------------------------------------

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
            if text.startswith(_ACCELERATORS):
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
            qualified = self.checker.qualified_name(expr.func)
            if qualified == "torch.device" and expr.args:
                first = expr.args[0].value
                kind = self.device_kind(first, function, depth + 1)
                return kind or "device"
            return None
        name = dotted_name(expr)
        if name is None:
            return None
        qualified = self.checker.qualified_name(expr)
        if qualified in _TORCH_DTYPES:
            return None
        table, _ = self._lookup(name, function)
        values = [b.value for b in table.bindings.get(name, []) if b.kind == "assign" and b.value]
        kinds = {self.device_kind(v, function, depth + 1) for v in values}
        if values and None not in kinds:
            return "cpu" if kinds == {"cpu"} else "device"
        tail = name.rsplit(".", 1)[-1].lower().strip("_")
        if (
            any(
                word == tail or tail.endswith("_" + word) or tail.startswith(word + "_")
                for word in _DEVICE_WORDS
            )
            or tail == "device"
        ):
            return "device"
        return None

    def move_of(self, call: cst.Call, function: cst.FunctionDef | None) -> DeviceMove | None:
        """`x.to(<device>)` / `x.cuda(...)` -> the move; CPU moves and dtype casts -> None."""
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
        if device is None:
            return None
        kind = self.device_kind(device, function)
        if kind in ("accelerator", "device"):
            return DeviceMove("to", device)
        return None

    def model_device(
        self,
        model: cst.BaseExpression,
        at: cst.CSTNode,
        *,
        _depth: int = 0,
        _before: tuple[int, int] | None = None,
        _function: cst.FunctionDef | None = None,
    ) -> ModelDevice | None:
        """The device the model named by `model` was moved to, written as seen at `at`."""
        name = dotted_name(model)
        if name is None or _depth > 4:
            return None
        function = _function if _depth else self.function_of(at)
        if _before is None and _depth == 0:
            _before = self._pos(at)
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
        before: tuple[int, int] | None,
        depth: int,
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
        """(move, the function the move's device is written in, loaded by from_pretrained)."""
        table, table_function = self._lookup(name, function)
        same_scope = table_function is function and not name.startswith("self.")
        limit = before if same_scope else None
        candidates: list[
            tuple[tuple[int, int], tuple[DeviceMove | None, cst.FunctionDef | None, bool]]
        ] = []
        pretrained = False
        direct_moves: set[tuple[int, int]] = set()
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
            move = self.move_of(call, table_function)
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
        position: tuple[int, int],
        depth: int,
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value in _MOVES:
                move = self.move_of(value, function)
                inner = self._move_in_value(value.func.value, function, position, depth)
                pretrained = bool(inner and inner[2])
                return (move, function, pretrained) if move or pretrained else None
            if value.func.attr.value == "from_pretrained":
                # Loaded with a device map: on a device, reachable only through `model.device`.
                device_map = next(
                    (a.value for a in value.args if a.keyword and a.keyword.value == "device_map"),
                    None,
                )
                if device_map is None or self.device_kind(device_map, function) == "cpu":
                    return None
                return (None, function, True)
            if value.func.attr.value in ("eval", "train", "half", "float", "bfloat16"):
                return self._move_in_value(value.func.value, function, position, depth)
        if isinstance(value, cst.Call):
            qualified = self.checker.qualified_name(value.func)
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
        self, function: cst.FunctionDef, param: str, binding: _Binding, depth: int
    ) -> tuple[DeviceMove | None, cst.FunctionDef | None, bool] | None:
        sites = self.call_sites(function)
        if not sites:
            return None
        results = []
        for call, caller in sites:
            argument = self._argument_for(call, function, param)
            if argument is None or dotted_name(argument) is None:
                return None
            found = self._find_move(dotted_name(argument) or "", caller, self._pos(call), depth + 1)
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
        roots = _root_names(expression)
        if origin is target or not roots:
            return move
        code = code_of(expression)
        if (
            roots == {"self"}
            and self.class_of(target) is not None
            and (origin is None or self.class_of(origin) is self.class_of(target))
        ):
            return move
        # `self.device = device` in the class: use the attribute.
        owner = self.class_of(target)
        if owner is not None:
            table = self._table(owner)
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
        module_table = self._table(self.context.module)
        if all(
            not self.bound_in(root, target)
            and (root in module_table.bindings or root in ("torch",))
            and (origin is None or not self.bound_in(root, origin))
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
            qualified = self.checker.qualified_name(expr.func)
            if qualified in DATALOADERS:
                return [expr]
            if qualified in ITERATION_WRAPPERS and expr.args and expr.args[0].keyword is None:
                return self.dataloader_calls(expr.args[0].value, function, depth + 1)
            return []
        name = dotted_name(expr)
        if name is None:
            return []
        table, table_function = self._lookup(name, function)
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
        function = self.function_of(loop)
        loaders = self.dataloader_calls(loop.iter, function)
        if not loaders:
            return None
        target: cst.BaseExpression = loop.target
        if isinstance(loop.iter, cst.Call) and self.checker.qualified_name(loop.iter.func) in (
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
        calls = [n for n in _scope_nodes(loop.body) if isinstance(n, cst.Call)]
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
        plan.unmoved = [n for n in names if n in bound and not _is_moved(loop.body, n, self)]
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
        for node in _scope_nodes(body):
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
                ("k", "v") if not {"k", "v"} & _root_names_of_move(move) else ("key", "value")
            )
            moved = code_of(move.apply(cst.Name(value)))
            return f"{name} = {{{key}: {moved} for {key}, {value} in {name}.items()}}"
        if as_sequence:
            item = "t" if "t" not in _root_names_of_move(move) else "item"
            return f"{name} = [{code_of(move.apply(cst.Name(item)))} for {item} in {name}]"
        return f"{name} = {code_of(move.apply(cst.Name(name)))}"

    def _device_bound(
        self, loop: cst.For, names: list[str], model_calls: list[cst.Call]
    ) -> set[str]:
        """Batch names passed to the model, or meeting its output in a call or an operation."""
        wanted = set(names)
        assigns = [n for n in _scope_nodes(loop.body) if isinstance(n, cst.Assign)]
        # `x = batch[0]`, `inp = x.float()`: names that hold (part of) a batch name unmoved.
        aliases: dict[str, set[str]] = {n: {n} for n in names}
        for _ in range(3):
            for assign in assigns:
                origin = {b for r in _tensor_roots(assign.value) for b in aliases.get(r, ())}
                if not origin:
                    continue
                for target in assign.targets:
                    for bound_name in _names_in(target.target) - wanted:
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
                for n in _walk(node)
            )

        for _ in range(4):
            for assign in assigns:
                if from_model(assign.value):
                    for target in assign.targets:
                        derived |= _names_in(target.target)
        for node in _scope_nodes(loop.body):
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


# -- small helpers ----------------------------------------------------------------------------


def _is_move_call(value: cst.BaseExpression) -> bool:
    """`x.to(...)`, `x.cuda()`, also under `.eval()`/`.train()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in _MOVES:
            return True
        value = value.func.value
    return False


def device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The device of `x.to(device, ...)` / `x.to(device=...)`; None for `.to(dtype)`-style calls."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[0].value if positional else None


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


def _root_names(expr: cst.CSTNode) -> set[str]:
    """Names an expression reads at its roots: `torch.device(args.gpu)` -> {"torch", "args"}."""
    roots: set[str] = set()
    for node in _walk(expr):
        if isinstance(node, cst.Attribute):
            root = node
            while isinstance(root, cst.Attribute):
                root = root.value  # type: ignore[assignment]
            if isinstance(root, cst.Name):
                roots.add(root.value)
    attr_names = {id(n.attr) for n in _walk(expr) if isinstance(n, cst.Attribute)}
    keyword_names = {id(n.keyword) for n in _walk(expr) if isinstance(n, cst.Arg) and n.keyword}
    for node in _walk(expr):
        if isinstance(node, cst.Name) and id(node) not in attr_names | keyword_names:
            roots.add(node.value)
    return roots


def _root_names_of_move(move: DeviceMove) -> set[str]:
    if move.expression is not None:
        return _root_names(move.expression)
    return set()


def _names_in(node: cst.CSTNode) -> set[str]:
    """Plain names read in `node` (not attribute names or keywords)."""
    attrs = {id(n.attr) for n in _walk(node) if isinstance(n, cst.Attribute)}
    keywords = {id(n.keyword) for n in _walk(node) if isinstance(n, cst.Arg) and n.keyword}
    return {
        n.value
        for n in _walk(node)
        if isinstance(n, cst.Name) and id(n) not in attrs and id(n) not in keywords
    }


def _device_helper(call: cst.Call) -> bool:
    name = dotted_name(call.func)
    tail = (name or "").rsplit(".", 1)[-1].lower()
    return "device" in tail or "cuda" in tail or tail.startswith(("to_", "move", "send"))


def _is_moved(body: cst.BaseSuite, name: str, flow: ScriptFlow) -> bool:
    """Whether the loop moves `name` itself (`.to`, `.cuda`, a device helper, a comprehension)
    or rebinds it from something that may have moved it."""
    for node in _scope_nodes(body):
        if isinstance(node, cst.Call):
            if (
                isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _MOVES
                and _moved_whole(node.func.value, name)
            ):
                return True
            if _device_helper(node) and any(name in _names_in(a.value) for a in node.args):
                return True
        elif isinstance(node, (cst.ListComp, cst.DictComp, cst.GeneratorExp, cst.SetComp)):
            if name in _names_in(node.for_in.iter) and any(
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and n.func.attr.value in _MOVES
                for n in _walk(node)
            ):
                return True
        elif (
            isinstance(node, cst.Assign)
            and any(name in _names_in(t.target) for t in node.targets)
            and not _keeps_device(node.value, flow)
        ):
            return True
    return False


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


def _keeps_device(value: cst.BaseExpression, flow: ScriptFlow) -> bool:
    """A rebinding computed by tensor methods and torch functions only (it stays where it was)."""
    for node in _walk(value):
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and not dotted_name(node.func):
                continue
            qualified = flow.checker.qualified_name(node.func)
            if qualified is not None and qualified.startswith("torch."):
                continue
            if isinstance(node.func, cst.Attribute) and node.func.attr.value not in _MOVES:
                # `x.view(...)`, `x.float()`: a tensor method keeps the device.
                receiver = dotted_name(node.func.value)
                if receiver is not None and "." not in receiver:
                    continue
            return False
    return True


_walk = walk


def _scope_nodes(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes of one scope, without descending into nested functions, classes and lambdas."""
    stack: list[cst.CSTNode] = list(
        reversed(list(root.body) if isinstance(root, cst.Module) else list(root.children))
    )
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(children_view(node)))
