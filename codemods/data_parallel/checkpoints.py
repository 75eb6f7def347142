"""Checkpoints: saved by rank 0 from the unwrapped model, loaded without DataParallel's prefix.

`torch.save` runs on rank 0 only (followed by `dist.barrier()` when the script reads the file
back), and `model.state_dict()` / `model.module` read the unwrapped model, so keys carry no
`module.` prefix. `model.load_state_dict(sd)` after the wrap strips the prefix of a
DataParallel-era checkpoint. `isinstance(model, nn.DataParallel)` asks about
DistributedDataParallel instead. A model that is no longer wrapped at all (a frozen one) loses
its `.module`.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import call_tail, is_docstring, statement_call
from devfix.codemods.analysis.torch_names import DATA_PARALLEL, FILE_WRITES
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import (
    RANK0,
    RANK0_ANYWHERE,
    Decline,
    Script,
    Wrap,
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
    savers = _plan_savers(script, plan)
    line_of = script.scopes.line_of
    loads_after = [
        line_of(call)
        for call in script.scopes.find(script.module, cst.Call)
        if call_tail(call.func) == "load"
        and script.in_run(call)
        and script.names.qualified_name(call.func) == "torch.load"
    ]
    for statement in script.scopes.find(script.module, cst.SimpleStatementLine):
        call = statement_call(statement)
        if call is None or plan.change_of(statement) is not None:
            continue
        if not isinstance(script.parent(statement), (cst.IndentedBlock, cst.Module)):
            continue
        run = script.in_run(statement)
        if _writes_file(script, call):
            if run:
                plan.statement(statement).gate = RANK0
                if call_tail(call.func) == "save" and any(
                    line > line_of(statement) for line in loads_after
                ):
                    plan.statement(statement).after += parse_statements(
                        "if distributed:\n"
                        "    dist.barrier()  # the other processes read this file\n"
                    )
            elif script.in_helper(statement) and not _inside(script, statement, savers):
                plan.statement(statement).gate = RANK0_ANYWHERE
                plan.need("os")
        elif run and _loads_into_wrapped(script, call, wraps):
            _plan_strip(script, plan, statement, call)


def _writes_file(script: Script, call: cst.Call) -> bool:
    qualified = script.names.qualified_name(call.func)
    if call_tail(call.func) == "save_pretrained" and isinstance(call.func, cst.Attribute):
        return True
    if qualified not in FILE_WRITES:
        return False
    # `os.makedirs(d, exist_ok=True)` may run everywhere.
    exist_ok = next((a for a in call.args if a.keyword and a.keyword.value == "exist_ok"), None)
    return exist_ok is None


def _plan_savers(script: Script, plan: Plan) -> list[cst.FunctionDef]:
    """Functions of the file that only write checkpoints (`save_checkpoint(state, is_best)`):
    their whole body runs on rank 0, so what they do after `torch.save` (copy the file, log it)
    never runs ahead of the write on another process."""
    savers: list[cst.FunctionDef] = []
    for function in script.module.body:
        if not isinstance(function, cst.FunctionDef) or not isinstance(
            function.body, cst.IndentedBlock
        ):
            continue
        if function is script.scope.function or function is script.scope.wrapper:
            continue
        if not _only_writes(script, function):
            continue
        savers.append(function)
        for statement in function.body.body:
            if is_docstring(statement):
                continue
            plan.statement(statement).gate = RANK0_ANYWHERE
        plan.need("os")
    return savers


def _only_writes(script: Script, function: cst.FunctionDef) -> bool:
    """Saves a checkpoint, returns nothing, runs no model (no call of a parameter, no loop, no
    `.backward()`), so no other process needs to run it with rank 0."""
    body = function.body
    find, qualified = script.scopes.find, script.names.qualified_name
    if not any(qualified(call.func) == "torch.save" for call in find(body, cst.Call)):
        return False
    if any(r.value is not None for r in find(body, cst.Return, own_scope=True)):
        return False
    if any(True for _ in find(body, (cst.For, cst.While, cst.Yield))):
        return False
    parameters = {p.name.value for p in function.params.params}
    for call in find(body, cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value in parameters:
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
            return False
    return True


def _inside(script: Script, node: cst.CSTNode, functions: list[cst.FunctionDef]) -> bool:
    return any(a is f for a in script.ancestors(node) for f in functions)


def _plan_model_reads(script: Script, plan: Plan, wraps: dict[str, Wrap]) -> None:
    """`model.module` and `model.state_dict()` read the model inside the wrapper."""
    for node in script.scopes.find(script.module, cst.Attribute):
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
    for call in script.scopes.find(script.module, cst.Call):
        if call_tail(call.func) != "isinstance" or len(call.args) != 2:
            continue
        kinds = call.args[1].value
        elements = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
        for kind in elements:
            if call_tail(kind) is not None and script.names.qualified_name(kind) in DATA_PARALLEL:
                plan.replace(kind, cst.Name("DistributedDataParallel"))
                plan.need("DistributedDataParallel")


def _refers_to_wrapped(script: Script, name: cst.Name, wrap: Wrap) -> bool:
    """`name` is the wrapped model: in the training code after the wrap, or in a helper of a
    flat script that reads the global."""
    if script.in_run(name):
        return script.scopes.line_of(name) > script.context.position(wrap.unit).end.line
    if script.scope.function is None and script.in_helper(name):
        scope = script.context.scope(name)
        return scope is not None and wrap.target not in scope.assignments
    return False


def _loads_into_wrapped(script: Script, call: cst.Call, wraps: dict[str, Wrap]) -> bool:
    """`model.load_state_dict(sd)` into the wrapped model: DataParallel took keys with its
    `module.` prefix there, the unwrapped model does not. (Loaded before the wrap, the keys
    never had it: the script could not have loaded them.)"""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "load_state_dict"
        and isinstance(receiver, cst.Name)
        and receiver.value in wraps
        and wraps[receiver.value].trained
        and _refers_to_wrapped(script, receiver, wraps[receiver.value])
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
        "  # saved by DataParallel\n"
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
