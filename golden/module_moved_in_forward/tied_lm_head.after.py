# A small language model split by hand over two GPUs ties its LM head to the input embedding.
# `self.lm_head.to(h.device)(h)` moves the shared weight to cuda:1, so the next decoding
# step's embedding lookup (ids on cuda:0) fails (fix-semantics A.7 "modules moved in forward").
# Run: python tied_lm_head.before.py
# devfix-flags: --select DF105 --unsafe-fixes
# devfix-expect: DF105
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class TinyLM(nn.Module):
    def __init__(self, vocab=30, dim=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.body = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight

    def place(self):
        self.embed.to(FIRST)
        self.body.to(LAST)
        return self

    def forward(self, ids):
        h = self.embed(ids)
        h = torch.relu(self.body(h.to(self.body.weight.device)))
        return self.lm_head(h.to(self.lm_head.weight.device))


def main():
    torch.manual_seed(0)
    model = TinyLM().place().eval()
    ids = torch.randint(0, 30, (2, 4), device=FIRST)
    with torch.no_grad():
        for _ in range(3):
            logits = model(ids)
            next_id = logits[:, -1].argmax(dim=-1, keepdim=True).to(ids.device)
            ids = torch.cat([ids, next_id], dim=1)
    print("generated", tuple(ids.shape))


if __name__ == "__main__":
    main()
