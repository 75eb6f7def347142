"""Optimizer state before the model move, and reordering the statements of one block.

Which optimizers are built or restored (`load_state_dict`, directly or through a checkpoint
helper) before the model they are built on is moved, whether a statement runs the model, which
statements must move along with the ones a fix moves past a later statement (DF301 moves
optimizer code after the model move), what would stop them, and where they go.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.training import TrainingObject
from devfix.codemods.analysis.names import call_tail
from devfix.codemods.analysis.scopes import Body


@dataclass
class EarlyState:
    """Optimizer state created (`kind` "construct") or restored ("load") by `node`, for the
    optimizer `name`, before `move`, the model move it must follow; `label`: how it is
    restored, for a message (`opt.load_state_dict`)."""

    node: cst.Call
    kind: str
    name: str
    move: cst.Call
    label: str = ""


class Reordering(Analysis):
    """Optimizer state built or restored before the model move, and statement moves within one
    block (`body`, indices into it), for one file."""

    def restores(
        self, statement: cst.CSTNode, objects: dict[str, TrainingObject], kinds: set[str]
    ) -> bool:
        """`x.load_state_dict(...)` alone on a line, `x` a training object of one of `kinds`."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        small = statement.body[0]
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return False
        func = small.value.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "load_state_dict"
            and isinstance(func.value, cst.Name)
            and func.value.value in objects
            and objects[func.value.value].kind in kinds
        )

    def close_dependencies(
        self,
        body: Body,
        moved: list[int],
        move_index: int,
        receivers: set[str],
    ) -> str | None:
        """Add to `moved` (indices into `body`, all before `move_index`) the statements between
        them that read what a moved statement binds or changes (a method of `receivers`); why
        they cannot all move (a compound statement or one that trains reads it), else None."""
        changed: set[str] = set()
        for index in range(moved[0], move_index):
            statement = body[index]
            if index in moved:
                changed |= self.scopes.names_bound(statement) | (
                    receivers & self.scopes.names_read(statement)
                )
                continue
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue  # runs later, when it is called
            reads = self.scopes.names_read(statement)
            if reads & changed:
                if isinstance(statement, cst.SimpleStatementLine) and not self._calls_model(
                    statement
                ):
                    moved.append(index)
                    moved.sort()
                    changed |= self.scopes.names_bound(statement)
                    continue
                names = ", ".join(f"`{n}`" for n in sorted(reads & changed))
                line = self.scopes.line_of(statement)
                return (
                    f"line {line} uses {names} before the model move, so "
                    "the statements cannot be reordered"
                )
        return None

    def _calls_model(self, statement: cst.CSTNode) -> bool:
        """A statement that trains or steps (`optimizer.step()` in a loop body, `train(...)`)."""
        return any(
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("step", "backward")
            for call in self.context.subtree(statement)
        )

    def rebinding_conflict(
        self,
        body: Body,
        moved: list[int],
        move_index: int,
        model: str,
    ) -> str | None:
        """Why the `moved` statements cannot follow the move at `move_index`: a statement they
        skip rebinds what they read, or the move reads what they bind; None if nothing does."""
        for index in moved:
            reads = self.scopes.names_read(body[index])
            for later in range(index + 1, move_index + 1):
                if later in moved:
                    continue
                bound = self.scopes.names_bound(body[later])
                if later == move_index:
                    bound.discard(model)
                clash = reads & bound
                if clash:
                    names = ", ".join(f"`{n}`" for n in sorted(clash))
                    line = self.scopes.line_of(body[later])
                    return f"line {line} rebinds {names}, which the moved statements read"
        move_reads = self.scopes.names_read(body[move_index])
        for index in moved:
            clash = move_reads & self.scopes.names_bound(body[index])
            if clash:
                names = ", ".join(f"`{n}`" for n in sorted(clash))
                return f"the model move reads {names}, bound by a statement that would move"
        return None

    def insertion_index(
        self,
        body: Body,
        moved: list[int],
        move_index: int,
        objects: dict[str, TrainingObject],
        restored: set[str],
    ) -> int:
        """Where the `moved` statements go: after the move (`move_index`); when they restore
        the optimizers `restored`, after a scheduler over one of them built right after it."""
        if not restored:
            return move_index
        involved = restored | set().union(*(self.scopes.names_bound(body[i]) for i in moved))
        moved_reads = set().union(*(self.scopes.names_read(body[i]) for i in moved))
        insert_at = move_index
        for index in range(move_index + 1, len(body)):
            statement = body[index]
            if not isinstance(statement, cst.SimpleStatementLine):
                break
            if self.scopes.names_bound(statement) & moved_reads:
                break
            scheduler = self._scheduler_over(statement, objects, restored)
            if scheduler:
                insert_at = index
                continue
            if self.scopes.names_read(statement) & involved:
                break
        return insert_at

    def _scheduler_over(
        self,
        statement: cst.SimpleStatementLine,
        objects: dict[str, TrainingObject],
        restored: set[str],
    ) -> bool:
        """`statement` builds a scheduler over one of the optimizers `restored`."""
        if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
            return False
        assign = statement.body[0]
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if not isinstance(target, cst.Name) or target.value not in objects:
            return False
        obj = objects[target.value]
        return obj.kind == "scheduler" and bool(obj.optimizers & restored)

    def early_optimizer_state(
        self, scope: cst.CSTNode, objects: dict[str, TrainingObject]
    ) -> list[EarlyState]:
        """Optimizers of `scope` (a function or the module; `objects`: its training objects)
        built, or restored, before the first move of a model they hold: each with the move it
        must follow (the latest of its models' first moves)."""
        first_move: dict[str, cst.Call] = {}
        for inner in self.scopes.statements(scope):
            if isinstance(inner, cst.Call):
                moved = self.facts.moves.moved_module(inner)
                if moved is not None and moved[0] not in first_move:
                    first_move[moved[0]] = inner
        if not first_move:
            return []
        found: list[EarlyState] = []
        for inner in self.scopes.statements(scope):
            if isinstance(inner, cst.Call):
                early = self._early_state(inner, objects, first_move)
                if early is not None:
                    found.append(early)
        return found

    def _early_state(
        self, call: cst.Call, objects: dict[str, TrainingObject], first_move: dict[str, cst.Call]
    ) -> EarlyState | None:
        parent = self.context.parent(call)
        if (
            isinstance(parent, cst.Assign)
            and parent.value is call
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            name = parent.targets[0].target.value
            obj = objects.get(name)
            if obj is not None and obj.kind == "optimizer":
                move = self._latest_move(obj.models, first_move)
                if (
                    move is not None
                    and self.scopes.line_of(move) > self.scopes.line_of(call)
                    and not self._rebound_after(name, move)
                ):
                    return EarlyState(call, "construct", name, move)
                return None
            # `start_epoch = load_checkpoint(path, model, optimizer)`: a restore whose result
            # (the epoch, the best score) the script keeps.
        optimizers = {name for name, obj in objects.items() if obj.kind == "optimizer"}
        restored = self.optimizer_restore(call, optimizers)
        if restored is None:
            return None
        name = restored
        models = set(objects[name].models)
        direct = isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"
        if not direct:
            # A checkpoint helper handed the model too restores it with the model's state.
            models |= self.scopes.names_read(call)
        move = self._latest_move(models, first_move)
        if (
            move is not None
            and self.scopes.line_of(move) > self.scopes.line_of(call)
            and not self._rebound_after(name, move)
        ):
            label = (
                f"{name}.load_state_dict"
                if direct
                else f"{self.context.module.code_for_node(call.func)}(..., {name})"
            )
            return EarlyState(call, "load", name, move, label)
        return None

    def _rebound_after(self, name: str, move: cst.Call) -> bool:
        """A fresh object is bound to `name` after the move: the early one is a different one."""
        scope = self.scopes.enclosing_scope(move)
        after = self.scopes.line_of(move)
        return any(
            isinstance(inner, cst.AssignTarget)
            and name in self.scopes.names_bound(inner)
            and self.scopes.line_of(inner) >= after
            for inner in self.scopes.statements(scope)
        )

    def _latest_move(self, models: set[str], first_move: dict[str, cst.Call]) -> cst.Call | None:
        moves = [first_move[name] for name in models if name in first_move]
        return max(moves, key=lambda c: self.scopes.line_of(c)) if moves else None

    def optimizer_restore(self, call: cst.Call, optimizers: set[str]) -> str | None:
        """The optimizer (one of `optimizers`, plain names) whose state `call` restores:
        `opt.load_state_dict(...)`, or a checkpoint helper named for loading that is handed it
        (`load_checkpoint(path, model, opt)`, `utils.resume(model, optimizer=opt)`). A helper
        defined in this file counts only when it calls `load_state_dict` itself."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            if isinstance(func.value, cst.Name) and func.value.value in optimizers:
                return func.value.value
            return None
        words = set(re.split(r"_+", (call_tail(func) or "").lower()))
        qualified = self.names.qualified_name(func) or ""
        if qualified.startswith("torch.") or not words & {"load", "resume", "restore"}:
            return None
        handed = [
            arg.value.value
            for arg in call.args
            if isinstance(arg.value, cst.Name) and arg.value.value in optimizers
        ]
        if len(handed) != 1:
            return None
        if isinstance(func, cst.Name):
            for statement in self.context.module.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == func.value:
                    loads = any(
                        isinstance(inner, cst.Call) and call_tail(inner.func) == "load_state_dict"
                        for inner in self.context.subtree(statement)
                    )
                    return handed[0] if loads else None
        return handed[0]

    def runs_module(self, root: cst.CSTNode, name: str) -> bool:
        """Code under `root` runs the module bound to `name`: `name(x)`, `name.forward(x)`,
        `name.generate(x)`, or hands it to a call together with a tensor built there
        (`writer.add_graph(name, torch.rand(1, 3, 224, 224))`)."""
        for call in self.scopes.find(root, cst.Call):
            func = call.func
            if isinstance(func, cst.Name) and func.value == name:
                return True
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == name
                and func.attr.value in ("forward", "generate", "predict")
            ):
                return True
            values = [arg.value for arg in call.args]
            if any(isinstance(v, cst.Name) and v.value == name for v in values) and any(
                (self.names.qualified_name(inner.func) or "").startswith("torch.")
                for value in values
                for inner in self.context.subtree(value)
                if isinstance(inner, cst.Call)
            ):
                return True
        return False
