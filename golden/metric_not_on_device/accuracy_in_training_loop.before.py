# A training script that tracks its running accuracy with a torchmetrics metric built next to the
# model but never moved (Lightning-AI/torchmetrics#608, #1047: "move the metric to the device";
# shared/design/fix-semantics.md C6, B.11).
# Run on a GPU: python accuracy_in_training_loop.before.py
# devfix-flags: --select DF205
# devfix-expect: DF205
# devfix-golden: gpus=1 fails-with="Encountered different devices in metric calculation"
# devfix-example: examples/metric_not_on_device.py is this case
import torch
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_acc = MulticlassAccuracy(num_classes=3)  # running accuracy of the epoch

batches = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(2)]
for features, labels in batches:
    features, labels = features.to(device), labels.to(device)
    logits = model(features)
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    train_acc.update(logits, labels)
print(f"accuracy {train_acc.compute().item():.2f}")
