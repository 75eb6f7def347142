# A CIFAR-10 style classifier (PyTorch "Training a Classifier" + "Data Parallelism" tutorials)
# on tiny random images: train and test loaders, a checkpoint every epoch, test accuracy.
# The per-channel normalisation constant lives at module level on cuda:0, so the replica on
# cuda:1 fails when it subtracts it.
# Run: python cifar_checkpoints.before.py
# devfix-flags: --select DF401 --unsafe-fixes
# devfix-expect: DF401
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
CHECKPOINT = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "cifar_net.pth"))


class Net(nn.Module):
    def __init__(self, mean):
        super().__init__()
        self.mean = mean
        self.conv1 = nn.Conv2d(3, 6, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(6 * 3 * 3, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = x - self.mean
        x = self.pool(F.relu(self.conv1(x)))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
trainset = TensorDataset(torch.rand(64, 3, 8, 8), torch.randint(0, 10, (64,)))
testset = TensorDataset(torch.rand(40, 3, 8, 8), torch.randint(0, 10, (40,)))
trainloader = DataLoader(trainset, batch_size=8, shuffle=False, num_workers=0)
testloader = DataLoader(testset, batch_size=8, shuffle=False, num_workers=0)

channel_mean = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1).to(device)
net = Net(channel_mean)
net.to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
if torch.cuda.device_count() > 1:
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    net = nn.DataParallel(net, device_ids=[0, 1])

for epoch in range(2):
    running_loss = 0.0
    for i, (inputs, labels) in enumerate(trainloader):
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    print(f"[{epoch + 1}] loss: {running_loss / len(trainloader):.3f}")
    torch.save(net.state_dict(), CHECKPOINT)

correct = 0
total = 0
with torch.no_grad():
    for images, labels in testloader:
        images, labels = images.to(device), labels.to(device)
        outputs = net(images)
        _, predicted = torch.max(outputs, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
print(f"Accuracy of the network on the {total} test images: {100 * correct // total} %")
