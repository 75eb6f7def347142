# An EMA class that can keep its copy on another device (`device="cpu"` to save GPU memory) but
# updates it in place from the model's tensors without moving them: fixed upstream by
# `lerp_(model_v.to(device=self.device), ...)` (huggingface/pytorch-image-models#2127).
# Run on a GPU: python ema_class_with_its_own_device.before.py
# devfix-flags: --select DF306
# devfix-expect: DF306
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
from copy import deepcopy

import torch
from torch import nn


class WeightEma(nn.Module):
    def __init__(self, model, decay=0.999, device=None):
        super().__init__()
        self.module = deepcopy(model).eval()
        self.decay = decay
        if device is not None:
            self.module.to(device=device)

    @torch.no_grad()
    def update(self, model):
        for ema_p, model_p in zip(self.module.parameters(), model.parameters()):
            ema_p.lerp_(model_p.to(ema_p.device), 1.0 - self.decay)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = nn.Linear(5, 3).to(device)
ema = WeightEma(net, device="cpu")  # the average lives on the CPU
for _ in range(2):
    net(torch.randn(2, 5, device=device)).sum().backward()
    with torch.no_grad():
        net.weight -= 0.1 * net.weight.grad
    ema.update(net)
print(ema.module.weight.sum().item())
