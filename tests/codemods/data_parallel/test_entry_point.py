"""Entry point: where the training runs, and scripts torchrun cannot launch as they are."""

from __future__ import annotations

import textwrap

import pytest

from devfix.codemods.data_parallel import entry_point
from devfix.codemods.data_parallel.script import Decline
from tests.codemods.data_parallel.planning import script_of


def _source(*parts: str) -> str:
    return textwrap.dedent("".join(parts))


def test_a_flat_script_moves_from_its_first_training_statement() -> None:
    script, plan = script_of(
        """
        import torch
        from torch.utils.data import DataLoader

        class Net(torch.nn.Module):
            pass

        loader = DataLoader(ds, batch_size=4)
        model = torch.nn.DataParallel(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x).sum().backward()
            opt.step()
        """
    )
    run = script.scope
    assert run.function is None and run.block is None
    assert plan.main_from is not None
    assert script.code(plan.main_from).strip().startswith("loader = DataLoader")


def test_the_innermost_function_with_a_training_loop_runs_it() -> None:
    script, _plan = script_of(
        _source(
            """
            import torch

            def set_model():
                model = torch.nn.DataParallel(Net())
                return model

            def main():
                model = set_model()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """,
            """
                for x in loader:
                    model(x).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main()
            """,
        )
    )
    run = script.scope
    assert run.function is not None and run.function.name.value == "main"
    assert run.wrapper is not None and run.wrapper.name.value == "set_model"
    assert run.teardown_after is None


def test_a_function_that_returns_early_gets_its_teardown_after_the_entry_call() -> None:
    script, _plan = script_of(
        _source(
            """
            import torch

            def main(args):
                model = torch.nn.DataParallel(Net())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                if args.eval:
                    return
            """,
            """
                for x in loader:
                    model(x).sum().backward()
                    opt.step()

            if __name__ == "__main__":
                main(parse())
            """,
        )
    )
    assert script.scope.teardown_after is not None
    assert script.code(script.scope.teardown_after).strip() == "main(parse())"


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        ("train()\ntrain()\n", "`train` is called 2 times"),
        ("for fold in range(3):\n    train()\n", "`train` is called in a loop"),
        ("", "which this file never runs"),
    ],
)
def test_a_function_the_process_group_cannot_start_in_once(calls: str, reason: str) -> None:
    source = "import torch\n\ndef train():\n    model = torch.nn.DataParallel(Net())\n\n" + calls
    with pytest.raises(Decline, match=reason):
        script_of(source)


def test_a_notebook_is_declined_with_what_to_do_instead() -> None:
    script, _plan = script_of("import torch\nmodel = torch.nn.DataParallel(Net())\n", "a.ipynb")
    with pytest.raises(Decline, match="notebook_launcher"):
        entry_point.check_launchable(script)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("torch.multiprocessing.spawn(run, nprocs=2)", "mp.spawn"),
        ('torch.distributed.init_process_group("nccl")', "already uses torch.distributed"),
    ],
)
def test_scripts_that_already_start_processes(line: str, reason: str) -> None:
    script, _plan = script_of(
        f"import torch\nimport torch.multiprocessing\nimport torch.distributed\n"
        f"model = torch.nn.DataParallel(Net())\n{line}\n"
    )
    with pytest.raises(Decline, match=reason):
        entry_point.check_launchable(script)
