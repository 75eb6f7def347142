# Look-alikes of a discarded move that are correct: `nn.Module.to` moves the module (and its
# buffers) in place, an object with an in-place `.to` of its own needs nothing, and a value
# the code says nothing about is left alone.
# devfix-flags: --select DF206 --unsafe-fixes
import torch
from torch import nn


class Embed(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.register_buffer("table", torch.randn(n, d))

    def forward(self, x):
        return x + self.table[: x.size(0)]


class Batch(dict):
    def to(self, device):
        for key, value in self.items():
            self[key] = value.to(device)
        return self


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
model.to(device)
embed = Embed(8, 4)
embed.to(device)
batch = Batch(x=torch.randn(3, 4))
batch.to(device)
print(embed(model(batch["x"])).sum().item())
