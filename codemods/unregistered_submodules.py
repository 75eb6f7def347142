"""DF104: submodules kept in a plain list/dict/tuple, or built inside `forward`."""

from __future__ import annotations

from collections import Counter

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.modules import AttributeUses, self_attribute, self_name
from devfix.codemods.analysis.names import code_of
from devfix.codemods.analysis.torch_names import MODULE_SELF_METHODS, STATEFUL_LAYERS
from devfix.types import Applicability, Edit


class UnregisteredSubmodules(DevicePass):
    """Submodules held in a plain Python list, dict or tuple, or constructed inside `forward`.

    ## What it does
    Finds attributes of an `nn.Module` that hold submodules in a plain container: a list or
    tuple literal or comprehension of modules (`self.layers = [nn.Linear(d, d) for _ in
    range(n)]`), a dict of modules, or an empty list/dict filled with `.append(nn.Conv2d(...))`,
    `.extend(...)`, `.insert(...)` or `self.heads["a"] = nn.Linear(...)`, and wraps them in the
    matching `nn` container. It also finds stateful layers constructed inside `forward`
    (`nn.BatchNorm2d(c)(x)`) and builds them once in `__init__`.

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
    A dict becomes `nn.ModuleDict` / `nn.ParameterDict`: with string-literal keys, and with
    computed keys (`{node_type: nn.Parameter(...) for node_type in sizes}`,
    `self.heads[task] = nn.Linear(...)`), which index as before (`self.W[key]`, `.items()`).
    A key that is provably not a string (a number, a tuple, a dotted string, the index of a
    `range` or `enumerate` loop) is reported, not rewritten. `nn.ModuleList` supports indexing,
    slicing, iteration, `len`, `append`, `extend`, `insert`, `pop` and `+=`; a container also
    used with a method that only a list or dict has (`.index`, `.sort`, `.get`, ...) is
    reported, not rewritten. Only containers whose elements are module *constructions* count:
    a list of modules that are already attributes (`[self.a, self.b]`) is registered already
    and left alone.

    A stateful layer built and called inside `forward` (`x = nn.BatchNorm2d(self.c)(x)`) is
    built once in `__init__` instead (`self.bn1 = nn.BatchNorm2d(self.c)`, after the
    attributes it reads and the layers `__init__` already builds) and called as `self.bn1(x)`.
    That needs arguments `__init__` can compute (constants, `self.<attr>` assigned once at the
    top level of `__init__`), one construction per call (not under an `if`, in a loop or a
    comprehension), and a class with its own `__init__` that calls `super().__init__()`;
    otherwise it is reported with the reason. Stateless layers built inline (`nn.ReLU()(x)`)
    are left alone.

    ## Fix safety
    Unsafe: the submodules join `model.parameters()` (an optimizer built from them now trains
    layers that used to stay at their random initialisation), `state_dict()` gains their keys
    (a checkpoint saved before the fix no longer loads with `strict=True`), and `model.eval()`
    now reaches them (dropout and batch norm inside them change behaviour in evaluation: a
    batch norm built once keeps running statistics and uses them in `eval()`, where the one
    built at every call normalised with the batch's). A dict with computed keys is a judgement
    that the keys are strings without a dot: if one is not, `nn.ModuleDict` /
    `nn.ParameterDict` raises when the model is built (`TypeError`/`KeyError`), so the risk
    shows at once rather than in training.

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
        contents = self.facts.submodules.contents(value, node, function.node)
        if contents is None:
            return
        kind, held, unknown = contents
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
        keys = self.facts.submodules.dict_keys(value, uses) if kind == "dict" else "literal"
        if blocker is None and keys == "invalid":
            blocker = f"a key is not a string (`{container}` keys must be strings without a dot)"
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
        computed = (
            f" (its keys are computed: `{container}` raises at construction if one is not a "
            "string or holds a dot)"
            if keys == "computed"
            else ""
        )
        self.report(
            node,
            message=(
                f"`{shown}` holds {members} in a plain {kind}: `model.to()`, "
                f"`model.parameters()` and `state_dict()` never see them; use `{container}`"
                + computed
            ),
            fix_title=f"Use `{container}`",
            edits=[Edit(value, replacement)],
            imports=imports,
        )

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
        problem = (
            f"`{short}(...)` is constructed inside `forward`: a new layer with fresh weights "
            "on the CPU at every call, never moved by `model.to()` nor trained"
        )
        hoist = self.facts.submodules.hoist(node, function.node)
        if isinstance(hoist, str):
            self.report(
                node,
                message=(
                    f"{problem}; construct it once in `__init__` (`self.<name> = {short}(...)`) "
                    f"and call `self.<name>(...)` here (not done automatically: {hoist})"
                ),
            )
            return
        self.report(
            node,
            message=f"{problem}; construct it once in `__init__` as `self.{hoist.name}`",
            fix_title=f"Build it once in `__init__` as `self.{hoist.name}`",
            edits=[
                Edit(node, hoist.reference),
                Edit(hoist.anchor, cst.FlattenSentinel([hoist.anchor, hoist.statement])),
            ],
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


def _wrap(spelled: str, value: cst.BaseExpression) -> cst.Call:
    func = cst.parse_expression(spelled)
    empty = isinstance(value, (cst.List, cst.Dict, cst.Tuple)) and not value.elements
    if empty:
        return cst.Call(func=func)
    inner = value
    if isinstance(value, cst.Tuple) and not value.lpar:
        inner = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    lines = code_of(value).splitlines()
    if len(lines) == 1 or lines[0].rstrip() in ("[", "{", "(", "(["):
        return cst.Call(func=func, args=[cst.Arg(value=inner)])  # `nn.ModuleDict({` hugs
    # `{key: ...` + newline + `for ...}`: the value on lines of its own, so that the first line
    # does not grow by the container's name.
    return cst.Call(
        func=func,
        whitespace_before_args=_line_break("    "),
        args=[cst.Arg(value=inner, whitespace_after_arg=_line_break(""))],
    )


def _line_break(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(indent),
    )
