"""DF401's planners in the order they run: each checks the script (raising `Decline`) or adds
its decisions to the one plan."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.data_parallel import (
    checkpoints,
    devices,
    entry_point,
    imports,
    loaders,
    model_wrap,
    output,
    process_group,
    teardown,
)
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Script


def convert(script: Script, calls: list[cst.Call], *, keep_per_process_batch: bool) -> Plan:
    """Every planner's decisions about the script, in one plan; raises Decline."""
    plan = Plan(script.context)
    entry_point.check_launchable(script)
    model_wrap.read_wraps(script, calls)
    entry_point.plan_entry_point(script, plan)
    process_group.check_names(script)
    imports.check_imports(script)
    model_wrap.plan_wraps(script, plan)
    loaders.plan_loaders(script, plan, keep_per_process_batch=keep_per_process_batch)
    checkpoints.plan_checkpoints(script, plan)
    output.plan_output(script, plan)
    devices.plan_devices(script, plan)
    process_group.plan_process_group(script, plan)
    teardown.plan_teardown(script, plan)
    imports.plan_imports(script, plan)
    return plan
