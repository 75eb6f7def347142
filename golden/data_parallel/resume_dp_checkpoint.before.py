# Fine-tuning that resumes from a checkpoint written by an earlier nn.DataParallel run (keys
# carry the `module.` prefix), with `from torch.nn import DataParallel as DP` inside the
# script's `__main__` block. The model makes its token positions on the hard-coded "cuda:0",
# which the replica on cuda:1 feeds to its own embedding.
# Run: python resume_dp_checkpoint.before.py   (RESUME_FROM=<checkpoint> to resume)
# devfix-flags: --select DF401,DF102 --unsafe-fixes
# devfix-expect: DF401 DF102
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import os
import tempfile

import torch
from torch import nn
from torch.nn import DataParallel as DP
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"


class Tagger(nn.Module):
    def __init__(self, vocab, dim, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(16, dim)
        self.head = nn.Linear(dim, tags)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=DEVICE).unsqueeze(0)
        return self.head(torch.tanh(self.embed(tokens) + self.position(positions)))


if __name__ == "__main__":
    resume = os.environ.get("RESUME_FROM", "")
    checkpoint = os.environ.get("CHECKPOINT", os.path.join(tempfile.gettempdir(), "tagger.pt"))
    torch.manual_seed(7)
    tokens = torch.randint(0, 50, (48, 8))
    tags = torch.randint(0, 5, (48, 8))
    loader = DataLoader(TensorDataset(tokens, tags), batch_size=12)

    model = DP(Tagger(50, 16, 5).to(DEVICE))
    if resume:
        model.load_state_dict(torch.load(resume, map_location=DEVICE))  # a DataParallel checkpoint
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)

    for epoch in range(3):
        model.train()
        for batch_tokens, batch_tags in loader:
            batch_tokens, batch_tags = batch_tokens.to(DEVICE), batch_tags.to(DEVICE)
            logits = model(batch_tokens)
            loss = nn.functional.cross_entropy(logits.reshape(-1, 5), batch_tags.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), checkpoint)
