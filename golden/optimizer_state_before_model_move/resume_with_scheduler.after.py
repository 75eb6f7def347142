# Resume inside `main()`: the optimizer is restored before `model.to(device)`, and the
# learning-rate scheduler is built after the move. The restored state must follow the move and
# the scheduler's construction ("call it after initializing the LRScheduler", torch docs)
# (shared/design/fix-semantics.md B.0 F2, B.3).
# Run on a GPU: python resume_with_scheduler.before.py
# devfix-flags: --select DF301
# devfix-expect: DF301
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import io

import torch
from torch import nn, optim


def make_checkpoint():
    net = nn.Linear(3, 3)
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net(torch.randn(2, 3)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    return buffer


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    state = torch.load(make_checkpoint(), map_location="cpu")
    model = nn.Linear(3, 3)
    model.load_state_dict(state["model"])
    model = model.to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    optimizer.load_state_dict(state["optimizer"])  # resume
    for _ in range(3):
        loss = model(torch.randn(4, 3).to(device)).pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    print(scheduler.get_last_lr())


main()
