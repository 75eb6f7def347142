# A seq2seq encoder that sorts its lengths on the model's device to permute the batch, then packs
# with those CUDA lengths (LauraRuis/multimodal_seq2seq_gSCAN before 17064bc; pytorch#43227).
# Run on a GPU: python sorted_lengths.before.py
# devfix-flags: --select DF107
# devfix-expect: DF107
# devfix-golden: gpus=1 fails-with="'lengths' argument should be a 1D CPU int64 tensor"
# devfix-example: examples/cpu_argument_on_device.py is this case
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)

    def forward(self, tokens, lengths):
        lengths = torch.tensor(lengths, device=tokens.device, dtype=torch.long)
        lengths, order = torch.sort(lengths, descending=True)
        embedded = self.embedding(tokens).index_select(0, order)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True)
        return output.index_select(0, order.argsort())


encoder = Encoder(20, 8).to(device)
tokens = torch.randint(1, 20, (3, 5), device=device)
print(encoder(tokens, [3, 5, 2]).shape)
