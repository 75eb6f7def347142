# The resume order of shared/design/fix-semantics.md B.3: model moved, optimizer built, scheduler
# built, then both restored. A helper that builds an optimizer for a model it is given is not
# followed. Nothing to change.
# devfix-flags: --select DF301
import io

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_optimizer(net):
    return torch.optim.AdamW(net.parameters(), lr=1e-3)


buffer = io.BytesIO()
seed = nn.Linear(2, 2)
seed_optimizer = build_optimizer(seed)
torch.save({"model": seed.state_dict(), "optimizer": seed_optimizer.state_dict()}, buffer)
buffer.seek(0)

checkpoint = torch.load(buffer, map_location="cpu")
model = nn.Linear(2, 2)
model.load_state_dict(checkpoint["model"])
model.to(device)
optimizer = build_optimizer(model)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
optimizer.load_state_dict(checkpoint["optimizer"])
print("ok")
