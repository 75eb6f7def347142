# An AMP training step written for one GPU: `.cuda(0)`, `.to("cuda:0")`,
# `torch.cuda.amp.GradScaler()` and `torch.cuda.amp.autocast()`. Under torchrun the targets come
# from the rank's GPU and rank 1 fails with "cuda:1 and cuda:0"; without a GPU it does not run
# at all (shared/design/fix-semantics.md B.10, companions).
# Run on 2 GPUs: LOCAL_RANK=1 python amp_training_cuda_index.before.py
# devfix-flags: --select DF304,DF308 --unsafe-fixes
# devfix-expect: DF304
# (DF308 then gives the AMP objects the chosen device's type: on CUDA alone they were right.)
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
# devfix-example: examples/hard_coded_device.py is this case
import os

import torch
import torch.nn.functional as F
from torch import nn


def rank_targets(n):
    """Library code: labels on this process's GPU."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    where = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    return torch.randint(0, 3, (n,), device=where)


def train():
    device = (
        torch.device(
            torch.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK", 0))
        )
        if torch.accelerator.is_available()
        else torch.device("cpu")
    )
    model = nn.Linear(5, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
    for _ in range(2):
        x = torch.randn(4, 5).to(device)
        y = rank_targets(4)
        with torch.autocast(device_type=device.type):
            loss = F.cross_entropy(model(x).float(), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return device, loss.item()


print(train())
