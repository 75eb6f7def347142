# Seed 003 ("训练恢复时解决设备不一致错误", cause 3: input data not transferred to the device):
# the model is moved with .to(device) but the loop feeds it the DataLoader's CPU batches,
# so the first Linear fails with "cuda:0 and cpu".
# Run on a GPU: python seed003_resume_training_loop.before.py
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect: DF204
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class YourModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


model = YourModel().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
dataset = TensorDataset(torch.randn(32, 6), torch.randint(0, 3, (32,)))
train_loader = DataLoader(dataset, batch_size=8, shuffle=True)

for epoch in range(2):
    for input, target in train_loader:
        input, target = input.to(device), target.to(device)
        # training step
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
