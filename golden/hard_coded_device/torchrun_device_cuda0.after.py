# Every torchrun process picks `torch.device("cuda:0")`, while the embedding table that the
# (torchrun-aware) data code loads sits on the process's own GPU: rank 1 fails with
# "cuda:0 and cuda:1" (shared/design/fix-semantics.md B.10).
# Run on 2 GPUs: LOCAL_RANK=1 python torchrun_device_cuda0.before.py
# devfix-flags: --select DF304
# devfix-expect: DF304
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import os

import torch
from torch import nn


def load_embedding_table(rows, dim):
    """Library code: places the table on this process's GPU, as torchrun-aware code does."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    where = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    return torch.randn(rows, dim, device=where)


device = (
    torch.device(torch.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK", 0)))
    if torch.accelerator.is_available()
    else torch.device("cpu")
)
model = nn.Linear(8, 4).to(device)
table = load_embedding_table(10, 8)
ids = torch.tensor([1, 2, 3])
features = table[ids]
print(model(features).shape)
