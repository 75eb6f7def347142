# A launcher-agnostic DDP script picks its backend at run time: NCCL when CUDA is there, Gloo
# otherwise, and puts its model on the matching device. Rank 0 decides how many warm-up steps
# every rank runs and broadcasts the number in a tensor made on the CPU: right under Gloo,
# refused by NCCL on the GPU machines the script is for.
# Run: torchrun --nproc_per_node=2 backend_chosen_at_run_time.before.py
# devfix-flags: --select DF311
# devfix-expect: DF311
# devfix-golden: gpus=2 fails-with="No backend type associated with device type cpu" env="RANK=1 LOCAL_RANK=1 WORLD_SIZE=2"
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

use_cuda = torch.cuda.is_available()
launched = "LOCAL_RANK" in os.environ
rank = int(os.environ.get("LOCAL_RANK", 0))
if launched:
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
device = torch.device(f"cuda:{rank}" if use_cuda else "cpu")
torch.manual_seed(2)
model = nn.Linear(3, 1).to(device)
if launched:
    model = DistributedDataParallel(model, device_ids=[rank] if use_cuda else None)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
warmup = torch.zeros(1, dtype=torch.int64)
if rank == 0:
    warmup += 4  # rank 0 chooses
if launched:
    dist.broadcast(warmup, src=0)
for _ in range(int(warmup.item())):
    x = torch.randn(8, 3, device=device)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("rank", rank, "warmed up for", int(warmup.item()), "steps")
if launched:
    dist.destroy_process_group()
