# An evaluation function that builds a MetricCollection for the model it is given and feeds it the
# model's outputs on the script's device (Lightning-AI/torchmetrics#1047: metric states stay on the
# CPU; shared/design/fix-semantics.md C6).
# Run on a GPU: python collection_in_evaluate.before.py
# devfix-flags: --select DF205
# devfix-expect: DF205
# devfix-golden: gpus=1 fails-with="Encountered different devices in metric calculation"
import torch
import torchmetrics as tm
from torch import nn


@torch.no_grad()
def evaluate(model, batches, device):
    metrics = tm.MetricCollection(
        {
            "acc": tm.Accuracy(task="binary"),
            "f1": tm.F1Score(task="binary"),
        }
    )
    model.eval()
    for x, y in batches:
        probs = model(x.to(device)).squeeze(1).sigmoid()
        metrics.update(probs, y.to(device))
    return {name: value.item() for name, value in metrics.compute().items()}


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(6, 1).to(device)
    batches = [(torch.randn(5, 6), torch.randint(0, 2, (5,))) for _ in range(2)]
    print(evaluate(model, batches, device))


if __name__ == "__main__":
    main()
