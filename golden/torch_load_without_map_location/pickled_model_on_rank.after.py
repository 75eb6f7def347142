# A whole model pickled by rank 0 (parameters on cuda:0) is loaded by each torchrun process
# with `weights_only=False` and no map_location: rank 1 feeds it inputs on cuda:1
# (shared/design/fix-semantics.md B.0 F3; weights_only must stay as written).
# Run on 2 GPUs: LOCAL_RANK=1 python pickled_model_on_rank.before.py
# devfix-flags: --select DF302
# devfix-expect: DF302
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
# devfix-example: examples/torch_load_without_map_location.py is this case
import os
import tempfile

import torch
from torch import nn

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
writer_rank = 0  # the process that saved the checkpoint
first_gpu = torch.device("cuda", writer_rank) if torch.cuda.is_available() else torch.device("cpu")
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(nn.Linear(4, 2).to(first_gpu), path)


def evaluate(checkpoint):
    model = torch.load(checkpoint, weights_only=False, map_location=device)
    with torch.no_grad():
        return model(torch.randn(3, 4, device=device))


print(evaluate(path).shape)
