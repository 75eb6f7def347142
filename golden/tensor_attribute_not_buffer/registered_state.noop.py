# Module state that is already registered: buffers, parameters, plain Python numbers, and a
# tensor re-assigned to its buffer in forward. Nothing to change.
# Run: python registered_state.noop.py
# devfix-flags: --select DF103 --unsafe-fixes
import torch
import torch.nn as nn


class Scaler(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.eps = 1e-6
        self.register_buffer("running", torch.zeros(dim), persistent=False)
        self.gain = nn.Parameter(torch.ones(dim))
        self.shift = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        self.running = 0.9 * self.running + 0.1 * x.detach().mean(0)
        return (x - self.running) * self.gain + self.shift


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Scaler(4).to(device)
    out = model(torch.randn(3, 4, device=device))
    print("out", tuple(out.shape))


if __name__ == "__main__":
    main()
