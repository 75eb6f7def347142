# A Dataset whose __getitem__ moves every sample to "cuda:0" (pytorch/pytorch#40985 style),
# trained under torchrun: rank 1's model is on cuda:1, its batches on cuda:0. The move is
# removed and the loop moves each batch to the rank's device instead.
# Run as rank 1 on 2 GPUs: LOCAL_RANK=1 python getitem_cuda0_rank.before.py
# devfix-flags: --select DF201 --unsafe-fixes
# devfix-expect: DF201
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cuda:1" env="LOCAL_RANK=1"
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset):
    def __init__(self, n=16):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 6, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        # one sample
        return self.x[i], self.y[i]


local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Pairs(), batch_size=4, shuffle=True)
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("done", loss.item())
