# An MLP keeps its hidden layers in a Python list comprehension: `model.to("cuda")` never
# moves them and `model.parameters()` never lists them (marlbenchmark/off-policy PR#12,
# xmu-xiaoma666/External-Attention-pytorch#94; fix-semantics A.7).
# Run: python list_of_layers.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn


class DeepMLP(nn.Module):
    def __init__(self, dim=8, depth=3):
        super().__init__()
        self.inp = nn.Linear(4, dim)
        self.hidden = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = DeepMLP().to(device)
    n_params = sum(p.numel() for p in model.parameters())
    out = model(torch.randn(5, 4, device=device))
    print("params", n_params, "out", tuple(out.shape))


if __name__ == "__main__":
    main()
