"""Data functions: which code prepares data (a Dataset's `__getitem__`, a `collate_fn`, a
function mapped over a dataset), the loops that consume it, and what moving its tensors to a
GPU there would break or need at the loop instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.calls import is_name, method_of
from devfix.codemods.analysis.flow.loops import (
    INSPECTING_CALLS,
    BatchLoops,
    string_key,
    tensor_roots,
)
from devfix.codemods.analysis.flow.processes import ProcessTopology
from devfix.codemods.analysis.moves import DeviceMove
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    keyword_argument,
)
from devfix.codemods.analysis.torch_names import (
    DATA_KEYWORDS,
    DATALOADERS,
    MAPPING_METHODS,
    PER_ITEM_METHODS,
    SELF_MOVING_TRAINERS,
)
from devfix.context import FileContext
from devfix.types import Edit

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


@dataclass
class DataFunction:
    """A function (or lambda) that prepares data, the role it plays, and the DataLoaders that
    consume it; `preloads`: it runs once when the dataset is built (`__init__`)."""

    node: cst.FunctionDef | cst.Lambda
    role: str
    #: DataLoader calls that consume it (empty: none found).
    loaders: list[cst.Call] = field(default_factory=list)
    preloads: bool = False
    #: It is mapped over a `datasets` dataset (`ds.map(f)`), not run by a DataLoader.
    mapping: bool = False
    #: It builds the dataset a Hugging Face `Trainer` is given, whose DataLoader pins batches.
    trainer_dataset: bool = False


@dataclass(frozen=True)
class DataHazard:
    """Why a move inside data preparation breaks (`text`), and whether the device it moves to
    is the right one for the batch (then the training loop can move the batch there instead)."""

    text: str
    right_device: bool


def _is_inspected(parent: cst.CSTNode | None, context: FileContext) -> bool:
    """A use of a name as the argument of `len(...)`, `print(...)` and the like."""
    if not isinstance(parent, cst.Arg):
        return False
    call = context.parent(parent)
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Name)
        and call.func.value in INSPECTING_CALLS
    )


def _not_a_tensor(value: cst.BaseExpression) -> bool:
    """`None`, a string, a list or list comprehension: what a collate returns next to tensors."""
    return is_name(value, "None") or isinstance(value, (cst.SimpleString, cst.List, cst.ListComp))


def _add_data_function(
    found: dict[int, DataFunction],
    node: cst.FunctionDef | cst.Lambda,
    role: str,
    consumers: list[cst.Call],
) -> None:
    """Records `node` (under the role it is first found in) with the loaders in `consumers`
    it was not yet known to feed."""
    entry = found.get(id(node))
    if entry is None:
        entry = found[id(node)] = DataFunction(node, role)
    entry.loaders.extend(c for c in consumers if c not in entry.loaders)


class DataPipelines(BatchLoops, ProcessTopology):
    """The file's data functions, the loops they feed, and the moves of their output."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._callbacks: frozenset[str] | None = None
        self._data: dict[int, DataFunction] | None = None

    def batch_move(
        self, loop: cst.For, move: DeviceMove, origin: cst.FunctionDef | None, data: DataFunction
    ) -> tuple[Edit, str] | str:
        """The statement that moves the batch of `loop` (a loop over a DataLoader that runs
        `data`) to the device `move` (written in `origin`) put it on before, at the head of the
        loop: the edit and the statement, or why there is none. The batch's shape comes from
        what `data` returns (a tuple of tensors, `None`s and lists is moved element by element
        where it is a tensor), else from how the loop reads it."""
        function = self.scopes.enclosing_function(loop)
        expressed = self.express(move, origin, function)
        if isinstance(expressed, str):
            return expressed
        target = self._batch_target(loop)
        if target is None:
            return "the loop's target is not a batch"
        if not isinstance(target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
            return "the loop unpacks the batch in its header"
        name = target.value
        if self._is_moved(loop.body, name):
            return ""  # the loop moves the batch already
        if not any(
            not _is_inspected(self.context.parent(use), self.context)
            for use in self.scopes.names_in(loop.body, name)
        ):
            return ""  # the loop does not use the batch (it counts or prints it)
        shape = self._returned_shape(data.node)
        calls = [n for n in self._scope_nodes(loop.body) if isinstance(n, cst.Call)]
        fed = [call for call, _ in self._model_calls(calls, [name])]
        kept = [
            use
            for use in self.facts.cpu_only.uses(loop.body, fed)
            if name in tensor_roots(use.expr)
        ]
        keys = tuple(
            dict.fromkeys(k for use in kept if (k := string_key(use.expr, name)) is not None)
        )
        if kept and (shape is not None or len(keys) != len(kept)):
            # A move of the whole batch would take it along; the shape leaves no key to spare.
            return f"`{code_of(kept[0].expr)}` stays on the CPU: {kept[0].reason}"
        if shape is None:
            statement = self._single_move(loop.body, name, expressed, keys)
            if statement is None:
                return f"cannot tell whether `{name}` is a tensor, a sequence or a dict"
        else:
            kind, mixed = shape
            item = "t" if "t" not in self._root_names_of_move(expressed) else "item"
            moved = code_of(expressed.apply(cst.Name(item)))
            torch_name, _ = self.names.torch_spelling()
            guarded = f"{moved} if isinstance({item}, {torch_name}.Tensor) else {item}"
            if kind == "tensor":
                statement = f"{name} = {code_of(expressed.apply(cst.Name(name)))}"
            elif kind == "dict":
                key = "k" if "k" not in self._root_names_of_move(expressed) else "key"
                value = guarded if mixed else moved
                statement = f"{name} = {{{key}: {value} for {key}, {item} in {name}.items()}}"
            elif mixed:
                # Tensors move; `None`s and lists of other objects stay as they are.
                statement = f"{name} = tuple({guarded} for {item} in {name})"
                source = f"{name} = tuple(\n    {guarded}\n    for {item} in {name}\n)\n"
            else:
                statement = f"{name} = [{moved} for {item} in {name}]"
        anchor = loop.body.body[0]
        new_line = cst.parse_statement(
            source if shape is not None and shape == ("sequence", True) else statement + "\n",
            config=self.context.module.config_for_parsing,
        )
        return Edit(anchor, cst.FlattenSentinel([new_line, anchor])), statement

    def collated_tensor_batch(self, loop: cst.For) -> str | None:
        """The name a loop binds each batch to, when every DataLoader it may iterate has a
        `collate_fn` of this file that returns one tensor (`torch.tensor(ids)`,
        `torch.stack(...)`), so the batch is a tensor; else None."""
        target = self._batch_target(loop)
        if not isinstance(target, cst.Name):
            return None
        loaders = self.dataloader_calls(loop.iter, self.scopes.enclosing_function(loop))
        if not loaders:
            return None
        for loader in loaders:
            collate = keyword_argument(loader, "collate_fn")
            if collate is None or not isinstance(collate.value, cst.Name):
                return None
            defined = self.scopes.module_functions().get(collate.value.value)
            if defined is None or self._returned_shape(defined) != ("tensor", False):
                return None
        return target.value

    def _returned_shape(self, function: cst.FunctionDef | cst.Lambda) -> tuple[str, bool] | None:
        """What a collate function returns: ("sequence" | "dict" | "tensor", whether some
        elements are not tensors: `None`, lists); None when it cannot be told."""
        if not isinstance(function, cst.FunctionDef) or not isinstance(
            function.body, cst.IndentedBlock
        ):
            return None
        shapes: set[tuple[str, bool]] = set()
        for node in self._scope_nodes(function.body):
            if isinstance(node, cst.Return):
                if node.value is None:
                    return None
                shape = self._shape_of(node.value, node)
                if shape is None:
                    return None
                shapes.add(shape)
        if len(shapes) != 1:
            return None
        return shapes.pop()

    def _shape_of(self, value: cst.BaseExpression, at: cst.CSTNode) -> tuple[str, bool] | None:
        if isinstance(value, (cst.Tuple, cst.List)):
            return "sequence", any(_not_a_tensor(e.value) for e in value.elements)
        if isinstance(value, cst.Dict):
            return "dict", any(
                isinstance(e, cst.DictElement) and _not_a_tensor(e.value) for e in value.elements
            )
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value in ("tuple", "list")
            and len(value.args) == 1
        ):
            inner = value.args[0].value
            if isinstance(inner, cst.Name):
                return "sequence", self._filled_with_non_tensors(inner.value, at)
            return None
        if isinstance(value, cst.Call):
            qualified = self.names.qualified_name(value.func) or ""
            if qualified.startswith("torch.") and call_tail(value.func) in (
                "stack",
                "cat",
                "tensor",
                "as_tensor",
                "from_numpy",
            ):
                return "tensor", False
        return None

    def _filled_with_non_tensors(self, name: str, at: cst.CSTNode) -> bool:
        """`name = []` appended to in the function: whether it gets `None`s or lists too."""
        function = self.scopes.enclosing_function(at)
        scope: cst.CSTNode = function if function is not None else self.context.module
        for node in self.context.subtree(scope):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "append"
                and is_name(node.func.value, name)
                and node.args
                and _not_a_tensor(node.args[0].value)
            ):
                return True
        return False

    def data_callbacks(self) -> frozenset[str]:
        """Names of functions handed to `ds.map(f)`, `DataLoader(collate_fn=f)`, `transform=f`."""
        if self._callbacks is None:
            names: set[str] = set()
            for call in self.context.subtree(self.context.module):
                if not isinstance(call, cst.Call):
                    continue
                mapping = (
                    isinstance(call.func, cst.Attribute) and call.func.attr.value in MAPPING_METHODS
                )
                for arg in call.args:
                    keyword = arg.keyword.value if arg.keyword is not None else None
                    if isinstance(arg.value, cst.Name) and (
                        keyword in DATA_KEYWORDS or (mapping and keyword in (None, "function"))
                    ):
                        names.add(arg.value.value)
            self._callbacks = frozenset(names)
        return self._callbacks

    def in_data_pipeline(self, node: cst.CSTNode) -> bool:
        """Inside a `Dataset` method, a collate function or a function handed to `ds.map(...)`."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                info = self.facts.modules.function_info(ancestor)
                if info.owner is not None and info.owner.is_dataset:
                    return True
                if "collate" in info.name.lower() or info.name in self.data_callbacks():
                    return True
        return False

    def data_functions(self) -> dict[int, DataFunction]:
        """Dataset per-item methods, collate functions and collator classes, functions mapped
        over datasets, transforms, and module functions those call, by `id(node)`."""
        if self._data is not None:
            return self._data
        found: dict[int, DataFunction] = {}
        module = self.context.module
        functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
        loaders = self._loader_calls()
        self._add_dataset_methods(found, classes, loaders)
        self._add_callbacks(found, functions, classes, loaders)
        self._add_installed_collate_fns(found, functions, classes)
        self._add_collate_named_functions(found)
        self._add_trainer_dataset_builders(found, functions)
        self._add_called_helpers(found, functions)
        self._data = found
        return found

    def _loader_calls(self) -> list[cst.Call]:
        """The file's `DataLoader(...)` calls."""
        module = self.context.module
        # Every spelling of a DataLoader (an alias, `data.DataLoader`) contains the word.
        return [
            n
            for n in (
                self.context.of_type(module, cst.Call) if "DataLoader" in self.context.text else ()
            )
            if dotted_name(n.func) is not None and self.names.qualified_name(n.func) in DATALOADERS
        ]

    def _add_dataset_methods(
        self,
        found: dict[int, DataFunction],
        classes: dict[str, cst.ClassDef],
        loaders: list[cst.Call],
    ) -> None:
        """Dataset classes (torch's, or the project's own `...Dataset` bases that define
        `__getitem__`) and the loaders built on their instances."""
        code = self.facts.modules
        for name, cls in classes.items():
            if not (code.class_info(cls).is_dataset or self._project_dataset(cls)):
                continue
            consumers = [
                c
                for c in loaders
                if self._dataset_class_of(argument(c, "dataset"), c, self) == name
            ]
            for statement in cls.body.body:
                if not isinstance(statement, cst.FunctionDef):
                    continue
                method = statement.name.value
                if method in PER_ITEM_METHODS or not method.startswith("__"):
                    _add_data_function(found, statement, f"`{name}.{method}`", consumers)
                elif method == "__init__":
                    entry = DataFunction(statement, f"`{name}.__init__`", list(consumers), True)
                    found[id(statement)] = entry

    def _add_callbacks(
        self,
        found: dict[int, DataFunction],
        functions: dict[str, cst.FunctionDef],
        classes: dict[str, cst.ClassDef],
        loaders: list[cst.Call],
    ) -> None:
        """Callbacks: collate_fn=, data_collator=, transform=, ds.map(f)."""
        for call in self.context.of_type(self.context.module, cst.Call):
            for arg in call.args:
                keyword = arg.keyword.value if arg.keyword is not None else None
                is_mapping = (
                    isinstance(call.func, cst.Attribute)
                    and call.func.attr.value in MAPPING_METHODS
                    and arg is call.args[0]
                    and keyword is None
                )
                if keyword not in DATA_KEYWORDS and not is_mapping:
                    continue
                target = self._callable(arg.value, functions, classes, self, call)
                if target is None:
                    continue
                if is_mapping:
                    consumers = [c for c in loaders if self._mapped_from(c, call, self)]
                    role = f"the function mapped over the dataset (`{code_of(call.func)}`)"
                    _add_data_function(found, target, role, consumers)
                    found[id(target)].mapping = True
                    continue
                elif keyword == "collate_fn":
                    consumers = [call] if call in loaders else []
                    role = "the `collate_fn`"
                elif keyword == "data_collator":
                    consumers = []
                    role = "the `data_collator`"
                else:
                    # `CIFAR10(..., transform=f)`: the loaders built on that dataset.
                    consumers = [c for c in loaders if self._mapped_from(c, call, self)]
                    role = f"the `{keyword}`"
                _add_data_function(found, target, role, consumers)

    def _add_installed_collate_fns(
        self,
        found: dict[int, DataFunction],
        functions: dict[str, cst.FunctionDef],
        classes: dict[str, cst.ClassDef],
    ) -> None:
        """`loader.collate_fn = f` installs a collate function after the loader is built."""
        for assign in self.context.of_type(self.context.module, cst.Assign):
            for assign_target in assign.targets:
                target_node = assign_target.target
                if not (
                    isinstance(target_node, cst.Attribute)
                    and target_node.attr.value == "collate_fn"
                ):
                    continue
                target = self._callable(assign.value, functions, classes, self, assign)
                if target is not None:
                    consumers = self.dataloader_calls(
                        target_node.value, self.scopes.enclosing_function(assign)
                    )
                    _add_data_function(found, target, "the `collate_fn`", consumers)

    def _add_collate_named_functions(self, found: dict[int, DataFunction]) -> None:
        """Functions and methods named as collate functions (`collate`, `pad_collate`,
        `_batch_collate_fn`): a library hands them to DataLoaders its users build. One the
        file only ever calls itself runs in the caller's process."""
        for node in self.context.of_type(self.context.module, cst.FunctionDef):
            if "collate" not in node.name.value.lower():
                continue
            if id(node) in found or self._only_called_directly(node):
                continue
            owner = self.scopes.class_of(node)
            where = f"{owner.name.value}.{node.name.value}" if owner else node.name.value
            _add_data_function(found, node, f"the collate function `{where}`", [])

    def _add_trainer_dataset_builders(
        self, found: dict[int, DataFunction], functions: dict[str, cst.FunctionDef]
    ) -> None:
        """Module functions whose result becomes a Hugging Face `Trainer`'s `train_dataset=`
        or `eval_dataset=` (`encoded = preprocess(texts)`; `rows = [... encoded ...]`): their
        tensors are what the Trainer's DataLoader pins and moves to each process's device."""
        if not self.has_self_moving_trainer():
            return
        for call in self.context.of_type(self.context.module, cst.Call):
            if self.names.qualified_name(call.func) not in SELF_MOVING_TRAINERS:
                continue
            for keyword in ("train_dataset", "eval_dataset"):
                arg = keyword_argument(call, keyword)
                if arg is None:
                    continue
                for builder in self._functions_building(arg.value, call, functions, depth=0):
                    role = f"`{builder.name.value}` (it builds the Trainer's `{keyword}`)"
                    _add_data_function(found, builder, role, [])
                    found[id(builder)].trainer_dataset = True

    def _functions_building(
        self,
        value: cst.BaseExpression,
        at: cst.CSTNode,
        functions: dict[str, cst.FunctionDef],
        depth: int,
    ) -> list[cst.FunctionDef]:
        """The module functions `value` calls, directly or through the names it reads (their
        last plain binding before `at`, three levels deep)."""
        built: list[cst.FunctionDef] = []
        for node in self.context.subtree(value):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                function = functions.get(node.func.value)
                if function is not None and function not in built:
                    built.append(function)
            elif isinstance(node, cst.Name) and depth < 3:
                bound = self.scopes.binding_before(node.value, at)
                if bound is not None and bound[0] == "assign" and bound[1] is not None:
                    for function in self._functions_building(bound[1], at, functions, depth + 1):
                        if function not in built:
                            built.append(function)
        return built

    def _add_called_helpers(
        self, found: dict[int, DataFunction], functions: dict[str, cst.FunctionDef]
    ) -> None:
        """Functions the data functions found call, one level down: module functions, and
        methods of the same class called on `self`."""
        for entry in list(found.values()):
            owner = (
                self.scopes.class_of(entry.node)
                if isinstance(entry.node, cst.FunctionDef)
                else None
            )
            for inner in self.context.of_type(entry.node, cst.Call):
                helper: cst.FunctionDef | None = None
                if isinstance(inner.func, cst.Name) and inner.func.value in functions:
                    helper = functions[inner.func.value]
                elif (
                    owner is not None
                    and isinstance(inner.func, cst.Attribute)
                    and is_name(inner.func.value, "self")
                ):
                    helper = method_of(owner, inner.func.attr.value)
                if helper is not None and id(helper) not in found:
                    role = f"`{helper.name.value}` (called by {entry.role})"
                    _add_data_function(found, helper, role, entry.loaders)

    def _only_called_directly(self, function: cst.FunctionDef) -> bool:
        """Every other mention of the function's name calls it (`f(batch)`), and there is one:
        nothing hands it on as a value."""
        mentions = [
            use
            for use in self.scopes.names_in(self.context.module, function.name.value)
            if use is not function.name
        ]
        for use in mentions:
            parent = self.context.parent(use)
            if isinstance(parent, cst.Attribute) and parent.attr is use:
                parent = self.context.parent(parent)
                use_node: cst.CSTNode = self.context.parent(use) or use
            else:
                use_node = use
            if not (isinstance(parent, cst.Call) and parent.func is use_node):
                return False
        return bool(mentions)

    def _project_dataset(self, cls: cst.ClassDef) -> bool:
        """A dataset class of the project: it defines `__getitem__` and derives from a class
        named as a dataset (`DataFrameDataset`, `BaseDataset`) that is not a torch name."""
        if method_of(cls, "__getitem__") is None:
            return False
        for base in cls.bases:
            name = dotted_name(base.value)
            qualified = self.names.qualified_name(base.value) or ""
            if (
                name is not None
                and name.rsplit(".", 1)[-1].endswith("Dataset")
                and not qualified.startswith("torch.")
            ):
                return True
        return False

    def _callable(
        self,
        value: cst.BaseExpression,
        functions: dict[str, cst.FunctionDef],
        classes: dict[str, cst.ClassDef],
        flow: DataPipelines,
        at: cst.CSTNode,
    ) -> cst.FunctionDef | cst.Lambda | None:
        if isinstance(value, cst.Lambda):
            return value
        if isinstance(value, cst.Name) and value.value in functions:
            return functions[value.value]
        if isinstance(value, cst.Attribute) and is_name(value.value, "self"):
            # `collate_fn=self._collate`: a method of the class the call is in.
            function = self.scopes.enclosing_function(at)
            owner = self.scopes.class_of(function) if function is not None else None
            return method_of(owner, value.attr.value) if owner is not None else None
        instance = value
        if isinstance(value, cst.Name):
            values = self.scopes.assigned_values(value.value, at)
            if len(values) == 1:
                instance = values[0]
        if (
            isinstance(instance, cst.Call)
            and self.names.qualified_name(instance.func) == "functools.partial"
            and instance.args
            and instance.args[0].keyword is None
        ):
            # `collate = partial(custom_collate, device=device)`: the function it wraps.
            return self._callable(instance.args[0].value, functions, classes, flow, at)
        if isinstance(instance, cst.Call) and isinstance(instance.func, cst.Name):
            cls = classes.get(instance.func.value)
            if cls is not None:
                for statement in cls.body.body:
                    if (
                        isinstance(statement, cst.FunctionDef)
                        and statement.name.value == "__call__"
                    ):
                        return statement
        return None

    def _dataset_class_of(
        self, value: cst.BaseExpression | None, at: cst.CSTNode, flow: DataPipelines
    ) -> str | None:
        for _ in range(4):
            if value is None:
                return None
            if isinstance(value, cst.Call):
                return value.func.value if isinstance(value.func, cst.Name) else None
            name = dotted_name(value)
            if name is None:
                return None
            values = self.scopes.assigned_values(name, at)
            if len(values) != 1:
                return None
            value = values[0]
        return None

    def _mapped_from(self, loader: cst.Call, mapping: cst.Call, flow: DataPipelines) -> bool:
        value = argument(loader, "dataset")
        for _ in range(4):
            if value is None:
                return False
            if any(node is mapping for node in self.context.subtree(value)):
                return True
            name = dotted_name(value)
            if name is None:
                return False
            values = self.scopes.assigned_values(name, loader)
            if not values:
                return False
            value = values[-1]
        return False

    def data_function_of(self, node: cst.CSTNode) -> DataFunction | None:
        """The data-preparation function `node` is in (not across a class boundary)."""
        data = self.data_functions()
        if not data:
            return None
        for ancestor in self.context.ancestors(node):
            entry = data.get(id(ancestor))
            if entry is not None:
                return entry
            if isinstance(ancestor, cst.ClassDef):
                return None
        return None

    def consuming_loops(self, entry: DataFunction) -> list[cst.For]:
        """The `for` loops over a DataLoader that runs `entry`."""
        if not entry.loaders:
            return []
        return [
            loop
            for loop in self.context.subtree(self.context.module)
            if isinstance(loop, cst.For)
            and any(
                call in entry.loaders
                for call in self.dataloader_calls(loop.iter, self.scopes.enclosing_function(loop))
            )
        ]

    def data_batch_moves(
        self, entry: DataFunction, loops: list[cst.For], data_device: DeviceMove | None
    ) -> tuple[list[Edit], list[str]] | str:
        """What makes the `loops` that consume data preparation `entry` move their batch, once
        a move inside `entry` is removed: the edits and the statements they add (none where
        every loop moves its batch already), or why no fix can be made. `data_device`: the
        move removed from `entry`, when its device is the right one for the batch."""
        if not loops:
            return (
                "no loop over its DataLoader was found that could move the batch to the model's "
                "device instead"
            )
        covered = {
            id(call)
            for loop in loops
            for call in self.dataloader_calls(loop.iter, self.scopes.enclosing_function(loop))
        }
        elsewhere = [call for call in entry.loaders if id(call) not in covered]
        if elsewhere:
            line = self.context.position(elsewhere[0]).start.line
            return (
                f"the batches of the DataLoader on line {line} are used where they cannot be "
                "followed, and would stay on the CPU"
            )
        edits: list[Edit] = []
        statements: list[str] = []
        origin = entry.node if isinstance(entry.node, cst.FunctionDef) else None
        for loop in loops:
            plan = self.loop_plan(loop)
            if data_device is not None and (plan is None or (plan.edit is None and plan.unmoved)):
                # The device the data went to is the right one: the loop moves it there.
                found = self.batch_move(loop, data_device, origin, entry)
                if isinstance(found, tuple):
                    edits.append(found[0])
                    statements.append(found[1])
                    continue
                if not found:
                    continue  # the loop moves the batch already
                if plan is None and self.hands_batch_on(loop):
                    return found
            if plan is None and not self.hands_batch_on(loop):
                continue  # the loop only inspects the batch (or does nothing with it)
            if plan is None:
                return (
                    "cannot tell which device the model fed by the loop on "
                    f"line {self.context.position(loop).start.line} is on"
                )
            if plan.reason and plan.unmoved:
                return plan.reason
            if plan.edit is not None:
                edits.append(plan.edit)
                statements.append(plan.statement_code)
        return edits, statements

    def data_move_hazard(
        self, entry: DataFunction, node: cst.CSTNode, move: DeviceMove
    ) -> DataHazard | None:
        """Where `move` inside data preparation `entry` breaks, or None where it cannot (then it
        is not a bug): the function runs in DataLoader worker processes (`num_workers`, or
        loaders this file does not show), its loader pins memory, it is mapped over a
        `datasets` dataset, the script runs as several processes and the device is not each
        process's own, or the model is on another device. A function that feeds a model itself
        (feature extraction inside `ds.map`) needs its moves."""
        if self._feeds_a_model(entry.node):
            return None
        right_device = move.kind == "device"
        if entry.trainer_dataset:
            return DataHazard(
                "the Trainer's DataLoader pins its batches (`dataloader_pin_memory` is on by "
                "default), which works only on CPU tensors, and moves each batch to its "
                "process's own device itself",
                False,
            )
        if entry.mapping:
            return DataHazard(
                "a mapped dataset is stored on the CPU, and with `num_proc` the function runs "
                "in worker processes, which cannot use CUDA",
                False,
            )
        model_devices = {
            plan.move.code
            for loop in self.consuming_loops(entry)
            if (plan := self.loop_plan(loop)) is not None and plan.move is not None
        }
        evidence = self.distributed_evidence()
        if evidence is not None and not self._is_process_device(move, node, model_devices):
            return DataHazard(
                f"the script runs as several processes ({evidence}) and {move.describe()} is not "
                "each process's own device",
                False,
            )
        right_device = right_device and not (model_devices - {move.code})
        for loader in entry.loaders:
            workers = argument(loader, "num_workers", 5)
            if isinstance(workers, cst.Name):
                workers = self.scopes.latest_binding(workers.value, loader) or workers
            if workers is not None and not (
                isinstance(workers, cst.Integer) and workers.evaluated_value == 0
            ):
                return DataHazard(
                    "its DataLoader runs it in worker processes "
                    f"(`num_workers={code_of(workers)}`), which cannot use CUDA",
                    right_device,
                )
            pinned = argument(loader, "pin_memory", 7)
            if isinstance(pinned, cst.Name) and pinned.value not in ("True", "False"):
                pinned = self.scopes.latest_binding(pinned.value, loader) or pinned
            if pinned is not None and not is_name(pinned, "False"):
                return DataHazard(
                    f"its DataLoader pins the batches (`pin_memory={code_of(pinned)}`), which "
                    "works only on CPU tensors",
                    right_device,
                )
        if not entry.loaders:
            return DataHazard(
                "no DataLoader in this file is known to run it: with `num_workers > 0` it runs "
                "in worker processes, which cannot use CUDA",
                right_device,
            )
        if evidence is not None or move.kind != "accelerator":
            return None  # each process's own device, or the script's choice in one process
        others = sorted(model_devices - {move.code})
        if others:
            return DataHazard(
                f"the model is on `{others[0]}`, the data on {move.describe()}", False
            )
        return None

    def _is_process_device(
        self, move: DeviceMove, node: cst.CSTNode, model_devices: set[str]
    ) -> bool:
        """The move is to each process's own device: the rank's (`cuda:{local_rank}`), the
        current device after `set_device(local_rank)`, or the device every process moves its
        model to."""
        if move.code in model_devices:
            return True
        if move.method == "cuda":
            return not move.cuda_args and self.sets_current_device()
        device = move.expression
        return isinstance(device, cst.Name) and self.facts.moves.is_process_device(
            device.value, node
        )

    def _feeds_a_model(self, function: cst.FunctionDef | cst.Lambda) -> bool:
        """`function` calls a model that is on a device (`model(**inputs)`, `model.generate`)."""
        for call in self.context.subtree(function):
            if not isinstance(call, cst.Call):
                continue
            callee = call.func
            if isinstance(callee, cst.Attribute) and callee.attr.value in ("forward", "generate"):
                callee = callee.value
            if dotted_name(callee) is None:
                continue
            found = self.model_device(callee, call)
            if found is not None and (found.move is not None or found.pretrained or found.reason):
                return True
        return False

    def has_self_moving_trainer(self) -> bool:
        """A Hugging Face / Lightning trainer that moves batches to the model itself."""
        key = "flow.self_moving_trainer"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        result = any(
            isinstance(n, cst.Call)
            and dotted_name(n.func) is not None
            and self.names.qualified_name(n.func) in SELF_MOVING_TRAINERS
            for n in self.context.subtree(self.context.module)
        )
        self.context.shared[key] = result
        return result
