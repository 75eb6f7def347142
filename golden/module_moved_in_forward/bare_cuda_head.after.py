# A two-stage model keeps its second stage and head on cuda:1, but forward calls
# `self.head.cuda()(x)`: a bare `.cuda()` means the current device, cuda:0, while the features
# are on cuda:1 (thunlp/OpenPrompt PR#161; fix-semantics A.8).
# Run: python bare_cuda_head.before.py
# devfix-flags: --select DF105 --unsafe-fixes
# devfix-expect: DF105
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/module_moved_in_forward.py is this case
import torch
import torch.nn as nn

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class TwoStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Linear(6, 10).to(FIRST)
        self.stage2 = nn.Linear(10, 10).to(LAST)
        self.head = nn.Linear(10, 3).to(LAST)

    def forward(self, x):
        x = torch.relu(self.stage1(x))
        x = torch.relu(self.stage2(x.to(self.stage2.weight.device)))
        return self.head(x.to(self.head.weight.device))


def main():
    torch.manual_seed(0)
    model = TwoStage()
    out = model(torch.randn(4, 6, device=FIRST))
    print("out", tuple(out.shape), out.device.type)


if __name__ == "__main__":
    main()
