"""A few AdamW steps of a small Transformer on cuda:0 with a head on cuda:1, twice: with the
runtime's C++ fast path, then with every op on the Python path. Each run prints what a change
of path could alter: every loss bit for bit, gradients, an in-place op on a view, memory
statistics, where a tensor's device came from; then how many ops the fast path took."""

import torch
import torch.nn as nn

from devfix.vgpu import _core, _shim, provenance

fast = _shim.fast_path_functions()
torch.set_num_threads(1)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, 50).to("cuda:1")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.enc(self.emb(x))
        chunks = torch.split(h, 4, dim=1)  # a list result
        h = torch.cat([c * 1.0 for c in chunks], dim=1)
        return self.head(h.to("cuda:1"))


def run() -> list[str]:
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    for d in range(2):
        torch.cuda.reset_peak_memory_stats(d)
    start = [torch.cuda.memory_allocated(d) for d in range(2)]
    out = []
    model = Model()
    model.emb.to("cuda:0")
    model.enc.to("cuda:0")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randint(0, 50, (3, 8), device="cuda:0")
    y = torch.randint(0, 50, (3, 8)).to("cuda:1")
    for _ in range(4):
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 50), y.reshape(-1))
        loss.backward()
        opt.step()
        out.append(loss.item().hex())
    grad = model.emb.weight.grad
    out.append(f"{type(grad).__name__} {grad.device} {grad.abs().sum().item().hex()}")
    w = model.head.weight.detach()
    t = w.t()
    before = w[0, 1].item()
    r = t.mul_(2.0)  # in place on a view: the base sees it, the result is the view itself
    out.append(f"{r is t} {w[0, 1].item() == 2 * before} {w.data_ptr() == t.data_ptr()}")
    out.append(f"{[torch.cuda.memory_allocated(d) - start[d] for d in range(2)]}")
    out.append(f"{[torch.cuda.max_memory_allocated(d) - start[d] for d in range(2)]}")
    s = provenance.site_of(logits)
    out.append(f"{s.line} {s.op} {provenance.KIND_NAMES[s.kind]} {s.parent.line} {s.parent.op}")
    return out


taken0, declined0 = fast["fast_counts"]()
on = run()
taken1, declined1 = fast["fast_counts"]()
fast["fast_remove"]()
_core.fast_add = None
off = run()
taken2, declined2 = fast["fast_counts"]()
print("\n".join(on))
print("--")
print("\n".join(off))
print("--")
print(taken1 - taken0, declined1 - declined0, taken2 - taken1, declined2 - declined1)
