# Class weights for an imbalanced data set, computed on the CPU from label counts and given to
# `nn.CrossEntropyLoss(weight, ...)` by position inside `main()` (shared/design/fix-semantics.md B.8).
# Run on a GPU: python class_weights_from_counts.before.py
# devfix-flags: --select DF303
# devfix-expect: DF303
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/loss_weight_on_cpu.py is this case
import torch
from torch import nn


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    labels = torch.tensor([0, 0, 0, 0, 1, 2, 2, 0])
    counts = [int((labels == c).sum()) for c in range(3)]
    class_weights = torch.tensor([len(labels) / (3 * n) for n in counts])
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    model.to(device)
    loss_fn = nn.CrossEntropyLoss(class_weights, label_smoothing=0.1)  # imbalanced classes
    features = torch.randn(len(labels), 5)
    logits = model(features.to(device))
    loss = loss_fn(logits, labels.to(device))
    print(loss.item())


if __name__ == "__main__":
    main()
