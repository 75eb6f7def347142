# A DCGAN-style script (the PyTorch DCGAN tutorial's shape) on tiny random data: a generator and
# a discriminator, each wrapped in nn.DataParallel behind the tutorial's
# `(device.type == "cuda") and (ngpu > 1)` guard, the discriminator's optimizer built before its
# wrap. The generator's output offset is a plain tensor attribute made on cuda:0, which the
# replica on cuda:1 meets. The noise comes with the data, so runs can be compared.
# Run: python gan_two_models.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> gan_two_models.before.py`
# (`python gan_two_models.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ngpu = torch.cuda.device_count()
CHECKPOINT = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "netG.pt"))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
        self.register_buffer("offset", torch.full((6,), 0.1, device=device), persistent=False)

    def forward(self, noise):
        return self.main(noise) + self.offset


if __name__ == "__main__":
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    real_images = torch.randn(32, 6)
    noise = torch.randn(32, 4)
    # DataParallel's batch of 8 was global; each of the world_size processes now
    # takes 8 // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    dataset = TensorDataset(real_images, noise)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0)
    dataloader = DataLoader(dataset, batch_size=8 // world_size, sampler=sampler)

    netG = Generator().to(device)
    netD = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)).to(device)
    criterion = nn.BCEWithLogitsLoss()
    if distributed:
        if torch.cuda.is_available():
            netG = netG.to(torch.device("cuda", local_rank))
            netG = DistributedDataParallel(netG, device_ids=[local_rank], output_device=local_rank)
            netD = netD.to(torch.device("cuda", local_rank))
            netD = DistributedDataParallel(netD, device_ids=[local_rank], output_device=local_rank)
        else:
            netG = DistributedDataParallel(netG)
            netD = DistributedDataParallel(netD)
    optimizerD = optim.SGD(netD.parameters(), lr=0.05)
    optimizerG = optim.SGD(netG.parameters(), lr=0.05)

    for epoch in range(2):
        sampler.set_epoch(epoch)
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
        if rank == 0:
            print(
                f"[{epoch}] Loss_D: {(errD_real + errD_fake).item():.4f} Loss_G: {errG.item():.4f}"
            )
    if rank == 0:
        torch.save((netG.module if distributed else netG).state_dict(), CHECKPOINT)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
