"""What the C++ fast path must leave to __torch_dispatch__, and what it must do as a GPU does.
Prints ``OK <name>`` per case, then how many ops the fast path took and declined."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from devfix.vgpu import _shim

counts = _shim.fast_path_functions()["fast_counts"]
a = torch.ones(3, device="cuda:0")
b = torch.full((3,), 2.0, device="cuda:0")
c = a + b  # the first sight of an op: the Python path, which hands it to the fast path
taken0, declined0 = counts()
c = a + b
taken1, _ = counts()
assert taken1 == taken0 + 1 and type(c).__name__ == "VTensor" and c.device.type == "cuda", (
    taken0,
    taken1,
)
assert c.tolist() == [3.0, 3.0, 3.0]
print("OK taken")

for other, text in (
    (torch.ones(3), "cuda:0 and cpu!"),
    (torch.ones(3, device="cuda:1"), "cuda:0 and cuda:1!"),
):
    try:
        a + other
    except RuntimeError as e:
        assert str(e).endswith(text), str(e)
    else:
        raise AssertionError("no device error")
print("OK mismatch")

assert (a + torch.tensor(1.0)).tolist() == [2.0, 2.0, 2.0]  # one CPU scalar: exempt
print("OK cpu-scalar")

same = a.add_(b)
assert same is a and a.tolist() == [3.0, 3.0, 3.0]
print("OK in-place")

parts = torch.ones(4, device="cuda:1").split(2)
assert [type(p).__name__ for p in parts] == ["VTensor", "VTensor"]
assert [str(p.device) for p in parts] == ["cuda:1", "cuda:1"]
print("OK list-result")


class Seen(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


with Seen() as seen:
    r = a + b
assert seen.ops == ["aten.add.Tensor"] and str(r.device) == "cuda:0", seen.ops
print("OK dispatch-mode")

a * b  # the Python path's first sight
with torch.autograd.profiler.profile() as prof:
    a * b
names = [e.name for e in prof.function_events]
assert names.count("aten::mul") == 1, names  # once, as on a GPU: not again for the CPU compute
print("OK profiler")

with torch.autocast("cuda", dtype=torch.float16):
    m = torch.mm(torch.ones(2, 2, device="cuda:0"), torch.ones(2, 2, device="cuda:0"))
assert m.dtype == torch.float16 and str(m.device) == "cuda:0", (m.dtype, m.device)
print("OK autocast")

zeros = a.new_zeros(1000)
zeros + 1  # the Python path's first sight
before = torch.cuda.memory_allocated(0)
big = zeros + 1  # 4000 bytes, in a block of 4096 as CUDA's caching allocator rounds them
assert torch.cuda.memory_allocated(0) - before == 4096, (before, torch.cuda.memory_allocated(0))
del big
assert torch.cuda.memory_allocated(0) == before
print("OK memory")

w = torch.ones(2, device="cuda:0", requires_grad=True)
(w * b[:2]).sum().backward()
assert w.grad is not None and w.grad.tolist() == [2.0, 2.0] and str(w.grad.device) == "cuda:0"
print("OK grad")

taken, declined = counts()
print("fast path", taken > taken1, declined > declined0)
