"""Imports: the ones the conversion needs and the file lacks; the DataParallel import it ends."""

from __future__ import annotations

import pytest

from devfix.codemods.data_parallel import imports
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Decline, Script
from devfix.types import ImportSpec
from tests.codemods.data_parallel.planning import planned, script_of


def _needed(source: str, *names: str) -> list[ImportSpec]:
    script, plan = script_of(source)
    for name in names:
        plan.need(name)
    imports.plan_imports(script, plan)
    return plan.imports


def test_the_names_the_file_lacks_are_asked_for() -> None:
    needed = _needed(
        """
        import sys
        import torch
        from torch.utils.data import DataLoader

        model = torch.nn.DataParallel(Net())
        """,
        "os",
        "dist",
        "DistributedDataParallel",
        "DistributedSampler",
    )
    assert needed == [
        ImportSpec("os"),
        ImportSpec("torch.distributed", alias="dist"),
        ImportSpec("torch.nn.parallel", "DistributedDataParallel"),
        ImportSpec("torch.utils.data.distributed", "DistributedSampler"),
    ]


def test_names_already_imported_in_any_form_are_not_imported_again() -> None:
    needed = _needed(
        """
        import os
        from torch import distributed as dist
        import torch as t
        model = t.nn.DataParallel(Net())
        """,
        "os",
        "dist",
    )
    assert needed == []


def test_torch_itself_when_the_file_only_reaches_it_through_a_from_import() -> None:
    needed = _needed(
        """
        from torch.nn import DataParallel
        model = DataParallel(Net())
        """
    )
    assert needed == [ImportSpec("torch")]


def test_the_data_parallel_import_goes_with_its_last_use() -> None:
    def planner(script: Script, plan: Plan) -> None:
        imports.plan_imports(script, plan)

    out = planned(
        """
        import torch
        from torch.nn import DataParallel, Module
        model = DataParallel(Net())
        """,
        planner,
    )
    assert "from torch.nn import Module\n" in out


def test_a_name_used_for_something_else() -> None:
    script, _plan = script_of("import torch\ndist = 3\nmodel = torch.nn.DataParallel(Net())\n")
    with pytest.raises(Decline, match="`dist` for something else"):
        imports.check_imports(script)
