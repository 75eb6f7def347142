# An evaluation loop moves each batch's inputs with a bare `inputs.cuda(non_blocking=True)`
# and feeds the unmoved tensor to the model on the GPU. Only its uses (`inputs.view`) say that
# the loop variable is a tensor, so the fix is unsafe.
# Run on a GPU: python eval_loop_cuda.before.py
# devfix-flags: --select DF206 --unsafe-fixes
# devfix-expect: DF206
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn.functional as F
from torch import nn


def evaluate(model, batches):
    model.eval()
    total = 0.0
    for inputs, targets in batches:
        inputs.cuda(non_blocking=True)
        targets = targets.cuda()
        with torch.no_grad():
            logits = model(inputs.view(inputs.size(0), -1))
        total += F.cross_entropy(logits, targets).item()
    return total / len(batches)


if torch.cuda.is_available():
    net = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 4)).cuda()
    data = [(torch.randn(6, 3, 4), torch.randint(0, 4, (6,))) for _ in range(2)]
    print(evaluate(net, data))
