"""DF104: submodules kept in a plain list/dict/tuple, or built inside `forward`."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import wrapped_in_call
from devfix.codemods.unregistered_submodules.facts import Submodules
from devfix.codemods.unregistered_submodules.late_layers import LateLayers
from devfix.types import Applicability, Edit


class UnregisteredSubmodules(DevicePass):
    """Submodules held in a plain Python list, dict or tuple, or constructed inside `forward`.

    ## What it does
    Finds attributes of an `nn.Module` that hold submodules in a plain container: a list or
    tuple literal or comprehension of modules (`self.layers = [nn.Linear(d, d) for _ in
    range(n)]`), a dict of modules, or an empty list/dict filled with `.append(nn.Conv2d(...))`,
    `.extend(...)`, `.insert(...)` or `self.heads["a"] = nn.Linear(...)`, and wraps them in the
    matching `nn` container. It also finds stateful layers constructed inside `forward`
    (`nn.BatchNorm2d(c)(x)`) and builds them once in `__init__`, and layers a model's method
    builds when the script calls it after moving the model (`model = Net(...).to(device)`, then
    `model.build_layers()`): the model is moved after that call instead.

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
        found = self.facts.own(Submodules).plain_container(node)
        if found is None:
            return
        kind, members = found.kind, found.members
        container = f"nn.{found.container_class}"
        shown = f"self.{found.attr}"
        if found.unknown:
            self.report(
                node,
                message=(
                    f"`{shown}` holds {members} in a plain {kind} that `model.to()` does not "
                    f"move, but also values that are not provably {members}; use `{container}` "
                    f"for the {members}"
                ),
            )
            return
        if found.blocker is not None:
            self.report(
                node,
                message=(
                    f"`{shown}` holds {members} in a plain {kind} that `model.to()` does not "
                    f"move; {found.blocker}, so it is not rewritten to `{container}`"
                ),
            )
            return
        spelled, imports = self.facts.names.nn_reference(found.container_class)
        computed = (
            f" (its keys are computed: `{container}` raises at construction if one is not a "
            "string or holds a dot)"
            if found.keys == "computed"
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
            edits=[Edit(node.value, wrapped_in_call(spelled, node.value))],
            imports=imports,
        )

    # -- layers built in forward -------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.facts.own(Submodules).built_in_forward(node)
        function = self.facts.scopes.enclosing_function(node)
        if qualified is None or function is None:
            return
        short = qualified.replace("torch.nn.", "nn.", 1)
        problem = (
            f"`{short}(...)` is constructed inside `forward`: a new layer with fresh weights "
            "on the CPU at every call, never moved by `model.to()` nor trained"
        )
        hoist = self.facts.own(Submodules).hoist(node, function)
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

    # -- layers built after the model was moved ------------------------------------------------

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        late = self.facts.own(LateLayers).built_after_move(node)
        if late is not None:
            self.report(
                node,
                message=f"`{late.model}.{late.builder}()` builds layers after `{late.model}` was "
                f"moved with `{late.move.lstrip('.')}` (line {late.move_line}): they stay on the "
                "CPU; build them first, then move the model",
                fix_title=f"Move `{late.model}` after `{late.builder}()`",
                edits=late.edits,
            )
