# A functional loss with a module-level CPU weight: `F.nll_loss(log_probs, y, weight=w)` inside
# the evaluation loop, while the model runs on the GPU (shared/design/fix-semantics.md B.8).
# Run on a GPU: python functional_nll_weight.before.py
# devfix-flags: --select DF303
# devfix-expect: DF303
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn.functional as F
from torch import nn

RARE_CLASS_BOOST = torch.tensor([1.0, 1.0, 4.0])

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(6, 3), nn.LogSoftmax(dim=-1)).to(device)
batches = [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(3)]

total = 0.0
with torch.no_grad():
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        log_probs = model(x)
        total += F.nll_loss(log_probs, y, weight=RARE_CLASS_BOOST).item()
print(total / len(batches))
