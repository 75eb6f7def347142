# A save after the last step, and one the loop undoes with `model.to(device)`, leave nothing
# wrong: the model is not trained on the CPU. Nothing to change.
# devfix-flags: --select DF310 --unsafe-fixes
import io

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(3, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    model(torch.randn(4, 3, device=device)).sum().backward()
    optimizer.step()
    torch.save(model.cpu().state_dict(), io.BytesIO())
    model.to(device)
torch.save(model.cpu().state_dict(), io.BytesIO())
