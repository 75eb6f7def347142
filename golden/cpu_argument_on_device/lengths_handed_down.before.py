# A pointer network whose encoder receives the lengths its parent model masks with (on the
# model's device) and packs them as they are (ast0414/pointer-networks-pytorch before d9fc063).
# Run on a GPU: python lengths_handed_down.before.py
# devfix-flags: --select DF107
# devfix-expect: DF107
# devfix-golden: gpus=1 fails-with="'lengths' argument should be a 1D CPU int64 tensor"
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.rnn = nn.LSTM(size, size, batch_first=True)

    def forward(self, embedded, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(embedded, lengths, batch_first=True)
        outputs, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True)[0]


class PointerNet(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.embedding = nn.Linear(2, size)
        self.encoder = Encoder(size)

    def forward(self, points, lengths):
        steps = torch.arange(points.size(1), device=lengths.device)
        mask = steps.unsqueeze(0) < lengths.unsqueeze(1)
        encoded = self.encoder(self.embedding(points), lengths)
        return encoded.masked_fill(~mask[:, : encoded.size(1), None], 0.0)


device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
model = PointerNet(8).to(device)
points = torch.rand(3, 6, 2, device=device)
lengths = torch.tensor([6, 4, 3], device=device)
print(model(points, lengths).shape)
