# Model parallelism over two GPUs: the labels are never moved to the device of the logits
# (the second stage's); no rule tells where they belong, the run does.
import torch
from torch import nn
import torch.nn.functional as F


class TwoStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 16).to("cuda:0")
        self.second = nn.Linear(16, 3).to("cuda:1")

    def forward(self, x):
        hidden = torch.relu(self.first(x.to("cuda:0")))
        return self.second(hidden.to("cuda:1"))


model = TwoStage()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    inputs = torch.randn(4, 8)
    labels = torch.randint(0, 3, (4,))
    logits = model(inputs)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("ok")
