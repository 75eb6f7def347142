"""Running DF401's planners one at a time on a snippet, as the pass runs them all."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import libcst as cst

from devfix.codemods.data_parallel import entry_point, model_wrap
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Script
from devfix.context import FileContext
from devfix.edit_plan import apply_edits

Planner = Callable[[Script, Plan], object]


def script_of(source: str, path: str = "train.py") -> tuple[Script, Plan]:
    """The script's facts and an empty plan, with the wraps read and the entry point found
    (every planner needs those)."""
    source = textwrap.dedent(source)
    context = FileContext(cst.parse_module(source), path, source)
    script = Script(context)
    plan = Plan(context)
    model_wrap.read_wraps(script, model_wrap.data_parallel_calls(script))
    entry_point.plan_entry_point(script, plan)
    return script, plan


def planned(source: str, *planners: Planner, path: str = "train.py") -> str:
    """The snippet after the given planners' edits alone."""
    script, plan = script_of(source, path)
    for planner in planners:
        planner(script, plan)
    return apply_edits(script.module, plan.edits()).code


def statement(script: Script, code: str) -> cst.BaseStatement:
    """The statement of the script whose code (stripped) is `code`."""
    for node in script.context._all_nodes():
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            text = script.module.code_for_node(node).strip()
            if text == code or text.splitlines()[0].strip() == code:
                return node
    raise LookupError(code)
