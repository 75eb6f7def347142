"""DF104: submodules kept in a plain list/dict/tuple, or built inside `forward`."""

from __future__ import annotations

from collections import Counter

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.modules import (
    AttributeUses,
    self_attribute,
    self_name,
    valid_module_key,
)
from devfix.codemods.analysis.scopes import Scopes, target_names
from devfix.codemods.analysis.torch_names import MODULE_SELF_METHODS, STATEFUL_LAYERS
from devfix.types import Applicability, Edit

LIST_MUTATORS = frozenset({"append", "insert", "extend"})


class UnregisteredSubmodules(DevicePass):
    """Submodules held in a plain Python list, dict or tuple, or constructed inside `forward`.

    ## What it does
    Finds attributes of an `nn.Module` that hold submodules in a plain container: a list or
    tuple literal or comprehension of modules (`self.layers = [nn.Linear(d, d) for _ in
    range(n)]`), a dict of modules, or an empty list/dict filled with `.append(nn.Conv2d(...))`,
    `.extend(...)`, `.insert(...)` or `self.heads["a"] = nn.Linear(...)`. It also reports stateful
    layers constructed inside `forward` (`nn.BatchNorm2d(c)(x)`).

    ## Why is this bad?
    `nn.Module` only registers submodules assigned directly as attributes or held in
    `nn.ModuleList` / `nn.ModuleDict` / `nn.Sequential`. Modules in a plain container are
    invisible to `model.to(device)` (their weights stay on the CPU: `Input type
    (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same`, `Expected
    all tensors to be on the same device ... cuda:0 and cpu!`), to `model.parameters()` (so the
    optimizer never trains them), to `state_dict()`, `model.eval()` and DataParallel
    replication. A layer built in `forward` gets fresh random weights on every call, on the CPU,
    and is never trained.

    ## Example
    ```python
    class Net(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.layers = [nn.Linear(d, d) for _ in range(n)]
            self.convs = []
            for c in (8, 16):
                self.convs.append(nn.Conv2d(c, c, 3))
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
            self.convs = nn.ModuleList()
            for c in (8, 16):
                self.convs.append(nn.Conv2d(c, c, 3))
    ```
    A dict becomes `nn.ModuleDict` (only when every key is a string literal without a dot, as
    `ModuleDict` requires). `nn.ModuleList` supports indexing, slicing, iteration, `len`,
    `append`, `extend`, `insert`, `pop` and `+=`; a container also used with a method that only a
    list or dict has (`.index`, `.sort`, `.get`, ...) is reported, not rewritten. Only
    containers whose elements are module *constructions* count: a list of modules that are
    already attributes (`[self.a, self.b]`) is registered already and left alone. A layer built
    inside `forward` is reported without a fix: move its construction to `__init__`
    (`self.bn = nn.BatchNorm2d(c)`) and call `self.bn(x)` in `forward`.

    ## Fix safety
    Unsafe: the submodules join `model.parameters()` (an optimizer built from them now trains
    layers that used to stay at their random initialisation), `state_dict()` gains their keys
    (a checkpoint saved before the fix no longer loads with `strict=True`), and `model.eval()`
    now reaches them (dropout and batch norm inside them change behaviour in evaluation).

    ## References
    - PyTorch docs, `torch.nn.ModuleList`, `torch.nn.ModuleDict`.
    - pytorch/pytorch#8017, #15005, #21905; Lightning-AI/pytorch-lightning#2623;
      syuu1987/geekTime-semantic-segmentation#1 (a module built in `forward`).
    """

    CODE = "DF104"
    NAME = "unregistered-submodules"
    MESSAGE = "submodules in a plain container are not registered; `model.to()` does not move them"
    FIX_TITLE = "Hold them in `nn.ModuleList` / `nn.ModuleDict`"
    APPLICABILITY = Applicability.UNSAFE

    # -- containers assigned in __init__ -----------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Attribute):
            return
        value = node.value
        if not isinstance(
            value,
            (
                cst.List,
                cst.Tuple,
                cst.ListComp,
                cst.GeneratorExp,
                cst.Dict,
                cst.DictComp,
                cst.BinaryOperation,
                cst.Name,
            ),
        ):
            return
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.owner is None or not function.owner.is_module:
            return
        if not self.facts.modules.is_construction(function):
            return  # `__init__` and the helpers only it calls build the module
        self_var = self_name(function.node)
        attr = self_attribute(node.targets[0].target, self_var or "")
        if attr is None or self_var is None:
            return
        classdef = function.owner.node
        if isinstance(value, cst.Name):
            kind, held, unknown = self._local_list(value.value, node, function.node)
        else:
            kind, held, unknown = self._contents(value)
        if kind is None:
            return
        uses = AttributeUses.collect(self.facts.modules, classdef, attr, node)
        if uses.registered_elsewhere:
            return  # `nn.Sequential(*self.layers)` registers the same modules already
        held = Counter(held)
        held["module"] += uses.added_modules
        held["parameter"] += uses.added_parameters
        unknown += uses.added_unknown
        if held["module"] and held["parameter"]:
            unknown += held["parameter"]  # one container class holds one kind
            held["parameter"] = 0
        member = "module" if held["module"] else "parameter"
        if held[member] == 0:
            return
        members = "modules" if member == "module" else "parameters"
        prefix = "Module" if member == "module" else "Parameter"
        container_class = prefix + ("List" if kind == "list" else "Dict")
        container = f"nn.{container_class}"
        shown = f"self.{attr}"
        if unknown:
            self.report(
                node,
                message=(
                    f"`{shown}` holds {members} in a plain {kind} that `model.to()` does not "
                    f"move, but also values that are not provably {members}; use `{container}` "
                    f"for the {members}"
                ),
            )
            return
        blocker = uses.blocker(kind)
        if blocker is None and kind == "dict":
            blocker = _dict_key_problem(value, uses, container)
        if blocker is not None:
            self.report(
                node,
                message=(
                    f"`{shown}` holds {members} in a plain {kind} that `model.to()` does not "
                    f"move; {blocker}, so it is not rewritten to `{container}`"
                ),
            )
            return
        spelled, imports = self.facts.names.nn_reference(container_class)
        replacement = _wrap(spelled, value)
        self.report(
            node,
            message=(
                f"`{shown}` holds {members} in a plain {kind}: `model.to()`, "
                f"`model.parameters()` and `state_dict()` never see them; use `{container}`"
            ),
            fix_title=f"Use `{container}`",
            edits=[Edit(value, replacement)],
            imports=imports,
        )

    def _contents(self, value: cst.BaseExpression) -> tuple[str | None, Counter[str], int]:
        """("list" | "dict" | None, modules and parameters constructed, other values) held by
        a literal or comprehension."""
        held: Counter[str] = Counter()
        kind_of = self.facts.modules.held_kind
        if isinstance(value, (cst.List, cst.Tuple)):
            unknown = 0
            for element in value.elements:
                found = None if isinstance(element, cst.StarredElement) else kind_of(element.value)
                if found is None:
                    unknown += 1
                else:
                    held[found] += 1
            return "list", held, unknown
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            found = kind_of(value.elt)
            return ("list", Counter({found: 1}), 0) if found else (None, held, 0)
        if isinstance(value, cst.Dict):
            unknown = 0
            for item in value.elements:
                found = kind_of(item.value) if isinstance(item, cst.DictElement) else None
                if found is None:
                    unknown += 1
                else:
                    held[found] += 1
            return "dict", held, unknown
        if isinstance(value, cst.DictComp):
            found = kind_of(value.value)
            return ("dict", Counter({found: 1}), 0) if found else (None, held, 0)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            # `[nn.Linear(d, d)] * n`: one module repeated (shared weights), still unregistered.
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if isinstance(side, cst.List) and isinstance(other, (cst.Name, cst.Integer)):
                    kind, inner, unknown = self._contents(side)
                    return (kind, inner, unknown) if kind == "list" else (None, held, 0)
        return None, held, 0

    def _local_list(
        self, name: str, origin: cst.Assign, init: cst.FunctionDef
    ) -> tuple[str | None, Counter[str], int]:
        """`layers = []; layers.append(nn.Linear(...)); self.layers = layers`: the local list's
        contents, when its only uses are those (so its modules are registered nowhere else)."""
        none: tuple[str | None, Counter[str], int] = (None, Counter(), 0)
        bound: list[cst.BaseExpression] = []
        held: Counter[str] = Counter()
        unknown = 0
        mutator_receivers: set[int] = set()
        for node in self.facts.scopes.nodes(init.body):
            if isinstance(node, cst.Assign) and node is not origin:
                for target in node.targets:
                    for sub in target_names(target.target):
                        if sub.value == name:
                            bound.append(node.value)
            elif isinstance(node, (cst.AugAssign, cst.For, cst.CompFor, cst.AnnAssign)):
                if name in {n.value for n in target_names(node.target)}:
                    return none
            elif (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == name
            ):
                if node.func.attr.value not in LIST_MUTATORS or not node.args:
                    return none
                mutator_receivers.add(id(node.func.value))
                added = node.args[-1].value
                if node.func.attr.value == "extend":
                    added_values = (
                        [e.value for e in added.elements]
                        if isinstance(added, (cst.List, cst.Tuple))
                        else [None]
                    )
                else:
                    added_values = [added]
                for added_value in added_values:
                    found = (
                        self.facts.modules.held_kind(added_value)
                        if added_value is not None
                        else None
                    )
                    if found is None:
                        unknown += 1
                    else:
                        held[found] += 1
        if len(bound) != 1 or not isinstance(bound[0], (cst.List, cst.ListComp)):
            return none
        # Every other read of the name (`nn.Sequential(*layers)`, `return layers`) disqualifies it.
        attribute_names = {
            id(node.attr)
            for node in self.facts.scopes.nodes(init.body)
            if isinstance(node, cst.Attribute)
        }
        keywords = {
            id(node.keyword)
            for node in self.facts.scopes.nodes(init.body)
            if isinstance(node, cst.Arg) and node.keyword is not None
        }
        for node in self.facts.scopes.nodes(init.body):
            if id(node) in attribute_names or id(node) in keywords:
                continue
            if (
                isinstance(node, cst.Name)
                and node.value == name
                and id(node) not in mutator_receivers
                and node is not origin.value
                and not _is_binding(self.facts.scopes, node, bound[0], init)
            ):
                return none
        kind, first_held, first_unknown = self._contents(bound[0])
        if kind is None:
            return none
        return kind, held + first_held, unknown + first_unknown

    # -- layers built in forward -------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, (cst.Name, cst.Attribute)):
            return
        tail = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
        if not tail[:1].isupper():
            return
        qualified = self.facts.modules.constructed_module(node)
        if qualified is None:
            return
        function = self.facts.modules.enclosing_function(node)
        if function is None or function.name != "forward":
            return
        if function.owner is None or not function.owner.is_module:
            return
        if self._kept_on_self(node, function.node):
            return  # `self.fc = nn.Linear(...)` in forward: lazy initialisation, registered once
        stateful = qualified in STATEFUL_LAYERS
        local = self.facts.modules.local_module_class(qualified)
        if local is not None:
            stateful = bool(self.facts.modules.class_info(local).layers)
        if not stateful:
            return
        short = qualified.replace("torch.nn.", "nn.", 1)
        self.report(
            node,
            message=(
                f"`{short}(...)` is constructed inside `forward`: a new layer with fresh weights "
                "on the CPU at every call, never moved by `model.to()` nor trained; construct it "
                f"once in `__init__` (`self.<name> = {short}(...)`) and call `self.<name>(...)` "
                "here"
            ),
        )

    def _kept_on_self(self, node: cst.Call, function: cst.FunctionDef) -> bool:
        current: cst.CSTNode = node
        parent = self.context.parent(current)
        while (
            isinstance(parent, cst.Attribute)
            and parent.value is current
            and parent.attr.value in MODULE_SELF_METHODS
        ):
            call = self.context.parent(parent)
            if not isinstance(call, cst.Call):
                return False
            current, parent = call, self.context.parent(call)
        if isinstance(parent, cst.Assign):
            self_var = self_name(function) or ""
            return any(self_attribute(t.target, self_var) is not None for t in parent.targets)
        return False


def _is_binding(
    scopes: Scopes, name: cst.Name, value: cst.BaseExpression, init: cst.FunctionDef
) -> bool:
    """`name` is the target of the assignment whose value is `value`."""
    for node in scopes.nodes(init.body):
        if isinstance(node, cst.Assign) and node.value is value:
            return any(t.target is name for t in node.targets)
    return False


def _dict_key_problem(value: cst.BaseExpression, uses: AttributeUses, container: str) -> str | None:
    rule = f"`{container}` keys must be strings without a dot"
    if uses.bad_keys:
        return f"a key is not a string literal ({rule})"
    if isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement) and not valid_module_key(element.key):
                return f"a key is not a string literal ({rule})"
    if isinstance(value, cst.DictComp):
        return f"its keys are computed ({rule})"
    return None


def _wrap(spelled: str, value: cst.BaseExpression) -> cst.Call:
    func = cst.parse_expression(spelled)
    empty = isinstance(value, (cst.List, cst.Dict, cst.Tuple)) and not value.elements
    if empty:
        return cst.Call(func=func)
    inner = value
    if isinstance(value, cst.Tuple) and not value.lpar:
        inner = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=func, args=[cst.Arg(value=inner)])
