"""DF301: optimizer built or restored before the model is moved to its device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import statement_before
from devfix.codemods.analysis.flow.training import TrainingObject
from devfix.codemods.analysis.scopes import Body, Placement
from devfix.codemods.analysis.torch_names import EAGER_STATE_OPTIMIZERS
from devfix.codemods.optimizer_state_before_model_move.facts import EarlyState, Reordering
from devfix.types import Applicability, Edit

#: Compound statements that may be moved whole (their body runs once, where they stand).
_MOVABLE_COMPOUND = (cst.If, cst.With, cst.Try)


class OptimizerStateBeforeModelMove(DevicePass):
    """Optimizer created or restored before `model.to(device)`.

    ## What it does
    Finds `optimizer.load_state_dict(...)` (with the scheduler's and grad scaler's
    `load_state_dict` next to it) and optimizer constructors
    (`torch.optim.Adam(model.parameters())`) that run before the model they train is moved with
    `model.to(device)` / `model.cuda()` / `nn.DataParallel(model).cuda()` in the same function
    or script, and moves those statements to just after the move. A restored optimizer state
    also goes after the construction of a learning-rate scheduler built right after the move.

    The optimizer may be built by a function of the project named for one
    (`build_optimizer(cfg, model)`, `create_optimizer_v2(...)`; reported only when its state is
    restored, since what it builds is unknown) and train parameters gathered by helpers
    (`get_params(net.backbone)`) or bound first (`groups = model.param_groups()`). The restore
    may go through a checkpoint helper handed the optimizer (`load_checkpoint(path, model,
    optimizer)`, `utils.resume(...)`, also when the script keeps what it returns: `start_epoch =
    load_checkpoint(...)`; one defined in the same file counts only when it calls
    `load_state_dict`).

    Statements are moved only when nothing between them and the move reads what they change,
    the move itself does not need them, and the move does not wrap the model they use (after
    `net = DataParallel(net).cuda()` they would see the wrapper and its `module.` keys). When
    they cannot be moved and the state is restored, the model is moved to the same device
    right before the first of them instead (`net = net.cuda()`), provided that device is
    already known there and nothing in between runs the model (`net(x)`,
    `writer.add_graph(net, torch.rand(...))`); otherwise the finding is reported without a
    fix, with the line that blocks it.

    ## Why is this bad?
    `Optimizer.load_state_dict` casts the saved state to the device each parameter has *when it
    is called*; nothing moves it later. Restored before `model.to(device)`, Adam's `exp_avg`
    stays on the CPU while the parameters go to the GPU and the first `optimizer.step()` fails
    with `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!`. Optimizers that create their state in the constructor
    (`torch.optim.Adagrad`) fail the same way when built before the move. SGD, Adam and AdamW
    create state lazily, so building them early works today, but it breaks on XLA and with
    eager-state optimizers: for them the finding is reported without a fix (it says so), since
    reordering working code changes nothing a run can see.

    ## Example
    ```python
    optimizer = torch.optim.Adam(model.parameters())
    checkpoint = torch.load("checkpoint.pth", map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    model = model.to(device)
    ```

    ## Use instead
    ```python
    checkpoint = torch.load("checkpoint.pth", map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(checkpoint["optimizer"])
    ```

    ## Fix safety
    Safe when the moved statements are simple statements: `Module.to` keeps the parameter
    objects, so the optimizer trains the same parameters, and the state now lands on their
    device. Unsafe when a whole `if`/`with`/`try` block is moved (for example `if args.resume:`),
    since its other statements move too, and when the model is moved earlier instead: the
    statements in between (loading its weights, say) now see it on the device. Optimizers built
    in another function than the model move, and restores inside a helper that is not handed
    the optimizer, are not followed.

    ## References
    - `torch.optim.Optimizer.load_state_dict` docs (call it after creating the LR scheduler).
    - pytorch/pytorch#7844 (parameters keep their identity under `.to()`); microsoft/Cream#2.
    """

    CODE = "DF301"
    NAME = "optimizer-state-before-model-move"
    MESSAGE = "optimizer state is created or restored before the model is moved to its device"
    FIX_TITLE = "Move it after the model move"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("optim",)
    REQUIRED_WORDS = ("torch",)

    def visit_Module(self, node: cst.Module) -> bool:
        scopes: list[cst.CSTNode] = [node]
        scopes.extend(self.context.of_type(node, cst.FunctionDef))
        for scope in scopes:
            self._check_scope(scope)
        return False

    # -- one function (or the module) -------------------------------------------------------------

    def _check_scope(self, scope: cst.CSTNode) -> None:
        objects = self.facts.flow.training_objects(scope)
        optimizers = {name for name, obj in objects.items() if obj.kind == "optimizer"}
        if not optimizers:
            return
        candidates = self.facts.own(Reordering).early_optimizer_state(scope, objects)
        groups: dict[int, list[EarlyState]] = {}
        for candidate in candidates:
            groups.setdefault(id(candidate.move), []).append(candidate)
        for group in groups.values():
            if not any(c.kind == "load" for c in group):
                # What a project's factory builds is unknown: only its restored state is a bug.
                group = [c for c in group if not objects[c.name].factory]
            if group:
                self._fix_group(group, objects)

    # -- reordering ---------------------------------------------------------------------------

    def _fix_group(self, group: list[EarlyState], objects: dict[str, TrainingObject]) -> None:
        move = group[0].move
        first = min(group, key=lambda c: self.facts.scopes.line_of(c.node))
        model = self._moved(move)[0]
        move_text = self._code(move)
        loads = [c for c in group if c.kind == "load"]
        constructs = [c for c in group if c.kind == "construct"]
        message = self._message(loads, constructs, objects, move_text)
        if not loads and not any(
            objects[c.name].qualified in EAGER_STATE_OPTIMIZERS for c in constructs
        ):
            # Working code: the parameters keep their identity under `.to()` and the state
            # does not exist yet, so reordering it would change nothing a run can see.
            self.report(first.node, message=f"{message}; no fix: it runs correctly as written")
            return
        places: list[tuple[Placement, Placement]] = []
        for candidate in group:
            pair = self.facts.scopes.common_placement(candidate.node, move)
            if pair is None or pair[0].index >= pair[1].index:
                self.report(
                    first.node,
                    message=f"{message}; it runs in the same statement as the move, so it "
                    "cannot be reordered",
                )
                return
            places.append(pair)
        owners = {id(pair[1].owner) for pair in places}
        if len(owners) != 1:
            self._move_model_early(group, message, "its statements sit in different blocks")
            return
        body = places[0][1].body
        move_index = places[0][1].index
        moved = sorted({pair[0].index for pair in places})
        receivers = {c.name for c in group}
        # Scheduler and scaler state restored in between goes along, in order.
        for index in range(moved[0] + 1, move_index):
            if index not in moved and self.facts.own(Reordering).restores(
                body[index], objects, {"scheduler", "scaler"}
            ):
                moved.append(index)
        moved.sort()
        blocked = self.facts.own(Reordering).close_dependencies(body, moved, move_index, receivers)
        if blocked is not None:
            self._move_model_early(group, message, blocked)
            return
        for index in moved:
            statement = body[index]
            if not isinstance(statement, (cst.SimpleStatementLine, *_MOVABLE_COMPOUND)):
                line = self.facts.scopes.line_of(statement)
                reason = f"the statement at line {line} cannot be moved whole"
                self._move_model_early(group, message, reason)
                return
        conflict = self.facts.own(Reordering).rebinding_conflict(body, moved, move_index, model)
        if conflict is None:
            conflict = self._wrapped_by_move(body, moved, move)
        if conflict is not None:
            self._move_model_early(group, message, conflict)
            return
        restored = {c.name for c in loads}
        insert_at = self.facts.own(Reordering).insertion_index(
            body, moved, move_index, objects, restored
        )
        statements = [body[index] for index in moved]
        edits = [Edit(body[index], cst.RemovalSentinel.REMOVE) for index in moved]
        if insert_at == move_index:
            edits.append(
                Edit(body[move_index], cst.FlattenSentinel([body[move_index], *statements]))
            )
        else:
            # Constructions right after the move; restored state after the scheduler.
            early = [s for s in statements if self.facts.scopes.names_bound(s)]
            late = [s for s in statements if not self.facts.scopes.names_bound(s)]
            edits.append(Edit(body[move_index], cst.FlattenSentinel([body[move_index], *early])))
            edits.append(Edit(body[insert_at], cst.FlattenSentinel([body[insert_at], *late])))
        compound = any(not isinstance(s, cst.SimpleStatementLine) for s in statements)
        where = "after the scheduler is built" if insert_at > move_index else f"after `{move_text}`"
        self.report(
            first.node,
            message=f"{message}; move it {where}",
            fix_title=f"Move it after `{move_text}`",
            edits=edits,
            applicability=Applicability.UNSAFE if compound else Applicability.SAFE,
        )

    def _moved(self, move: cst.Call) -> tuple[str, bool]:
        return self.facts.moves.moved_module(move) or ("model", False)

    def _wrapped_by_move(self, body: Body, moved: list[int], move: cst.Call) -> str | None:
        """The move wraps the model (`DataParallel(net).cuda()`) and the moved statements use
        the model: after it they would see the wrapper (`module.` keys, no `net.head`)."""
        model, wraps = self._moved(move)
        if wraps and any(model in self.facts.scopes.names_read(body[i]) for i in moved):
            return (
                f"the moved statements use `{model}`, which the move wraps: after it they would "
                "see the wrapper (its state dict keys start with `module.`)"
            )
        return None

    def _move_model_early(self, group: list[EarlyState], message: str, reason: str) -> None:
        """The statements cannot follow the move: move the model before the first of them
        instead, to the same device, when that device is known there and nothing in between
        runs the model; else report `reason`."""
        first = min(group, key=lambda c: self.facts.scopes.line_of(c.node))
        move = first.move
        model = self._moved(move)[0]
        pair = self.facts.scopes.common_placement(first.node, move)
        definite = any(c.kind == "load" for c in group) or "a definite bug" in message
        if not definite or pair is None or pair[0].index >= pair[1].index:
            self.report(first.node, message=f"{message}; {reason}")
            return
        body, at = pair[0].body, pair[0].index
        anchor = body[at]
        if not isinstance(anchor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.report(first.node, message=f"{message}; {reason}")
            return
        needed = {model}.union(*(self.facts.scopes.names_read(a.value) for a in move.args))
        unknown = sorted(n for n in needed if not self.facts.scopes.visible_name(n, anchor))
        if unknown:
            names = ", ".join(f"`{n}`" for n in unknown)
            self.report(
                first.node,
                message=f"{message}; {reason}, and {names} is bound only after it, so the model "
                "cannot be moved earlier either",
            )
            return
        for index in range(at, pair[1].index):
            if self.facts.own(Reordering).runs_module(body[index], model):
                line = self.facts.scopes.line_of(body[index])
                self.report(
                    first.node,
                    message=f"{message}; {reason}, and line {line} runs `{model}` on its current "
                    "device, so the model cannot be moved earlier either",
                )
                return
        method = cst.ensure_type(move.func, cst.Attribute).attr.value
        arguments = ", ".join(self._code(a).rstrip(", ") for a in move.args)
        text = f"{model}.{method}({arguments})"
        parent = self.context.parent(move)
        if isinstance(parent, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == model for t in parent.targets
        ):
            text = f"{model} = {text}"
        # Blank lines above the anchor go above the move; its comments stay with it.
        comments = [i for i, line in enumerate(anchor.leading_lines) if line.comment is not None]
        split = comments[0] if comments else len(anchor.leading_lines)
        self.report(
            first.node,
            message=f"{message}; {reason}: move `{model}` to its device before it instead",
            fix_title=f"Move `{model}` with `{text}` before it",
            edits=[statement_before(anchor, text, split)],
            applicability=Applicability.UNSAFE,
        )

    def _message(
        self,
        loads: list[EarlyState],
        constructs: list[EarlyState],
        objects: dict[str, TrainingObject],
        move_text: str,
    ) -> str:
        if loads:
            names = ", ".join(sorted({f"`{c.label}`" for c in loads}))
            return (
                f"{names} runs before `{move_text}`: the restored state is cast to the "
                "parameters' device at load time and stays on the old device"
            )
        eager = sorted(
            {
                objects[c.name].qualified.rsplit(".", 1)[1]
                for c in constructs
                if objects[c.name].qualified in EAGER_STATE_OPTIMIZERS
            }
        )
        names = ", ".join(sorted({f"`{c.name}`" for c in constructs}))
        if eager:
            return (
                f"{names} is built before `{move_text}`: `{eager[0]}` creates its state in the "
                "constructor, on the old device (a definite bug)"
            )
        return (
            f"{names} is built before `{move_text}` (robustness: this optimizer creates its "
            "state lazily, so it works today, but eager-state optimizers and XLA break)"
        )

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)
