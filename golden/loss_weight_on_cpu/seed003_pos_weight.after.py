# Seed 003 (方案三 2): `nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3]))` keeps pos_weight on
# the CPU while the model runs on the GPU (shared/design/fix-semantics.md B.8).
# Run on a GPU: python seed003_pos_weight.before.py
# devfix-flags: --select DF303
# devfix-expect: DF303
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1).to(device)
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3])).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

inputs = torch.randn(16, 4)
targets = (inputs.sum(1, keepdim=True) > 0).float()
for step in range(3):
    x, y = inputs.to(device), targets.to(device)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
