# A model split over two devices that already moves activations to each submodule's device,
# and casts (not moves) a head's dtype. Nothing to change.
# Run: python inputs_already_moved.noop.py
# devfix-flags: --select DF105 --unsafe-fixes
import torch
import torch.nn as nn

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Linear(6, 10).to(FIRST)
        self.head = nn.Linear(10, 3).to(LAST)

    def forward(self, x):
        x = torch.relu(self.stage1(x))
        return self.head.to(torch.float32)(x.to(self.head.weight.device))


def main():
    model = Split()
    print("out", tuple(model(torch.randn(4, 6, device=FIRST)).shape))


if __name__ == "__main__":
    main()
