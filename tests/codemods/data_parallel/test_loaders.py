"""Loaders: which loaders train, and each one's DistributedSampler."""

from __future__ import annotations

import pytest

from devfix.codemods.data_parallel import loaders
from devfix.codemods.data_parallel.script import Decline
from tests.codemods.data_parallel.planning import planned, script_of


def _plan_loaders(script: object, plan: object) -> None:
    loaders.plan_loaders(script, plan, keep_per_process_batch=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("loader", "sampler"),
    [
        ("train_loader", "train_sampler"),
        ("trainloader", "trainsampler"),
        ("train_iterator", "train_sampler"),
        ("train_dataloader", "train_sampler"),
        ("loader", "sampler"),
        ("batches", "batches_sampler"),
    ],
)
def test_sampler_names(loader: str, sampler: str) -> None:
    assert loaders.sampler_name(loader) == sampler


def test_a_global_loader_trained_in_a_helper_of_a_flat_script() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        def train(epoch):
            for x, y in trainloader:
                model(x).sum().backward()

        trainloader = DataLoader(trainset, batch_size=128, shuffle=True)
        model = torch.nn.DataParallel(Net())
        for epoch in range(10):
            train(epoch)
        """,
        _plan_loaders,
    )
    assert "shuffle=True, seed=0" in out
    assert "    for epoch in range(10):\n        trainsampler.set_epoch(epoch)" in out


def test_a_loader_a_factory_returns() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        def set_loader(opt):
            train_loader = DataLoader(train_set, batch_size=opt.batch_size, shuffle=True)
            val_loader = DataLoader(val_set, batch_size=64)
            return train_loader, val_loader

        def main():
            train_loader, val_loader = set_loader(opt)
            model = torch.nn.DataParallel(Net())
            for epoch in range(3):
                for x in train_loader:
                    model(x).sum().backward()

        main()
        """,
        _plan_loaders,
    )
    assert "def set_loader(opt):\n    # This process's share of the data" in out
    assert '    rank = int(os.environ.get("RANK", "0"))\n' in out
    assert "        train_loader.sampler.set_epoch(epoch)" in out
    assert "val_loader = DataLoader(val_set, batch_size=64)" in out


def test_the_placeholder_sampler_becomes_the_distributed_one() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        train_sampler = None
        loader = DataLoader(ds, batch_size=8, shuffle=(train_sampler is None), sampler=train_sampler)
        model = torch.nn.DataParallel(Net())
        for x in loader:
            model(x).sum().backward()
        """,
        _plan_loaders,
    )
    assert "train_sampler = None" not in out
    assert "rank=rank, shuffle=True, seed=0" in out
    assert "batch_size=8 // world_size, sampler=train_sampler)" in out


def test_a_loader_with_its_own_sampler_is_kept_beside_a_converted_one() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        if few_shot:
            loader = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds, replacement=True))
        else:
            loader = DataLoader(ds, batch_size=8, shuffle=True)
        model = torch.nn.DataParallel(Net())
        for x in loader:
            model(x).sum().backward()
        """,
        _plan_loaders,
    )
    assert "# devfix DF401: this loader keeps its own sampler" in out
    assert out.count("DistributedSampler(") == 1


def test_only_loaders_with_their_own_sampler() -> None:
    with pytest.raises(Decline, match="already has a `batch_sampler`"):
        script, plan = script_of(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_sampler=buckets)
            model = torch.nn.DataParallel(Net())
            for x in loader:
                model(x).sum().backward()
            """
        )
        _plan_loaders(script, plan)


def test_a_loader_built_by_the_caller_of_the_training_function() -> None:
    script, plan = script_of(
        """
        import torch
        from torch.utils.data import DataLoader

        def train(loader):
            model = torch.nn.DataParallel(Net())
            for x in loader:
                model(x).sum().backward()

        def main():
            train(DataLoader(ds, batch_size=4))

        main()
        """
    )
    with pytest.raises(Decline, match="built in `main`"):
        _plan_loaders(script, plan)


def test_a_shuffled_loader_without_an_epoch_loop_says_where_set_epoch_goes() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=8, shuffle=True)
        model = torch.nn.DataParallel(Net())
        for step, x in enumerate(recycle(loader)):
            model(x).sum().backward()
        """,
        _plan_loaders,
    )
    assert "# devfix DF401: call `sampler.set_epoch(n)` when pass n" in out
    assert "sampler.set_epoch(epoch)" not in out


def test_a_loader_drawn_with_next_in_the_step_loop_trains() -> None:
    out = planned(
        """
        import torch
        from torch.utils.data import DataLoader

        data_loader = DataLoader(ds, 32, shuffle=True)
        net = torch.nn.DataParallel(Net())
        batch_iterator = iter(data_loader)
        for iteration in range(1000):
            images = next(batch_iterator)
            net(images).sum().backward()
        """,
        _plan_loaders,
    )
    assert "DataLoader(ds, 32 // world_size, sampler=sampler)" in out
    # The note sits on the loader, below the sampler the loader now reads.
    assert "    # devfix DF401: call `sampler.set_epoch(n)` when pass n over the data\n" in out
    assert out.index("sampler = DistributedSampler(") < out.index("call `sampler.set_epoch(n)`")
    assert out.index("call `sampler.set_epoch(n)`") < out.index("data_loader = DataLoader(")


@pytest.mark.parametrize(
    "setter",
    [
        "torch.set_default_tensor_type('torch.cuda.FloatTensor')",
        "torch.set_default_device('cuda')",
    ],
)
def test_a_cuda_default_device_keeps_the_loader_as_it_is(setter: str) -> None:
    # DistributedSampler's own CPU generator cannot shuffle on a CUDA default device.
    script, plan = script_of(
        f"""
        import torch
        from torch.utils.data import DataLoader
        if torch.cuda.is_available():
            {setter}
        loader = DataLoader(ds, batch_size=32, shuffle=True)
        model = torch.nn.DataParallel(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x).sum().backward()
            opt.step()
        """
    )
    with pytest.raises(Decline, match="default device is an accelerator"):
        _plan_loaders(script, plan)
