"""Freed blocks of a virtual GPU are kept for reuse up to the device's peak, as CUDA's caching
allocator keeps them, and torch.cuda.empty_cache() returns them."""

import ctypes

import torch

from devfix.vgpu import _shim

lib = _shim.load_shim()
lib.devfix_vgpu_cached_bytes.restype = ctypes.c_int64


def cached() -> int:
    return int(lib.devfix_vgpu_cached_bytes(0))


block = 1000 * 1024  # bytes: 256,000 floats, a multiple of the 512-byte rounding
a = torch.empty(block // 4, device="cuda:0")
where = a.data_ptr()
del a
assert cached() == block and torch.cuda.memory_allocated(0) == 0, cached()
b = torch.ones(block // 4, device="cuda:0")  # the same size: the same block again
assert b.data_ptr() == where and cached() == 0, (cached(), b.data_ptr(), where)
assert b.sum().item() == block // 4
small = torch.ones(10, device="cuda:0")
del small
assert cached() == 0  # small blocks come from malloc's free lists
del b
assert cached() == block
torch.cuda.empty_cache()
assert cached() == 0 and torch.cuda.memory_allocated(0) == 0

torch.cuda.reset_peak_memory_stats(0)
x = torch.empty(2 * block // 4, device="cuda:0")
del x
assert cached() == 2 * block  # up to the peak
y = torch.empty(block // 4, device="cuda:0")
del y
assert cached() == 2 * block, cached()  # 3 blocks' worth would pass the peak of 2: freed
torch.cuda.empty_cache()
print("OK")
