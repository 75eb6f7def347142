"""A fresh script sees no allocation and no peak on its virtual GPU."""

import torch

stats = torch.cuda.memory_stats()
print(
    torch.cuda.memory_allocated(),
    torch.cuda.max_memory_allocated(),
    stats["allocation.all.allocated"],
)
x = torch.ones(3, device="cuda")
print(torch.cuda.max_memory_allocated())
