# A tagger whose training loop moves every field of the batch to the GPU, the lengths too: the
# forward pass hands those lengths to pack_padded_sequence (fix-semantics: CPU-only arguments).
# Run on a GPU: python moved_batch.before.py
# devfix-flags: --select DF107
# devfix-expect: DF107
# devfix-golden: gpus=1 fails-with="'lengths' argument should be a 1D CPU int64 tensor"
import torch
import torch.nn.utils.rnn as rnn_utils
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(30, 6)
        self.gru = nn.GRU(6, 6, batch_first=True)
        self.out = nn.Linear(6, 4)

    def forward(self, words, lengths):
        packed = rnn_utils.pack_padded_sequence(
            self.embed(words), lengths.long().cpu(), batch_first=True, enforce_sorted=False
        )
        hidden, _ = self.gru(packed)
        hidden, _ = rnn_utils.pad_packed_sequence(hidden, batch_first=True)
        return self.out(hidden)


device = "cuda" if torch.cuda.is_available() else "cpu"
model = Tagger().to(device)
batch = {"words": torch.randint(1, 30, (2, 4)), "lengths": torch.tensor([4, 2])}
batch = {key: value.to(device) for key, value in batch.items()}
print(model(batch["words"], batch["lengths"]).shape)
