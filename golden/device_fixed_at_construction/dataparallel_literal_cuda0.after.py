# Issue 3's DataParallel case: forward hard-codes device="cuda:0"; replica 1 runs on cuda:1
# and fails with "cuda:1 and cuda:0" (shared/design/fix-semantics.md A.2, Face-Transformer#37).
# Run on 2 GPUs: python dataparallel_literal_cuda0.before.py
# devfix-flags: --select DF102
# devfix-expect: DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        bias = torch.ones(x.shape[-1], device=self.fc.weight.device)
        return self.fc(x) + bias


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Scorer().to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(4, 8, device=device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
