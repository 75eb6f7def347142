# Evaluation under torchrun: every rank counts its correct predictions on its shard of the
# validation set, then the counts are summed across ranks. The count tensor is made on the CPU,
# and NCCL, the GPUs' backend, communicates CUDA tensors only: the epoch ends in an error.
# Run: torchrun --nproc_per_node=2 cpu_tensor_in_collective.py
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group(backend="nccl")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)).to(device)
    data = TensorDataset(torch.randn(32, 6), torch.randint(0, 3, (32,)))
    sampler = DistributedSampler(data, shuffle=False) if distributed else None
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    correct, seen = 0, 0
    with torch.no_grad():
        for features, labels in loader:
            features, labels = features.to(device), labels.to(device)
            correct += int((model(features).argmax(dim=1) == labels).sum())
            seen += len(labels)
    totals = torch.tensor([correct, seen], dtype=torch.long)  # this rank's share
    if distributed:
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    print(f"accuracy {totals[0].item() / totals[1].item():.3f} over {totals[1].item()} samples")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
