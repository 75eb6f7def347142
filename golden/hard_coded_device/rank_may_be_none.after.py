# A trainer class written for torchrun (one process per `gpu_id`) also runs as a single process
# with `gpu_id=None`; its batches go to `f"cuda:{self.gpu_id}"`, which is "cuda:None" there. The
# model it holds was moved to that id and knows the device.
# Run on a GPU: python rank_may_be_none.before.py
# devfix-flags: --select DF304
# devfix-expect: DF304
# devfix-golden: gpus=1 fails-with="Invalid device string"
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, gpu_id):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.optimizer = optimizer

    def run_epoch(self, batches):
        for x, y in batches:
            x = x.to(next(self.model.parameters()).device)
            y = y.to(next(self.model.parameters()).device)
            loss = F.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


if torch.cuda.is_available():
    net = nn.Linear(6, 3).cuda()
    trainer = Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1), gpu_id=None)
    batches = [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(2)]
    if trainer.gpu_id is None:
        print("single process")
    print(trainer.run_epoch(batches))
