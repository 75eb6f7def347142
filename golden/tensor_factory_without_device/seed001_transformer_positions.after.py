# Seed 001 (shared/seeds/001): a Transformer encoder builds its position ids with
# torch.arange in forward, on the CPU, and feeds them to self.pos_embedding.
# Run: python seed001_transformer_positions.before.py
# devfix-flags: --select DF101
# devfix-expect: DF101
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/tensor_factory_without_device.py is this case
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, vocab_size, hid_dim, max_length=32):
        super().__init__()
        self.tok_embedding = nn.Embedding(vocab_size, hid_dim)
        self.pos_embedding = nn.Embedding(max_length, hid_dim)
        self.layer = nn.TransformerEncoderLayer(hid_dim, nhead=2, dim_feedforward=32, batch_first=True)

    def forward(self, src):
        batch_size = src.shape[0]
        src_len = src.shape[1]
        pos = torch.arange(0, src_len, device=self.pos_embedding.weight.device).unsqueeze(0).repeat(
            batch_size, 1
        )
        src = self.tok_embedding(src) + self.pos_embedding(pos)
        return self.layer(src)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Encoder(vocab_size=50, hid_dim=16).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        src = torch.randint(0, 50, (4, 10), device=device)
        loss = model(src).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
