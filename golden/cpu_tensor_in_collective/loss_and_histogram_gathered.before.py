# A training script's epoch summary across ranks: the summed loss is wrapped in a legacy
# `torch.Tensor([...])`, a label histogram comes from NumPy, and the histograms are gathered
# into outputs made in a comprehension. All three are CPU tensors handed to NCCL collectives
# through an aliased `torch.distributed`.
# Run: torchrun --nproc_per_node=2 loss_and_histogram_gathered.before.py
# devfix-flags: --select DF311
# devfix-expect: DF311
# devfix-golden: gpus=2 fails-with="No backend type associated with device type cpu" env="RANK=1 LOCAL_RANK=1 WORLD_SIZE=2"
import os

import numpy as np
import torch
import torch.distributed as distributed
from torch import nn
from torch.distributed import all_gather as gather_from_ranks


def train_epoch(model, batches, optimizer, dev, world):
    total = 0.0
    labels_seen = []
    for inputs, targets in batches:
        inputs, targets = inputs.to(dev), targets.to(dev)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        labels_seen.extend(targets.tolist())
    epoch_loss = torch.Tensor([total]).double()
    histogram = torch.from_numpy(np.bincount(labels_seen, minlength=4))
    histograms = [torch.zeros(4, dtype=torch.long) for _ in range(world)]
    if world > 1:
        distributed.reduce(epoch_loss, dst=0)
        gather_from_ranks(histograms, histogram)
    else:
        histograms = [histogram]
    return epoch_loss, torch.stack(histograms).sum(dim=0)


def main() -> None:
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        distributed.init_process_group("nccl")
    use_gpu = torch.cuda.is_available()
    dev = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if use_gpu else "cpu")
    torch.manual_seed(1)
    model = nn.Linear(5, 4)
    model.to(dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(6, 5), torch.randint(0, 4, (6,))) for _ in range(3)]
    epoch_loss, counts = train_epoch(model, batches, optimizer, dev, world)
    print("loss", round(epoch_loss.item(), 3), "labels", counts.tolist())
    if world > 1:
        distributed.destroy_process_group()


if __name__ == "__main__":
    main()
