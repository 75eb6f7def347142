"""Tensors, errors, autograd, Module.to identity, optimizers, save/load, deepcopy, clip."""

import copy
import io
import pickle

import torch
import torch.nn as nn

d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")

# --- torch.cuda API
assert torch.cuda.is_available() and torch.cuda.device_count() == 2
assert torch.cuda.current_device() == 0
torch.cuda.set_device(1)
assert torch.cuda.current_device() == 1 and torch.zeros(1, device="cuda").device == d1
with torch.cuda.device(0):
    assert torch.cuda.current_device() == 0 and torch.ones(1).cuda().device == d0
assert torch.cuda.current_device() == 1
torch.cuda.set_device(0)
p = torch.cuda.get_device_properties(1)
assert p.total_memory > 0 and p.multi_processor_count > 0
torch.cuda.manual_seed(1)
torch.cuda.manual_seed_all(1)
torch.cuda.synchronize()
torch.cuda.empty_cache()
base = torch.cuda.memory_allocated()
big = torch.empty(1000, device="cuda")  # 4,000 bytes: one 4,096-byte block
assert torch.cuda.memory_allocated() - base == 4096
del big
assert torch.cuda.memory_allocated() == base and torch.cuda.max_memory_allocated(0) >= base + 4096
s = torch.cuda.Stream()
e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e1.record()
with torch.cuda.stream(s):
    z = torch.ones(3, device="cuda") * 2
e2.record()
s.synchronize()
assert e1.elapsed_time(e2) >= 0 and e2.query()
torch.cuda.current_stream().wait_stream(s)
print("OK cuda-api")

# --- tensors report cuda:k everywhere, values are the CPU's bit for bit
x = torch.randn(3, 4)
v = x.to("cuda:1")
assert v.device == d1 and v.is_cuda and v.get_device() == 1 and v.type() == "torch.cuda.FloatTensor"
assert v.to("cuda:1") is v and v.cuda(1) is v
assert repr(torch.ones(2, device="cuda:1")) == "tensor([1., 1.], device='cuda:1')"
assert repr(torch.ones(2, device="cuda:1", requires_grad=True) * 2) == (
    "tensor([2., 2.], device='cuda:1', grad_fn=<MulBackward0>)"
)
w = torch.randn(4, 5)
assert torch.equal((v @ w.to(d1)).cpu(), x @ w)
assert torch.equal(torch.softmax(v, -1).log().cpu(), torch.softmax(x, -1).log())
assert (v.sum() * 3).item() == (x.sum() * 3).item()
assert v.cpu().device.type == "cpu" and torch.equal(v.cpu(), x)
assert v.to(d0).device == d0
assert torch.arange(5, device="cuda:1").tolist() == list(range(5))
assert torch.eye(3, device=d1).device == d1
assert torch.linspace(0, 1, 5, device=d1).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
assert torch.randperm(4, device=d1).device == d1
assert torch.tensor([1, 2], device=d1).device == d1
assert torch.full((2,), 3.0, device=d0).tolist() == [3.0, 3.0]
t = torch.randn(2, 3, device=d1)
assert t.t_().shape == (3, 2) and t.unsqueeze_(0).shape == (1, 3, 2)
m = torch.zeros(4, device=d0)
m[1:3] = 5
m[torch.tensor([0])] = 1
assert m.tolist() == [1.0, 5.0, 5.0, 0.0]
assert m[torch.tensor([True, False, True, False])].tolist() == [1.0, 5.0]
# pickled storage tags say cuda:k
buf = io.BytesIO()
torch.save(torch.ones(2, device=d1), buf)
assert b"cuda:1" in buf.getvalue() and b"VTensor" not in buf.getvalue()
raw = pickle.dumps(torch.ones(2, device=d1))
assert b"VTensor" not in raw
# an explicit `device=` decides where `_like` and `new_*` results live, not the input's device
for made in (
    torch.zeros_like(v, device="cpu"),
    torch.ones_like(v, device=torch.device("cpu")),
    torch.empty_like(v, device="cpu"),
    torch.full_like(v, 2.0, device="cpu"),
    torch.rand_like(v, device="cpu"),
    v.new_zeros(2, device="cpu"),
    v.new_full((2,), 1.0, device="cpu"),
):
    assert type(made) is torch.Tensor and made.device.type == "cpu", made.device
assert torch.zeros_like(v, device="cuda:0").device == d0 and v.new_ones(2, device=d0).device == d0
assert torch.zeros_like(v, device="cuda:1").device == d1 and torch.zeros_like(v).device == d1
assert torch.zeros_like(v, device="cpu").sum().item() == 0.0
print("OK tensors")

# --- autograd
a = torch.randn(4, device=d1, requires_grad=True)
(a * a).sum().backward()
assert a.grad.device == d1 and torch.equal(a.grad.cpu(), 2 * a.detach().cpu())
print("OK autograd")

# --- Module.to / .cuda() / .cpu() keep parameter identity
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
params = list(net.parameters())
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
net.to("cuda:1")
assert all(p is q for p, q in zip(params, net.parameters()))
assert all(p.device == d1 and isinstance(p, nn.Parameter) for p in params)
assert repr(params[3]).startswith("Parameter containing:\ntensor([")
net(torch.randn(3, 4, device=d1)).pow(2).mean().backward()
assert params[0].grad.device == d1
opt.step()
net.cpu()
assert all(p is q for p, q in zip(params, net.parameters()))
assert params[0].device.type == "cpu" and type(params[0]) is nn.Parameter
assert params[0].grad is None or params[0].grad.device.type == "cpu"
net.cuda()
assert params[0].device == d0
p0 = nn.Parameter(torch.ones(2, device=d1))
assert isinstance(p0, nn.Parameter) and p0.requires_grad and p0.device == d1
# a parameter's class rebuilds a parameter (accelerate: `type(old)(new, requires_grad=...)`),
# also from the old one's __dict__ as keyword arguments
rebuilt = type(p0)(torch.zeros(2, device=d0), requires_grad=False)
assert isinstance(rebuilt, nn.Parameter) and not rebuilt.requires_grad and rebuilt.device == d0
rebuilt = type(p0)(torch.zeros(2), **{**p0.__dict__, "requires_grad": True})
assert type(rebuilt) is nn.Parameter and rebuilt.requires_grad
assert type(p0)(torch.zeros(2, device="meta")).device.type == "meta"
# a GPU tensor moved to `meta` is a meta tensor (accelerate's offload puts layers back there)
assert p0.to("meta").device.type == "meta" and p0.to("meta").shape == p0.shape
assert torch.ones(3, device=d1).to(device="meta", dtype=torch.float16).dtype == torch.float16
try:
    type(p0)(torch.zeros(2), colour=1)
    raise AssertionError("an unknown keyword was accepted")
except TypeError:
    pass
# data pointers tell tensors apart, views included, as on a GPU
t1, t2 = torch.zeros(4, device=d1), torch.zeros(4, device=d1)
assert t1.data_ptr() != 0 and t1.data_ptr() != t2.data_ptr()
assert t1[1:].data_ptr() == t1.data_ptr() + 4
assert t1.untyped_storage().data_ptr() == t1[2:].untyped_storage().data_ptr() == t1.data_ptr()
assert t1.untyped_storage().nbytes() == 16
print("OK module-to")

# --- optimizers: default (foreach) path, state_dict round trip
for cls in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW):
    torch.manual_seed(0)
    ref = nn.Linear(4, 2)
    vir = copy.deepcopy(ref).to(d0)
    kw = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 1e-2}
    o_ref, o_vir = cls(ref.parameters(), **kw), cls(vir.parameters(), **kw)
    for _ in range(2):
        xb = torch.randn(5, 4)
        for mod, o, xx in ((ref, o_ref, xb), (vir, o_vir, xb.to(d0))):
            o.zero_grad()
            mod(xx).pow(2).sum().backward()
            o.step()
    assert torch.equal(ref.weight.detach(), vir.weight.detach().cpu()), cls
    sd = o_vir.state_dict()
    if cls is not torch.optim.SGD:
        st = sd["state"][0]
        assert st["exp_avg"].device == d0 and st["step"].device.type == "cpu"
    o2 = cls(vir.parameters(), **kw)
    o2.load_state_dict(sd)
    if cls is not torch.optim.SGD:
        assert o2.state[vir.weight]["exp_avg"].device == d0
    o2.step()
print("OK optim")

# --- torch.save / torch.load with and without map_location
buf = io.BytesIO()
sd = nn.Linear(2, 2).cuda(1).state_dict()
torch.save({"t": torch.arange(6.0, device=d1).reshape(2, 3), "sd": sd}, buf)
for ml, want in (
    (None, "cuda:1"),
    ("cpu", "cpu"),
    ({"cuda:1": "cuda:0"}, "cuda:0"),
    (torch.device("cuda:0"), "cuda:0"),
):
    buf.seek(0)
    got = torch.load(buf, map_location=ml)
    assert str(got["t"].device) == want and str(got["sd"]["weight"].device) == want, (ml, got)
    assert got["t"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
buf.seek(0)
assert torch.load(buf, weights_only=True)["t"].device == d1
print("OK save-load")

# --- deepcopy, clip_grad_norm_ over two devices
mm = nn.Linear(3, 3).cuda(1)
mc = copy.deepcopy(mm)
assert mc.weight.device == d1 and mc.weight is not mm.weight
assert torch.equal(mc.weight.detach().cpu(), mm.weight.detach().cpu())
la, lb = nn.Linear(3, 3).cuda(0), nn.Linear(3, 3).cuda(1)
(la(torch.ones(2, 3, device=d0)).sum() + lb(torch.ones(2, 3, device=d1)).sum().to(d0)).backward()
n = nn.utils.clip_grad_norm_(list(la.parameters()) + list(lb.parameters()), 1.0)
assert n.device == d0 and n.item() > 0
print("OK misc")

# --- the real errors for numpy() and an out-of-range device
try:
    torch.ones(2, device=d0).numpy()
    raise AssertionError("numpy() should fail")
except TypeError as e:
    assert str(e).startswith("can't convert cuda:0 device type tensor to numpy."), e
try:
    torch.zeros(1, device="cuda:5")
    raise AssertionError("cuda:5 should fail")
except RuntimeError as e:
    assert str(e).startswith("CUDA error: invalid device ordinal"), e
print("OK real-errors")
