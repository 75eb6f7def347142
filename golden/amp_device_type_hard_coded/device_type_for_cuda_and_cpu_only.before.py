# nanoGPT's train.py (karpathy/nanoGPT#654, fix proposed in PR#698): the device is a configurable
# string, the autocast device type knows only "cuda" and "cpu" (mps becomes "cpu", so autocast is
# skipped), and a CUDA GradScaler is requested for float16 wherever the script runs. The golden
# runs it on a machine without CUDA with warnings as errors (python -W error::UserWarning).
# Run without a GPU: python -W error::UserWarning device_type_for_cuda_and_cpu_only.before.py
# devfix-flags: --select DF308 --unsafe-fixes
# devfix-expect: DF308
# devfix-golden: gpus=0 fails-with="CUDA is not available" env="PYTHONWARNINGS=error::UserWarning"
import os
from contextlib import nullcontext

import torch
from torch import nn

device = os.environ.get("DEVICE", "cuda" if torch.cuda.is_available() else "cpu")  # or DEVICE=mps
dtype = "float16"
device_type = "cuda" if "cuda" in device else "cpu"  # for later use in torch.autocast
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

model = nn.Linear(16, 16)
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(2):
    with ctx:
        loss = model(torch.randn(2, 16, device=device)).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
print(f"loss {loss.item():.4f}")
