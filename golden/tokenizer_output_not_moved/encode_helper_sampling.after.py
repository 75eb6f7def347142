# Greedy sampling from a small language model after it was moved to the GPU: the prompt's token
# ids come from a helper that wraps `tokenizer.encode(...)` in `torch.tensor`, a CPU tensor
# (the shape of rasbt/LLMs-from-scratch#435). The same call before the move is correct.
# Run on a GPU: python encode_helper_sampling.before.py
# devfix-flags: --select DF202
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn

VOCAB = 32


class CharTokenizer:
    def encode(self, text):
        return [ord(c) % VOCAB for c in text]


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, idx):
        return self.head(self.embed(idx))


def text_to_ids(text, tokenizer):
    ids = tokenizer.encode(text)
    return torch.tensor(ids).unsqueeze(0)  # a batch of one


def greedy(model, idx, steps):
    for _ in range(steps):
        with torch.no_grad():
            logits = model(idx)[:, -1, :]
        idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
    return idx


torch.manual_seed(0)
tokenizer = CharTokenizer()
model = TinyLM()
print(greedy(model, text_to_ids("hello", tokenizer), 3).tolist())
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.to(device)
out = greedy(model=model, idx=text_to_ids("hello", tokenizer).to(device), steps=3)
print(out.tolist())
