"""Reordering the statements of one block: which statements must move along with the ones a
fix moves past a later statement (DF301 moves optimizer code after the model move), what would
stop them, and where they go."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.flow.training import TrainingObject
from devfix.codemods.analysis.scopes import Body


class Reordering(Analysis):
    """Statement moves within one block (`body`, indices into it), for one file."""

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
