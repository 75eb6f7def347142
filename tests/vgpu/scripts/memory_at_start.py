"""A fresh script sees no allocation and no peak on its virtual GPU."""

import torch
print(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(), torch.cuda.memory_stats()["allocation.all.allocated"])
x = torch.ones(3, device="cuda"); print(torch.cuda.max_memory_allocated())
