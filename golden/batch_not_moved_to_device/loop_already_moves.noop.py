# Loops that already move their batches (non_blocking, helper, comprehension) and a model that
# stays on the CPU: nothing to do.
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect:
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def to_device(batch, device):
    return [t.to(device) for t in batch]


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4, pin_memory=torch.cuda.is_available())
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = nn.functional.cross_entropy(model(x), y)
for batch in loader:
    batch = to_device(batch, device)
    model(batch[0])
for batch in loader:
    batch = tuple(t.to(device) for t in batch)
    model(batch[0])
cpu_model = nn.Linear(4, 2)
for x, y in loader:
    cpu_model(x)
print("ok")
