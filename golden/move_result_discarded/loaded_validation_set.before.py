# Validation images come from a loader function of the project; the script "moves" them with
# bare `.to(device)` statements. Nothing in their binding says tensor, but their use does
# (`expand_as`, the same loader as a tensor used so), so the fix is unsafe.
# Run on a GPU: python loaded_validation_set.before.py
# devfix-flags: --select DF206 --unsafe-fixes
# devfix-expect: DF206
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import numpy as np
import torch
from torch import nn


def read_images(count):
    """Stands for the project's image loader (it returns a float tensor)."""
    return torch.from_numpy(np.random.rand(count, 3, 4)).float()


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = nn.Linear(4, 2).to(device)

surface = read_images(1)
captured = read_images(5)
captured.to(device)
surface_valid = surface.expand_as(captured)
surface_valid.to(device)

with torch.no_grad():
    print(net(torch.cat([captured, surface_valid], dim=1)).mean().item())
