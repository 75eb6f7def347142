# `torch.set_default_device("cuda")` makes every new tensor a CUDA tensor, and the shuffling
# DataLoader's RandomSampler then draws `randperm(n, generator=<CPU generator>)` on CUDA
# (amdegroot/ssd.pytorch#578 and pytorch/pytorch#62152 with the older `set_default_tensor_type`).
# Run on a GPU: python shuffle_after_set_default_device.before.py
# devfix-flags: --select DF307
# devfix-expect: DF307
# devfix-golden: gpus=1 fails-with="Expected a 'cuda' device type for generator but found 'cpu'"
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if torch.cuda.is_available():
    torch.set_default_device("cuda")

dataset = TensorDataset(torch.randn(12, 5), torch.randint(0, 2, (12,)))
loader = DataLoader(dataset, batch_size=4, shuffle=True)
model = nn.Linear(5, 2)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
print(f"last loss {loss.item():.3f}")
