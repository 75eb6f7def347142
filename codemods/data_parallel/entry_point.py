"""Entry point: whether the script can run under torchrun, and where its training runs.

Three shapes: a flat script (its training statements move under a new `if __name__ ==
"__main__":`), training inside the script's `__main__` block, and training inside a module-level
function that the entry point calls exactly once (directly or through other functions, e.g.
`main()` calling `train(args)`). The setup goes at the start of that code and the teardown at
its end (after the entry point's call when the function returns early).
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import call_tail, is_main_guard, keyword_argument
from devfix.codemods.analysis.torch_names import (
    DATALOADERS,
    DISTRIBUTED_DATA_PARALLEL,
    PROCESS_SPAWNERS,
)
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Decline, RunScope, Script

_ALREADY_DISTRIBUTED = DISTRIBUTED_DATA_PARALLEL | {"torch.distributed.init_process_group"}
#: The last names of those (and of the spawners): only such a name is worth resolving.
_IRREGULAR_TAILS = frozenset(
    name.rsplit(".", 1)[1] for name in _ALREADY_DISTRIBUTED | PROCESS_SPAWNERS
)
_LOOPS = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
#: How many calls deep the entry point may reach the function that wraps the model.
_MAX_CHAIN = 4

NOTEBOOK_REASON = (
    "a notebook cannot be launched with torchrun (one process per GPU); move the training "
    "into a script and convert that, or launch a training function from the notebook with "
    "`accelerate.notebook_launcher` / `torch.multiprocessing.start_processes(..., "
    'start_method="fork")`, or train on one GPU'
)


def check_launchable(script: Script) -> None:
    """Decline scripts that torchrun cannot launch as they are, or that need no conversion."""
    if script.path.endswith(".ipynb"):
        raise Decline(NOTEBOOK_REASON)
    names: list[cst.Name | cst.Attribute] = [*script.scopes.find(script.module, cst.Name)]
    names += script.scopes.find(script.module, cst.Attribute)
    for node in names:
        tail = call_tail(node)
        if tail is None or not (tail in _IRREGULAR_TAILS or tail.endswith("Trainer")):
            continue
        qualified = script.names.qualified_name(node)
        if qualified is None:
            continue
        if qualified in PROCESS_SPAWNERS:
            raise Decline("the script already starts its processes with `mp.spawn`")
        if qualified in _ALREADY_DISTRIBUTED:
            raise Decline("the script already uses torch.distributed")
        if qualified.split(".")[0] in ("transformers", "trl") and tail.endswith("Trainer"):
            raise Decline(
                "a Hugging Face Trainer runs DistributedDataParallel itself when the script "
                "is launched with torchrun or accelerate; change the launch, not the code"
            )


def plan_entry_point(script: Script, plan: Plan) -> RunScope:
    """Find where the training runs (every wrap must be in the same place); record it."""
    units = [wrap.unit for wrap in script.wraps]
    blocks = {id(script.parent(unit)) for unit in units}
    if len(blocks) != 1:
        raise Decline(
            "the models are wrapped in different blocks or functions; wrap them in one place"
        )
    block = script.parent(units[0])
    owner = script.module if isinstance(block, cst.Module) else script.parent(block or units[0])
    body: list[cst.BaseStatement] = list(script.module.body)
    guard = next((s for s in body if isinstance(s, cst.If) and is_main_guard(s)), None)
    if isinstance(owner, cst.Module):
        if guard is not None:
            raise Decline(
                "DataParallel is applied at module level next to an `if __name__ == "
                '"__main__":` block; move the training into one place first'
            )
        start = _run_start(script, body, min(body.index(unit) for unit in units))
        run = RunScope(None, body[start:], None, main_from=body[start])
    elif owner is guard and isinstance(owner, cst.If) and isinstance(owner.body, cst.IndentedBlock):
        run = RunScope(None, [owner], owner.body)
    elif (
        isinstance(owner, cst.FunctionDef)
        and script.parent(owner) is script.module
        and isinstance(owner.body, cst.IndentedBlock)
    ):
        entry, chain = _entry_call(script, owner, guard)
        # The training runs in the innermost function of the chain with a training loop; the
        # function that wraps may be a factory it calls (`model = build_model(args)`).
        runner = next((f for f in chain if _trains(script, f)), None)
        wrapper = owner if runner is not owner else None
        if runner is None and guard is not None and script.parent(entry) is guard.body:
            assert isinstance(guard.body, cst.IndentedBlock)
            run = RunScope(None, [guard], guard.body, wrapper=wrapper)
        elif runner is None:
            start = _run_start(script, body, body.index(entry))
            run = RunScope(None, body[start:], None, main_from=body[start], wrapper=wrapper)
        else:
            assert isinstance(runner.body, cst.IndentedBlock)
            run = RunScope(runner, [runner], runner.body, wrapper=wrapper)
            if guard is None and script.parent(entry) is script.module:
                # A bare `main()` at module level: it moves under a main block with what follows.
                run.main_from = body[_run_start(script, body, body.index(entry))]
            if _returns_early(script, runner):
                run.teardown_after = entry
    else:
        raise Decline("DataParallel is applied in a nested function or block")
    plan.main_from = run.main_from
    script.run = run
    return run


def _returns_early(script: Script, function: cst.FunctionDef) -> bool:
    assert isinstance(function.body, cst.IndentedBlock)
    last = function.body.body[-1] if function.body.body else None
    return any(
        not (isinstance(last, cst.SimpleStatementLine) and node in last.body)
        for node in script.scopes.find(function.body, cst.Return, own_scope=True)
    )


def _trains(script: Script, function: cst.FunctionDef) -> bool:
    """A loop in `function` that calls `.backward()` (itself or through the file's functions)."""
    return any(
        script.flow.calls_backward(loop.body)
        for loop in script.scopes.find(function.body, (cst.For, cst.While), own_scope=True)
    )


def _entry_call(
    script: Script, function: cst.FunctionDef, guard: cst.If | None
) -> tuple[cst.BaseStatement, list[cst.FunctionDef]]:
    """The entry-point statement that (through a chain of single calls) runs `function`, and
    the chain of functions from `function` out to the entry point."""
    current = function
    chain = [function]
    for _step in range(_MAX_CHAIN):
        name = current.name.value
        sites = _call_sites(script, current)
        if not sites:
            raise Decline(
                f"DataParallel is applied in `{function.name.value}`, which this file never "
                "runs (library code); convert the script that launches it"
            )
        if len(sites) > 1:
            raise Decline(
                f"`{name}` is called {len(sites)} times; the process group can start only once"
            )
        call, caller = sites[0]
        for ancestor in script.ancestors(call):
            if ancestor is caller:
                break
            if isinstance(ancestor, _LOOPS):
                raise Decline(
                    f"`{name}` is called in a loop; the process group can start only once"
                )
        if caller is None:
            statement: cst.CSTNode = call
            for ancestor in script.ancestors(call):
                if ancestor is script.module or (guard is not None and ancestor is guard.body):
                    break
                statement = ancestor
            assert isinstance(statement, cst.BaseStatement)
            return statement, chain
        current = caller
        chain.append(caller)
    raise Decline(
        f"`{function.name.value}` is reached through more than {_MAX_CHAIN} calls from the entry "
        "point"
    )


def _call_sites(
    script: Script, function: cst.FunctionDef
) -> list[tuple[cst.Call, cst.FunctionDef | None]]:
    """Calls of the module-level `function`, each with the module-level function that holds it
    (None: module-level code or the main block); calls inside classes are ignored."""
    sites: list[tuple[cst.Call, cst.FunctionDef | None]] = []
    for call, _innermost in script.flow.call_sites(function):
        holder: cst.FunctionDef | None = None
        inside_class = False
        for ancestor in script.ancestors(call):
            if isinstance(ancestor, cst.ClassDef):
                inside_class = True
            if isinstance(ancestor, cst.FunctionDef):
                holder = ancestor
        if inside_class or (holder is not None and script.parent(holder) is not script.module):
            continue
        sites.append((call, holder))
    return sites


def _run_start(script: Script, body: list[cst.BaseStatement], limit: int) -> int:
    """Where the module's statements start moving under `if __name__ == "__main__":`.

    Classes and functions (and the statements between them) stay at module level when
    nothing among those statements touches a device or data; the training that follows the
    last of them moves.
    """
    first = _first_executable(script, body)
    if first is None or first > limit:
        raise Decline("cannot tell where the script's training starts")
    last_definition = max(
        (i for i, s in enumerate(body[:limit]) if isinstance(s, (cst.FunctionDef, cst.ClassDef))),
        default=-1,
    )
    start = max(first, last_definition + 1)
    for statement in body[first:start]:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if _touches_training(script, statement):
            return first
    return start


def _touches_training(script: Script, statement: cst.BaseStatement) -> bool:
    for call in script.scopes.find(statement, cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("cuda", "to"):
            return True
        if keyword_argument(call, "device") is not None:
            return True
        qualified = script.names.qualified_name(call.func) or ""
        if qualified in DATALOADERS or qualified.startswith("torch.optim"):
            return True
    return False


def _first_executable(script: Script, body: list[cst.BaseStatement]) -> int | None:
    for index, statement in enumerate(body):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(statement, cst.SimpleStatementLine) and all(
            _is_definition(script, small) for small in statement.body
        ):
            continue
        return index
    return None


def _is_definition(script: Script, small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        return True
    if isinstance(small, cst.Expr) and isinstance(
        small.value, (cst.SimpleString, cst.ConcatenatedString)
    ):
        return True
    if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
        for call in script.scopes.find(small.value, cst.Call):
            if script.names.qualified_name(call.func) not in (
                "torch.device",
                "torch.cuda.is_available",
            ):
                return False
        return True
    return False
