# A device type computed by hand from a device that can only be CUDA or the CPU: `"cuda" if
# "cuda" in device else "cpu"` is then exactly `torch.device(device).type`, so there is
# nothing to rewrite (an `mps` device would need it; this script never chooses one).
# devfix-flags: --select DF308 --unsafe-fixes
# devfix-expect:
import torch
from torch import nn

device = "cuda:0" if torch.cuda.is_available() else "cpu"
model = nn.Linear(4, 4).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda" if "cuda" in device else "cpu", enabled=torch.cuda.is_available())
for _ in range(2):
    with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu"):
        loss = model(torch.randn(2, 4, device=device)).float().sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
print("ok")
