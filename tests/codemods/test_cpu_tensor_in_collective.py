"""DF311 cpu-tensor-in-collective."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF311"


def test_a_validation_count_reduced_across_an_nccl_group_is_made_on_the_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def validate(model, loader, local_rank):
            dist.init_process_group(backend="nccl")
            device = torch.device("cuda", local_rank)
            model = model.to(device)
            hits = 0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                hits += (model(x).argmax(1) == y).sum().item()
            hits_t = torch.tensor([hits])  # this rank's count
            dist.all_reduce(hits_t, op=dist.ReduceOp.SUM)
            return hits_t.item()
        """,
        """
        import torch
        import torch.distributed as dist

        def validate(model, loader, local_rank):
            dist.init_process_group(backend="nccl")
            device = torch.device("cuda", local_rank)
            model = model.to(device)
            hits = 0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                hits += (model(x).argmax(1) == y).sum().item()
            hits_t = torch.tensor([hits], device=device)  # this rank's count
            dist.all_reduce(hits_t, op=dist.ReduceOp.SUM)
            return hits_t.item()
        """,
    )
    assert [f.applicability for f in findings] == [Applicability.SAFE]
    assert "`hits_t` is made on the CPU (`torch.tensor(...)`)" in findings[0].message
    assert "this NCCL group" in findings[0].message


def test_legacy_constructors_numpy_and_gathered_outputs_move_through_aliased_imports() -> None:
    # `torch.Tensor([...])` and `from_numpy` take no `device=`; `all_gather`'s outputs made in
    # a comprehension must sit on the GPU as well; the collectives are reached by aliases.
    assert_fix(
        RULE,
        """
        import numpy as np
        import torch
        import torch.distributed as td
        from torch.distributed import all_gather as gather_from_ranks

        def summarise(net, batches, dev, world):
            td.init_process_group("nccl", world_size=world)
            net.to(dev)
            total = sum(float(net(b.to(dev)).sum()) for b in batches)
            loss = torch.Tensor([total]).float()
            td.reduce(loss, 0)
            counts = torch.from_numpy(np.bincount([1, 2, 2]))
            parts = [torch.zeros(3, dtype=torch.long) for _ in range(world)]
            gather_from_ranks(parts, counts)
            return loss, parts
        """,
        """
        import numpy as np
        import torch
        import torch.distributed as td
        from torch.distributed import all_gather as gather_from_ranks

        def summarise(net, batches, dev, world):
            td.init_process_group("nccl", world_size=world)
            net.to(dev)
            total = sum(float(net(b.to(dev)).sum()) for b in batches)
            loss = torch.Tensor([total]).to(dev).float()
            td.reduce(loss, 0)
            counts = torch.from_numpy(np.bincount([1, 2, 2])).to(dev)
            parts = [torch.zeros(3, dtype=torch.long, device=dev) for _ in range(world)]
            gather_from_ranks(parts, counts)
            return loss, parts
        """,
    )


def test_a_script_that_always_makes_an_nccl_group_and_moves_with_bare_cuda_gets_cuda() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def main():
            dist.init_process_group("nccl")
            torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
            model = Model().cuda()
            for images, targets in loader:
                loss = criterion(model(images.cuda()), targets.cuda())
            seen = torch.zeros(1)
            seen += len(loader.dataset)
            dist.broadcast(seen, src=0)
        """,
        """
        import torch
        import torch.distributed as dist

        def main():
            dist.init_process_group("nccl")
            torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
            model = Model().cuda()
            for images, targets in loader:
                loss = criterion(model(images.cuda()), targets.cuda())
            seen = torch.zeros(1).cuda()
            seen += len(loader.dataset)
            dist.broadcast(seen, src=0)
        """,
    )


def test_a_bare_cuda_script_that_can_run_without_a_gpu_gets_a_finding_without_a_fix() -> None:
    # Since torch 2.6 `init_process_group()` naming no backend is NCCL alone on a GPU host,
    # Gloo on a CPU one: there the CPU tensor is right and `.cuda()` would fail.
    cases = (
        ("dist.init_process_group()", "but NCCL, the GPUs' backend, communicates"),
        ('if use_gpu:\n    dist.init_process_group("nccl")', "but this NCCL group communicates"),
    )
    for init, group in cases:
        finding = assert_declined(
            RULE,
            f"""
import torch
import torch.distributed as dist

{init}
model = Model().cuda()
loss = criterion(model(images.cuda()), targets.cuda())
seen = torch.zeros(1)
dist.broadcast(seen, src=0)
""",
            reason="no fix: the script moves its work with bare `.cuda()` and can run without a GPU",
        )
        assert group in finding.message


def test_groups_that_take_cpu_tensors_and_tensors_already_on_the_device_are_left_alone() -> None:
    for backend in ('"gloo"', 'backend="mpi"', 'backend="cpu:gloo,cuda:nccl"'):
        assert_noop(
            RULE,
            f"""
            import torch
            import torch.distributed as dist

            dist.init_process_group({backend})
            device = torch.device("cuda")
            model = Model().to(device)
            stat = torch.tensor([1.0])
            dist.all_reduce(stat)
            """,
        )
    assert_noop(
        RULE,
        """
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        device = torch.device("cuda")
        model = Model().to(device)
        stat = torch.tensor([1.0], device=device)
        dist.all_reduce(stat)
        moved = torch.tensor([2.0]).to(device)
        dist.all_reduce(moved)
        dist.all_reduce(model(batch.to(device)).sum())
        """,
    )


def test_a_computed_backend_with_no_gpu_in_sight_is_not_reported() -> None:
    # `--backend gloo` on a CPU cluster is as likely as NCCL: nothing says a GPU runs this.
    assert_noop(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def run(args):
            dist.init_process_group(backend=args.backend)
            stat = torch.tensor([1.0])
            dist.all_reduce(stat)
        """,
    )


def test_several_devices_or_one_bound_later_get_a_finding_without_a_fix() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        encoder = Encoder().to("cuda:0")
        decoder = Decoder().to("cuda:1")
        total = torch.tensor([0.0])
        dist.all_reduce(total)
        """,
        reason="no fix: the code moves its work to several devices",
    )
    assert_declined(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def main(rank):
            dist.init_process_group("nccl")
            counter = torch.zeros(2)
            device = torch.device("cuda", rank)
            model = Model().to(device)
            dist.all_reduce(counter)
        """,
        reason="no fix: `device` is not set where it is made (line 7)",
    )


def test_a_group_made_elsewhere_or_named_by_torch_s_backend_enum_is_not_taken_for_nccl() -> None:
    # The caller's group may be Gloo, which takes the CPU tensor: a finding, no fix.
    assert_declined(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def agree(failed, side_group, device):
            dist.init_process_group("nccl")
            model = Net().to(device)
            flag = torch.tensor([int(failed)])
            dist.all_reduce(flag, group=side_group)
            return flag.item() > 0
        """,
        reason="a group made elsewhere; no fix: NCCL needs it on the GPU",
    )
    assert_noop(
        RULE,
        """
        import torch
        import torch.distributed as dist

        def agree(failed, device):
            dist.init_process_group("nccl")
            side = dist.new_group(backend=dist.Backend.GLOO)
            model = Net().to(device)
            flag = torch.tensor([int(failed)])
            dist.all_reduce(flag, group=side)
            return flag.item() > 0
        """,
    )


def test_a_count_of_an_inputs_rows_held_in_a_field_is_made_where_the_input_is() -> None:
    findings = assert_fix(
        "DF311",
        """
        import torch
        import torch.distributed as dist

        class Accuracy:
            def update(self, scores: torch.Tensor, target: torch.Tensor):
                self.hits = (scores.argmax(-1) == target).sum()
                self.seen = torch.tensor(scores.size(0))
                if dist.is_initialized():
                    dist.all_reduce(self.hits)
                    dist.all_reduce(self.seen)
                return self.hits / self.seen
        """,
        """
        import torch
        import torch.distributed as dist

        class Accuracy:
            def update(self, scores: torch.Tensor, target: torch.Tensor):
                self.hits = (scores.argmax(-1) == target).sum()
                self.seen = torch.tensor(scores.size(0), device=scores.device)
                if dist.is_initialized():
                    dist.all_reduce(self.hits)
                    dist.all_reduce(self.seen)
                return self.hits / self.seen
        """,
    )
    assert "where `scores` is, whose size it counts" in findings[0].message
