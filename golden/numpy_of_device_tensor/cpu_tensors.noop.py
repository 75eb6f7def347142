# `.numpy()` on tensors that are already on the CPU, and np.mean over Python floats.
# devfix-flags: --select DF203 --unsafe-fixes
# devfix-expect:
import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(3, 2).to(device)
cpu_model = nn.Linear(3, 2)
x = torch.randn(4, 3)
a = cpu_model(x).detach().numpy()
b = model(x.to(device)).detach().cpu().numpy()
c = model(x.to(device)).argmax(1).cpu().numpy()
losses = []
for _ in range(3):
    losses.append(model(x.to(device)).sum().item())
print(a.shape, b.shape, c.shape, np.mean(losses) is not None, torch.randn(2).numpy().shape)
