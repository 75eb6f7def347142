# The weighted criterion is an attribute of the model, so `model.to(device)` moves its weight
# buffer too (shared/design/fix-semantics.md B.8); the second criterion is already moved.
# devfix-flags: --select DF303
import torch
from torch import nn

CLASS_WEIGHTS = torch.tensor([1.0, 3.0])

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.criterion = nn.CrossEntropyLoss(weight=CLASS_WEIGHTS)

    def forward(self, x, y):
        logits = self.fc(x)
        return logits, self.criterion(logits, y)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Classifier().to(device)
extra = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0])).to(device)
x = torch.randn(5, 4).to(device)
y = torch.tensor([0, 1, 1, 0, 1]).to(device)
logits, loss = model(x, y)
print(loss.item(), extra(logits[:, 1], y.float()).item())
