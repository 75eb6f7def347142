# A collate_fn that pads a batch and calls .cuda() on it (pytorch/pytorch#17359): the current
# CUDA device is cuda:0, rank 1's model is on cuda:1. The `.cuda()` calls are removed (the
# dtype cast stays) and the loop moves the dict batch.
# Run as rank 1 on 2 GPUs: LOCAL_RANK=1 python collate_fn_cuda.before.py
# devfix-flags: --select DF201 --unsafe-fixes
# devfix-expect: DF201
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cuda:1" env="LOCAL_RANK=1"
# devfix-example: examples/device_in_data_pipeline.py is this case
import os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader


def collate_batch(samples):
    tokens = pad_sequence([s for s, _ in samples], batch_first=True)
    labels = torch.tensor([label for _, label in samples])
    return {"tokens": tokens, "labels": labels.to(torch.long)}


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(50, 8)
        self.fc = nn.Linear(8, 2)

    def forward(self, tokens):
        return self.fc(self.embed(tokens))


local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
torch.manual_seed(0)
samples = [(torch.randint(1, 50, (n,)), n % 2) for n in range(2, 10)]
model = BagOfWords().to(device)
for batch in DataLoader(samples, batch_size=4, collate_fn=collate_batch):
    batch = {k: v.to(device) for k, v in batch.items()}
    logits = model(batch["tokens"])
    loss = nn.functional.cross_entropy(logits, batch["labels"])
    loss.backward()
print("done", loss.item())
