# Seed 001's attention layer builds its scale in __init__ with `.to(device)`: the plain
# attribute lives on cuda:0 only, and the nn.DataParallel replica on cuda:1 divides by it
# (bentrevett/pytorch-seq2seq; fix-semantics A.8, B.7).
# Run: python seed001_dataparallel_scale.before.py
# devfix-flags: --select DF103 --unsafe-fixes
# devfix-expect: DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/tensor_attribute_not_buffer.py is this case
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, device):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = hid_dim // n_heads
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        self.scale = torch.sqrt(torch.FloatTensor([self.head_dim])).to(device)

    def forward(self, x):
        batch = x.shape[0]
        q = self.fc_q(x).view(batch, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.fc_k(x).view(batch, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        v = self.fc_v(x).view(batch, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(q, k.permute(0, 1, 3, 2)) / self.scale
        attention = torch.softmax(energy, dim=-1)
        out = torch.matmul(attention, v).permute(0, 2, 1, 3).contiguous()
        return self.fc_o(out.view(batch, -1, self.n_heads * self.head_dim))


def main():
    torch.manual_seed(0)
    layer = MultiHeadAttentionLayer(16, 4, device).to(device)
    model = nn.DataParallel(layer)
    x = torch.randn(4, 5, 16, device=device)
    print("out", tuple(model(x).shape))


if __name__ == "__main__":
    main()
