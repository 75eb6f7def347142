# Generators done right (shared/design/fix-semantics.md A.6): created on the device they draw on,
# CPU generators for the data utilities, draws with `device=g.device`.
# devfix-flags: --select DF307
import torch
from torch.utils.data import DataLoader, TensorDataset, random_split

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
g = torch.Generator(device=device)
g.manual_seed(0)
noise = torch.randn(3, 4, generator=g, device=device)
mask = torch.rand(3, 4, generator=g, device=g.device) > 0.5
cpu_rng = torch.Generator().manual_seed(1)
dataset = TensorDataset(torch.randn(8, 4))
train_set, val_set = random_split(dataset, [6, 2], generator=cpu_rng)
for (x,) in DataLoader(train_set, batch_size=3, shuffle=True, generator=torch.Generator()):
    print((x.to(device) * mask[: len(x)] + noise[: len(x)]).sum().item())
