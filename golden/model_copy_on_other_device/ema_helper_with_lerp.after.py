# A training function whose EMA copy (deepcopy, eval mode) is made before `model.cuda()` and
# updated with `lerp_` in a helper (huggingface/pytorch-image-models#2127 shape;
# shared/design/fix-semantics.md C15).
# Run on a GPU: python ema_helper_with_lerp.before.py
# devfix-flags: --select DF306
# devfix-expect: DF306
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
from copy import deepcopy

import torch
from torch import nn


@torch.no_grad()
def update_ema(ema, model, decay=0.999):
    for ema_v, model_v in zip(ema.state_dict().values(), model.state_dict().values()):
        if ema_v.dtype.is_floating_point:
            ema_v.lerp_(model_v, 1.0 - decay)


def train(steps):
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    ema = deepcopy(model).eval()
    if torch.cuda.is_available():
        model.cuda()
        ema.cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for _ in range(steps):
        x = torch.randn(8, 4, device=next(model.parameters()).device)
        model(x).square().mean().backward()
        optimizer.step()
        update_ema(ema, model)
    return ema


if __name__ == "__main__":
    print(sum(p.sum().item() for p in train(2).parameters()))
