# Knowledge distillation in a `main()` (a common research-code shape): a frozen teacher and a
# student, both wrapped in nn.DataParallel when several GPUs are visible; only the student has
# an optimizer. The student's temperature is a plain tensor attribute made on cuda:0, which
# the replica on cuda:1 meets. The checkpoint is written through `model.module if
# hasattr(model, "module") else model`.
# Run: python teacher_student.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
        self.temperature = torch.tensor(2.0, device=DEVICE)

    def forward(self, x):
        return self.body(x) / self.temperature


def main():
    checkpoint = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "student.pt"))
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(DEVICE)
    teacher.requires_grad_(False)
    teacher.eval()
    student = Student().to(DEVICE)
    if torch.cuda.device_count() > 1:
        print("Distilling on", torch.cuda.device_count(), "GPUs")
        teacher = nn.DataParallel(teacher)
        student = nn.DataParallel(student)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.5)
    loader = DataLoader(TensorDataset(torch.randn(48, 6)), batch_size=12)
    for epoch in range(3):
        for (x,) in loader:
            x = x.to(DEVICE)
            with torch.no_grad():
                soft_targets = F.softmax(teacher(x) / 2.0, dim=-1)
            loss = F.kl_div(F.log_softmax(student(x), dim=-1), soft_targets, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: distillation loss {loss.item():.4f}")
    model_to_save = student.module if hasattr(student, "module") else student
    torch.save(model_to_save.state_dict(), checkpoint)


if __name__ == "__main__":
    main()
