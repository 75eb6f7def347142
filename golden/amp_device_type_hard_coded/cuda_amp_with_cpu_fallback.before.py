# A mixed-precision training step written with the CUDA-only AMP objects in a script that falls
# back to the CPU: without CUDA both warn and switch themselves off, and the step silently trains
# in float32 (mlfoundations/open_clip PR#654; shared/design/fix-semantics.md C18, B.10). The golden
# runs it on a machine without CUDA with warnings as errors (python -W error::UserWarning).
# Run without a GPU: python -W error::UserWarning cuda_amp_with_cpu_fallback.before.py
# devfix-flags: --select DF308 --unsafe-fixes
# devfix-expect: DF308
# devfix-golden: gpus=0 fails-with="CUDA is not available" env="PYTHONWARNINGS=error::UserWarning"
# devfix-example: examples/amp_device_type_hard_coded.py is this case
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler()

for step in range(2):
    x, y = torch.randn(4, 8, device=device), torch.randint(0, 4, (4,), device=device)
    with torch.cuda.amp.autocast():
        loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
print(f"loss {loss.item():.3f}")
