# Layers appended to a plain list in __init__ stay on the CPU after `model.to("cuda")`
# (pytorch/pytorch#8017 with convolutions, Lightning-AI/pytorch-lightning#2623; fix-semantics A.7).
# Run: python appended_layers.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/unregistered_submodules.py is this case
import torch
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, widths=(6, 12, 12)):
        super().__init__()
        self.stages = []
        for w_in, w_out in zip(widths[:-1], widths[1:]):
            self.stages.append(nn.Linear(w_in, w_out))
        self.head = nn.Linear(widths[-1], 2)

    def forward(self, x):
        for stage in self.stages:
            x = torch.relu(stage(x))
        return self.head(x)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Tower().to(device)
    out = model(torch.randn(2, 6, device=device))
    print("out", tuple(out.shape))


if __name__ == "__main__":
    main()
