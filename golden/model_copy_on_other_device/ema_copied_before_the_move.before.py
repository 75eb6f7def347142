# An EMA of the weights made with copy.deepcopy before the model is moved: the copy stays on the
# CPU and the first update mixes devices (lucidrains/DALLE2-pytorch#87, dptech-corp/Uni-Core#42;
# shared/design/fix-semantics.md C15, B.11).
# Run on a GPU: python ema_copied_before_the_move.before.py
# devfix-flags: --select DF306
# devfix-expect: DF306
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/model_copy_on_other_device.py is this case
import copy

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2))
ema_model = copy.deepcopy(model)  # weights averaged for evaluation
model = model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

for step in range(2):
    x, y = torch.randn(4, 6, device=device), torch.randint(0, 2, (4,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for ema_p, p in zip(ema_model.parameters(), model.parameters()):
            ema_p.mul_(0.99).add_(p, alpha=0.01)
print(f"loss {loss.item():.3f}")
