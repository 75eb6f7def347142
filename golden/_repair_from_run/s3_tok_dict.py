# A hand-written tokenizer that returns a plain dict of CPU tensors, unpacked into a model
# on the GPU; the error is raised inside forward.
import torch
from torch import nn


class TinyTokenizer:
    def __call__(self, texts):
        ids = [[ord(c) % 50 for c in t[:6].ljust(6)] for t in texts]
        return {"input_ids": torch.tensor(ids), "mask": torch.ones(len(ids), 6)}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids, mask):
        pooled = (self.embed(input_ids) * mask.unsqueeze(-1)).mean(1)
        return self.head(pooled)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
tokenizer = TinyTokenizer()
model = Classifier().to(device)
inputs = tokenizer(["hello world", "device bugs"])
with torch.no_grad():
    print(model(**inputs).argmax(-1).tolist())
