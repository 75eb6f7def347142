# A convolution block builds its batch norms inside forward, from the width __init__ stores:
# each call makes new layers on the CPU with fresh statistics, never trained, and on a GPU
# the first call fails (syuu1987/geekTime-semantic-segmentation#1 has this shape).
# Run: python norm_built_in_forward.before.py
# devfix-flags: --select DF104 --unsafe-fixes
# devfix-expect: DF104
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, c_in, width):
        super().__init__()
        self.width = width
        self.conv_a = nn.Conv2d(c_in, width, kernel_size=3, padding=1)
        self.conv_b = nn.Conv2d(width, width, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(num_features=self.width)
        self.bn2 = nn.BatchNorm2d(num_features=self.width)

    def forward(self, x):
        x = self.conv_a(x)
        x = self.bn1(x)
        x = nn.ReLU(inplace=True)(x)
        x = self.conv_b(x)
        x = self.bn2(x)
        return nn.ReLU(inplace=True)(x)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    block = ConvBlock(3, 8).to(device)
    optimizer = torch.optim.SGD(block.parameters(), lr=0.1)
    images = torch.randn(4, 3, 8, 8, device=device)
    loss = block(images).mean()
    loss.backward()
    optimizer.step()
    print("loss", round(loss.item(), 4), "tensors trained:", len(list(block.parameters())))


if __name__ == "__main__":
    main()
