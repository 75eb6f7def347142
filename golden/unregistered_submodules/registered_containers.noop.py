# Containers that are fine as they are: nn.ModuleList / nn.ModuleDict, a list of modules that
# are already attributes, a list of sizes, and a local list unpacked into nn.Sequential.
# Run: python registered_containers.noop.py
# devfix-flags: --select DF104 --unsafe-fixes
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, sizes=(4, 8, 8)):
        super().__init__()
        self.sizes = list(sizes)
        self.blocks = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])
        self.heads = nn.ModuleDict({"a": nn.Linear(sizes[-1], 1)})
        self.first = nn.Linear(sizes[-1], sizes[-1])
        self.second = nn.Linear(sizes[-1], sizes[-1])
        self.pair = [self.first, self.second]
        layers = []
        for _ in range(2):
            layers.append(nn.Linear(sizes[-1], sizes[-1]))
        self.tail = nn.Sequential(*layers)

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        for layer in self.pair:
            x = layer(x)
        return self.heads["a"](self.tail(x))


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Net().to(device)
    print("out", tuple(model(torch.randn(2, 4, device=device)).shape))


if __name__ == "__main__":
    main()
