# A DCGAN-style script (the PyTorch DCGAN tutorial's shape) on tiny random data: a generator and
# a discriminator, each wrapped in nn.DataParallel behind the tutorial's
# `(device.type == "cuda") and (ngpu > 1)` guard, the discriminator's optimizer built before its
# wrap. The generator's output offset is a plain tensor attribute made on cuda:0, which the
# replica on cuda:1 meets. The noise comes with the data, so runs can be compared.
# Run: python gan_two_models.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import os
import tempfile

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
ngpu = torch.cuda.device_count()
CHECKPOINT = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "netG.pt"))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
        self.offset = torch.full((6,), 0.1, device=device)

    def forward(self, noise):
        return self.main(noise) + self.offset


torch.manual_seed(0)
real_images = torch.randn(32, 6)
noise = torch.randn(32, 4)
dataloader = DataLoader(TensorDataset(real_images, noise), batch_size=8, shuffle=False)

netG = Generator().to(device)
netD = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)).to(device)
criterion = nn.BCEWithLogitsLoss()
optimizerD = optim.SGD(netD.parameters(), lr=0.05)
if (device.type == "cuda") and (ngpu > 1):
    netG = nn.DataParallel(netG, list(range(ngpu)))
    netD = nn.DataParallel(netD, list(range(ngpu)))
optimizerG = optim.SGD(netG.parameters(), lr=0.05)

for epoch in range(2):
    for i, (real, z) in enumerate(dataloader):
        real, z = real.to(device), z.to(device)
        netD.zero_grad()
        label = torch.ones(real.size(0), 1, device=device)
        errD_real = criterion(netD(real), label)
        errD_real.backward()
        fake = netG(z)
        errD_fake = criterion(netD(fake.detach()), torch.zeros_like(label))
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
    print(f"[{epoch}] Loss_D: {(errD_real + errD_fake).item():.4f} Loss_G: {errG.item():.4f}")
torch.save(netG.state_dict(), CHECKPOINT)
