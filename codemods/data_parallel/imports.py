"""Imports: the names the conversion uses, imported where the file imports.

A standard-library import joins the file's standard-library imports, a torch import the
file's torch imports, each in sorted position (`import x` lines before `from x import y`
lines, as isort and ruff order them); a file without standard-library imports gets its first
one at the top of its imports, followed by a blank line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import libcst as cst

from devfix.codemods.analysis.torch_names import DATA_PARALLEL
from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import Decline, Script

#: Name -> (what it must resolve to when the file already binds it, the import statement).
IMPORTS = {
    "os": ("os", "import os"),
    "dist": ("torch.distributed", "import torch.distributed as dist"),
    "DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel",
        "from torch.nn.parallel import DistributedDataParallel",
    ),
    "DistributedSampler": (
        "torch.utils.data.distributed.DistributedSampler",
        "from torch.utils.data.distributed import DistributedSampler",
    ),
    "consume_prefix_in_state_dict_if_present": (
        "torch.nn.modules.utils.consume_prefix_in_state_dict_if_present",
        "from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present",
    ),
}

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"os", "sys", "argparse", "logging"}


@dataclass(frozen=True)
class _Import:
    statement: cst.SimpleStatementLine
    module: str
    straight: bool

    @property
    def stdlib(self) -> bool:
        return self.module.split(".")[0] in _STDLIB

    @property
    def package(self) -> str:
        return self.module.split(".")[0]

    @property
    def key(self) -> str:
        return self.module.lower()


def check_imports(script: Script) -> None:
    """A name the conversion needs that the file binds to something else stops it."""
    for name, (qualified, _code) in IMPORTS.items():
        if name in script.bound and script.imports.get(name) != qualified:
            raise Decline(f"the script already uses the name `{name}` for something else")
    if "torch" not in script.imports.values() and "torch" in script.bound:
        raise Decline("the name `torch` is used for something else")


def plan_imports(script: Script, plan: Plan) -> None:
    _plan_unused(script, plan)
    needed = [
        _parse(IMPORTS[name][1])
        for name in plan.needed
        if script.imports.get(name) != IMPORTS[name][0]
    ]
    if script.torch not in script.imports:
        needed.append(_parse("import torch"))
    existing = _module_imports(script.module)
    if not existing:
        raise Decline("the script imports nothing at module level")
    for new in sorted(needed, key=lambda i: (not i.stdlib, not i.straight, i.key)):
        _place(plan, existing, new)


def _parse(code: str) -> _Import:
    (statement,) = parse_statements(code + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    found = _describe(statement)
    assert found is not None
    return found


def _describe(statement: cst.BaseStatement) -> _Import | None:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    code = cst.Module([]).code_for_node
    if isinstance(small, cst.Import):
        return _Import(statement, code(small.names[0].name), True)
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        return _Import(statement, code(small.module), False)
    return None


def _module_imports(module: cst.Module) -> list[_Import]:
    found: list[_Import] = []
    for statement in module.body:
        described = _describe(statement)
        if described is not None and described.module != "__future__":
            found.append(described)
    return found


def _place(plan: Plan, existing: list[_Import], new: _Import) -> None:
    section = [i for i in existing if i.stdlib == new.stdlib]
    if not new.stdlib:
        section = [i for i in section if i.package == new.package] or section
    if not section:
        if new.stdlib:
            # The file's first standard-library import: at the top, a blank line after it.
            first = existing[0].statement
            plan.statement(first).before.append(new.statement)
            plan.statement(first).space_before = True
        else:
            plan.statement(existing[-1].statement).after.append(new.statement)
        return
    same_style = [i for i in section if i.straight == new.straight]
    if same_style:
        later = next((i for i in same_style if i.key > new.key), None)
        if later is not None:
            plan.statement(later.statement).before.append(new.statement)
        else:
            plan.statement(same_style[-1].statement).after.append(new.statement)
    elif new.straight:
        plan.statement(section[0].statement).before.append(new.statement)
    else:
        plan.statement(section[-1].statement).after.append(new.statement)


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
