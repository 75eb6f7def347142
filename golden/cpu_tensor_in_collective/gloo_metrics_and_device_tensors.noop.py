# Metrics reduced the two right ways: a Gloo group for the CPU-side bookkeeping (Gloo takes CPU
# tensors), and the NCCL world's collectives on tensors made on the GPU or computed there.
# devfix-flags: --select DF311
# devfix-golden: gpus=2
import os

import torch
import torch.distributed as dist
from torch import nn

distributed = "RANK" in os.environ
if distributed:
    dist.init_process_group("nccl")
    bookkeeping = dist.new_group(backend="gloo")
local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
model = nn.Linear(4, 2).to(device)
loss = model(torch.randn(3, 4, device=device)).sum()
total = loss.detach()
steps_done = torch.tensor([3])
flag = torch.ones(1, device=device)
if distributed:
    dist.all_reduce(total)  # computed on the GPU
    dist.all_reduce(steps_done, group=bookkeeping)  # a Gloo group
    dist.broadcast(flag, src=0)
print("steps", steps_done.item(), "flag", flag.item(), "total", round(total.item(), 3))
if distributed:
    dist.destroy_process_group()
