# Knowledge distillation in a `main()` (a common research-code shape): a frozen teacher and a
# student, both wrapped in nn.DataParallel when several GPUs are visible; only the student has
# an optimizer. The student's temperature is a plain tensor attribute made on cuda:0, which
# the replica on cuda:1 meets. The checkpoint is written through `model.module if
# hasattr(model, "module") else model`.
# Run: python teacher_student.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> teacher_student.before.py`
# (`python teacher_student.before.py` runs one process)
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
        self.register_buffer("temperature", torch.tensor(2.0, device=DEVICE), persistent=False)

    def forward(self, x):
        return self.body(x) / self.temperature


def main():
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor
    if distributed:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

    checkpoint = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "student.pt"))
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(DEVICE)
    teacher.requires_grad_(False)
    teacher.eval()
    student = Student().to(DEVICE)
    if distributed:
        if torch.cuda.is_available():
            student = student.to(torch.device("cuda", local_rank))
            student = DistributedDataParallel(
                student, device_ids=[local_rank], output_device=local_rank
            )
        else:
            student = DistributedDataParallel(student)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.5)
    # DataParallel's batch of 12 was global; each of the world_size processes now
    # takes 12 // world_size of it (when that does not divide, the global batch is
    # smaller). Each process reads its own shard of the data set.
    dataset = TensorDataset(torch.randn(48, 6))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False, seed=0)
    loader = DataLoader(dataset, batch_size=12 // world_size, sampler=sampler)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for (x,) in loader:
            x = x.to(DEVICE)
            with torch.no_grad():
                soft_targets = F.softmax(teacher(x) / 2.0, dim=-1)
            loss = F.kl_div(F.log_softmax(student(x), dim=-1), soft_targets, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: distillation loss {loss.item():.4f}")
    model_to_save = student.module if hasattr(student, "module") else student
    if rank == 0:
        torch.save(model_to_save.state_dict(), checkpoint)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
