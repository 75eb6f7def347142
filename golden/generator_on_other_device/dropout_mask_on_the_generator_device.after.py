# A mask drawn with a CUDA generator but without `device=`: torch.rand draws on the CPU and refuses
# the CUDA generator (torchfont PR#327; shared/design/fix-semantics.md B.11 "Generator").
# Run on a GPU: python dropout_mask_on_the_generator_device.before.py
# devfix-flags: --select DF307
# devfix-expect: DF307
# devfix-golden: gpus=1 fails-with="Expected a 'cpu' device type for generator but found 'cuda'"
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
gen = torch.Generator(device=device)
gen.manual_seed(7)
tokens = torch.randint(0, 100, (2, 6), device=device)
keep = torch.rand(2, 6, generator=gen, device=gen.device) > 0.15
print(torch.where(keep.to(device), tokens, torch.zeros_like(tokens)))
