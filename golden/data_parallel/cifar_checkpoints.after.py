# A CIFAR-10 style classifier (PyTorch "Training a Classifier" + "Data Parallelism" tutorials)
# on tiny random images: train and test loaders, a checkpoint every epoch, test accuracy.
# The per-channel normalisation constant lives at module level on cuda:0, so the replica on
# cuda:1 fails when it subtracts it.
# Run: python cifar_checkpoints.before.py
# devfix-flags: --select DF401 --unsafe-fixes
# devfix-expect: DF401
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> cifar_checkpoints.before.py`
# (`python cifar_checkpoints.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
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


if __name__ == "__main__":
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    trainset = TensorDataset(torch.rand(64, 3, 8, 8), torch.randint(0, 10, (64,)))
    testset = TensorDataset(torch.rand(40, 3, 8, 8), torch.randint(0, 10, (40,)))
    # DataParallel's batch of 8 was global; each of the world_size processes now
    # takes 8 // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    trainsampler = DistributedSampler(
        trainset, num_replicas=world_size, rank=rank, shuffle=False, seed=0
    )
    trainloader = DataLoader(
        trainset, batch_size=8 // world_size, num_workers=0, sampler=trainsampler
    )
    testloader = DataLoader(testset, batch_size=8, shuffle=False, num_workers=0)

    channel_mean = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1).to(device)
    net = Net(channel_mean)
    net.to(device)
    criterion = nn.CrossEntropyLoss()
    if distributed:
        if torch.cuda.is_available():
            net = net.to(torch.device("cuda", local_rank))
            net = DistributedDataParallel(net, device_ids=[local_rank], output_device=local_rank)
        else:
            net = DistributedDataParallel(net)
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    for epoch in range(2):
        trainsampler.set_epoch(epoch)
        running_loss = 0.0
        for i, (inputs, labels) in enumerate(trainloader):
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        if rank == 0:
            print(f"[{epoch + 1}] loss: {running_loss / len(trainloader):.3f}")
            torch.save((net.module if distributed else net).state_dict(), CHECKPOINT)

    correct = 0
    total = 0
    with torch.no_grad():
        for images, labels in testloader:
            images, labels = images.to(device), labels.to(device)
            outputs = net(images)
            _, predicted = torch.max(outputs, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    if rank == 0:
        print(f"Accuracy of the network on the {total} test images: {100 * correct // total} %")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
