# Seed 002, after moving the pooled features to the head: the encoder is sharded over two GPUs,
# the classification head sits on the last one (cuda:1), and the labels stay on cuda:0 where
# the batch was put, so BCEWithLogitsLoss sees two devices (fix-semantics B.4).
# Run: python seed002_classifier_labels.before.py
# devfix-flags: --select DF106
# devfix-expect: DF106
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
        self.classifier = nn.Linear(hidden, 1, bias=True).to(LAST)
        self.loss_fn = nn.BCEWithLogitsLoss()

    def forward(self, input_ids=None, labels=None):
        pooled = self.encoder(input_ids).mean(dim=1)
        logits = self.classifier(pooled.to(self.classifier.weight.device)).squeeze(-1)
        loss = None
        if labels is not None:
            labels = labels.float().view(-1)
            loss = self.loss_fn(logits, labels.to(logits.device))  # binary relevance
        return loss, logits


def main():
    torch.manual_seed(0)
    model = ProtT5ForClassification(ShardedEncoder())
    input_ids = torch.randint(0, 40, (4, 7), device=FIRST)
    labels = torch.tensor([0, 1, 1, 0], device=FIRST)
    loss, _ = model(input_ids, labels)
    loss.backward()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
