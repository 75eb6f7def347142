# A training routine builds its criterion through a loss factory and, when asked to, with class
# weights computed from the label counts (a CPU tensor); the model and the batches go to the
# GPU, the weights never do (sacdallago/biotrainer#67 has this shape).
# Run: python factory_class_weights.before.py
# devfix-flags: --select DF303 --unsafe-fixes
# devfix-expect: DF303
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


def get_loss(choice, weight=None):
    losses = {"cross_entropy": nn.CrossEntropyLoss, "nll": nn.NLLLoss}
    return losses[choice](weight=weight)


def compute_class_weights(labels, n_classes):
    counts = torch.bincount(labels, minlength=n_classes).float()
    return counts.sum() / (n_classes * counts.clamp(min=1))


def train(labels, use_class_weights=True, device=None):
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    class_weights = None
    if use_class_weights:
        class_weights = compute_class_weights(labels, 3)
    model = nn.Linear(5, 3).to(device)
    loss_function = get_loss("cross_entropy", weight=class_weights)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(labels.shape[0], 5, device=device)
    loss = loss_function(model(x), labels.to(device))
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    print("loss", round(train(torch.randint(0, 3, (12,))), 4))
