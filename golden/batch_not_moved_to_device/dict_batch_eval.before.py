# An evaluation loop over dict batches (the shape Hugging Face-style datasets produce):
# `model(**batch)` gets CPU tensors while the model was moved to `device`.
# The fix moves every entry with a dict comprehension.
# Run on a GPU: python dict_batch_eval.before.py
# devfix-flags: --select DF204 --unsafe-fixes
# devfix-expect: DF204
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Encoded(Dataset):
    def __init__(self, n=12):
        self.ids = torch.randint(0, 30, (n, 5))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(30, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids, labels):
        logits = self.head(self.embed(input_ids).mean(1))
        return nn.functional.cross_entropy(logits, labels), logits


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Classifier()
model.to(device)
model.eval()
correct = 0
with torch.no_grad():
    for batch in DataLoader(Encoded(), batch_size=4):
        loss, logits = model(**batch)
        correct += (logits.argmax(-1) == batch["labels"]).sum().item()
print("accuracy", correct / 12)
