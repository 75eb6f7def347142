"""Load argv[1] without map_location: a cuda:1 checkpoint in a run with one GPU."""

import sys

import torch

torch.load(sys.argv[1])
