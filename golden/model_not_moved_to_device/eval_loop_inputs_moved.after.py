# An evaluation script that moves every batch to the chosen device but builds its model and
# never moves it (the SuperPrompt notebook shape, issue #1: the prompt ids go to `device`, the
# T5 model stays where `from_pretrained` put it): on a GPU the first layer meets CUDA inputs
# with CPU weights.
# Run on a GPU: python eval_loop_inputs_moved.before.py
# devfix-flags: --select DF207
# devfix-expect: DF207
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/model_not_moved_to_device.py is this case
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
scorer = Scorer()
scorer.to(device)
scorer.eval()
batches = [torch.randn(4, 6) for _ in range(3)]
with torch.no_grad():
    total = sum(scorer(batch.to(device)).sum().item() for batch in batches)
print(f"total score {total:.4f}")
