# AMP done right (shared/design/fix-semantics.md B.10): autocast from the device's type, a scaler
# enabled only on CUDA, a CPU autocast chosen on purpose.
# devfix-flags: --select DF308
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 4).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
for _ in range(2):
    with torch.autocast(device_type=device.type):
        loss = model(torch.randn(2, 4, device=device)).float().sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
with torch.autocast("cpu", dtype=torch.bfloat16):
    print(model.cpu()(torch.randn(1, 4)).dtype)
