# A head on the last of two GPUs whose losses already take targets on the logits' device (moved
# with `.to(logits.device)`, or derived from the logits). Nothing to change.
# Run: python labels_already_moved.noop.py
# devfix-flags: --select DF106 --unsafe-fixes
import torch
import torch.nn as nn
import torch.nn.functional as F

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4).to(FIRST)
        self.fc = nn.Linear(4, 3).to(LAST)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        logits = self.fc(self.trunk(x).to(self.fc.weight.device))
        if labels is None:
            return logits
        labels = labels.to(logits.device)
        loss = self.loss_fn(logits, labels)
        smooth = F.mse_loss(logits, torch.zeros_like(logits))
        return loss + 0.01 * smooth


def main():
    model = Head()
    x = torch.randn(5, 4, device=FIRST)
    loss = model(x, torch.tensor([0, 1, 2, 0, 1], device=FIRST))
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
