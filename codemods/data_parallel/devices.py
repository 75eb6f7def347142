"""Devices: `"cuda:0"` becomes `"cuda"` and `.cuda(0)` becomes `.cuda()`.

After `torch.cuda.set_device(local_rank)` plain `"cuda"` is the process's own GPU (and still
GPU 0 when the script runs as one process). The script's own `torch.cuda.set_device(...)` in
the training code goes (the setup selects the process's GPU); a script that hard-codes another
GPU, or selects one elsewhere, is not converted.
"""

from __future__ import annotations

import re

import libcst as cst

from devfix.codemods.analysis.names import call_tail, statement_call
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Decline, Script

_CUDA_INDEX = re.compile(r"^cuda:(\d+)$")


def plan_devices(script: Script, plan: Plan) -> None:
    for string in script.scopes.find(script.module, cst.SimpleString):
        value = string.evaluated_value
        match = _CUDA_INDEX.match(value) if isinstance(value, str) else None
        if match is None or script.output.in_log_statement(string):
            continue
        if match.group(1) != "0":
            raise Decline(f"the script hard-codes GPU `{match.group(0)}`")
        quote = string.quote
        plan.replace(string, string.with_changes(value=f"{string.prefix}{quote}cuda{quote}"))
    for call in script.scopes.find(script.module, cst.Call):
        if (
            call_tail(call.func) == "set_device"
            and script.names.qualified_name(call.func) == "torch.cuda.set_device"
        ):
            # The script's own choice of GPU (`gpus[0]`, `args.gpu`) gives way to the setup's.
            statement = script.parent(script.parent(call) or call)
            if (
                isinstance(statement, cst.SimpleStatementLine)
                and statement_call(statement) is call
                and (script.in_run(call) or _in_wrapper(script, call))
                and isinstance(script.parent(statement), (cst.IndentedBlock, cst.Module))
            ):
                plan.statement(statement).remove = True
                continue
            raise Decline("the script already selects its GPU with `torch.cuda.set_device`")
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "cuda"
            and len(call.args) == 1
            and call.args[0].keyword is None
            and isinstance(call.args[0].value, cst.Integer)
        ):
            if call.args[0].value.value != "0":
                raise Decline(f"the script hard-codes GPU {call.args[0].value.value}")
            plan.replace(call, call.with_changes(args=[]))


def _in_wrapper(script: Script, node: cst.CSTNode) -> bool:
    wrapper = script.scope.wrapper
    return wrapper is not None and any(a is wrapper for a in script.ancestors(node))
