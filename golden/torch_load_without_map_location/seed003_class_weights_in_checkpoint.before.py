# Seed 003 (resume after a checkpoint): the checkpoint also holds the class weights of the loss.
# Saved by rank 0 from cuda:0 and loaded without map_location, rank 1's criterion keeps them on
# cuda:0 while its logits are on cuda:1 (shared/design/fix-semantics.md B.0 F3, B.8).
# Run on 2 GPUs: LOCAL_RANK=1 python seed003_class_weights_in_checkpoint.before.py
# devfix-flags: --select DF302
# devfix-expect: DF302
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import os
import tempfile

import torch
from torch import nn

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
writer_rank = 0  # the process that saved the checkpoint
first_gpu = torch.device("cuda", writer_rank) if torch.cuda.is_available() else torch.device("cpu")
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")

model = nn.Linear(4, 3)
torch.save(
    {
        "epoch": 2,
        "model_state_dict": model.state_dict(),
        "class_weights": torch.tensor([1.0, 2.0, 0.5], device=first_gpu),
    },
    path,
)

checkpoint = torch.load(path)
model.load_state_dict(checkpoint["model_state_dict"])
model = model.to(device)
criterion = nn.CrossEntropyLoss(weight=checkpoint["class_weights"])
start_epoch = checkpoint["epoch"] + 1
x = torch.randn(6, 4, device=device)
y = torch.tensor([0, 1, 2, 0, 1, 2], device=device)
loss = criterion(model(x), y)
print(start_epoch, loss.item())
