# A custom loss keeps its class weights as a plain tensor attribute, so
# `criterion = CustomLoss().to(device)` leaves them on the CPU (seed 003, fix-semantics B.7/B.8).
# Run: python seed003_custom_loss_weight.before.py
# devfix-flags: --select DF103 --unsafe-fixes
# devfix-expect: DF103
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn


class CustomLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer(
            "weight", torch.Tensor([1.0, 2.0]), persistent=False
        )  # per-output weights

    def forward(self, input, target):
        return ((input - target) ** 2 * self.weight).mean()


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Linear(4, 2).to(device)
    criterion = CustomLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4, device=device)
    y = torch.randn(8, 2, device=device)
    for _ in range(2):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
