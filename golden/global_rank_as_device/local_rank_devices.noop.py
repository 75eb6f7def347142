# A torchrun script that uses each rank where it belongs: LOCAL_RANK picks the GPU, the
# global rank shards the data and decides who prints. A naive tool would flag every `rank`.
# devfix-golden: gpus=2 env="RANK=3 LOCAL_RANK=1 WORLD_SIZE=4"
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

distributed = "RANK" in os.environ
local_rank = int(os.environ.get("LOCAL_RANK", 0))
if distributed:
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
rank = dist.get_rank() if distributed else 0
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")

data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
sampler = DistributedSampler(data, num_replicas=dist.get_world_size(), rank=rank) if distributed else None
loader = DataLoader(data, batch_size=4, sampler=sampler)
model = nn.Linear(4, 1).to(device)
if distributed:
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank} on {next(model.parameters()).device}: {loss.item():.3f}")
