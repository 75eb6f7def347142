# A vocoder builds its filter bank inside `forward` for the device of its input and puts the
# filters there with `.cuda(device)`. On a GPU that works; run on the CPU (inference on a
# laptop), `.cuda(torch.device("cpu"))` raises "Invalid device, must be cuda device".
# `.to(device)` is the same move on a GPU and works on the CPU.
# Run on 1 GPU: python cuda_of_a_device_that_may_be_the_cpu.before.py
# devfix-flags: --select DF304
# devfix-expect: DF304
# devfix-golden: gpus=1 fails-with="Invalid device, must be cuda device"
import math

import torch
import torch.nn.functional as F
from torch import nn


class FilterBank(nn.Module):
    def __init__(self, device, bands: int = 4, taps: int = 9) -> None:
        super().__init__()
        steps = torch.arange(taps, dtype=torch.float32) - (taps - 1) / 2
        rows = [torch.cos((2 * k + 1) * math.pi / (2 * bands) * steps) for k in range(bands)]
        analysis = torch.stack(rows).unsqueeze(1).cuda(device)
        self.register_buffer("analysis", analysis)
        self.register_buffer("gain", torch.ones(bands).cuda(device, non_blocking=True))

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        bands = F.conv1d(wave, self.analysis, padding=self.analysis.shape[-1] // 2)
        return bands * self.gain[None, :, None]


class Vocoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Conv1d(1, 1, 3, padding=1)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        bank = FilterBank(wave.device)
        return bank(self.pre(wave))


def infer_on_cpu() -> None:
    torch.manual_seed(0)
    vocoder = Vocoder()
    print("bands", tuple(vocoder(torch.randn(2, 1, 32)).shape))


if __name__ == "__main__":
    infer_on_cpu()
