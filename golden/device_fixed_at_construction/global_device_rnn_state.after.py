# A GRU decoder sends its initial state to the script's global DEVICE (cuda:0); under
# nn.DataParallel replica 1 sees "cuda:1 and cuda:0" (bentrevett/pytorch-seq2seq#57 style).
# Run on 2 GPUs: python global_device_rnn_state.before.py
# devfix-flags: --select DF102
# devfix-expect: DF102
# devfix-golden: gpus=2 fails-with="Input and hidden tensors are not at the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/device_fixed_at_construction.py is this case
import torch
import torch.nn as nn

DEVICE = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


class Decoder(nn.Module):
    def __init__(self, n_in=4, n_hidden=8):
        super().__init__()
        self.n_hidden = n_hidden
        self.rnn = nn.GRU(n_in, n_hidden, batch_first=True)
        self.head = nn.Linear(n_hidden, 1)

    def forward(self, x):
        h = torch.zeros(1, x.shape[0], self.n_hidden).to(x.device)
        states, _ = self.rnn(x, h)
        return self.head(states[:, -1])


def main():
    torch.manual_seed(0)
    model = Decoder().to(DEVICE)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        x = torch.randn(6, 5, 4, device=DEVICE)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
