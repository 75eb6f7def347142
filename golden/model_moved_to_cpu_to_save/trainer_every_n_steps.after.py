# A trainer class keeps the latest weights every few steps, reading them through
# `self.net.cpu().state_dict()`. The first such step leaves `self.net` on the CPU while the
# following batches still go to `self.device`.
# Run on a GPU: python trainer_every_n_steps.before.py
# devfix-flags: --select DF310 --unsafe-fixes
# devfix-expect: DF310
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class Fitter:
    def __init__(self, device):
        self.device = device
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)
        self.latest = None

    def fit(self, batches, every=2):
        for step, (x, y) in enumerate(batches):
            pred = self.net(x.to(self.device))
            loss = nn.functional.mse_loss(pred, y.to(self.device))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if step % every == 0:
                self.latest = {
                    "net": {k: v.cpu() for k, v in self.net.state_dict().items()},
                    "step": step,
                }
        return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    fitter = Fitter(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(5)]
    print("loss", round(fitter.fit(data), 4), "kept step", fitter.latest["step"])
