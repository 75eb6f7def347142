# Tokenizer outputs that are moved on the way, a NumPy request, and a CPU model: nothing to do.
# devfix-flags: --select DF202
# devfix-expect:
import torch
import torch.nn as nn


class BatchEncoding(dict):
    def to(self, device):
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


def tokenizer(text, return_tensors=None):
    ids = [[ord(c) % 40 for c in text]]
    return BatchEncoding(input_ids=torch.tensor(ids) if return_tensors == "pt" else ids)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(40, 4)

    def forward(self, input_ids):
        return self.embed(input_ids).sum()


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
a = tokenizer("abc", return_tensors="pt").to(device)
print(model(**a).item())
b = tokenizer("def", return_tensors="pt")
b = {k: v.to(device) for k, v in b.items()}
print(model(**b).item())
c = tokenizer("ghi", return_tensors="pt")
print(model(c["input_ids"].to(device)).item())
cpu_model = Net()
print(cpu_model(**tokenizer("jkl", return_tensors="pt")).item())
