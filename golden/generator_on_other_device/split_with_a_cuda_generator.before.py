# A CUDA generator handed to random_split, which draws its permutation on the CPU
# (pytorch/pytorch#44714; shared/design/fix-semantics.md A.6: data utilities take CPU generators).
# Run on a GPU: python split_with_a_cuda_generator.before.py
# devfix-flags: --select DF307
# devfix-expect: DF307
# devfix-golden: gpus=1 fails-with="Expected a 'cpu' device type for generator but found 'cuda'"
import torch
from torch.utils.data import DataLoader, TensorDataset, random_split

device = "cuda" if torch.cuda.is_available() else "cpu"
split_rng = torch.Generator(device=device).manual_seed(42)
full = TensorDataset(torch.arange(20.0).unsqueeze(1))
train_set, val_set = random_split(full, [16, 4], generator=split_rng)
for (batch,) in DataLoader(train_set, batch_size=8):
    print(batch.to(device).sum().item())
