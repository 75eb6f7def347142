# An argparse + main() training script in the style of the Hugging Face examples: `--device`
# defaults to "cuda:0", the model keeps that device for the bias column it appends to every
# batch (on cuda:0, while the replica's batch is on cuda:1), the model is wrapped when several
# GPUs are visible, and the loss is averaged over the replicas.
# Run: python argparse_main.before.py --epochs 2
# devfix-flags: --select DF401,DF102 --unsafe-fixes
# devfix-expect: DF401 DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/data_parallel.py is this case
# devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs> argparse_main.before.py`
# (`python argparse_main.before.py` runs one process)
import argparse
import logging
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger(__name__)


class Regressor(nn.Module):
    def __init__(self, features, hidden, device):
        super().__init__()
        self.device = device
        self.body = nn.Sequential(nn.Linear(features + 1, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        ones = torch.ones(x.shape[0], 1, device=x.device)
        return self.body(torch.cat([x, ones], dim=1)).squeeze(-1)


def parse_args():
    parser = argparse.ArgumentParser(description="Train a small regressor.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--output", default=os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "regressor.pt")))
    return parser.parse_args()


def train_epoch(model, loader, optimizer, args):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(args.device), y.to(args.device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 2 == 0:
            if os.environ.get("RANK", "0") == "0":
                logger.info("step %d loss %.4f", step, loss.item())
    return total / len(loader)


def main():
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    torch.manual_seed(3)
    features = torch.randn(96, 5)
    targets = features @ torch.randn(5) + 0.1 * torch.randn(96)
    # DataParallel's batch of args.batch_size was global; each of the world_size processes now
    # takes args.batch_size // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    train_dataset = TensorDataset(features, targets)
    train_sampler = DistributedSampler(
        train_dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0
    )
    train_loader = DataLoader(
        train_dataset, batch_size=args.batch_size // world_size, sampler=train_sampler
    )

    model = Regressor(5, 8, args.device)
    model.to(args.device)
    if distributed:
        if torch.cuda.is_available():
            model = model.to(torch.device("cuda", local_rank))
            model = DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank
            )
        else:
            model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        loss = train_epoch(model, train_loader, optimizer, args)
        if rank == 0:
            print(f"epoch {epoch} mean loss {loss:.4f}")
    if rank == 0:
        torch.save((model.module if distributed else model).state_dict(), args.output)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
