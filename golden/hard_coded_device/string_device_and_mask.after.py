# `device = "cuda"` means "the current GPU" (cuda:1 on rank 1 after set_device), which is right
# and stays; but a mask is made with `device="cuda:0"`: rank 1 fails with "cuda:1 and cuda:0"
# (shared/design/fix-semantics.md A.8, B.10).
# Run on 2 GPUs: LOCAL_RANK=1 python string_device_and_mask.before.py
# devfix-flags: --select DF304
# devfix-expect: DF304
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import os

import torch
from torch import nn

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Linear(6, 6).to(device)
keep = torch.ones(6, device=device)
keep[0] = 0.0
with torch.no_grad():
    x = torch.randn(2, 6).to(device)
    print((model(x) * keep).sum().item())
