# A NumPy batch turned into a tensor and "moved" with a bare `x.to(device)`: a tensor's `.to`
# returns a copy, so the batch stays on the CPU and meets the model's weights on the GPU
# (the CompenNet issue #2 shape: "the result of tensor.to(device) was not assigned").
# Run on a GPU: python from_numpy_batch.before.py
# devfix-flags: --select DF206
# devfix-expect: DF206
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/move_result_discarded.py is this case
import numpy as np
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(5, 3)
model.to(device)  # a module moves in place: nothing to change here

images = torch.from_numpy(np.random.rand(4, 5)).float()
images = images.to(device)  # the copy is thrown away
with torch.no_grad():
    print(model(images).sum().item())
