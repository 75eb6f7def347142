# Seed 000 (multi-GPU Llama fine-tuning, "cuda:3 and cuda:0"), step 1: the preprocessing
# function mapped over the dataset pins the tensors to cuda:0 while the rank's model sits on
# cuda:LOCAL_RANK; the loop moves only the input ids, believing the labels are on the GPU
# already. Stand-ins: a tiny tokenizer and a dataset with `.map(fn, batched=True)`,
# consumed by a plain loop instead of Trainer (Hugging Face is not installed here).
# Run as rank 1 on 2 GPUs: LOCAL_RANK=1 python seed000_preprocess_map.before.py
# devfix-flags: --select DF201 --unsafe-fixes
# devfix-expect: DF201
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cuda:1" env="LOCAL_RANK=1"
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

VOCAB = 32


def tokenizer(texts, truncation=True, padding="max_length", max_length=6):
    rows = [[(ord(c) % (VOCAB - 1)) + 1 for c in text[:max_length]] for text in texts]
    rows = [row + [0] * (max_length - len(row)) for row in rows]
    return {"input_ids": torch.tensor(rows)}


class TextDataset:
    def __init__(self, texts):
        self.rows = [{"text": t} for t in texts]

    def map(self, function, batched=False):
        out = function({"text": [r["text"] for r in self.rows]})
        return [{k: v[i] for k, v in out.items()} for i in range(len(self.rows))]


def preprocess_function(examples):
    inputs = tokenizer(examples["text"], truncation=True, padding="max_length")
    inputs["labels"] = inputs["input_ids"].clone()
    return inputs


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, input_ids, labels):
        logits = self.head(self.embed(input_ids))
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


local_rank = int(os.environ.get("LOCAL_RANK", 0))
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
torch.manual_seed(0)
train_dataset = TextDataset(["hello world", "device bugs", "multi gpu", "fine tune"]).map(
    preprocess_function, batched=True
)
model = TinyLM().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for batch in DataLoader(train_dataset, batch_size=2):
    batch = {k: v.to(device) for k, v in batch.items()}
    loss = model(batch["input_ids"].to(device), batch["labels"])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print("loss", loss.item())
