# No-op: every factory in model code already states its device, derives it from an input, or
# is a 0-dim scalar (legal next to CUDA tensors). A naive "add device=" tool breaks these.
# Run: python device_already_derived.noop.py
# devfix-flags: --select DF101
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        pos = torch.arange(x.shape[1], device=x.device)
        noise = torch.randn_like(x) * 0.01
        scaled = self.fc(x + noise) * torch.tensor(0.5)
        ones = x.new_ones(x.shape[0], 1, 1)
        return scaled + pos.unsqueeze(-1).to(x.dtype) * 0 + ones


def main():
    torch.manual_seed(0)
    model = Block()
    out = model(torch.randn(2, 8, 8))
    print(out.shape)


if __name__ == "__main__":
    main()
