# Metrics done right (Lightning-AI/torchmetrics#1047): registered on the module in `__init__` (moved
# with it), built with `.to(device)`, moved afterwards, or fed CPU tensors on purpose.
# devfix-flags: --select DF205
import torch
from torch import nn
from torchmetrics import F1Score, MeanMetric
from torchmetrics.classification import MulticlassAccuracy


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 3)
        self.accuracy = MulticlassAccuracy(num_classes=3)

    def forward(self, x):
        return self.head(x)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Classifier().to(device)
loss_mean = MeanMetric().to(device)
f1 = F1Score(task="multiclass", num_classes=3)
f1.to(device)
cpu_accuracy = MulticlassAccuracy(num_classes=3)
predictions, targets = [], []
for _ in range(2):
    x, y = torch.randn(5, 4, device=device), torch.randint(0, 3, (5,), device=device)
    logits = model(x)
    model.accuracy.update(logits, y)
    loss_mean.update(nn.functional.cross_entropy(logits, y))
    f1.update(logits, y)
    predictions.extend(logits.argmax(1).tolist())
    targets.extend(y.tolist())
print(model.accuracy.compute(), loss_mean.compute(), f1.compute())
print(cpu_accuracy(torch.tensor(predictions), torch.tensor(targets)))
