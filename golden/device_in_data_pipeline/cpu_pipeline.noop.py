# Data preparation that stays on the CPU (`.to(torch.float32)` is a dtype cast, `.cpu()` is
# deliberate), and a loop that moves the batch: nothing to do.
# devfix-flags: --select DF201 --unsafe-fixes
# devfix-expect:
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Pairs(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.full((4,), float(i)).to(torch.float32)
        return x.cpu(), i % 2


def collate(samples):
    xs, ys = zip(*samples)
    return torch.stack(xs), torch.tensor(ys)


model = nn.Linear(4, 2).to(device)
for x, y in DataLoader(Pairs(), batch_size=4, collate_fn=collate, pin_memory=torch.cuda.is_available()):
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = nn.functional.cross_entropy(model(x), y)
print("ok", loss.item())
