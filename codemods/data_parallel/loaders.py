"""Loaders: every training DataLoader reads its process's shard through a DistributedSampler.

A training loader is one that a loop calling `.backward()` iterates (directly, or through a
function of the file it is passed to). It gets `DistributedSampler(dataset,
num_replicas=world_size, rank=rank, shuffle=<its shuffle>, seed=0)`, loses `shuffle=`, takes
`batch_size // world_size` (DataParallel's batch was global) and each epoch loop around it
starts with `sampler.set_epoch(epoch)`. Evaluation loaders stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devfix.codemods._edits import append_keyword
from devfix.codemods.analysis.names import call_tail, keyword_argument
from devfix.codemods.analysis.torch_names import DATALOADERS
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import Decline, Script


@dataclass
class Loader:
    statement: cst.SimpleStatementLine
    name: str
    call: cst.Call
    epoch_loops: list[cst.For]
    #: Built in a factory the training code calls: the training code's name for it.
    outer_name: str | None = None
    factory: cst.FunctionDef | None = None


def training_loaders(script: Script) -> list[Loader]:
    """The DataLoaders that feed a loop calling `.backward()`: built in the training code, or
    built by a function of the file that returns them to it (`train_loader, val_loader =
    set_loader(args)`)."""
    loaders: list[Loader] = []
    qualified = script.names.qualified_name
    for call in script.scopes.find(script.module, cst.Call):
        if call_tail(call.func) != "DataLoader" and qualified(call.func) not in DATALOADERS:
            continue
        if qualified(call.func) not in DATALOADERS or not script.in_run(call):
            continue
        found = _assigned(script, call)
        if found is None:
            if _feeds_training(script, call):
                raise Decline("a training DataLoader is not assigned to a plain name")
            continue
        statement, name = found
        uses = _training_uses(script, name)
        if uses is not None:
            loaders.append(Loader(statement, name, call, uses))
    return loaders + _factory_loaders(script)


def _assigned(script: Script, call: cst.Call) -> tuple[cst.SimpleStatementLine, str] | None:
    """`name = DataLoader(...)` alone on its line: the statement and the name."""
    parent = script.parent(call)
    statement = script.parent(parent) if parent is not None else None
    if (
        isinstance(parent, cst.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
    ):
        return statement, parent.targets[0].target.value
    return None


def _factory_loaders(script: Script) -> list[Loader]:
    """Loaders a function of the file builds and returns to the training code, which trains
    on them (`train_loader, val_loader = set_loader(opt)`)."""
    found: list[Loader] = []
    functions = script.scopes.module_functions()
    for assign in script.scopes.find(script.module, cst.Assign):
        if not script.in_run(assign) or not isinstance(assign.value, cst.Call):
            continue
        func = assign.value.func
        factory = functions.get(func.value) if isinstance(func, cst.Name) else None
        if factory is None or factory is script.scope.function or len(assign.targets) != 1:
            continue
        returned = _returned_parts(script, factory)
        target = assign.targets[0].target
        names = [target] if isinstance(target, cst.Name) else []
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value for e in target.elements if isinstance(e.value, cst.Name)]
            if len(names) != len(target.elements):
                continue
        if returned is None or len(returned) != len(names):
            continue
        for outer, inner in zip(names, returned):
            assert isinstance(outer, cst.Name)
            uses = _training_uses(script, outer.value)
            if uses is None:
                continue
            if (
                isinstance(inner, cst.Call)
                and script.names.qualified_name(inner.func) in DATALOADERS
            ):
                # `return DataLoader(train, ...), DataLoader(valid, ...)`: the sampler goes
                # before the `return`, named after the training code's name for the loader.
                statement = _statement_of(script, inner)
                if statement is not None:
                    found.append(Loader(statement, outer.value, inner, uses, outer.value, factory))
                continue
            if not isinstance(inner, cst.Name):
                continue
            for call in script.scopes.find(factory.body, cst.Call, own_scope=True):
                if script.names.qualified_name(call.func) not in DATALOADERS:
                    continue
                assigned = _assigned(script, call)
                if assigned is not None and assigned[1] == inner.value:
                    found.append(Loader(*assigned, call, uses, outer.value, factory))
    return found


def _returned_parts(script: Script, function: cst.FunctionDef) -> list[cst.BaseExpression] | None:
    """What the function's `return` gives back, part by part (`return a, b`), when that is its
    only `return`."""
    returns = list(script.scopes.find(function.body, cst.Return, own_scope=True))
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value
    if isinstance(value, cst.Tuple):
        return [part.value for part in value.elements]
    return [value]


def _statement_of(script: Script, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    for ancestor in script.ancestors(node):
        if isinstance(ancestor, cst.SimpleStatementLine):
            return ancestor
    return None


def plan_loaders(script: Script, plan: Plan, *, keep_per_process_batch: bool) -> None:
    loaders = training_loaders(script)
    if not loaders:
        outside = _loader_outside(script)
        if outside is not None:
            raise Decline(
                f"the training DataLoader is built in `{outside}`, outside the function that "
                "wraps the model; build the loader where the model is wrapped"
            )
        raise Decline(
            "no DataLoader feeding the training loop (a loop that calls `.backward()`) was "
            "found where the model is wrapped"
        )
    default = script.flow.default_device(loaders[0].call)
    if default is not None:
        raise Decline(
            f"the default device is an accelerator (`{script.code(default.setter.func)}`): "
            "DistributedSampler shuffles with a CPU generator of its own there and fails with "
            "`Expected a 'cuda' device type for generator`; keep the CPU as the default device"
        )
    plan.need("DistributedSampler")
    kept = [loader for loader in loaders if _own_sampler(script, loader.call)]
    if len(kept) == len(loaders):
        keyword = _own_sampler(script, kept[0].call)
        raise Decline(f"DataLoader `{kept[0].name}` already has a `{keyword}`")
    taken = set(script.bound)
    factories: set[int] = set()
    for loader in loaders:
        if loader in kept:
            # Another loader of the same data (an `else:` branch) is converted; this one
            # keeps its sampler and so reads the whole data set in every process.
            plan.statement(loader.statement).note = (
                "devfix DF401: this loader keeps its own sampler: every process draws from "
                "the whole data set"
            )
            continue
        _convert(script, plan, loader, taken, factories, keep_per_process_batch)


def _feeds_training(script: Script, call: cst.Call) -> bool:
    for ancestor in script.ancestors(call):
        if isinstance(ancestor, cst.For) and script.flow.calls_backward(ancestor.body):
            return True
    return False


def _training_uses(script: Script, name: str) -> list[cst.For] | None:
    """The epoch loops around the training uses of loader `name`; None if it never trains.

    A use is a loop over the loader that calls `.backward()`, the loader passed to a function
    of the file that trains, or (where the training code is the module's) a function of the
    file that loops over the global loader and that the training code calls.
    """
    epochs: list[cst.For] = []
    training = False
    for node in script.scopes.find(script.module, cst.Name):
        if node.value != name:
            continue
        if not script.in_run(node):
            for call in _global_use(script, node):
                training = True
                outer = _enclosing_for(script, call)
                if outer is not None and outer not in epochs:
                    epochs.append(outer)
            continue
        loop = _loop_over(script, node)
        if loop is not None and script.flow.calls_backward(loop.body):
            training = True
            outer = _enclosing_for(script, loop)
        elif loop is None and _passed_to_trainer(script, node):
            training = True
            outer = _enclosing_for(script, node)
        elif loop is None and _drawn_by_next(script, node):
            # `batches = iter(loader)` ... `next(batches)` in the step loop: no epoch loop.
            training = True
            continue
        else:
            continue
        if outer is not None and outer not in epochs:
            epochs.append(outer)
    return epochs if training else None


def _drawn_by_next(script: Script, node: cst.Name) -> bool:
    """`batches = iter(loader)`, and a loop that calls `.backward()` draws `next(batches)`."""
    arg = script.parent(node)
    call = script.parent(arg) if isinstance(arg, cst.Arg) else None
    assign = script.parent(call) if isinstance(call, cst.Call) else None
    if not (
        isinstance(call, cst.Call)
        and script.names.qualified_name(call.func) in ("builtins.iter", "iter")
        and isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        return False
    name = assign.targets[0].target.value
    for draw in script.scopes.find(script.module, cst.Call):
        if not (
            script.names.qualified_name(draw.func) in ("builtins.next", "next")
            and draw.args
            and isinstance(draw.args[0].value, cst.Name)
            and draw.args[0].value.value == name
            and script.in_run(draw)
        ):
            continue
        for ancestor in script.ancestors(draw):
            if isinstance(ancestor, (cst.For, cst.While)) and script.flow.calls_backward(
                ancestor.body
            ):
                return True
    return False


def _loop_over(script: Script, node: cst.Name) -> cst.For | None:
    for ancestor in script.ancestors(node):
        if isinstance(ancestor, cst.For) and script.scopes.within(node, ancestor.iter):
            return ancestor
    return None


def _global_use(script: Script, node: cst.Name) -> list[cst.Call]:
    """Where the module-level training code calls the function that trains over the global
    loader `node` (kuangliu's `def train(epoch): for ... in trainloader:`)."""
    if script.scope.function is not None or not script.in_helper(node):
        return []
    function = next(a for a in script.ancestors(node) if isinstance(a, cst.FunctionDef))
    scope = script.context.scope(node)
    if scope is None or node.value in scope.assignments:
        return []
    loop = _loop_over(script, node)
    if loop is None or not script.flow.calls_backward(loop.body):
        return []
    return [
        call
        for call in script.scopes.find(script.module, cst.Call)
        if isinstance(call.func, cst.Name)
        and call.func.value == function.name.value
        and script.in_run(call)
    ]


def _enclosing_for(script: Script, node: cst.CSTNode) -> cst.For | None:
    for ancestor in script.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(ancestor, cst.For) and ancestor is not node:
            return ancestor
    return None


def _passed_to_trainer(script: Script, node: cst.Name) -> bool:
    """`train(model, loader, ...)` where `train` is a function of this file that trains."""
    arg = script.parent(node)
    call = script.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return False
    function = script.scopes.module_functions().get(call.func.value)
    return function is not None and script.flow.calls_backward(function.body)


def sampler_name(loader: str) -> str:
    """`train_loader` -> `train_sampler`, `loader` -> `sampler`, `data` -> `data_sampler`."""
    if loader.lower() in ("loader", "dl", "iterator", "dataloader", "data_loader"):
        return "sampler"
    for suffix in ("dataloader", "loader", "iterator", "iter", "dl"):
        if loader.lower().endswith(suffix) and len(loader) > len(suffix):
            return loader[: -len(suffix)] + "sampler"
    return f"{loader}_sampler"


def _convert(
    script: Script,
    plan: Plan,
    loader: Loader,
    taken: set[str],
    factories: set[int],
    keep_per_process_batch: bool,
) -> None:
    call = loader.call
    dataset_arg = next((a for a in call.args if a.keyword is None), None) or keyword_argument(
        call, "dataset"
    )
    if dataset_arg is None or any(a.star for a in call.args):
        raise Decline(f"cannot read the dataset of DataLoader `{loader.name}`")
    placeholder = _placeholder(script, call)
    if placeholder is not None:
        # `train_sampler = None` ... `DataLoader(..., sampler=train_sampler)`: the script's
        # own place for a distributed sampler.
        sampler = placeholder[1]
    else:
        sampler = sampler_name(loader.name)
        if sampler in taken:
            raise Decline(f"the script already uses the name `{sampler}`")
        taken.add(sampler)
    hoisted_code = ""
    dataset = dataset_arg.value
    if not isinstance(dataset, (cst.Name, cst.Attribute)):
        # `DataLoader(TensorDataset(x, y), ...)`: the sampler needs the data set too.
        hoisted = (
            sampler[: -len("sampler")] + "dataset"
            if sampler.endswith("sampler")
            else (f"{sampler}_dataset")
        )
        if hoisted in taken or hoisted == sampler:
            raise Decline(f"the script already uses the name `{hoisted}`")
        taken.add(hoisted)
        hoisted_code = f"{hoisted} = {script.code(dataset)}\n"
        dataset = cst.Name(hoisted)
    positional = [a for a in call.args if a.keyword is None]
    shuffle_arg = keyword_argument(call, "shuffle")
    if shuffle_arg is None and len(positional) >= 3:
        shuffle_arg = positional[2]
    shuffle = script.code(shuffle_arg.value) if shuffle_arg is not None else "False"
    if placeholder is not None and shuffle_arg is not None:
        # `shuffle=(train_sampler is None)` shuffled while the sampler was None.
        shuffle = "True" if _is_none_test(shuffle_arg.value, sampler) else shuffle
    batch_arg = keyword_argument(call, "batch_size")
    if batch_arg is None and len(positional) >= 2:
        batch_arg = positional[1]
    args: list[cst.Arg] = []
    for arg in call.args:
        if arg is shuffle_arg:
            # `a, shuffle=True,\n    b`: the line break after it stays between `a` and `b`.
            comma = arg.comma
            if (
                args
                and arg is not call.args[-1]
                and isinstance(comma, cst.Comma)
                and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
                and isinstance(args[-1].comma, cst.Comma)
            ):
                args[-1] = args[-1].with_changes(
                    comma=args[-1].comma.with_changes(whitespace_after=comma.whitespace_after)
                )
            continue
        if arg is dataset_arg:
            arg = arg.with_changes(value=dataset)
        if arg is batch_arg and not keep_per_process_batch:
            arg = arg.with_changes(value=_per_process(arg.value))
        args.append(arg)
    if args:
        last = args[-1]
        if shuffle_arg is call.args[-1] and shuffle_arg.comma is not cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=shuffle_arg.comma)
        elif last.comma is not cst.MaybeSentinel.DEFAULT and not any(
            a.comma is not cst.MaybeSentinel.DEFAULT for a in call.args[-1:]
        ):
            args[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    new_call = call.with_changes(args=args)
    if placeholder is None:
        new_call = append_keyword(new_call, "sampler", cst.Name(sampler))
    plan.replace(call, new_call)
    if loader.factory is not None and id(loader.factory) not in factories:
        # The factory runs in the processes too; torchrun's variables say which share is its.
        factories.add(id(loader.factory))
        assert isinstance(loader.factory.body, cst.IndentedBlock)
        plan.prepend(
            loader.factory.body,
            parse_statements(
                "# This process's share of the data (torchrun sets RANK and WORLD_SIZE).\n"
                'rank = int(os.environ.get("RANK", "0"))\n'
                'world_size = int(os.environ.get("WORLD_SIZE", "1"))\n'
            ),
        )
        plan.need("os")
    batch = script.code(batch_arg.value) if batch_arg is not None else "1"
    if keep_per_process_batch:
        comment = (
            f"# `batch_size` stays per process, so the global batch is {batch} * world_size.\n"
        )
    else:
        comment = (
            f"# DataParallel's batch of {batch} was global; each of the world_size processes now\n"
            f"# takes {batch} // world_size of it (when that does not divide, the global batch is\n"
            "# smaller). Each process reads its own shard of the data set.\n"
        )
    statements = parse_statements(
        comment
        + hoisted_code
        + f"{sampler} = DistributedSampler({script.code(dataset)}, num_replicas=world_size, "
        + f"rank=rank, shuffle={shuffle}, seed=0)\n"
    )
    if placeholder is not None:
        plan.statement(placeholder[0]).replace = statements
    else:
        plan.statement(loader.statement).before += statements
    # Out of the factory, the sampler is the loader's.
    holder = f"{loader.outer_name}.sampler" if loader.outer_name is not None else sampler
    if not loader.epoch_loops and shuffle != "False":
        # Step-based training (`for x in recycle(loader)`): no loop says where an epoch starts.
        plan.statement(loader.statement).note = (
            f"devfix DF401: call `{holder}.set_epoch(n)` when pass n over the data starts, or "
            "every pass repeats the first one's order"
        )
    for loop in loader.epoch_loops:
        if not isinstance(loop.target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
            raise Decline("cannot place `sampler.set_epoch` in the epoch loop")
        plan.prepend(
            loop.body,
            parse_statements(f"{holder}.set_epoch({loop.target.value})\n"),
        )


def _per_process(value: cst.BaseExpression) -> cst.BinaryOperation:
    """`batch // world_size`, with parentheses around an expression that needs them."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(left=value, operator=cst.FloorDivide(), right=cst.Name("world_size"))


def _loader_outside(script: Script) -> str | None:
    """The caller that builds a loader and hands it to the training function, if any."""
    function = script.scope.function
    if function is None:
        return None
    for call in script.scopes.find(script.module, cst.Call):
        if script.names.qualified_name(call.func) not in DATALOADERS or script.in_run(call):
            continue
        holder = next((a for a in script.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
        if holder is not None and script.flow.calls_backward(holder.body):
            return holder.name.value
    return None


def _own_sampler(script: Script, call: cst.Call) -> str | None:
    """`sampler` / `batch_sampler` when the loader already has one of its own."""
    if keyword_argument(call, "batch_sampler") is not None:
        return "batch_sampler"
    if keyword_argument(call, "sampler") is not None and _placeholder(script, call) is None:
        return "sampler"
    return None


def _placeholder(script: Script, call: cst.Call) -> tuple[cst.SimpleStatementLine, str] | None:
    """`sampler=train_sampler` where `train_sampler = None` is the name's only binding."""
    arg = keyword_argument(call, "sampler")
    if arg is None or not isinstance(arg.value, cst.Name):
        return None
    name = arg.value.value
    holder = next((a for a in script.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
    root: cst.CSTNode = holder if holder is not None else script.module
    binders: tuple[type[cst.CSTNode], ...] = (
        cst.AssignTarget,
        cst.AnnAssign,
        cst.AugAssign,
        cst.For,
        cst.NamedExpr,
    )
    bindings = [node for node in script.scopes.find(root, binders) if _binds(node, name)]
    if len(bindings) != 1 or not isinstance(bindings[0], cst.AssignTarget):
        return None
    assign = script.parent(bindings[0])
    statement = script.parent(assign) if assign is not None else None
    if (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.value, cst.Name)
        and assign.value.value == "None"
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
    ):
        return statement, name
    return None


def _binds(node: cst.CSTNode, name: str) -> bool:
    target = getattr(node, "target", None)
    return isinstance(target, cst.Name) and target.value == name


def _is_none_test(test: cst.BaseExpression, name: str) -> bool:
    """`name is None`, with or without parentheses."""
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )
