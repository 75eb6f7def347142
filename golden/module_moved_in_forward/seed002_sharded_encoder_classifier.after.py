# Seed 002: an encoder sharded over two GPUs, a classification head placed on the first GPU,
# and `self.classifier.to(pooled.device)(pooled)` in forward. The head is dragged to cuda:1,
# its logits come out on cuda:1 and the labels (on cuda:0, where the Trainer put the batch)
# no longer match (fix-semantics B.4, B.6).
# Run: python seed002_sharded_encoder_classifier.before.py
# devfix-flags: --select DF105,DF106 --unsafe-fixes
# devfix-expect: DF105 DF106
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
import torch
import torch.nn as nn

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class ShardedEncoder(nn.Module):
    """Stand-in for a T5 encoder loaded with a two-GPU device map."""

    def __init__(self, vocab=40, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model).to(FIRST)
        self.block = nn.Linear(d_model, d_model).to(LAST)

    def forward(self, input_ids):
        hidden = self.embed(input_ids.to(self.embed.weight.device))
        return torch.tanh(self.block(hidden.to(self.block.weight.device)))


class ProtT5ForClassification(nn.Module):
    def __init__(self, encoder, hidden=16):
        super().__init__()
        self.encoder = encoder  # already sharded
        self.classifier = nn.Linear(hidden, 1, bias=True).to(FIRST)
        self.loss_fn = nn.BCEWithLogitsLoss()

    def masked_mean_pool(self, hidden_states, attention_mask):
        mask = attention_mask.unsqueeze(-1).type_as(hidden_states)
        summed = (hidden_states * mask).sum(dim=1)
        denom = mask.sum(dim=1).clamp(min=1e-9)
        return summed / denom

    def forward(self, input_ids=None, attention_mask=None, labels=None):
        last_hidden = self.encoder(input_ids)
        pooled = self.masked_mean_pool(last_hidden, attention_mask.to(last_hidden.device))
        logits = self.classifier(pooled.to(self.classifier.weight.device)).squeeze(-1)
        loss = None
        if labels is not None:
            labels = labels.float().view(-1)
            loss = self.loss_fn(logits, labels.to(logits.device))
        return loss, logits


def main():
    torch.manual_seed(0)
    model = ProtT5ForClassification(ShardedEncoder())
    input_ids = torch.randint(0, 40, (4, 7), device=FIRST)
    attention_mask = torch.ones(4, 7, dtype=torch.long, device=FIRST)
    labels = torch.tensor([0, 1, 1, 0], device=FIRST)
    loss, logits = model(input_ids, attention_mask, labels)
    loss.backward()
    print("loss", round(loss.item(), 4), "logits", tuple(logits.shape))


if __name__ == "__main__":
    main()
