# A metric built anew for every validation batch, as in Lightning-AI/torchmetrics#340 (`F1(...)`
# constructed inside `validation_step`), here in a plain loop over a model on a device string
# (shared/design/fix-semantics.md C6: a metric built per step also forgets its state).
# Run on a GPU: python metric_per_batch.before.py
# devfix-flags: --select DF205
# devfix-expect: DF205
# devfix-golden: gpus=1 fails-with="Encountered different devices in metric calculation"
import torch
from torch import nn
from torchmetrics import MeanSquaredError

device = "cuda" if torch.cuda.is_available() else "cpu"
regressor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
regressor.eval()
with torch.no_grad():
    for step in range(2):
        x, y = torch.randn(6, 3).to(device), torch.randn(6, 1).to(device)
        mse = MeanSquaredError()
        print(step, mse(regressor(x), y).item())
