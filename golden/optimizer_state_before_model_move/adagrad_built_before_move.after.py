# `torch.optim.Adagrad` creates its `sum` state in the constructor, on the device the parameters
# have then; built before `model.to(device)`, its state stays on the CPU and the first step
# fails (shared/design/fix-semantics.md B.0 F1, B.3).
# Run on a GPU: python adagrad_built_before_move.before.py
# devfix-flags: --select DF301
# devfix-expect: DF301
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/optimizer_state_before_model_move.py is this case
import torch
from torch import nn
from torch.optim import Adagrad


def train(steps=3):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 1))
    model.to(device)
    optimizer = Adagrad(model.parameters(), lr=0.05)  # sparse features
    for _ in range(steps):
        x = torch.randn(10, 6).to(device)
        loss = model(x).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    print(train())
