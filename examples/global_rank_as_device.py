# A torchrun script that reads both ranks from the environment, then selects its GPU with the
# global one. On the second node (RANK=3, LOCAL_RANK=1, two GPUs a node) `set_device(3)` asks
# for a GPU the machine does not have.
# Run: torchrun --nnodes=2 --nproc_per_node=2 global_rank_as_device.py
import os

import torch
import torch.distributed as dist
from torch import nn

distributed = "RANK" in os.environ
local_rank = int(os.environ.get("LOCAL_RANK", 0))
global_rank = int(os.environ.get("RANK", 0))
world_size = int(os.environ.get("WORLD_SIZE", 1))

if distributed:
    dist.init_process_group(backend="nccl", rank=global_rank, world_size=world_size)
    torch.cuda.set_device(global_rank)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

net = nn.Linear(6, 3).to(device)
if distributed:
    net = nn.parallel.DistributedDataParallel(net, device_ids=[global_rank])
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    inputs = torch.randn(5, 6).to(device)
    loss = net(inputs).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"rank {global_rank}/{world_size} on {next(net.parameters()).device}: {loss.item():.3f}")
