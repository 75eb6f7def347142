"""Output: `print`, `logging` and `logger.<level>(...)` run on rank 0 only.

In the code that runs the training the gate is `if rank == 0:`; in the file's other functions
(helpers it calls, callers around it) it is `os.environ.get("RANK", "0") == "0"`, which holds
before the process group starts and after it ends too.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import RANK0, RANK0_ANYWHERE, Script


def plan_output(script: Script, plan: Plan) -> None:
    for statement in script.scopes.find(script.module, cst.SimpleStatementLine):
        if plan.change_of(statement) is not None or not script.output.logs(statement):
            continue
        if _gated_around(script, plan, statement):
            continue
        if not isinstance(script.parent(statement), (cst.IndentedBlock, cst.Module)):
            continue
        if script.in_run(statement):
            plan.statement(statement).gate = RANK0
        elif script.in_helper(statement) or _in_caller(script, statement):
            plan.statement(statement).gate = RANK0_ANYWHERE
            plan.need("os")


def _in_caller(script: Script, statement: cst.BaseStatement) -> bool:
    """In the `__main__` block or a module-level function, when the training runs in a
    function: every process runs these statements too."""
    run = script.scope
    if run.function is None:
        return False
    for ancestor in script.ancestors(statement):
        if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
            return False
        if ancestor is run.function:
            return False
    return True


def _gated_around(script: Script, plan: Plan, statement: cst.BaseStatement) -> bool:
    """A statement inside one that is already gated (a checkpoint writer's body)."""
    for ancestor in script.ancestors(statement):
        if isinstance(ancestor, cst.BaseStatement):
            change = plan.change_of(ancestor)
            if change is not None and change.gate is not None:
                return True
    return False
