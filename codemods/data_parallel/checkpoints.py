"""Checkpoints: saved by rank 0 from the unwrapped model, loaded without DataParallel's prefix.

`torch.save` runs on rank 0 only (followed by `dist.barrier()` when the script reads the file
back), and `model.state_dict()` / `model.module` read the unwrapped model, so keys carry no
`module.` prefix. `model.load_state_dict(sd)` strips the prefix of a DataParallel-era
checkpoint. `isinstance(model, nn.DataParallel)` asks about DistributedDataParallel instead.
A model that is no longer wrapped at all (a frozen one) loses its `.module`.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods._edits import call_tail
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import (
    DATA_PARALLEL,
    RANK0,
    RANK0_ANYWHERE,
    Decline,
    Script,
    Wrap,
    nodes_of,
    statement_call,
)

LOADED = "loaded_state"


def unwrapped(target: str, *, in_run: bool) -> cst.BaseExpression:
    """The model inside the DDP wrapper, or the model itself when it runs as one process (in
    the training code `distributed` says which; elsewhere the model's type)."""
    if in_run:
        return cst.parse_expression(f"({target}.module if distributed else {target})")
    return cst.parse_expression(
        f"({target}.module if isinstance({target}, DistributedDataParallel) else {target})"
    )


def plan_checkpoints(script: Script, plan: Plan) -> None:
    if LOADED in script.bound:
        raise Decline(f"the script already uses the name `{LOADED}`")
    wraps = {wrap.target: wrap for wrap in script.wraps}
    _plan_model_reads(script, plan, wraps)
    _plan_isinstance(script, plan)
    loads_after = [
        script.line(call)
        for call in nodes_of(script.module, cst.Call)
        if call_tail(call.func) == "load"
        and script.in_run(call)
        and script.qualified(call.func) == "torch.load"
    ]
    for statement in nodes_of(script.module, cst.SimpleStatementLine):
        call = statement_call(statement)
        if call is None:
            continue
        run = script.in_run(statement)
        if call_tail(call.func) == "save" and script.qualified(call.func) == "torch.save":
            if run:
                plan.statement(statement).gate = RANK0
                if any(line > script.line(statement) for line in loads_after):
                    plan.statement(statement).after += parse_statements(
                        "if distributed:\n"
                        "    dist.barrier()  # devfix DF401: the other processes read this file\n"
                    )
            elif script.in_helper(statement):
                plan.statement(statement).gate = RANK0_ANYWHERE
                plan.need("os")
        elif run and _loads_into_model(call, wraps):
            _plan_strip(script, plan, statement, call)


def _plan_model_reads(script: Script, plan: Plan, wraps: dict[str, Wrap]) -> None:
    """`model.module` and `model.state_dict()` read the model inside the wrapper."""
    for node in nodes_of(script.module, cst.Attribute):
        if not isinstance(node.value, cst.Name) or node.value.value not in wraps:
            continue
        wrap = wraps[node.value.value]
        attribute = node.attr.value
        if not _refers_to_wrapped(script, node.value, wrap):
            continue
        in_run = script.in_run(node)
        if not in_run and wrap.trained:
            plan.need("DistributedDataParallel")
        if attribute == "module":
            if isinstance(script.parent(node), cst.AssignTarget) or _guarded_unwrap(script, node):
                continue
            replacement = (
                unwrapped(wrap.target, in_run=in_run) if wrap.trained else cst.Name(wrap.target)
            )
            plan.replace(node, replacement)
        elif attribute in ("state_dict", "load_state_dict") and wrap.trained:
            plan.replace(node.value, unwrapped(wrap.target, in_run=in_run))


def _guarded_unwrap(script: Script, node: cst.Attribute) -> bool:
    """`model.module if hasattr(model, "module") else model` already unwraps either way."""
    for ancestor in script.ancestors(node):
        if isinstance(ancestor, cst.IfExp):
            test = ancestor.test
            if isinstance(test, cst.Call) and call_tail(test.func) in ("hasattr", "isinstance"):
                return True
        if isinstance(ancestor, cst.BaseStatement):
            return False
    return False


def _plan_isinstance(script: Script, plan: Plan) -> None:
    """`isinstance(model, nn.DataParallel)` -> `isinstance(model, DistributedDataParallel)`."""
    for call in nodes_of(script.module, cst.Call):
        if call_tail(call.func) != "isinstance" or len(call.args) != 2:
            continue
        kinds = call.args[1].value
        elements = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
        for kind in elements:
            if call_tail(kind) is not None and script.qualified(kind) in DATA_PARALLEL:
                plan.replace(kind, cst.Name("DistributedDataParallel"))
                plan.need("DistributedDataParallel")


def _refers_to_wrapped(script: Script, name: cst.Name, wrap: Wrap) -> bool:
    """`name` is the wrapped model: in the training code after the wrap, or in a helper of a
    flat script that reads the global."""
    if script.in_run(name):
        return script.line(name) > script.context.position(wrap.unit).end.line
    if script.scope.function is None and script.in_helper(name):
        scope = script.context.scope(name)
        return scope is not None and wrap.target not in scope.assignments
    return False


def _loads_into_model(call: cst.Call, wraps: dict[str, Wrap]) -> bool:
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "load_state_dict"
        and isinstance(call.func.value, cst.Name)
        and any(call.func.value.value in wrap.names for wrap in wraps.values())
        and bool(call.args)
        and call.args[0].keyword is None
    )


def _plan_strip(
    script: Script, plan: Plan, statement: cst.SimpleStatementLine, call: cst.Call
) -> None:
    """`model.load_state_dict(sd)`: the state goes through a name that loses `module.`."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    plan.need("consume_prefix_in_state_dict_if_present")
    head = parse_statements(
        f"{LOADED} = None\n"
        f'if any(key.startswith("module.") for key in {LOADED}):'
        "  # devfix DF401: saved by DataParallel\n"
        f'    consume_prefix_in_state_dict_if_present({LOADED}, "module.")\n'
    )
    first = head[0]
    assert isinstance(first, cst.SimpleStatementLine)
    assign = first.body[0]
    assert isinstance(assign, cst.Assign)
    # The loaded value and the other arguments are the script's own nodes: edits inside them
    # (DF302's `map_location`, say) still apply.
    head[0] = first.with_changes(body=[assign.with_changes(value=call.args[0].value)])
    new_receiver = plan.replacement_of(receiver)
    load = call.with_changes(
        func=call.func.with_changes(
            value=new_receiver if isinstance(new_receiver, cst.BaseExpression) else receiver
        ),
        args=[call.args[0].with_changes(value=cst.Name(LOADED)), *call.args[1:]],
    )
    small = statement.body[0]
    assert isinstance(small, cst.Expr)
    last = statement.with_changes(body=[small.with_changes(value=load)], leading_lines=[])
    plan.statement(statement).replace = [*head, last]
