# A train function given the script's device (a string that falls back to the CPU) but with
# autocast and the scaler hard-coded to "cuda": off CUDA both warn and switch themselves off
# (shared/design/fix-semantics.md B.10 "AMP"). The golden runs it on a machine without CUDA with
# warnings as errors (python -W error::UserWarning).
# Run without a GPU: python -W error::UserWarning autocast_cuda_in_a_train_function.before.py
# devfix-flags: --select DF308 --unsafe-fixes
# devfix-expect: DF308
# devfix-golden: gpus=0 fails-with="CUDA is not available" env="PYTHONWARNINGS=error::UserWarning"
import torch
from torch import nn


def train(model, batches, device, use_amp=True):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(
        torch.device(device).type, enabled=use_amp and torch.device(device).type == "cuda"
    )
    for x, y in batches:
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=use_amp):
            loss = nn.functional.mse_loss(model(x.to(device)).float(), y.to(device))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return loss.item()


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = nn.Linear(3, 1).to(device)
    print(train(net, [(torch.randn(5, 3), torch.randn(5, 1)) for _ in range(2)], device))
