# A training script whose device selection falls back to the CPU but pins the second GPU: on a
# machine with one GPU `net.to(device)` fails (odcnn issue #5, "invalid device ordinal"). Only
# the index goes; the script's own fallback stays.
# Run on a one-GPU machine: python pinned_fallback_second_gpu.before.py
# devfix-flags: --select DF304 --unsafe-fixes
# devfix-expect: DF304
# devfix-golden: gpus=1 fails-with="invalid device ordinal"
import torch
import torch.nn.functional as F
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = nn.Linear(6, 2).to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    x = torch.randn(4, 6, device=device)
    y = torch.randint(0, 2, (4,), device=device)
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
