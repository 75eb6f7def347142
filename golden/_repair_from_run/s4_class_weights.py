# Class weights from the label counts, given to the loss and never moved.
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
targets = torch.randint(0, 3, (64,))
counts = torch.bincount(targets, minlength=3).float()
weights = counts.sum() / (3 * counts)
criterion = nn.CrossEntropyLoss(weight=weights)
model = nn.Linear(5, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
features = torch.randn(64, 5)
for start in range(0, 64, 16):
    x = features[start : start + 16].to(device)
    y = targets[start : start + 16].to(device)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("ok")
