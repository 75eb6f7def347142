# Normalisation statistics saved by rank 0 (on cuda:0) are loaded by every torchrun process
# without map_location, so rank 1 gets them on cuda:0 while its inputs are on cuda:1
# (shared/design/fix-semantics.md B.0 F3, B.3; pytorch/examples#1078).
# Run on 2 GPUs: LOCAL_RANK=1 python rank0_stats_used_directly.before.py
# devfix-flags: --select DF302
# devfix-expect: DF302
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import os
import tempfile

import torch

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
writer_rank = 0  # the process that saved the checkpoint
first_gpu = torch.device("cuda", writer_rank) if torch.cuda.is_available() else torch.device("cpu")
path = os.path.join(tempfile.mkdtemp(), "stats.pt")

# What rank 0 wrote during an earlier run.
data = torch.randn(64, 4, device=first_gpu)
torch.save({"mean": data.mean(0), "std": data.std(0)}, path)

stats = torch.load(path, map_location=device)
x = torch.randn(8, 4, device=device)
x = (x - stats["mean"]) / stats["std"]
print(x.shape)
