# devfix-repair: flags="--unsafe-fixes" fixes="DF204"
# The batch is built on the CPU by a collate function in another file; the loop never moves it.
import torch
from torch.utils.data import DataLoader

from batching import collate

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).to(device)
rows = [([1.0, 2.0, 3.0, 4.0], 0)] * 8
loader = DataLoader(rows, batch_size=4, collate_fn=collate)
for features in loader:
    out = model(features)
print(tuple(out.shape), out.device.type)
