# A multi-task model keeps its task heads in a dict and its trunk in a list built locally and
# then assigned: neither is registered, so both stay on the CPU (pytorch/pytorch#15005, #21905).
# Run: python dict_of_heads_and_local_list.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class MultiTask(nn.Module):
    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.inp = nn.Linear(4, dim)
        trunk = []
        for _ in range(depth):
            trunk.append(nn.Linear(dim, dim))
        self.trunk = nn.ModuleList(trunk)
        self.heads = nn.ModuleDict({"cls": nn.Linear(dim, 3), "reg": nn.Linear(dim, 1)})

    def forward(self, x):
        x = self.inp(x)
        for layer in self.trunk:
            x = torch.tanh(layer(x))
        return {name: head(x) for name, head in self.heads.items()}


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = MultiTask().to(device)
    outputs = model(torch.randn(5, 4, device=device))
    print({name: tuple(value.shape) for name, value in outputs.items()})


if __name__ == "__main__":
    main()
