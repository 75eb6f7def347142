# A tagger that packs its padded batch: `pack_padded_sequence` wants the lengths on the CPU, so
# the loop moves the tokens and the tags and deliberately leaves `lengths` where the DataLoader
# put it. Moving it too would be a needless copy (a crash before torch 1.7). Nothing to do.
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect:
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, TensorDataset


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.long(), batch_first=True, enforce_sorted=False
        )
        hidden, _ = self.rnn(packed)
        hidden, _ = pad_packed_sequence(hidden, batch_first=True, total_length=tokens.size(1))
        return self.out(hidden)


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
tagger = Tagger().to(device)
optimizer = torch.optim.Adam(tagger.parameters())
tokens = torch.randint(1, 20, (8, 6))
lengths = torch.randint(1, 7, (8,))
tags = torch.randint(0, 3, (8, 6))
loader = DataLoader(TensorDataset(tokens, lengths, tags), batch_size=4)
for tokens, lengths, tags in loader:
    tokens, tags = tokens.to(device), tags.to(device)
    scores = tagger(tokens, lengths)
    loss = nn.functional.cross_entropy(scores.flatten(0, 1), tags.flatten())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("ok")
