"""DataLoader with workers and pin_memory; nn.DataParallel over the virtual GPUs."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")

ds = TensorDataset(torch.randn(32, 8), torch.randint(0, 3, (32,)))
m = nn.Linear(8, 3).to(d1)
n = 0
for x, y in DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True):
    assert x.is_pinned() and not x.is_cuda
    x, y = x.to(d1, non_blocking=True), y.cuda(1)
    nn.functional.cross_entropy(m(x), y).backward()
    n += 1
assert n == 4 and m.weight.grad.device == d1
cpu = torch.randn(3)
assert not cpu.is_pinned() and cpu.pin_memory().is_pinned()
assert torch.ones(2, pin_memory=True).is_pinned()
print("OK dataloader")


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 4)
        self.seen = []

    def forward(self, x):
        self.seen.append((str(x.device), str(self.l1.weight.device)))
        return self.l2(torch.tanh(self.l1(x)) + torch.zeros(32, device=x.device))


torch.manual_seed(0)
ref = Probe()
net = Probe()
net.load_state_dict(ref.state_dict())
net.to(d0)
dp = nn.DataParallel(net)
opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
opt_v = torch.optim.SGD(dp.parameters(), lr=0.1)
for _ in range(2):
    x = torch.randn(8, 16)
    for mod, o, xx in ((ref, opt_r, x), (dp, opt_v, x.to(d0))):
        out = mod(xx)
        loss = out.pow(2).mean()
        o.zero_grad()
        loss.backward()
        o.step()
assert out.device == d0 and net.l1.weight.grad.device == d0
assert ("cuda:1", "cuda:1") in net.seen and ("cuda:0", "cuda:0") in net.seen
diff = (net.l1.weight.detach().cpu() - ref.l1.weight.detach()).abs().max().item()
assert diff < 1e-6, diff
print("OK dataparallel")

try:
    nn.DataParallel(nn.Linear(2, 2))(torch.randn(4, 2, device=d0))
    raise AssertionError("a CPU module under DataParallel should fail")
except RuntimeError as e:
    assert (
        "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but "
        "found one of them on device: cpu" in str(e)
    ), e
print("OK dataparallel-cpu-module")
