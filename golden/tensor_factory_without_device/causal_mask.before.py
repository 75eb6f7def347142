# Self-attention builds its causal mask with torch.triu(torch.ones(L, L)) in forward, on the CPU
# (fix-semantics B.2; OpenNMT-py PR#1494).
# Run: python causal_mask.before.py
# devfix-flags: --select DF101
# devfix-expect: DF101
# devfix-golden: gpus=1 fails-with="expected self and mask to be on the same device" devices="cuda:0,cpu"
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        length = x.shape[1]
        mask = torch.triu(torch.ones(length, length), diagonal=1).bool()
        scores = scores.masked_fill(mask, float("-inf"))
        return self.proj(F.softmax(scores, dim=-1) @ v)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = CausalSelfAttention().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(2, 8, 16, device=device)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
