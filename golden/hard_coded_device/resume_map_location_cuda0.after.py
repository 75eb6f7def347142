# A torchrun training script resumes from a checkpoint with `map_location="cuda:0"`. The
# model's weights are copied onto its own GPU by `load_state_dict`, but the class weights
# stored in the checkpoint are used as loaded: rank 1 fails with "cuda:1 and cuda:0"
# (shared/design/fix-semantics.md B.0 F3, B.3).
# Run on 2 GPUs: LOCAL_RANK=1 python resume_map_location_cuda0.before.py
# devfix-flags: --select DF304
# devfix-expect: DF304
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
if torch.cuda.is_available():
    device = torch.device("cuda", local_rank)
else:
    device = torch.device("cpu")
path = os.path.join(tempfile.mkdtemp(), "last.pt")
torch.save({"model": nn.Linear(5, 3).state_dict(), "class_weights": torch.ones(3)}, path)

model = nn.Linear(5, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
checkpoint = torch.load(path, map_location=device)
model.load_state_dict(checkpoint["model"])
weights = checkpoint["class_weights"]
x = torch.randn(4, 5, device=device)
y = torch.randint(0, 3, (4,), device=device)
loss = F.cross_entropy(model(x), y, weight=weights)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item())
