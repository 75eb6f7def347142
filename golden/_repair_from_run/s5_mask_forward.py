# A causal mask made with torch.ones in forward (DF101, an unsafe fix).
import torch
from torch import nn


class Causal(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        steps = x.shape[1]
        mask = torch.tril(torch.ones(steps, steps))
        scores = self.proj(x) @ x.transpose(1, 2)
        scores = scores.masked_fill(mask == 0, float("-inf"))
        return scores.softmax(-1) @ x


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Causal(4).to(device)
print(model(torch.randn(2, 5, 4, device=device)).shape)
