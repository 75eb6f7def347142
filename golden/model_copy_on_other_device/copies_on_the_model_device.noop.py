# EMA copies done right (shared/design/fix-semantics.md B.11): made after the move, or kept on the
# CPU on purpose with every update moving the model's tensor to them.
# devfix-flags: --select DF306
import copy

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
ema = copy.deepcopy(model)
cpu_average = copy.deepcopy(model).to("cpu")
for _ in range(2):
    model(torch.randn(3, 4, device=device)).sum().backward()
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.9).add_(p, alpha=0.1)
        for c, p in zip(cpu_average.parameters(), model.parameters()):
            c.lerp_(p.to(c.device), 0.1)
print(ema.weight.sum().item(), cpu_average.weight.sum().item())
