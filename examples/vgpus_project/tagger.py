"""A tiny sequence tagger with a device bug: the positions are made on the CPU."""

import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab=20, dim=8, tags=4, max_len=16):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_len, dim)
        self.head = nn.Linear(dim, tags)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        return self.head(self.tokens(ids) + self.positions(positions))
