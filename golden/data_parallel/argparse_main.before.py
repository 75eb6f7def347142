# An argparse + main() training script in the style of the Hugging Face examples: `--device`
# defaults to "cuda:0", the model keeps that device for the bias column it appends to every
# batch (on cuda:0, while the replica's batch is on cuda:1), the model is wrapped when several
# GPUs are visible, and the loss is averaged over the replicas.
# Run: python argparse_main.before.py --epochs 2
# devfix-flags: --select DF401,DF102 --unsafe-fixes
# devfix-expect: DF401 DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/data_parallel.py is this case
import argparse
import logging
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)


class Regressor(nn.Module):
    def __init__(self, features, hidden, device):
        super().__init__()
        self.device = device
        self.body = nn.Sequential(nn.Linear(features + 1, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        ones = torch.ones(x.shape[0], 1, device=self.device)
        return self.body(torch.cat([x, ones], dim=1)).squeeze(-1)


def parse_args():
    parser = argparse.ArgumentParser(description="Train a small regressor.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--output", default=os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "regressor.pt")))
    return parser.parse_args()


def train_epoch(model, loader, optimizer, args):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(args.device), y.to(args.device)
        loss = nn.functional.mse_loss(model(x), y)
        if torch.cuda.device_count() > 1:
            loss = loss.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 2 == 0:
            logger.info("step %d loss %.4f", step, loss.item())
    return total / len(loader)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO)
    torch.manual_seed(3)
    features = torch.randn(96, 5)
    targets = features @ torch.randn(5) + 0.1 * torch.randn(96)
    train_loader = DataLoader(TensorDataset(features, targets), batch_size=args.batch_size, shuffle=False)

    model = Regressor(5, 8, args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model.to(args.device)
    if torch.cuda.device_count() > 1:
        model = torch.nn.parallel.DataParallel(model)

    for epoch in range(args.epochs):
        loss = train_epoch(model, train_loader, optimizer, args)
        print(f"epoch {epoch} mean loss {loss:.4f}")
    torch.save(model.state_dict(), args.output)


if __name__ == "__main__":
    main()
