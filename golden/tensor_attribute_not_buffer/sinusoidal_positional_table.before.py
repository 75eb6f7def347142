# The classic sinusoidal positional encoding stores its table as `self.pe = pe.unsqueeze(0)`:
# `model.to("cuda")` moves the embedding but not the table (facebookresearch/fairseq#4420,
# wenet-e2e/wenet PR#2413; fix-semantics B.7).
# Run: python sinusoidal_positional_table.before.py
# devfix-flags: --select DF103 --unsafe-fixes
# devfix-expect: DF103
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.pe = pe.unsqueeze(0)

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


class TinyEncoder(nn.Module):
    def __init__(self, vocab=50, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model)
        self.out = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.out(self.pos(self.embed(tokens)))


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyEncoder().to(device)
    tokens = torch.randint(0, 50, (2, 10), device=device)
    logits = model(tokens)
    print("logits", tuple(logits.shape))


if __name__ == "__main__":
    main()
