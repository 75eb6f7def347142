"""Output: rank 0 prints and logs."""

from __future__ import annotations

from devfix.codemods.data_parallel import output
from tests.codemods.data_parallel.planning import planned


def test_training_code_helpers_and_callers() -> None:
    out = planned(
        """
        import logging
        import torch

        logger = logging.getLogger(__name__)

        def report(loss):
            logger.info("loss %s", loss)

        def train():
            model = torch.nn.DataParallel(Net())
            print("training")
            for x in loader:
                model(x).sum().backward()
                report(0.0)

        def main():
            print("start")
            train()

        main()
        """,
        output.plan_output,
    )
    assert '    if rank == 0:\n        print("training")\n' in out
    assert '    if os.environ.get("RANK", "0") == "0":\n        logger.info(' in out
    assert '    if os.environ.get("RANK", "0") == "0":\n        print("start")\n' in out


def test_a_print_in_a_one_line_block_is_left_alone() -> None:
    out = planned(
        """
        import torch
        model = torch.nn.DataParallel(Net())
        if verbose: print("hi")
        """,
        output.plan_output,
    )
    assert '    if verbose: print("hi")\n' in out
