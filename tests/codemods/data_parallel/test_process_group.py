"""Process group and teardown: where the training code starts and ends."""

from __future__ import annotations

import pytest

from devfix.codemods.data_parallel import process_group, teardown
from devfix.codemods.data_parallel.script import Decline
from tests.codemods.data_parallel.planning import planned, script_of

SOURCE = '''
import torch

def main():
    """Train."""
    model = torch.nn.DataParallel(Net())
    for x in loader:
        model(x).sum().backward()
    return model

main()
'''


def test_setup_after_the_docstring_and_a_launch_line_on_top() -> None:
    out = planned(SOURCE, process_group.plan_process_group, path="run.py")
    assert out.startswith("\n# devfix DF401: launch with\n# `torchrun --standalone")
    assert "run.py`" in out
    assert '    """Train."""\n    # One process per device:' in out
    assert (
        "\n        dist.init_process_group(\n" in out or "dist.init_process_group(backend=" in out
    )


def test_teardown_before_the_last_return() -> None:
    out = planned(SOURCE, teardown.plan_teardown)
    assert "        dist.destroy_process_group()\n    return model\n" in out


def test_names_the_setup_binds_must_be_free() -> None:
    script, _plan = script_of(
        "import torch\nworld_size = 2\nmodel = torch.nn.DataParallel(Net())\n"
    )
    with pytest.raises(Decline, match="`world_size`"):
        process_group.check_names(script)
