"""DF309 global-rank-as-device."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF309"


def test_device_ids_take_the_local_index_the_script_already_computed() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(args):
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            device = rank % torch.cuda.device_count()
            torch.cuda.set_device(device)
            model = build(args).to(device)
            model = DDP(model, device_ids=[rank])  # wrap
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(args):
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            device = rank % torch.cuda.device_count()
            torch.cuda.set_device(device)
            model = build(args).to(device)
            model = DDP(model, device_ids=[device])  # wrap
        """,
    )
    assert [f.applicability for f in findings] == [Applicability.SAFE]
    assert "`rank` is the global rank (`dist.get_rank()`)" in findings[0].message


def test_rank_read_from_the_environment_prefers_a_local_rank_name() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch
        from torch import nn

        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        global_rank = int(os.environ["RANK"])
        torch.cuda.set_device(global_rank)
        net = nn.parallel.DistributedDataParallel(
            net.cuda(global_rank), device_ids=[global_rank], output_device=global_rank
        )
        """,
        """
        import os
        import torch
        from torch import nn

        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        global_rank = int(os.environ["RANK"])
        torch.cuda.set_device(local_rank)
        net = nn.parallel.DistributedDataParallel(
            net.cuda(local_rank), device_ids=[local_rank], output_device=local_rank
        )
        """,
    )


def test_without_a_local_index_the_rank_is_taken_modulo_the_gpus() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch as T
        from torch.distributed import get_rank

        def setup():
            rank = int(os.getenv("RANK", "0"))
            device = T.device("cuda", rank)
            name = f"cuda:{get_rank()}"
            other = "cuda:" + str(rank)
            return device, name, other
        """,
        """
        import os
        import torch as T
        from torch.distributed import get_rank

        def setup():
            rank = int(os.getenv("RANK", "0"))
            device = T.device("cuda", rank % T.cuda.device_count())
            name = f"cuda:{get_rank() % T.cuda.device_count()}"
            other = "cuda:" + str(rank % T.cuda.device_count())
            return device, name, other
        """,
    )


def test_tensor_moves_by_rank() -> None:
    assert_fix(
        RULE,
        """
        import torch.distributed as D

        rank = D.get_rank()
        batch = batch.to(rank, non_blocking=True)
        model.cuda(device=rank)
        """,
        """
        import torch
        import torch.distributed as D

        rank = D.get_rank()
        batch = batch.to(rank % torch.cuda.device_count(), non_blocking=True)
        model.cuda(device=rank % torch.cuda.device_count())
        """,
    )


def test_local_indices_spawn_ranks_and_parameters_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import os
        import torch
        import torch.distributed as dist

        local_rank = int(os.environ["LOCAL_RANK"])
        rank = int(os.environ["RANK"])
        model = DDP(model.to(local_rank), device_ids=[local_rank])
        gpu = dist.get_rank() % torch.cuda.device_count()
        torch.cuda.set_device(gpu)
        x = x.to(f"cuda:{torch.cuda.current_device()}")
        sampler = DistributedSampler(data, rank=rank)  # the global rank, where it belongs

        def worker(rank, world_size):
            torch.cuda.set_device(rank)
            return DDP(model.to(rank), device_ids=[rank])
        """,
    )
    assert_noop(
        RULE,
        """
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def worker(index, world_size):
            dist.init_process_group("nccl", rank=index, world_size=world_size)
            rank = dist.get_rank()
            model = DDP(net.to(rank), device_ids=[rank])

        mp.spawn(worker, args=(torch.cuda.device_count(),), nprocs=torch.cuda.device_count())
        """,
    )


def test_a_name_that_is_not_always_the_rank_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import os
        import torch.distributed as dist

        if distributed:
            gpu = dist.get_rank()
        else:
            gpu = args.gpu
        model = model.to(gpu)
        rank = 0
        model = DDP(model, device_ids=[rank])
        """,
    )


def test_a_local_index_bound_with_the_rank_under_one_condition_is_used_where_the_rank_is() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch

        def launch(cfg):
            if cfg.multi_node:
                gpu = int(os.environ["LOCAL_RANK"])
                node_rank = int(os.environ["RANK"])
            if torch.distributed.is_initialized():
                torch.cuda.set_device(node_rank)
        """,
        """
        import os
        import torch

        def launch(cfg):
            if cfg.multi_node:
                gpu = int(os.environ["LOCAL_RANK"])
                node_rank = int(os.environ["RANK"])
            if torch.distributed.is_initialized():
                torch.cuda.set_device(gpu)
        """,
    )


def test_a_local_index_bound_after_the_rank_or_in_another_branch_is_not_used() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch

        def launch(cfg):
            if cfg.multi_node:
                node_rank = int(os.environ["RANK"])
                gpu = int(os.environ["LOCAL_RANK"])
            else:
                node_rank = int(os.environ["RANK"])
            if torch.distributed.is_initialized():
                torch.cuda.set_device(node_rank)
        """,
        """
        import os
        import torch

        def launch(cfg):
            if cfg.multi_node:
                node_rank = int(os.environ["RANK"])
                gpu = int(os.environ["LOCAL_RANK"])
            else:
                node_rank = int(os.environ["RANK"])
            if torch.distributed.is_initialized():
                torch.cuda.set_device(node_rank % torch.cuda.device_count())
        """,
    )


def test_deepspeed_comm_ranks_count_as_torch_distributed_ones() -> None:
    assert_fix(
        RULE,
        """
        import deepspeed
        import torch
        from deepspeed import comm as ds_comm

        deepspeed.init_distributed()
        torch.cuda.set_device(ds_comm.get_rank())

        def place(engine):
            gpu = ds_comm.get_local_rank()
            return engine.to(f"cuda:{ds_comm.get_rank()}"), gpu
        """,
        """
        import deepspeed
        import torch
        from deepspeed import comm as ds_comm

        deepspeed.init_distributed()
        torch.cuda.set_device(ds_comm.get_rank() % torch.cuda.device_count())

        def place(engine):
            gpu = ds_comm.get_local_rank()
            return engine.to(f"cuda:{gpu}"), gpu
        """,
    )


def test_a_rank_unpacked_from_a_helper_or_a_method_that_returns_it_is_the_rank() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def dist_info():
            if dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
            return 0, 1

        class Halo(torch.nn.Module):
            def shape(self):
                world, me = 1, 0
                if dist.is_initialized():
                    world, me = dist.get_world_size(), dist.get_rank()
                return world, me

            def forward(self, x):
                world, me = self.shape()
                sizes = torch.zeros(world, device=torch.device("cuda", me))
                return x, sizes

        rank, world_size = dist_info()
        torch.cuda.set_device(rank)
        """,
        """
        import torch
        import torch.distributed as dist

        def dist_info():
            if dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
            return 0, 1

        class Halo(torch.nn.Module):
            def shape(self):
                world, me = 1, 0
                if dist.is_initialized():
                    world, me = dist.get_world_size(), dist.get_rank()
                return world, me

            def forward(self, x):
                world, me = self.shape()
                sizes = torch.zeros(world, device=torch.device("cuda", me % torch.cuda.device_count()))
                return x, sizes

        rank, world_size = dist_info()
        torch.cuda.set_device(rank % torch.cuda.device_count())
        """,
    )


def test_a_helper_returning_something_else_at_that_place_gives_no_rank() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def dist_info():
            return dist.get_rank(), dist.get_world_size()

        world_size, rank = dist_info()
        torch.cuda.set_device(rank)
        """,
    )


def test_a_global_rank_field_handed_to_deepspeeds_accelerator_is_the_rank() -> None:
    assert_fix(
        RULE,
        """
        import deepspeed
        import torch
        from deepspeed.accelerator import get_accelerator

        class Launch:
            def setup(self):
                get_accelerator().set_device(self.cfg.global_rank)
                deepspeed.init_distributed()

            def place(self, model):
                return model.to(self.cfg.local_rank)
        """,
        """
        import deepspeed
        import torch
        from deepspeed.accelerator import get_accelerator

        class Launch:
            def setup(self):
                get_accelerator().set_device(self.cfg.global_rank % torch.cuda.device_count())
                deepspeed.init_distributed()

            def place(self, model):
                return model.to(self.cfg.local_rank)
        """,
    )


def test_set_device_of_another_backend_is_bounded_by_its_own_device_count() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch
        import torch_npu
        import torch.distributed as dist

        dist.init_process_group("hccl")
        torch.npu.set_device(int(os.environ["RANK"]))
        torch.accelerator.set_device_index(dist.get_rank())
        """,
        """
        import os
        import torch
        import torch_npu
        import torch.distributed as dist

        dist.init_process_group("hccl")
        torch.npu.set_device(int(os.environ["RANK"]) % torch.npu.device_count())
        torch.accelerator.set_device_index(dist.get_rank() % torch.accelerator.device_count())
        """,
    )


def test_a_device_built_from_the_rank_alone_is_a_gpu_index() -> None:
    # `torch.device(3)` is `cuda:3`; a device named by a string is not an index.
    assert_fix(
        RULE,
        """
        import os
        import torch

        gpu = int(os.environ["RANK"])
        device = torch.device(gpu)
        spare = torch.device("cpu")
        """,
        """
        import os
        import torch

        gpu = int(os.environ["RANK"])
        device = torch.device(gpu % torch.cuda.device_count())
        spare = torch.device("cpu")
        """,
    )


def test_slurm_s_task_rank_read_by_a_helper_is_the_global_rank() -> None:
    # `srun` sets SLURM_PROCID to the task's rank in the whole job, SLURM_LOCALID on its node.
    assert_fix(
        RULE,
        """
        import os
        import torch

        def task_rank():
            return int(os.environ.get("SLURM_PROCID", 0))

        def main():
            rank = task_rank()
            gpu = int(os.environ["SLURM_LOCALID"])
            device = torch.device(f"cuda:{rank}")
            model = Net().to(device)
        """,
        """
        import os
        import torch

        def task_rank():
            return int(os.environ.get("SLURM_PROCID", 0))

        def main():
            rank = task_rank()
            gpu = int(os.environ["SLURM_LOCALID"])
            device = torch.device(f"cuda:{gpu}")
            model = Net().to(device)
        """,
    )


def test_a_rank_with_a_negative_no_launcher_fallback_is_still_the_rank() -> None:
    # `rank = -1` where no launcher ran: set_device(-1) selects nothing, and the modulo would
    # make it the last GPU, so the fix waits for --unsafe-fixes.
    before = """
        import os
        import torch
        import torch.distributed as dist

        if "RANK" in os.environ:
            rank = int(os.environ["RANK"])
        else:
            rank = -1
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank)
        """
    after = before.replace("set_device(rank)", "set_device(rank % torch.cuda.device_count())")
    assert_fix(RULE, before, before)  # reported, left as it is without --unsafe-fixes
    findings = assert_fix(RULE, before, after, unsafe=True)
    assert findings[0].applicability is Applicability.UNSAFE
    assert "selects no GPU" in findings[0].message


def test_a_selector_of_the_runs_own_device_type_and_a_rank_scaled_to_stages() -> None:
    # `getattr(torch, dev.type)` is `torch.cuda` or `torch.xpu` at run time: its own
    # `device_count()` bounds the index. A rank times the pipeline's stages takes the local rank
    # where a name holds it, and is only reported where none does.
    before = """
        import os
        import torch
        import torch.distributed as dist

        def start(dev, stages):
            dist.init_process_group("nccl")
            getattr(torch, dev.type).set_device(dist.get_rank())
            node_rank = int(os.environ["LOCAL_RANK"])
            getattr(torch, dev.type).set_device(dist.get_rank() * stages)
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "set_device(dist.get_rank())\n",
            "set_device(dist.get_rank() % getattr(torch, dev.type).device_count())\n",
        ).replace("set_device(dist.get_rank() * stages)", "set_device(node_rank * stages)"),
    )
    assert_declined(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def start(dev, stages):
            dist.init_process_group("nccl")
            getattr(torch, dev.type).set_device(dist.get_rank() * stages)
        """,
        reason="it needs the local rank (not a modulo)",
    )
