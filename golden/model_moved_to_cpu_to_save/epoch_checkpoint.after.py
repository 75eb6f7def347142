# A training script saves a checkpoint at the end of every epoch with
# `torch.save(model.cpu().state_dict(), ...)`. `.cpu()` moves the model itself, so the second
# epoch feeds GPU batches to a model on the CPU.
# Run on a GPU: python epoch_checkpoint.before.py
# devfix-flags: --select DF310 --unsafe-fixes
# devfix-expect: DF310
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/model_moved_to_cpu_to_save.py is this case
import io

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
checkpoints = []

for epoch in range(3):
    for _ in range(4):
        x = torch.randn(8, 6).to(device)
        y = torch.randint(0, 3, (8,)).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    buffer = io.BytesIO()
    torch.save(
        {k: v.cpu() for k, v in model.state_dict().items()}, buffer
    )  # the epoch's checkpoint
    checkpoints.append(buffer.getvalue())
    print(f"epoch {epoch}: loss {loss.item():.4f}")

print("checkpoints", len(checkpoints))
