# DataParallel inside a library class: the wrapper decides nothing about processes, samplers
# or checkpoints, so DF401 reports it without a fix (convert the script that trains with it).
# Run: python library_wrapper.noop.py
# devfix-flags: --select DF401 --unsafe-fixes
import torch
import torch.nn as nn


class MultiGPUModel(nn.Module):
    """Wraps a backbone for every visible GPU."""

    def __init__(self, backbone):
        super().__init__()
        self.net = nn.DataParallel(backbone) if torch.cuda.device_count() > 1 else backbone

    def forward(self, x):
        return self.net(x)


if __name__ == "__main__":
    # DataParallel needs the backbone on the first GPU (on a CPU machine it is not applied)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = MultiGPUModel(nn.Linear(4, 2).to(device))
    print(model(torch.randn(3, 4, device=device)).shape)
