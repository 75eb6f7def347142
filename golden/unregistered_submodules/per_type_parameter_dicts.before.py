# A layer for graphs with several node types keeps one weight and one bias per node type in
# plain dicts, built in a helper that __init__ calls, keyed by the node-type names it is given:
# model.to(device) never moves them and model.parameters() misses them.
# Run: python per_type_parameter_dicts.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class PerTypeLinear(nn.Module):
    def __init__(self, in_sizes, out_size):
        super().__init__()
        self.in_sizes = in_sizes
        self.out_size = out_size
        self._make_parameters()
        for key in self.weight:
            nn.init.xavier_uniform_(self.weight[key])

    def _make_parameters(self):
        self.weight = {kind: nn.Parameter(torch.empty(size, self.out_size))
                       for kind, size in self.in_sizes.items()}
        self.bias = {kind: nn.Parameter(torch.zeros(self.out_size)) for kind in self.in_sizes}

    def forward(self, features):
        return {
            kind: torch.tanh(x @ self.weight[kind] + self.bias[kind])
            for kind, x in features.items()
        }


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    layer = PerTypeLinear({"user": 6, "item": 4}, 3).to(device)
    features = {"user": torch.randn(5, 6, device=device), "item": torch.randn(2, 4, device=device)}
    out = layer(features)
    print({kind: tuple(value.shape) for kind, value in out.items()})
    print("trainable tensors:", len(list(layer.parameters())))


if __name__ == "__main__":
    main()
