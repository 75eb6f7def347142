# The correct resume order of shared/design/fix-semantics.md B.3: map_location given, the model
# moved before its optimizer is built and restored. Nothing to change.
# devfix-flags: --select DF302
import os
import tempfile

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")
model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)

checkpoint = torch.load(path, map_location="cpu", weights_only=True)
model.load_state_dict(checkpoint["model"])
model.to(device)
optimizer = torch.optim.Adam(model.parameters())
optimizer.load_state_dict(checkpoint["optimizer"])
print("ok")
