# Seed 001 (multi-GPU Transformer, step 3 "确保输入数据设备正确"): the train() function receives
# the model and the iterator; `src`/`trg` come from the DataLoader on the CPU while the
# model is on `device`. The fix uses train()'s own `device` parameter.
# Run on a GPU: python seed001_transformer_iterator.before.py
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect: DF204
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, HIDDEN, LENGTH = 20, 16, 7


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embedding = nn.Embedding(VOCAB, HIDDEN)
        self.trg_embedding = nn.Embedding(VOCAB, HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, src, trg):
        context = self.src_embedding(src).mean(dim=1, keepdim=True)
        return self.out(self.trg_embedding(trg) + context)


def train(model, iterator, optimizer, criterion, device):
    model.train()
    epoch_loss = 0.0
    for src, trg in iterator:
        src, trg = src.to(device), trg.to(device)
        optimizer.zero_grad()
        output = model(src, trg[:, :-1])
        loss = criterion(output.reshape(-1, VOCAB), trg[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    return epoch_loss / len(iterator)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pairs = TensorDataset(torch.randint(0, VOCAB, (24, LENGTH)), torch.randint(0, VOCAB, (24, LENGTH)))
    train_iterator = DataLoader(pairs, batch_size=8)
    model = Seq2Seq().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        print(epoch, train(model, train_iterator, optimizer, criterion, device))


main()
