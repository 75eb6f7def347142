# A normalising front end caches a GPU copy of its constants in `forward`, in a slot set to
# None in `__init__` (the shape of RobustBench#58). One plain forward on cuda:0 fills the
# cache; nn.DataParallel replicas then copy that cuda:0 tensor through `__dict__`, and the
# replica on cuda:1 fails. A buffer slot is replicated per device.
# Run on 2 GPUs: python cached_copy_under_dataparallel.before.py
# devfix-flags: --select DF103 --unsafe-fixes
# devfix-expect: DF103
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn


class Normalized(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(-1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(-1, 1, 1))
        self.register_buffer("mean_gpu", None, persistent=False)
        self.register_buffer("std_gpu", None, persistent=False)
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        if x.is_cuda:
            if self.mean_gpu is None:
                self.mean_gpu = self.mean.cuda()
                self.std_gpu = self.std.cuda()
            x = (x - self.mean_gpu) / self.std_gpu
        else:
            x = (x - self.mean) / self.std
        return self.conv(x).mean(dim=(1, 2, 3))


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Normalized([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]).to(device)
    with torch.no_grad():
        model(torch.rand(2, 3, 8, 8, device=device))  # a clean-accuracy pass first
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    with torch.no_grad():
        scores = model(torch.rand(4, 3, 8, 8, device=device))
    print(f"scores {scores.sum().item():.4f}")


if __name__ == "__main__":
    main()
