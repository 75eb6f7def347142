"""DF307 generator-on-other-device."""

from __future__ import annotations

from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF307"


def test_cpu_generator_for_a_factory_on_the_script_device() -> None:
    assert_fix(
        RULE,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        g = torch.Generator()  # reproducible noise
        g.manual_seed(1234)
        noise = torch.randn(16, 8, generator=g, device=device)
        """,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        g = torch.Generator(device=device)  # reproducible noise
        g.manual_seed(1234)
        noise = torch.randn(16, 8, generator=g, device=device)
        """,
    )


def test_seeded_inline_generator_in_a_function_and_an_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch as t

        def sample_latents(n, device):
            return t.rand(n, 4, device=device, generator=t.Generator().manual_seed(0))
        """,
        """
        import torch as t

        def sample_latents(n, device):
            return t.rand(n, 4, device=device, generator=t.Generator(device=device).manual_seed(0))
        """,
    )


def test_inline_generator_object() -> None:
    assert_fix(
        RULE,
        """
        from torch import Generator, randperm

        idx = randperm(100, generator=Generator(), device="cuda")
        """,
        """
        from torch import Generator, randperm

        idx = randperm(100, generator=Generator(device="cuda"), device="cuda")
        """,
    )


def test_cuda_generator_for_a_cpu_factory_draws_on_its_device() -> None:
    assert_fix(
        RULE,
        """
        import torch

        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        mask = torch.rand(batch, seq_len, generator=gen) < p
        """,
        """
        import torch

        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        mask = torch.rand(batch, seq_len, generator=gen, device=gen.device) < p
        """,
    )


def test_in_place_draw_into_a_moved_tensor() -> None:
    assert_fix(
        RULE,
        """
        import torch

        device = torch.device("cuda")
        rng = torch.Generator()
        weights = torch.empty(10, 10).to(device)
        weights.normal_(0, 0.02, generator=rng)
        """,
        """
        import torch

        device = torch.device("cuda")
        rng = torch.Generator(device=device)
        weights = torch.empty(10, 10).to(device)
        weights.normal_(0, 0.02, generator=rng)
        """,
    )


def test_shuffling_loader_after_set_default_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader, random_split

        torch.set_default_device("cuda")

        def make_loaders(dataset):
            train, val = random_split(dataset, [0.9, 0.1])
            return DataLoader(train, batch_size=32, shuffle=True), DataLoader(val, batch_size=32)
        """,
        """
        import torch
        from torch.utils.data import DataLoader, random_split

        torch.set_default_device("cuda")

        def make_loaders(dataset):
            train, val = random_split(dataset, [0.9, 0.1], generator=torch.Generator(device=torch.get_default_device()))
            return DataLoader(train, batch_size=32, shuffle=True, generator=torch.Generator(device=torch.get_default_device())), DataLoader(val, batch_size=32)
        """,
    )


def test_default_tensor_type_set_under_an_if_uses_where_an_empty_tensor_goes() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.utils.data as data

        if args.cuda:
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        else:
            torch.set_default_tensor_type("torch.FloatTensor")

        def train():
            loader = data.DataLoader(dataset, args.batch_size, shuffle=True, num_workers=2)
        """,
        """
        import torch
        import torch.utils.data as data

        if args.cuda:
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        else:
            torch.set_default_tensor_type("torch.FloatTensor")

        def train():
            loader = data.DataLoader(dataset, args.batch_size, shuffle=True, num_workers=2, generator=torch.Generator(device=torch.empty(0).device))
        """,
    )


def test_cpu_generator_given_to_a_loader_on_a_cuda_default() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        torch.set_default_device("cuda:0")
        g = torch.Generator()
        g.manual_seed(0)
        loader = DataLoader(ds, shuffle=True, generator=g)
        """,
        """
        import torch
        from torch.utils.data import DataLoader

        torch.set_default_device("cuda:0")
        g = torch.Generator(device=torch.get_default_device())
        g.manual_seed(0)
        loader = DataLoader(ds, shuffle=True, generator=g)
        """,
    )


def test_cuda_generator_for_random_split_becomes_a_cpu_generator() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import random_split

        split_rng = torch.Generator(device="cuda").manual_seed(42)
        train_set, test_set = random_split(full, [800, 200], generator=split_rng)
        """,
        """
        import torch
        from torch.utils.data import random_split

        split_rng = torch.Generator().manual_seed(42)
        train_set, test_set = random_split(full, [800, 200], generator=split_rng)
        """,
    )


def test_generator_used_on_two_devices_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch

        g = torch.Generator()
        a = torch.randn(3, generator=g)
        b = torch.randn(3, generator=g, device="cuda")
        """,
        reason="one generator cannot serve both",
    )


def test_device_bound_after_the_generator_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch

        g = torch.Generator()
        device = pick_device()
        x = torch.randn(3, generator=g, device=device)
        """,
        reason="is not known where the generator is created",
    )


def test_correct_generators_and_loaders_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        g = torch.Generator(device=device)
        noise = torch.randn(4, generator=g, device=device)
        cpu_g = torch.Generator()
        cpu_noise = torch.rand(4, generator=cpu_g)
        loader = DataLoader(ds, shuffle=True, generator=torch.Generator())
        unshuffled = DataLoader(ds, batch_size=8)
        """,
    )


def test_loader_with_a_cuda_default_but_no_shuffle_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        torch.set_default_device("cuda")
        loader = DataLoader(ds, batch_size=8, shuffle=False)
        cpu_default = torch.set_default_device("cpu")
        """,
    )


def test_manual_seed_under_data_parallel_seeds_every_gpu() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        torch.manual_seed(args.seed)
        if args.cuda:
            torch.cuda.manual_seed(args.seed)  # seed the GPU too
        model = nn.DataParallel(Net()).cuda()
        """,
        """
        import torch
        import torch.nn as nn

        torch.manual_seed(args.seed)
        if args.cuda:
            torch.cuda.manual_seed_all(args.seed)  # seed the GPU too
        model = nn.DataParallel(Net()).cuda()
        """,
    )


def test_manual_seed_in_a_single_gpu_script_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        torch.cuda.manual_seed(0)
        model = Net().cuda()
        """,
    )


def test_hard_coded_rng_state_index_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel

        state = torch.cuda.get_rng_state(0)
        model = DistributedDataParallel(Net().to(rank), device_ids=[rank])
        """,
        reason="random state of GPU 0 only",
    )


def test_distributed_sampler_under_a_cuda_default_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        def train(args, dataset):
            sampler = DistributedSampler(dataset)
            return DataLoader(dataset, batch_size=4, sampler=sampler)

        if __name__ == "__main__":
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
            train(parse_args(), load())
        """,
        reason="shuffles with a CPU generator of its own",
    )


def test_main_guard_is_not_a_condition_and_init_functions_are_not_draws() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        if __name__ == "__main__":
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
            rng = torch.Generator()
            torch.nn.init.normal_(weight, generator=rng)
            loader = DataLoader(dataset, shuffle=True)
        """,
        """
        import torch
        from torch.utils.data import DataLoader

        if __name__ == "__main__":
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
            rng = torch.Generator()
            torch.nn.init.normal_(weight, generator=rng)
            loader = DataLoader(dataset, shuffle=True, generator=torch.Generator(device=torch.empty(0).device))
        """,
    )


def test_default_device_from_a_variable() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import RandomSampler

        device = torch.device("cuda", args.local_rank)
        torch.set_default_device(device)
        sampler = RandomSampler(train_set)
        """,
        """
        import torch
        from torch.utils.data import RandomSampler

        device = torch.device("cuda", args.local_rank)
        torch.set_default_device(device)
        sampler = RandomSampler(train_set, generator=torch.Generator(device=device))
        """,
    )
