# A resumable trainer: build() restores the optimizer from a checkpoint before the model
# is moved, so Adam's state stays on the CPU (DF301, on the provenance chain).
import os
import tempfile

import torch
from torch import nn


def build(device, resume):
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    if resume:
        state = torch.load(resume, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])
    model.to(device)
    return model, optimizer


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    model, optimizer = build(device, None)
    model(torch.randn(8, 4, device=device)).sum().backward()
    optimizer.step()
    torch.save({"model": model.state_dict(), "optim": optimizer.state_dict()}, path)
    model, optimizer = build(device, path)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(8, 4, device=device)).sum().backward()
        optimizer.step()
    print("ok")


if __name__ == "__main__":
    main()
