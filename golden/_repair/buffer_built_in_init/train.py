# devfix-repair: flags="--unsafe-fixes" fixes="DF103"
# The root cause is in another file and another function than the raising line: the scale
# built in Encoder.__init__ as a plain attribute, which model.to() does not move.
import torch

from encoder import Encoder

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Encoder(10, 8).to(device)
out = model(torch.randint(0, 10, (2, 5), device=device))
print(tuple(out.shape), out.device.type)
