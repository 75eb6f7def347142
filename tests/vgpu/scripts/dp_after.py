import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        offset = torch.ones(4, device=x.device)
        return self.fc(x) + offset


model = nn.DataParallel(Net().to("cuda:0"))
out = model(torch.randn(8, 16, device="cuda:0"))
out.sum().backward()
print("gathered on", out.device)
