# A DiT-style torchrun training script: each process picks its GPU as `rank %
# torch.cuda.device_count()` and moves the model there, but hands DistributedDataParallel the
# global rank. On one node the two are equal; on the second node of a 2-node launch (RANK=3,
# LOCAL_RANK=1 with 2 GPUs a node) DDP is told to use `cuda:3`, which the machine lacks.
# Run: torchrun --nnodes=2 --nproc_per_node=2 ddp_device_ids_global_rank.before.py
# devfix-expect: DF309
# devfix-golden: gpus=2 fails-with="invalid device ordinal" env="RANK=3 LOCAL_RANK=1 WORLD_SIZE=4"
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("nccl")
    rank = dist.get_rank() if distributed else 0
    if torch.cuda.is_available():
        device = rank % torch.cuda.device_count()
        torch.cuda.set_device(device)
    else:
        device = "cpu"
    torch.manual_seed(rank)

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    if distributed:
        model = DDP(model, device_ids=[device])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for step in range(3):
        x = torch.randn(4, 8, device=device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print("rank", rank, "trained on", next(model.parameters()).device)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
