# Seed 003 (方案二): the checkpoint is restored, optimizer state included, and only then is the
# model moved with `model = model.to(device)`. Adam's restored exp_avg stays on the CPU and the
# first step fails with "cuda:0 and cpu" (shared/design/fix-semantics.md B.0 F2, B.3).
# Run on a GPU: python seed003_resume_before_move.before.py
# devfix-flags: --select DF301
# devfix-expect: DF301
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import os
import tempfile

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")


def save_earlier_run():
    """What the interrupted run saved: one Adam step of state, on the CPU."""
    net = nn.Linear(4, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
    torch.save({"epoch": 0, "model_state_dict": net.state_dict(),
                "optimizer_state_dict": opt.state_dict()}, path)


save_earlier_run()
model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

# Resume.
checkpoint = torch.load(path, map_location="cpu")
model.load_state_dict(checkpoint["model_state_dict"])
optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
start_epoch = checkpoint["epoch"] + 1
model = model.to(device)

for epoch in range(start_epoch, 3):
    x = torch.randn(8, 4).to(device)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
