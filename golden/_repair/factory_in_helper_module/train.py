# devfix-repair: flags="--unsafe-fixes" fixes="DF101 DF101"
# Two factories of a helper module imported by the script build CPU tensors for a batch on the
# GPU; each error is raised in the model's forward, in another file than the line that made it.
import torch
import torch.nn as nn

from inputs import causal_mask, position_ids


class Attention(nn.Module):
    def __init__(self, vocab, length, dim):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(length, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.tokens(tokens) + self.positions(position_ids(tokens))
        scores = h @ h.transpose(1, 2) / h.size(-1) ** 0.5
        scores = scores.masked_fill(causal_mask(scores), float("-inf"))
        return self.out(scores.softmax(-1) @ h)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Attention(10, 6, 8).to(device)
out = model(torch.randint(0, 10, (2, 6), device=device))
print(tuple(out.shape), out.device.type)
