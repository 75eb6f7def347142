import math

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, vocab, hid_dim):
        super().__init__()
        self.tok_embedding = nn.Embedding(vocab, hid_dim)
        self.scale = torch.tensor([math.sqrt(hid_dim)])

    def forward(self, src):
        return self.tok_embedding(src) * self.scale
