"""Imports: the names the conversion uses, and the DataParallel import it leaves unused.

The finding carries the imports it needs (the engine adds each to its section of the file's
imports, sorted as isort and ruff sort them); a name the file already imports in another form
(`from torch import distributed as dist`) is not imported again, and a name the file binds to
something else stops the conversion.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.torch_names import DATA_PARALLEL
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Decline, Script
from devfix.types import ImportSpec

#: Name -> (what it must resolve to when the file already binds it, the import it needs).
IMPORTS = {
    "os": ("os", ImportSpec("os")),
    "dist": ("torch.distributed", ImportSpec("torch.distributed", alias="dist")),
    "DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel",
        ImportSpec("torch.nn.parallel", "DistributedDataParallel"),
    ),
    "DistributedSampler": (
        "torch.utils.data.distributed.DistributedSampler",
        ImportSpec("torch.utils.data.distributed", "DistributedSampler"),
    ),
    "consume_prefix_in_state_dict_if_present": (
        "torch.nn.modules.utils.consume_prefix_in_state_dict_if_present",
        ImportSpec("torch.nn.modules.utils", "consume_prefix_in_state_dict_if_present"),
    ),
}


def check_imports(script: Script) -> None:
    """A name the conversion needs that the file binds to something else stops it."""
    for name, (qualified, _spec) in IMPORTS.items():
        if name in script.bound and script.imports.get(name) != qualified:
            raise Decline(f"the script already uses the name `{name}` for something else")
    if "torch" not in script.imports.values() and "torch" in script.bound:
        raise Decline("the name `torch` is used for something else")


def plan_imports(script: Script, plan: Plan) -> None:
    _plan_unused(script, plan)
    for name in plan.needed:
        qualified, spec = IMPORTS[name]
        if script.imports.get(name) != qualified:
            plan.imports.append(spec)
    if script.torch not in script.imports:
        plan.imports.append(ImportSpec("torch"))


def _plan_unused(script: Script, plan: Plan) -> None:
    """`from torch.nn import DataParallel [as DP]` goes when no use of the name is left."""
    consumed = {id(wrap.call.func) for wrap in script.wraps} | set(plan.expressions)
    uses: dict[str, list[cst.Name]] = {}
    for name in script.scopes.find(script.module, cst.Name):
        if not isinstance(script.parent(name), (cst.ImportAlias, cst.AsName)):
            uses.setdefault(name.value, []).append(name)
    for statement in script.module.body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        small = statement.body[0]
        if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
            continue
        kept = []
        for alias in small.names:
            local = alias.asname.name if alias.asname is not None else alias.name
            if (
                isinstance(local, cst.Name)
                and script.imports.get(local.value) in DATA_PARALLEL
                and all(id(use) in consumed for use in uses.get(local.value, ()))
            ):
                continue
            kept.append(alias)
        if len(kept) == len(small.names):
            continue
        if not kept:
            plan.statement(statement).remove = True
            continue
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        plan.statement(statement).replace = [
            statement.with_changes(body=[small.with_changes(names=kept)])
        ]
