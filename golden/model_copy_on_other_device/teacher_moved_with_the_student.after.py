# A mean-teacher set-up: the teacher is a second instance loaded from the student's state before
# the device is chosen, and follows the student by `t.data = ...` arithmetic (a second instance
# "loaded from the same state", shared/design/fix-semantics.md C15).
# Run on a GPU: python teacher_moved_with_the_student.before.py
# devfix-flags: --select DF306
# devfix-expect: DF306
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 3)

    def forward(self, x):
        return self.proj(x)


student = Encoder()
teacher = Encoder()
teacher.load_state_dict(student.state_dict())
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
student.to(device)
teacher.to(device)
for step in range(2):
    x = torch.randn(4, 6, device=device)
    student(x).pow(2).mean().backward()
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.data = 0.99 * t.data + 0.01 * s.data
print(teacher.proj.weight.norm().item())
