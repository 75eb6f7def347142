# A training function that builds its model and sends each batch to the device it is given,
# but not the model: the model gets the same move.
# Run on a GPU: python inputs_moved_in_a_training_function.before.py
# devfix-flags: --select DF207
# devfix-expect: DF207
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


def train(steps, device):
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        x = torch.randn(8, 3).to(device)
        loss = net(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


print(f"last loss {train(3, 'cuda' if torch.cuda.is_available() else 'cpu'):.4f}")
