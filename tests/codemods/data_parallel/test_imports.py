"""Imports: each new import joins its group, in sorted position."""

from __future__ import annotations

import pytest

from devfix.codemods.data_parallel import imports
from devfix.codemods.data_parallel.plan import Plan
from devfix.codemods.data_parallel.script import Decline, Script
from tests.codemods.data_parallel.planning import planned, script_of


def _needing(*names: str):  # type: ignore[no-untyped-def]
    def planner(script: Script, plan: Plan) -> None:
        for name in names:
            plan.need(name)
        imports.plan_imports(script, plan)

    return planner


def test_standard_library_and_torch_groups() -> None:
    out = planned(
        """
        import argparse
        import sys

        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        model = torch.nn.DataParallel(Net())
        """,
        _needing("os", "dist", "DistributedDataParallel", "DistributedSampler"),
    )
    assert out.startswith(
        "\nimport argparse\nimport os\nimport sys\n\n"
        "import torch\nimport torch.distributed as dist\nimport torch.nn as nn\n"
        "from torch.nn.parallel import DistributedDataParallel\n"
        "from torch.utils.data import DataLoader\n"
        "from torch.utils.data.distributed import DistributedSampler\n"
    )


def test_a_first_standard_library_import_opens_the_block() -> None:
    out = planned(
        '''
        """Docstring."""
        from __future__ import annotations
        import torch

        model = torch.nn.DataParallel(Net())
        ''',
        _needing("os"),
    )
    assert (
        '"""Docstring."""\nfrom __future__ import annotations\nimport os\n\nimport torch\n' in out
    )


def test_names_already_imported_are_not_imported_again() -> None:
    out = planned(
        """
        import os
        import torch.distributed as dist
        import torch
        model = torch.nn.DataParallel(Net())
        """,
        _needing("os", "dist"),
    )
    assert out.count("import os") == 1 and out.count("import torch.distributed") == 1


def test_the_data_parallel_import_goes_with_its_last_use() -> None:
    out = planned(
        """
        import torch
        from torch.nn import DataParallel, Module
        model = DataParallel(Net())
        """,
        _needing(),
    )
    assert "from torch.nn import Module\n" in out


def test_a_name_used_for_something_else() -> None:
    script, _plan = script_of("import torch\ndist = 3\nmodel = torch.nn.DataParallel(Net())\n")
    with pytest.raises(Decline, match="`dist` for something else"):
        imports.check_imports(script)
