# An evaluation loop that collects predictions with `.numpy()` straight from the model's
# output; the model (and the batch) are on the GPU, so NumPy cannot read them.
# Run on a GPU: python eval_predictions_numpy.before.py
# devfix-flags: --select DF203
# devfix-expect: DF203
# devfix-golden: gpus=2 fails-with="can't convert cuda:0 device type tensor to numpy"
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
loader = DataLoader(TensorDataset(torch.randn(12, 5), torch.randint(0, 3, (12,))), batch_size=4)
all_preds, all_labels = [], []
model.eval()
with torch.no_grad():
    for x, y in loader:
        x = x.to(device)
        logits = model(x)
        all_preds.append(logits.argmax(dim=1).detach().cpu().numpy())  # class ids
        all_labels.append(y.numpy())
accuracy = (np.concatenate(all_preds) == np.concatenate(all_labels)).mean()
print(f"accuracy {accuracy:.2f}")
