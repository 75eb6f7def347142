# Seed 003 (方案四): the script already selects MPS, then CUDA, then the CPU; a CUDA-only
# branch guarded by `torch.cuda.is_available()` is fine. Nothing to change.
# devfix-flags: --select DF304
import torch
from torch import nn

if torch.backends.mps.is_available():
    device = torch.device("mps")
    print("使用MPS设备")
else:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

model = nn.Linear(3, 3).to(device)
if torch.cuda.is_available():
    torch.backends.cudnn.benchmark = True
    warmup = torch.zeros(1, 3, device="cuda")
x = torch.randn(2, 3).to(device)
print(model(x).shape)
