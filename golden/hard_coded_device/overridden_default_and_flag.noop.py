# Look-alikes of a hard-coded device that are correct: a default `device=torch.device("cuda")`
# that every call overrides (timm's train_one_epoch), and a selection with the user's own
# fallback (`if args.use_gpu: ... else: cpu`). Nothing to change.
# devfix-flags: --select DF304 --unsafe-fixes
import argparse

import torch
import torch.nn.functional as F
from torch import nn


def train_one_epoch(model, optimizer, batches, device=torch.device("cuda")):
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


parser = argparse.ArgumentParser()
parser.add_argument("--use-gpu", action="store_true")
args = parser.parse_args([])
if args.use_gpu:
    device = torch.device("cuda:0")
else:
    device = torch.device("cpu")
model = nn.Linear(4, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(8, 4), torch.randint(0, 3, (8,)))]
print(train_one_epoch(model, optimizer, batches, device=device))
