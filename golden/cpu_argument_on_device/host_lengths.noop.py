# Lengths that reach pack_padded_sequence on the host already: a list, a CPU tensor the code
# makes, and a device tensor brought back with .cpu() (bentrevett's sentiment notebooks since 1.7).
# devfix-flags: --select DF107
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(50, 4)
        self.rnn = nn.RNN(4, 4)

    def forward(self, text, text_lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, text_lengths.to("cpu"), enforce_sorted=False)
        return self.rnn(packed)[1][-1]


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Classifier().to(device)
text = torch.randint(1, 50, (5, 2), device=device)
print(model(text, torch.tensor([5, 3], device=device)).shape)
print(pack_padded_sequence(torch.randn(4, 2, 3), [4, 2]).data.shape)
print(pack_padded_sequence(torch.randn(4, 2, 3), torch.tensor([4, 1])).data.shape)
