# Dict batches fed to a packing encoder on the GPU: the tokens and labels must move, but the
# `lengths` entry feeds `pack_padded_sequence`, which wants it on the CPU. The fix moves the
# batch with a comprehension that leaves that key where it is.
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect: DF204
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset


class Sentences(Dataset):
    def __init__(self, n=8):
        self.tokens = torch.randint(1, 20, (n, 6))
        self.lengths = torch.randint(1, 7, (n,))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "lengths": self.lengths[i], "label": self.labels[i]}


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        _, (last, _) = self.rnn(packed)
        return self.head(last[-1])


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
encoder = Encoder().to(device)
for batch in DataLoader(Sentences(), batch_size=4):
    logits = encoder(batch["tokens"], lengths=batch["lengths"])
    loss = nn.functional.cross_entropy(logits, batch["label"])
    loss.backward()
print("ok")
