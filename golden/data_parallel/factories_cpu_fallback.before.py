# A script in the shape of many research repositories (SupContrast, the ImageNet example):
# `set_loader(opt)` builds the loaders around a `train_sampler = None` placeholder,
# `set_model(opt)` wraps the model in nn.DataParallel when CUDA has several GPUs and falls back
# to the CPU otherwise, `main()` runs the epochs and a `save_model` helper writes checkpoints.
# The model's input normalisation is a plain tensor attribute made on cuda:0, which the
# replica on cuda:1 meets.
# Run: python factories_cpu_fallback.before.py
# devfix-flags: --select DF401,DF103 --unsafe-fixes
# devfix-expect: DF401 DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.tensor([0.5, -0.5, 0.25, 0.0], device=DEVICE)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x - self.mean)


def set_loader(opt):
    torch.manual_seed(1)
    train_dataset = TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,)))
    val_dataset = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
    train_sampler = None
    train_loader = DataLoader(
        train_dataset, batch_size=opt["batch_size"], shuffle=False, sampler=train_sampler
    )
    val_loader = DataLoader(val_dataset, batch_size=8, shuffle=False)
    return train_loader, val_loader


def set_model(opt):
    model = Classifier()
    criterion = nn.CrossEntropyLoss()
    if torch.cuda.is_available():
        if len(opt["gpus"]) > 1:
            model = nn.DataParallel(model, device_ids=opt["gpus"])
        model = model.cuda()
        criterion = criterion.cuda()
    else:
        model = model.to(DEVICE)
    return model, criterion


def train(loader, model, criterion, optimizer):
    model.train()
    for x, y in loader:
        x, y = x.to(DEVICE), y.to(DEVICE)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def save_model(model, epoch, save_file):
    print(f"==> Saving epoch {epoch}...")
    state = {"epoch": epoch, "model": model.state_dict()}
    torch.save(state["model"], save_file)
    del state


def main():
    opt = {"batch_size": 8, "gpus": list(range(torch.cuda.device_count())), "epochs": 3}
    save_file = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "last.pth"))
    train_loader, val_loader = set_loader(opt)
    torch.manual_seed(0)
    model, criterion = set_model(opt)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, opt["epochs"] + 1):
        loss = train(train_loader, model, criterion, optimizer)
        print(f"epoch {epoch}, loss {loss:.4f}")
    save_model(model.module if hasattr(model, "module") else model, opt["epochs"], save_file)


if __name__ == "__main__":
    main()
