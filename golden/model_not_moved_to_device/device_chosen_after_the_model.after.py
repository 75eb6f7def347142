# A notebook-style script: the model is built in one step, the device is chosen in a later one,
# and only the data is moved there. The move of the model goes right after the device exists.
# Run on a GPU: python device_chosen_after_the_model.before.py
# devfix-flags: --select DF207
# devfix-expect: DF207
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Embedding(50, 8), nn.Flatten(), nn.Linear(40, 2))

# later: pick the device and run the data through
device = "cuda:0" if torch.cuda.is_available() else "cpu"
encoder.to(device)
tokens = torch.randint(0, 50, (3, 5))
logits = encoder(tokens.to(device))
print(logits.argmax(-1).tolist())
