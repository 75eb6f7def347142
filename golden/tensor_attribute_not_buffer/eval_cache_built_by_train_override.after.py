# A LeViT-style attention caches its gathered biases when switched to eval (a `train()`
# override), in a plain attribute. `model.eval()` called before `model.to(device)` leaves the
# cache on the CPU, and the first evaluation on the GPU fails. A buffer follows `.to()`.
# Run on a GPU: python eval_cache_built_by_train_override.before.py
# devfix-flags: --select DF103 --unsafe-fixes
# devfix-expect: DF103
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import itertools

import torch
import torch.nn as nn


class BiasedAttention(nn.Module):
    def __init__(self, dim=8, heads=2, size=3):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        points = list(itertools.product(range(size), range(size)))
        offsets = {}
        idxs = []
        for p1 in points:
            for p2 in points:
                offset = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                offsets.setdefault(offset, len(offsets))
                idxs.append(offsets[offset])
        self.biases = nn.Parameter(torch.zeros(heads, len(offsets)))
        self.register_buffer("bias_idxs", torch.LongTensor(idxs).view(len(points), len(points)))

    @torch.no_grad()
    def train(self, mode=True):
        super().train(mode)
        if mode and hasattr(self, "ab"):
            del self.ab
        else:
            self.register_buffer("ab", self.biases[:, self.bias_idxs], persistent=False)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        bias = self.biases[:, self.bias_idxs] if self.training else self.ab
        attn = (q @ k.transpose(-2, -1) + bias).softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(b, n, c)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = BiasedAttention()
    model.eval()
    model.to(device)
    with torch.no_grad():
        out = model(torch.randn(2, 9, 8, device=device))
    print(f"out {out.sum().item():.4f}")


if __name__ == "__main__":
    main()
