# A loss helper computes per-batch class weights from the targets (on cuda:0) and calls
# F.cross_entropy on logits from the last GPU: both the targets and the weights need to move
# (fix-semantics B.4 "move masks and weights too", B.8).
# Run: python weighted_functional_loss.before.py
# devfix-flags: --select DF106
# devfix-expect: DF106
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn
import torch.nn.functional as F

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


def balanced_loss(logits, targets, n_classes):
    counts = torch.bincount(targets, minlength=n_classes).float()
    class_weights = counts.clamp(min=1).reciprocal()
    return F.cross_entropy(
        logits, targets.to(logits.device), weight=class_weights.to(logits.device)
    )


def main():
    torch.manual_seed(0)
    trunk = nn.Linear(5, 8).to(FIRST)
    head = nn.Linear(8, 3).to(LAST)
    x = torch.randn(6, 5, device=FIRST)
    targets = torch.tensor([0, 1, 2, 2, 1, 0], device=FIRST)
    logits = head(torch.relu(trunk(x)).to(LAST))
    loss = balanced_loss(logits, targets, 3)
    loss.backward()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
