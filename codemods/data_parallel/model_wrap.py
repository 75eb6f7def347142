"""Model wrap: each `nn.DataParallel(model)` becomes a DistributedDataParallel model.

The wrap can sit under any condition that decides whether to parallelise (`if n_gpu > 1:`,
`if len(device_ids) > 1:`, `if args.multi_gpu:`, `if torch.cuda.is_available(): ... else:` with a
CPU branch, a one-line `if`, `model = DP(model) if n_gpu > 1 else model`): under torchrun the
launch decides, so the condition keeps whatever else it guards and the DDP wrap follows it,
when the script runs distributed. Several wrapped models (a GAN's generator and
discriminator) each become a DDP model under the one process group; a wrapped model that no
optimizer trains (a frozen teacher) is only unwrapped: DDP has nothing to synchronise for it.
An optimizer built from a wrapped model before the wrap moves after it, and the DataParallel
idiom `if n_gpu > 1: loss = loss.mean()` goes.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    is_main_guard,
    name_assignment,
    root_name,
)
from devfix.codemods.analysis.torch_names import (
    DATA_PARALLEL,
    FUNCTIONAL_DATA_PARALLEL,
    GPU_COUNT_NAMES,
    MODULE_SELF_METHODS,
)
from devfix.codemods.data_parallel import layout
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import Decline, Script, Wrap


def functional_data_parallel(script: Script) -> list[tuple[cst.Call, str]]:
    """Every call of torch's `nn.parallel.data_parallel(module, inputs, device_ids)`, with why
    it is not converted."""
    if "data_parallel" not in script.context.text:
        return []
    found: list[tuple[cst.Call, str]] = []
    for call in script.scopes.find(script.module, cst.Call):
        if call_tail(call.func) is None:
            continue
        if script.names.qualified_name(call.func) not in FUNCTIONAL_DATA_PARALLEL:
            continue
        module = code_of(call.args[0].value) if call.args else "the module"
        found.append(
            (
                call,
                f"`data_parallel` replicates `{module}` over the GPUs on every call, as "
                "`nn.DataParallel` does, so a tensor its `forward` puts on a fixed device meets "
                "a replica on another GPU; not converted: the functional form runs inside the "
                "caller's code, which must become one process per GPU by hand "
                "(DistributedDataParallel under torchrun)",
            )
        )
    return found


def data_parallel_calls(script: Script) -> list[cst.Call]:
    """Every `DataParallel(...)` call of torch's, whatever it is imported as."""
    names = {"DataParallel"}
    for alias in script.scopes.find(script.module, cst.ImportAlias):
        if alias.asname is not None and call_tail(alias.name) == "DataParallel":
            target = alias.asname.name
            if isinstance(target, cst.Name):
                names.add(target.value)
    star = any(
        isinstance(node.names, cst.ImportStar)
        for node in script.scopes.find(script.module, cst.ImportFrom)
    )
    qualified = script.names.qualified_name
    return [
        call
        for call in script.scopes.find(script.module, cst.Call)
        if call_tail(call.func) in names
        and (
            qualified(call.func) in DATA_PARALLEL
            or (star and _root_unbound(script, call.func) and _spelled_torch(call.func))
        )
    ]


def _root_unbound(script: Script, func: cst.BaseExpression) -> bool:
    """The root of `func`'s spelling (`nn` of `nn.DataParallel`) is bound nowhere in the file:
    with a `from package import *` in it, that star import is where it comes from."""
    return root_name(func) not in script.bound


def _spelled_torch(func: cst.BaseExpression) -> bool:
    """`torch.nn.DataParallel`, `nn.DataParallel`, `torch.nn.parallel.DataParallel`."""
    return code_of(func) in (
        "torch.nn.DataParallel",
        "nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "nn.parallel.DataParallel",
    )


def read_wraps(script: Script, calls: Sequence[cst.Call]) -> list[Wrap]:
    wraps = [_read_wrap(script, call) for call in calls]
    targets = [wrap.target for wrap in wraps]
    if len(set(targets)) != len(targets):
        raise Decline("one name is wrapped twice; convert the script by hand")
    _mark_trained(script, wraps)
    if not any(wrap.trained for wrap in wraps):
        raise Decline("no optimizer trains the wrapped model (inference only)")
    script.wraps = wraps
    return wraps


def _read_wrap(script: Script, call: cst.Call) -> Wrap:
    ancestors = script.ancestors(call)
    for ancestor in ancestors:
        if isinstance(ancestor, cst.ClassDef):
            raise Decline(
                "DataParallel is applied inside a class (library code); convert the training "
                "script that uses it"
            )
        if isinstance(ancestor, (cst.Lambda, cst.For, cst.While, cst.With, cst.Try)):
            raise Decline("DataParallel is applied inside a loop, `with` or `try` block")
    small = next((a for a in ancestors if isinstance(a, cst.BaseSmallStatement)), None)
    holder = script.parent(small) if small is not None else None
    if small is None or holder is None:
        raise Decline("DataParallel is applied outside a statement of its own")
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        raise Decline("the DataParallel model is not assigned to a plain name")
    inner = argument(call, "module")
    if inner is None:
        raise Decline("the DataParallel call has no model argument")
    for arg in call.args:
        if (
            arg.keyword is not None
            and arg.keyword.value == "dim"
            and not (isinstance(arg.value, cst.Integer) and arg.value.value == "0")
        ):
            raise Decline("DataParallel splits along `dim` other than 0")
    value = small.value
    if isinstance(value, cst.IfExp):
        if not _chain_holds(value.body, call):
            raise Decline("the DataParallel call is part of a larger expression")
    elif not _chain_holds(value, call):
        raise Decline("the DataParallel call is part of a larger expression")
    if isinstance(holder, cst.SimpleStatementSuite):
        # `if torch.cuda.device_count() > 1: model = nn.DataParallel(model)` on one line.
        guard = script.parent(holder)
        if not isinstance(guard, cst.If) or len(holder.body) != 1 or guard.orelse is not None:
            raise Decline("DataParallel is applied in a one-line block that does more")
        statement = cst.SimpleStatementLine(body=[small])
        unit: cst.BaseStatement = guard
        guards = [guard]
    else:
        assert isinstance(holder, cst.SimpleStatementLine)
        if len(holder.body) != 1:
            raise Decline("DataParallel is applied on a line with other statements")
        statement = holder
        unit, guards = statement, []
    node: cst.CSTNode = unit
    while True:
        block = script.parent(node)
        owner = script.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if isinstance(owner, cst.Else):
            owner = script.parent(owner)
        if not isinstance(owner, cst.If) or is_main_guard(owner):
            break
        unit = node = owner
        guards.insert(0, owner)
    target = small.targets[0].target
    assert isinstance(target, cst.Name)
    return Wrap(call, statement, target.value, inner, unit, guards)


def _chain_holds(value: cst.BaseExpression, call: cst.Call) -> bool:
    """`value` is `call`, or `.to(...)` / `.cuda()` / ... chained on it."""
    while value is not call:
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in MODULE_SELF_METHODS
        ):
            value = value.func.value
        else:
            return False
    return True


def _mark_trained(script: Script, wraps: list[Wrap]) -> None:
    """A model is trained when an optimizer is built from it (directly or through a name
    assigned from it); when no optimizer shows which, all are, unless frozen in the script."""
    optimizers = [
        call
        for call in script.scopes.find(script.module, cst.Call)
        if script.flow.builds_optimizer(call)
    ]
    mentions = script.scopes.mentions
    seen = set()
    for wrap in wraps:
        names = wrap.names | _derived_names(script, wrap.names)
        if any(mentions(arg, name) for call in optimizers for arg in call.args for name in names):
            seen.add(wrap.target)
    for wrap in wraps:
        wrap.trained = wrap.target in seen if seen else not _frozen(script, wrap.names)


def _derived_names(script: Script, names: set[str]) -> set[str]:
    """Names assigned from an expression that mentions one of `names` (`params = ...`)."""
    derived: set[str] = set()
    for assign in script.scopes.find(script.module, cst.Assign):
        if any(script.scopes.mentions(assign.value, name) for name in names):
            for target in assign.targets:
                if isinstance(target.target, cst.Name) and target.target.value not in names:
                    derived.add(target.target.value)
    return derived


def _frozen(script: Script, names: set[str]) -> bool:
    """`model.requires_grad_(False)` or `p.requires_grad = False` over `model.parameters()`."""
    find, mentions = script.scopes.find, script.scopes.mentions
    for call in find(script.module, cst.Call):
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "requires_grad_"
            and isinstance(func.value, cst.Name)
            and func.value.value in names
            and call.args
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == "False"
        ):
            return True
    for loop in find(script.module, cst.For):
        if any(mentions(loop.iter, name) for name in names) and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
            for t in find(loop.body, cst.AssignTarget)
        ):
            return True
    return False


# -- the plan ------------------------------------------------------------------------------


def plan_wraps(script: Script, plan: Plan) -> None:
    units: dict[int, list[Wrap]] = {}
    for wrap in script.wraps:
        units.setdefault(id(wrap.unit), []).append(wrap)
    for group in units.values():
        _plan_unit(script, plan, group)
    for group in units.values():
        _plan_optimizers(script, plan, group)
    _plan_loss_mean(script, plan)


def ddp_block(script: Script, targets: Sequence[str]) -> list[cst.BaseStatement]:
    """`if distributed:` wrap of each target in DistributedDataParallel. In a factory the
    training code calls, the process group and the current device (set by the setup) say it."""
    condition = "distributed"
    device = 'torch.device("cuda", local_rank)'
    device_ids = "[local_rank], output_device=local_rank"
    if script.scope.wrapper is not None:
        condition = "dist.is_initialized()"
        device, device_ids = "torch.cuda.current_device()", "[torch.cuda.current_device()]"
    cuda = "".join(
        f"        {t} = {t}.to({device})\n"
        f"        {t} = DistributedDataParallel({t}, device_ids={device_ids})\n"
        for t in targets
    )
    cpu = "".join(f"        {t} = DistributedDataParallel({t})\n" for t in targets)
    return parse_statements(
        script.t(f"if {condition}:\n    if torch.cuda.is_available():\n{cuda}    else:\n{cpu}")
    )


def _unwrapped_statement(plan: Plan, wrap: Wrap) -> cst.SimpleStatementLine | None:
    """The wrap statement without the wrapper (None: it would only rebind the name). The
    statement is the script's own, the wrapper goes by an expression edit inside it, so every
    other edit inside it (a `"cuda:0"`, a `.cuda(0)`) still applies."""
    small = wrap.statement.body[0]
    assert isinstance(small, cst.Assign)
    value = small.value
    if isinstance(value, cst.IfExp):
        # `model = nn.DataParallel(model) if n_gpu > 1 else model`
        body = layout.substitute(value.body, {id(wrap.call): wrap.inner})
        if code_of(body) == code_of(value.orelse):
            if isinstance(value.orelse, cst.Name) and value.orelse.value == wrap.target:
                return None
            plan.replace(value, value.orelse)
            return wrap.statement
    elif (
        value is wrap.call and isinstance(wrap.inner, cst.Name) and wrap.inner.value == wrap.target
    ):
        return None
    plan.replace(wrap.call, wrap.inner)
    return wrap.statement


def _plan_unit(script: Script, plan: Plan, wraps: list[Wrap]) -> None:
    unit = wraps[0].unit
    trained = [wrap.target for wrap in wraps if wrap.trained]
    ddp = ddp_block(script, trained) if trained else []
    plan.need("dist")
    if trained:
        plan.need("DistributedDataParallel")
    if not wraps[0].guards:
        (wrap,) = wraps
        unwrapped = _unwrapped_statement(plan, wrap)
        plan.statement(unit).replace = [*([unwrapped] if unwrapped else []), *ddp]
        return
    # What becomes of each statement inside the guards ([]: it goes).
    outcome: dict[int, list[cst.BaseStatement]] = {}
    nodes: dict[int, cst.BaseStatement] = {}
    for wrap in wraps:
        unwrapped = _unwrapped_statement(plan, wrap)
        innermost = wrap.guards[-1]
        # A one-line `if` holds only the wrap: the `if` itself is what changes.
        changed: cst.BaseStatement = (
            innermost if isinstance(innermost.body, cst.SimpleStatementSuite) else wrap.statement
        )
        outcome[id(changed)] = [unwrapped] if unwrapped else []
        nodes[id(changed)] = changed
    guards = {id(guard): guard for wrap in wraps for guard in wrap.guards}
    for guard in sorted(guards.values(), key=lambda g: -len(script.ancestors(g))):
        if id(guard) in outcome:
            continue
        nodes[id(guard)] = guard
        new = _pruned_guard(script, guard, outcome)
        if new is not guard:
            outcome[id(guard)] = [new] if new is not None else []
    for key, replacement in outcome.items():
        node = nodes[key]
        if node is unit:
            continue
        if not replacement:
            plan.statement(node).remove = True
        elif replacement != [node]:
            plan.statement(node).replace = replacement
    change = plan.statement(unit)
    if id(unit) in outcome:
        change.replace = [*outcome[id(unit)], *ddp]
    else:
        change.after += ddp


def _emptied(
    script: Script, block: cst.BaseSuite, outcome: dict[int, list[cst.BaseStatement]]
) -> bool:
    """Nothing of `block` is left once the wrap goes but output about the GPUs it used (`print
    ("Let's use", n, "GPUs!")`): a branch that would only print is dead."""
    if not isinstance(block, cst.IndentedBlock):
        return False
    gone = [outcome.get(id(statement)) == [] for statement in block.body]
    return any(gone) and all(
        went or script.output.logs(statement) for went, statement in zip(gone, block.body)
    )


def _pruned_guard(
    script: Script, guard: cst.If, outcome: dict[int, list[cst.BaseStatement]]
) -> cst.BaseStatement | None:
    """`guard` once the statements that go have gone: itself, without its `else`, with the
    condition negated around the `else` branch, or None when nothing is left."""
    body_gone = _emptied(script, guard.body, outcome)
    orelse = guard.orelse
    if orelse is None:
        return None if body_gone else guard
    if isinstance(orelse, cst.If):
        if body_gone:
            raise Decline("the `elif` around DataParallel leaves nothing to wrap")
        return guard
    else_gone = _emptied(script, orelse.body, outcome)
    if body_gone and else_gone:
        return None
    if else_gone:
        return guard.with_changes(orelse=None)
    if body_gone:
        # Nothing left to do when the condition holds: keep the other branch.
        return cst.If(
            test=cst.UnaryOperation(operator=cst.Not(), expression=_parenthesized(guard.test)),
            body=orelse.body,
            leading_lines=guard.leading_lines,
        )
    return guard


def _parenthesized(test: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or test.lpar:
        return test
    return test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _plan_optimizers(script: Script, plan: Plan, wraps: list[Wrap]) -> None:
    """Optimizers built from a trained model before its wrap move right after the wrap."""
    unit = wraps[0].unit
    block = script.parent(unit)
    body = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
    if unit not in body:
        return
    names = {name for wrap in wraps if wrap.trained for name in wrap.names}
    index = body.index(unit)
    moved: list[cst.BaseStatement] = []
    mentions = script.scopes.mentions
    for position, statement in enumerate(body[:index]):
        name = _optimizer_name(script, statement)
        if name is None or not any(mentions(statement, model) for model in names):
            continue
        if any(mentions(other, name) for other in body[position + 1 : index + 1]):
            continue
        if plan.change_of(statement) is not None:
            continue
        plan.statement(statement).remove = True
        moved.append(statement)
    if moved:
        plan.statement(unit).after += moved


def _optimizer_name(script: Script, statement: cst.BaseStatement) -> str | None:
    small = name_assignment(statement)
    if small is None or not isinstance(small.value, cst.Call):
        return None
    if script.flow.builds_optimizer(small.value):
        return cst.ensure_type(small.targets[0].target, cst.Name).value
    return None


def is_gpu_count_guard(script: Script, test: cst.BaseExpression) -> bool:
    """`torch.cuda.device_count() > 1`, `n_gpu >= 2`, `len(device_ids) > 1`, `args.n_gpu > 1`."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comparison = test.comparisons[0]
    value = comparison.comparator
    if not isinstance(value, cst.Integer):
        return False
    limit = (isinstance(comparison.operator, cst.GreaterThan) and value.value == "1") or (
        isinstance(comparison.operator, cst.GreaterThanEqual) and value.value == "2"
    )
    left = test.left
    if isinstance(left, cst.Call):
        counts = script.names.qualified_name(left.func) in (
            "torch.cuda.device_count",
            "builtins.len",
            "len",
        )
    else:
        counts = call_tail(left) in GPU_COUNT_NAMES
    return limit and counts


def _plan_loss_mean(script: Script, plan: Plan) -> None:
    """`if n_gpu > 1: loss = loss.mean()`: DataParallel's per-replica losses; DDP has one."""
    units = {id(wrap.unit) for wrap in script.wraps}
    for node in script.scopes.find(script.module, cst.If):
        if node.orelse is not None or id(node) in units:
            continue
        if not is_gpu_count_guard(script, node.test) or not isinstance(
            node.body, cst.IndentedBlock
        ):
            continue
        if node.body.body and all(_is_self_mean(s) for s in node.body.body):
            plan.statement(node).remove = True


def _is_self_mean(statement: cst.BaseStatement) -> bool:
    """`loss = loss.mean()`: the DataParallel idiom for per-replica losses."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return False
    target = small.targets[0].target
    value = small.value
    return (
        isinstance(target, cst.Name)
        and isinstance(value, cst.Call)
        and not value.args
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "mean"
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == target.value
    )
