# Look-alikes: a model moved after it is built, one handed to a wrapper that places it, one
# loaded onto its devices by a device map, and inputs "moved" to the CPU.
# devfix-flags: --select DF207
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
moved = nn.Linear(2, 2)
moved.to(device)
wrapped = nn.Linear(2, 2)
wrapped = nn.DataParallel(wrapped).to(device)
local = nn.Linear(2, 2)
x = torch.randn(1, 2)
print(moved(x.to(device)), wrapped(x.to(device)), local(x.to("cpu")))
