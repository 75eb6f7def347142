# Training losses collected as tensors and averaged with np.mean (swz30/MPRNet#91): NumPy
# converts each CUDA loss and fails. torch.stack(...).mean() averages them on the device.
# Run on a GPU: python epoch_loss_np_mean.before.py
# devfix-flags: --select DF203 --unsafe-fixes
# devfix-expect: DF203
# devfix-golden: gpus=2 fails-with="can't convert cuda:0 device type tensor to numpy"
# devfix-example: examples/numpy_of_device_tensor.py is this case
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1).to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(2):
    epoch_losses = []
    for step in range(5):
        x = torch.randn(8, 4, device=device)
        target = x.sum(dim=1, keepdim=True)
        loss = criterion(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses.append(loss)
    print(f"epoch {epoch}: mean loss {np.mean(epoch_losses):.4f}")
