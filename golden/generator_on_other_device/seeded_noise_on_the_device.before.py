# Reproducible noise from a seeded CPU generator drawn on the script's device: torch.randn refuses a
# generator of another device type (pytorch/pytorch PR#47022; shared/design/fix-semantics.md A.6,
# C17).
# Run on a GPU: python seeded_noise_on_the_device.before.py
# devfix-flags: --select DF307
# devfix-expect: DF307
# devfix-golden: gpus=1 fails-with="Expected a 'cuda' device type for generator but found 'cpu'"
# devfix-example: examples/generator_on_other_device.py is this case
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
denoiser = nn.Linear(8, 8).to(device)
noise_rng = torch.Generator()
noise_rng.manual_seed(1234)

clean = torch.randn(4, 8, device=device)
for step in range(2):
    noise = torch.randn(4, 8, generator=noise_rng, device=device)
    loss = (denoiser(clean + noise) - clean).pow(2).mean()
    loss.backward()
print(f"loss {loss.item():.3f}")
