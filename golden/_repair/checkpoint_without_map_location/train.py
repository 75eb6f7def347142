# devfix-repair: flags="" fixes="DF302"
# Statistics saved by an earlier run on cuda:1 are loaded without map_location in a helper
# function: they come back on cuda:1 and meet this run's cuda:0 batch in another function.
import os
import tempfile

import torch

from stats import write_stats

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def load_stats(path):
    return torch.load(path)


def normalise(batch, stats):
    return (batch - stats["mean"]) / stats["std"]


path = os.path.join(tempfile.mkdtemp(), "stats.pt")
write_stats(path)
stats = load_stats(path)
model = torch.nn.Linear(4, 2).to(device)
out = model(normalise(torch.randn(8, 4, device=device), stats))
print(tuple(out.shape), out.device.type)
