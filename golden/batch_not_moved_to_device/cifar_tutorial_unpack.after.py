# The PyTorch "Training a Classifier" loop, run after `net.to(device)` without the tutorial's
# "Training on GPU" step: `inputs, labels = data` stay on the CPU. The move goes right after
# the unpacking line. The convolution reports the mismatch in its own words.
# Run on a GPU: python cifar_tutorial_unpack.before.py
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect: DF204
# devfix-golden: gpus=2 fails-with="Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
# devfix-example: examples/batch_not_moved_to_device.py is this case
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc(torch.flatten(x, 1))


torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
net = Net()
net.to(device)
trainset = TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
trainloader = DataLoader(trainset, batch_size=4, shuffle=True)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)

for epoch in range(2):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    print(f"[{epoch + 1}] loss: {running_loss / len(trainloader):.3f}")
