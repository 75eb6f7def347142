"""Save a tensor from cuda:1 (argv[1]: the file)."""

import sys

import torch

torch.save({"w": torch.ones(2, device="cuda:1")}, sys.argv[1])
