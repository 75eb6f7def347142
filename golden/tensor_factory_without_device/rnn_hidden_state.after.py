# An LSTM tagger creates its initial hidden state with torch.zeros in forward, on the CPU
# (Lightning-AI/pytorch-lightning#3738, pytorch/pytorch#52186).
# Run: python rnn_hidden_state.before.py
# devfix-flags: --select DF101
# devfix-expect: DF101
# devfix-golden: gpus=1 fails-with="Input and hidden tensors are not at the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, n_in=6, n_hidden=12, n_tags=3):
        super().__init__()
        self.n_hidden = n_hidden
        self.lstm = nn.LSTM(n_in, n_hidden, batch_first=True)
        self.out = nn.Linear(n_hidden, n_tags)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)
        c0 = torch.zeros(1, x.size(0), self.n_hidden, device=x.device)
        states, _ = self.lstm(x, (h0, c0))
        return self.out(states)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Tagger().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(3):
        x = torch.randn(5, 7, 6, device=device)
        y = torch.randint(0, 3, (5, 7), device=device)
        loss = loss_fn(model(x).reshape(-1, 3), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
