"""Common layers, RNNs, attention, autocast and GradScaler on a virtual GPU."""

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("error")  # e.g. no cuDNN warning on every RNN call
d1 = torch.device("cuda:1")


def same(a, b, tol=0.0):
    return (a.detach().cpu() - b.detach()).abs().max().item() <= tol


# --- LSTM / GRU (fused CUDA cells, forward and backward) vs CPU
for cls in (nn.LSTM, nn.GRU):
    torch.manual_seed(0)
    rnn = cls(5, 7, num_layers=2, batch_first=True)
    x = torch.randn(3, 4, 5)
    out_c, _ = rnn(x)
    out_c.sum().backward()
    g_c = rnn.weight_ih_l0.grad.clone()
    rnn.zero_grad()
    rnn.to(d1)
    out_v, h = rnn(x.to(d1))
    out_v.sum().backward()
    assert out_v.device == d1 and rnn.weight_ih_l0.grad.device == d1
    assert same(out_v, out_c, 1e-6) and same(rnn.weight_ih_l0.grad, g_c, 1e-5), cls
print("OK rnn")

# --- packed sequences: batch_sizes stay on the CPU, as on a GPU
lstm = nn.LSTM(5, 7).to(d1)
x = torch.randn(6, 3, 5, device=d1)
packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([6, 4, 2]))
assert packed.batch_sizes.device.type == "cpu" and packed.data.device == d1
out, _ = lstm(packed)
padded, lens = nn.utils.rnn.pad_packed_sequence(out)
assert padded.device == d1 and lens.device.type == "cpu"
padded.sum().backward()
print("OK packed")

# --- attention, transformer (bitwise identical to CPU), conv, batchnorm, layernorm, embedding
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
src = torch.randn(2, 6, 16)
ref = enc(src)
enc.to(d1)
out = enc(src.to(d1))
assert out.device == d1 and torch.equal(out.detach().cpu(), ref.detach())
out.sum().backward()
enc.eval()
with torch.no_grad():
    assert enc(src.to(d1)).device == d1
mha = nn.MultiheadAttention(16, 4, batch_first=True).to(d1)
q = torch.randn(2, 5, 16, device=d1)
o, w = mha(q, q, q)
o.sum().backward()
assert o.device == d1 and w.device == d1
conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).to(d1)
o = conv(torch.randn(2, 3, 8, 8, device=d1))
o.mean().backward()
assert o.device == d1 and conv[1].running_mean.device == d1 and conv[0].weight.grad.device == d1
bn1 = nn.BatchNorm1d(4).to(d1)
assert bn1(torch.randn(5, 4, device=d1)).device == d1
ln, emb = nn.LayerNorm(8).to(d1), nn.Embedding(10, 8).to(d1)
o = ln(emb(torch.tensor([[1, 2, 3]], device=d1)))
o.sum().backward()
assert emb.weight.grad.device == d1
logits = torch.randn(4, 3, device=d1, requires_grad=True)
F.cross_entropy(logits, torch.tensor([0, 1, 2, 0], device=d1)).backward()
assert logits.grad.device == d1
print("OK layers")

# --- autocast('cuda') really casts; GradScaler steps
m = nn.Linear(8, 4).to("cuda:0")
opt = torch.optim.SGD(m.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = m(torch.randn(2, 8, device="cuda:0"))
assert y.dtype == torch.bfloat16 and y.device == torch.device("cuda:0")
with torch.autocast("cuda"):
    assert m(torch.randn(2, 8, device="cuda:0")).dtype == torch.float16
scaler.scale(y.float().sum()).backward()
scaler.step(opt)
scaler.update()
assert scaler.get_scale() == 65536.0
print("OK amp")
