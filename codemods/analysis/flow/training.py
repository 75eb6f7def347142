"""Training code: optimizers, schedulers and grad scalers and the models they are built on,
optimizer state created before the model's move, whether the file trains, runs as a script,
and what it logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.flow.calls import CallSites
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    dotted_name,
    root_name,
)
from devfix.codemods.analysis.torch_names import (
    GRAD_SCALERS,
    OPTIMIZER_CLASS_NAMES,
    OTHER_OPTIMIZERS,
)

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


#: Methods that run a training routine when called with data (`model.train()` alone does not).
_TRAINING_ROUTINES = frozenset({"train", "fit", "train_model", "train_epoch", "train_one_epoch"})


@dataclass
class TrainingObject:
    """A name bound to an optimizer, a learning-rate scheduler or a grad scaler."""

    kind: str  # "optimizer" | "scheduler" | "scaler"
    qualified: str
    models: set[str] = field(default_factory=set)
    #: For a scheduler: the optimizer names it was built on.
    optimizers: set[str] = field(default_factory=set)
    #: Built by a function of the project named for an optimizer (`build_optimizer(cfg,
    #: model)`): what it builds, and whether it keeps its state lazily, is unknown.
    factory: bool = False


#: Words of a function name that say it returns something else than an optimizer
#: (`get_optimizer_params`, `optimizer_cls`, `load_optimizer_state`, `prepare_optimizer`).
_NOT_AN_OPTIMIZER = frozenset(
    {"param", "params", "parameters", "group", "groups", "state", "states", "dict", "sched",
     "scheduler", "cls", "class", "type", "name", "kwargs", "args", "config", "cfg", "lr",
     "prepare", "wrap", "step", "zero", "grad", "save", "to", "device"}
)  # fmt: skip


def _names_an_optimizer(tail: str) -> bool:
    """`build_optimizer`, `create_optimizer_v2`, `make_optim`, `FusedAdam`; not
    `get_optimizer_grouped_parameters` or `optimizer_cls`."""
    if tail in OPTIMIZER_CLASS_NAMES:
        return True
    words = set(re.split(r"_+", tail.lower()))
    return bool(words & {"optimizer", "optim", "optimizers"}) and not words & _NOT_AN_OPTIMIZER


def _roots(values: list[cst.BaseExpression]) -> set[str]:
    """The root names of the names and attributes among `values` (`model` of `model.head`)."""
    return {
        root
        for value in values
        if isinstance(value, (cst.Name, cst.Attribute)) and (root := root_name(value)) is not None
    }


class TrainingCode(CallSites):
    """Optimizers, training objects, training calls, and the script's role and output."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._module_objects: dict[str, TrainingObject] | None = None

    def training_objects(self, scope: cst.CSTNode) -> dict[str, TrainingObject]:
        """Optimizers, schedulers and scalers bound in the module and then in `scope`."""
        if self._module_objects is None:
            self._module_objects = self._bound_in(self.context.module)
        found = dict(self._module_objects)
        if scope is not self.context.module:
            found.update(self._bound_in(scope))
        return found

    def _bound_in(self, scope: cst.CSTNode) -> dict[str, TrainingObject]:
        found: dict[str, TrainingObject] = {}
        for statement in self.scopes.statements_of_type(scope, cst.Assign):
            if not (
                isinstance(statement, cst.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)
                and isinstance(statement.value, cst.Call)
            ):
                continue
            call = statement.value
            kind, qualified = self._kind(call)
            if kind is None or qualified is None:
                continue
            obj = TrainingObject(kind, qualified, factory=kind == "factory")
            reads = set().union(*(self.scopes.names_read(arg.value) for arg in call.args))
            if kind in ("optimizer", "factory"):
                obj.kind = "optimizer"
                obj.models = self._parameter_owners(call, obj.factory)
            elif kind == "scheduler":
                obj.optimizers = reads
            found[statement.targets[0].target.value] = obj
        return found

    def _kind(self, call: cst.Call) -> tuple[str | None, str | None]:
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None, None
        qualified = self.names.qualified_name(call.func)
        if qualified is None:
            return None, None
        if qualified.startswith("torch.optim.lr_scheduler.") or (
            qualified.startswith("transformers.") and "schedule" in qualified
        ):
            return "scheduler", qualified
        if qualified in GRAD_SCALERS:
            return "scaler", qualified
        if (
            qualified.startswith("torch.optim.")
            and not qualified.startswith("torch.optim.swa_utils.")
            and qualified.rsplit(".", 1)[1][:1].isupper()
        ) or qualified in OTHER_OPTIMIZERS:
            return "optimizer", qualified
        if not qualified.startswith("torch.") and _names_an_optimizer(call_tail(call.func) or ""):
            return "factory", qualified
        return None, None

    def _parameter_owners(self, call: cst.Call, factory: bool) -> set[str]:
        """Names whose parameters an optimizer built by `call` may train: the roots of
        `model.parameters()` / `named_parameters()`, of modules handed to parameter helpers
        (`get_params(net.backbone, "weight")`), of what a name in the parameters was bound to
        (`params = model.param_groups(); Adam(params)`), and for a factory the modules it is
        given (`build_optimizer(cfg, model)`). Names that are not modules come along; callers
        match them against the modules they move."""
        owners: set[str] = set()
        if factory:
            values = [arg.value for arg in call.args]
            owners |= _roots(values)
        else:
            params = argument(call, "params")
            values = [] if params is None else [params]
        for value in values:
            owners |= self._owners_in(value)
            for name in self.scopes.names_read(value):
                bound = self.scopes.latest_binding(name, call)
                if bound is None:
                    continue
                owners |= self._owners_in(bound)
                if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute):
                    root = root_name(bound.func.value)  # `model.set_train_params(...)`
                    if root is not None and root not in self.names.import_table():
                        owners.add(root)
        return owners

    def _owners_in(self, expr: cst.BaseExpression) -> set[str]:
        owners: set[str] = set()
        for node in self.context.subtree(expr):
            if not isinstance(node, cst.Call):
                continue
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                "parameters",
                "named_parameters",
            ):
                values = [node.func.value]
            else:
                values = [arg.value for arg in node.args]
            owners |= _roots(values)
        return owners

    def trains(self) -> bool:
        """The file trains a model: `loss.backward()`, an optimizer's `.step()`, or a training
        routine called with its data (`net.train(songs=..., epoch=...)`, `trainer.fit(model)`;
        `model.train()` alone only switches the mode)."""
        key = "flow.trains"
        cached = self.context.shared.get(key)
        if isinstance(cached, bool):
            return cached
        optimizers = {
            name
            for scope in self._scopes_with_functions()
            for name, obj in self._bound_in(scope).items()
            if obj.kind == "optimizer"
        }
        found = False
        for node in self.context.subtree(self.context.module):
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
                continue
            method = node.func.attr.value
            if method == "backward" or (
                method == "step" and dotted_name(node.func.value) in optimizers
            ):
                found = True
            elif method in _TRAINING_ROUTINES and any(
                arg.keyword is None or arg.keyword.value != "mode" for arg in node.args
            ):
                only = node.args[0].value if len(node.args) == 1 else None
                found = not (
                    isinstance(only, cst.Name)
                    and (only.value in ("True", "False") or self._flag_parameter(only))
                )
            if found:
                break
        self.context.shared[key] = found
        return found

    def _flag_parameter(self, name: cst.Name) -> bool:
        """`mode` in `def train(self, mode=True): super().train(mode)`: a parameter of the
        enclosing function whose default is a bool, handed on as the mode."""
        function = self.scopes.enclosing_function(name)
        if function is None:
            return False
        return any(
            param.name.value == name.value
            and isinstance(param.default, cst.Name)
            and param.default.value in ("True", "False")
            for param in function.params.params
        )

    def _scopes_with_functions(self) -> Iterator[cst.CSTNode]:
        yield self.context.module
        for node in self.context.subtree(self.context.module):
            if isinstance(node, cst.FunctionDef):
                yield node

    def calls_backward(self, root: cst.CSTNode, _depth: int = 0) -> bool:
        """A `.backward()` call under `root`, or in a module-level function called there
        (followed two calls deep): the code under `root` trains."""
        module = self.context.module
        for call in self.scopes.find(root, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
                return True
            if _depth < 2 and isinstance(call.func, cst.Name):
                for statement in module.body:
                    if (
                        isinstance(statement, cst.FunctionDef)
                        and statement.name.value == call.func.value
                        and statement.body is not root
                        and self.calls_backward(statement.body, _depth + 1)
                    ):
                        return True
        return False

    def builds_optimizer(self, call: cst.Call) -> bool:
        """An optimizer is built here: one of torch.optim (schedulers aside), a known optimizer
        class of another library (`FusedAdam`), or a factory named for one
        (`build_optimizer(cfg, model)`). Looser than :meth:`training_objects`: enough to tell
        which models a script trains."""
        qualified = self.names.qualified_name(call.func) or ""
        if qualified.startswith("torch.optim.") and ".lr_scheduler" not in qualified:
            return True
        tail = call_tail(call.func) or ""
        return tail in OPTIMIZER_CLASS_NAMES or "optimizer" in tail.lower()
