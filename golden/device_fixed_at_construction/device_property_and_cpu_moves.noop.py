# No-op: a `device` property derived from the module's own tensors, a deliberate move to the
# CPU and a dtype conversion are all correct, and script-level device selection is not model code.
# Run: python device_property_and_cpu_moves.noop.py
# devfix-flags: --select DF102
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @property
    def device(self):
        return self.fc.weight.device

    def forward(self, x):
        y = self.fc(x.to(self.device))
        stats = y.detach().to("cpu")
        return y.to(torch.float32), stats


def main():
    model = Probe().to(device)
    out, stats = model(torch.randn(2, 4, device=device))
    print(out.shape, stats.device)


if __name__ == "__main__":
    main()
