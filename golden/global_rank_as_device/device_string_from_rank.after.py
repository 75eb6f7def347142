# Evaluation under torchrun whose device string is built from `dist.get_rank()`: fine on one
# node, `cuda:3` on the second node of a 2x2 launch (RANK=3), where the model's move fails.
# Run: torchrun --nnodes=2 --nproc_per_node=2 device_string_from_rank.before.py
# devfix-expect: DF309
# devfix-golden: gpus=2 fails-with="invalid device ordinal" env="RANK=3 LOCAL_RANK=1 WORLD_SIZE=4"
import os

import torch
import torch.distributed as dist
from torch import nn


def evaluate(model: nn.Module, batches: list[torch.Tensor]) -> float:
    if dist.is_initialized():
        device = torch.device(f"cuda:{dist.get_rank() % torch.cuda.device_count()}")
    else:
        device = torch.device("cpu")
    model = model.to(device).eval()
    total = torch.zeros((), device=device)
    with torch.no_grad():
        for batch in batches:
            total += model(batch.to(device)).sum()
    if dist.is_initialized():
        dist.all_reduce(total)
    return total.item()


if __name__ == "__main__":
    if "RANK" in os.environ:
        dist.init_process_group("nccl")
    torch.manual_seed(0)
    data = [torch.randn(3, 4) for _ in range(2)]
    print("sum over ranks:", round(evaluate(nn.Linear(4, 2), data), 3))
    if dist.is_initialized():
        dist.destroy_process_group()
