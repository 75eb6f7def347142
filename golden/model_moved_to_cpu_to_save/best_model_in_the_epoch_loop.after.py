# The best model so far is saved whenever the validation loss improves, inside the epoch loop;
# `model.cpu()` there moves the model for the rest of training.
# Run on a GPU: python best_model_in_the_epoch_loop.before.py
# devfix-flags: --select DF310 --unsafe-fixes
# devfix-expect: DF310
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import io

import torch
import torch.nn.functional as F
from torch import nn


def train(epochs=3):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    net = nn.Conv1d(2, 4, 3, padding=1).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    best, store = float("inf"), io.BytesIO()
    for epoch in range(epochs):
        signal = torch.randn(5, 2, 10, device=device)
        loss = F.mse_loss(net(signal), torch.zeros(5, 4, 10, device=device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < best:
            best = loss.item()
            torch.save(
                {"epoch": epoch, "weights": {k: v.cpu() for k, v in net.state_dict().items()}},
                store,
            )
    return best


print("best", round(train(), 4))
