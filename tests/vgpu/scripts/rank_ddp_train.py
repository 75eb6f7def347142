"""A plain DDP training script as torchrun starts it, run as one rank: nccl process group,
the rank's GPU, DistributedDataParallel and a DistributedSampler (peers mirror this rank)."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
print("world", dist.get_rank(), dist.get_world_size(), dist.get_backend(), dist.is_initialized())

torch.manual_seed(0)
features = torch.randn(16, 4)
dataset = TensorDataset(features, features @ torch.tensor([1.0, -2.0, 0.5, 3.0]))
sampler = DistributedSampler(dataset, shuffle=False)
print("sampler", list(sampler))

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(local_rank)
ddp = DistributedDataParallel(
    model, device_ids=[local_rank], output_device=local_rank, find_unused_parameters=True
)
print(
    "ddp",
    isinstance(ddp, DistributedDataParallel),
    ddp.module is model,
    next(iter(ddp.state_dict())),
)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
losses = []
for _epoch in range(5):
    sampler.set_epoch(_epoch)
    for x, y in DataLoader(dataset, batch_size=4, sampler=sampler):  # CPU batches: DDP moves x
        loss = nn.functional.mse_loss(ddp(x).squeeze(1), y.to(local_rank))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
with ddp.no_sync():
    ddp(features[:2]).sum().backward()
print("trained", losses[-1] < losses[0], sorted({str(p.device) for p in model.parameters()}))

for bad in (
    lambda: nn.Linear(4, 1),
    lambda: nn.Sequential(nn.Linear(4, 4).to(0), nn.Linear(4, 1).to(1)),
):
    try:
        DistributedDataParallel(bad(), device_ids=[local_rank], static_graph=True)
    except ValueError as error:
        print("refused", str(error).split(", but got")[0])
dist.barrier()
dist.destroy_process_group()
print("destroyed", dist.is_initialized())
