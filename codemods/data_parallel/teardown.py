"""Teardown: the processes meet at a barrier and leave the process group at the end.

At the end of the code that runs the training (before its last `return`); when that function
returns early, after the entry point's call of it instead. The barrier first: with gloo a
process that leaves while another still works can abort at exit.
"""

from __future__ import annotations

from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import Script

TEARDOWN = "if distributed:\n    dist.barrier()\n    dist.destroy_process_group()\n"
#: Outside the training code `distributed` is not bound; the process group knows.
TEARDOWN_ANYWHERE = (
    "if dist.is_initialized():\n    dist.barrier()\n    dist.destroy_process_group()\n"
)


def plan_teardown(script: Script, plan: Plan) -> None:
    run = script.scope
    plan.need("dist")
    if run.teardown_after is not None:
        plan.statement(run.teardown_after).after += parse_statements(TEARDOWN_ANYWHERE)
    else:
        plan.append(run.block, parse_statements(TEARDOWN))
