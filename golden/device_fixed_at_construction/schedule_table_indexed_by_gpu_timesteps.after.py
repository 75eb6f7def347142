# A diffusion noise schedule (a plain object, not a module) builds its tables on the CPU in
# __init__; the training step draws the timesteps on the GPU beside the images, and indexing
# a CPU table with them fails: "indices should be either on cpu or on the same device".
# The tables move to the images' device where they are indexed.
# Run on a GPU: python schedule_table_indexed_by_gpu_timesteps.before.py
# devfix-flags: --select DF102 --unsafe-fixes
# devfix-expect: DF102
# devfix-golden: gpus=1 fails-with="indices should be either on cpu or on the same device" devices="cpu"
import torch
from torch import nn


class NoiseSchedule:
    def __init__(self, steps: int = 50, beta_start: float = 1e-4, beta_end: float = 2e-2) -> None:
        self.betas = torch.linspace(beta_start, beta_end, steps)
        self.alpha_bars = torch.cumprod(1.0 - self.betas, dim=0)

    def add_noise(self, images: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        keep = self.alpha_bars.to(images.device)[t].sqrt().view(-1, 1)
        mix = (1 - self.alpha_bars.to(images.device)[t]).sqrt().view(-1, 1)
        return keep * images + mix * noise


def train_step() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = nn.Linear(8, 8).to(device)
    schedule = NoiseSchedule()
    images = torch.randn(4, 8, device=device)
    noise = torch.randn_like(images)
    t = torch.randint(0, 50, (4,), device=device)
    loss = (model(schedule.add_noise(images, noise, t)) - noise).pow(2).mean()
    loss.backward()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    train_step()
