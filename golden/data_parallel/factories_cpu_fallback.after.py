# A script in the shape of many research repositories (SupContrast, the ImageNet example):
# `set_loader(opt)` builds the loaders around a `train_sampler = None` placeholder,
# `set_model(opt)` wraps the model in nn.DataParallel when CUDA has several GPUs and falls back
# to the CPU otherwise, `main()` runs the epochs and a `save_model` helper writes checkpoints.
# The model's input normalisation is a plain tensor attribute made on cuda:0, which the
# replica on cuda:1 meets.
# Run: python factories_cpu_fallback.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> factories_cpu_fallback.before.py`
# (`python factories_cpu_fallback.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer(
            "mean", torch.tensor([0.5, -0.5, 0.25, 0.0], device=DEVICE), persistent=False
        )
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x - self.mean)


def set_loader(opt):
    # This process's share of the data (torchrun sets RANK and WORLD_SIZE).
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    torch.manual_seed(1)
    train_dataset = TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,)))
    val_dataset = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
    # DataParallel's batch of opt["batch_size"] was global; each of the world_size processes now
    # takes opt["batch_size"] // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    train_sampler = DistributedSampler(
        train_dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0
    )
    train_loader = DataLoader(
        train_dataset, batch_size=opt["batch_size"] // world_size, sampler=train_sampler
    )
    val_loader = DataLoader(val_dataset, batch_size=8, shuffle=False)
    return train_loader, val_loader


def set_model(opt):
    model = Classifier()
    criterion = nn.CrossEntropyLoss()
    if torch.cuda.is_available():
        model = model.cuda()
        criterion = criterion.cuda()
    else:
        model = model.to(DEVICE)
    if dist.is_initialized():
        if torch.cuda.is_available():
            model = model.to(torch.cuda.current_device())
            model = DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
        else:
            model = DistributedDataParallel(model)
    return model, criterion


def train(loader, model, criterion, optimizer):
    model.train()
    for x, y in loader:
        x, y = x.to(DEVICE), y.to(DEVICE)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def save_model(model, epoch, save_file):
    if os.environ.get("RANK", "0") == "0":
        print(f"==> Saving epoch {epoch}...")
        state = {"epoch": epoch, "model": model.state_dict()}
        torch.save(state["model"], save_file)
        del state


def main():
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    opt = {"batch_size": 8, "gpus": list(range(torch.cuda.device_count())), "epochs": 3}
    save_file = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "last.pth"))
    train_loader, val_loader = set_loader(opt)
    torch.manual_seed(0)
    model, criterion = set_model(opt)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, opt["epochs"] + 1):
        train_loader.sampler.set_epoch(epoch)
        loss = train(train_loader, model, criterion, optimizer)
        if rank == 0:
            print(f"epoch {epoch}, loss {loss:.4f}")
    save_model(model.module if hasattr(model, "module") else model, opt["epochs"], save_file)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
