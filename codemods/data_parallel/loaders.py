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

from devfix.codemods._edits import append_keyword, call_tail, keyword_argument
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import (
    DATA_LOADERS,
    Decline,
    Script,
    contains,
    has_backward,
    nodes_of,
)


@dataclass
class Loader:
    statement: cst.SimpleStatementLine
    name: str
    call: cst.Call
    epoch_loops: list[cst.For]


def training_loaders(script: Script) -> list[Loader]:
    """The DataLoaders of the training code that feed a loop calling `.backward()`."""
    loaders: list[Loader] = []
    for call in nodes_of(script.module, cst.Call):
        if call_tail(call.func) != "DataLoader" and script.qualified(call.func) not in DATA_LOADERS:
            continue
        if script.qualified(call.func) not in DATA_LOADERS or not script.in_run(call):
            continue
        parent = script.parent(call)
        statement = script.parent(parent) if parent is not None else None
        name = None
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
            and isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
        ):
            name = parent.targets[0].target.value
        if name is None:
            if _feeds_training(script, call):
                raise Decline("a training DataLoader is not assigned to a plain name")
            continue
        assert isinstance(statement, cst.SimpleStatementLine)
        uses = _training_uses(script, name)
        if uses is not None:
            loaders.append(Loader(statement, name, call, uses))
    return loaders


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
    plan.need("DistributedSampler")
    taken = set(script.bound)
    for loader in loaders:
        _convert(script, plan, loader, taken, keep_per_process_batch)


def _feeds_training(script: Script, call: cst.Call) -> bool:
    for ancestor in script.ancestors(call):
        if isinstance(ancestor, cst.For) and has_backward(ancestor.body, script.module):
            return True
    return False


def _training_uses(script: Script, name: str) -> list[cst.For] | None:
    """The epoch loops around the training uses of loader `name`; None if it never trains."""
    epochs: list[cst.For] = []
    training = False
    for node in nodes_of(script.module, cst.Name):
        if node.value != name or not script.in_run(node):
            continue
        loop = None
        for ancestor in script.ancestors(node):
            if isinstance(ancestor, cst.For) and contains(ancestor.iter, node):
                loop = ancestor
                break
        if loop is not None and has_backward(loop.body, script.module):
            training = True
            outer = _enclosing_for(script, loop)
        elif loop is None and _passed_to_trainer(script, node):
            training = True
            outer = _enclosing_for(script, node)
        else:
            continue
        if outer is not None and outer not in epochs:
            epochs.append(outer)
    return epochs if training else None


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
    function = script.function_named(call.func.value)
    return function is not None and has_backward(function.body, script.module)


def sampler_name(loader: str) -> str:
    """`train_loader` -> `train_sampler`, `loader` -> `sampler`, `data` -> `data_sampler`."""
    if loader.lower() in ("loader", "dl", "iterator", "dataloader", "data_loader"):
        return "sampler"
    for suffix in ("dataloader", "loader", "iterator", "iter", "dl"):
        if loader.lower().endswith(suffix) and len(loader) > len(suffix):
            return loader[: -len(suffix)] + "sampler"
    return f"{loader}_sampler"


def _convert(
    script: Script, plan: Plan, loader: Loader, taken: set[str], keep_per_process_batch: bool
) -> None:
    call = loader.call
    dataset_arg = next((a for a in call.args if a.keyword is None), None) or keyword_argument(
        call, "dataset"
    )
    if dataset_arg is None or any(a.star for a in call.args):
        raise Decline(f"cannot read the dataset of DataLoader `{loader.name}`")
    for keyword in ("sampler", "batch_sampler"):
        if keyword_argument(call, keyword) is not None:
            raise Decline(f"DataLoader `{loader.name}` already has a `{keyword}`")
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
    batch_arg = keyword_argument(call, "batch_size")
    if batch_arg is None and len(positional) >= 2:
        batch_arg = positional[1]
    args: list[cst.Arg] = []
    for arg in call.args:
        if arg is shuffle_arg:
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
    plan.replace(call, append_keyword(call.with_changes(args=args), "sampler", cst.Name(sampler)))
    batch = script.code(batch_arg.value) if batch_arg is not None else "1"
    if keep_per_process_batch:
        comment = (
            f"# devfix DF401: `batch_size` stays per process, so the global batch is {batch} * "
            "world_size.\n"
        )
    else:
        comment = (
            f"# devfix DF401: DataParallel's batch of {batch} was global; each of the world_size\n"
            f"# processes now takes {batch} // world_size of it (when that does not divide, the\n"
            "# global batch is smaller). Each process reads its own shard of the data set.\n"
        )
    plan.statement(loader.statement).before += parse_statements(
        comment
        + hoisted_code
        + f"{sampler} = DistributedSampler({script.code(dataset)}, num_replicas=world_size, "
        + f"rank=rank, shuffle={shuffle}, seed=0)\n"
    )
    for loop in loader.epoch_loops:
        if not isinstance(loop.target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
            raise Decline("cannot place `sampler.set_epoch` in the epoch loop")
        plan.prepend(
            loop.body,
            parse_statements(
                f"{sampler}.set_epoch({loop.target.value})"
                "  # devfix DF401: a new shuffle every epoch\n"
            ),
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
    for call in nodes_of(script.module, cst.Call):
        if script.qualified(call.func) not in DATA_LOADERS or script.in_run(call):
            continue
        holder = next((a for a in script.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
        if holder is not None and has_backward(holder.body, script.module):
            return holder.name.value
    return None
