# The module stores the device it was built for (self.device = device) and creates position ids
# there in forward; under nn.DataParallel replica 1 fails with "cuda:1 and cuda:0".
# Run on 2 GPUs: python device_stored_in_init.before.py
# devfix-flags: --select DF102
# devfix-expect: DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn


class Embedder(nn.Module):
    def __init__(self, device, vocab=20, dim=8, max_len=16):
        super().__init__()
        self.device = device
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_len, dim)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=self.device).expand_as(ids)
        return self.tokens(ids) + self.positions(pos)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    model = Embedder(device).to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        ids = torch.randint(0, 20, (4, 6), device=device)
        loss = model(ids).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
