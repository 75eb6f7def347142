# Convolutions appended to a plain list in __init__ stay on the CPU after `model.cuda()`
# (pytorch/pytorch#8017, Lightning-AI/pytorch-lightning#2623; fix-semantics A.7).
# Run: python appended_convs.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Input type" devices="cuda:0,cpu"
import torch
import torch.nn as nn


class ConvStack(nn.Module):
    def __init__(self, channels=(3, 8, 8)):
        super().__init__()
        self.convs = []
        for c_in, c_out in zip(channels[:-1], channels[1:]):
            self.convs.append(nn.Conv2d(c_in, c_out, kernel_size=3, padding=1))
        self.head = nn.Linear(channels[-1], 2)

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.head(x.mean(dim=(2, 3)))


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = ConvStack().to(device)
    out = model(torch.randn(2, 3, 8, 8, device=device))
    print("out", tuple(out.shape))


if __name__ == "__main__":
    main()
