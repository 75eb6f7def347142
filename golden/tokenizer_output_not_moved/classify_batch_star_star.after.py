# Batched classification with `model(**inputs)`: the tokenizer's BatchEncoding stays on the
# CPU while the classifier was moved to `device` (huggingface/transformers#11165).
# Run on a GPU: python classify_batch_star_star.before.py
# devfix-flags: --select DF202
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
# devfix-example: examples/tokenizer_output_not_moved.py is this case
import torch
import torch.nn as nn

VOCAB = 40


class BatchEncoding(dict):
    def to(self, device):
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


def tokenizer(texts, padding=False, truncation=False, return_tensors=None):
    width = max(len(t) for t in texts)
    ids = torch.tensor([[ord(c) % VOCAB for c in t.ljust(width)] for t in texts])
    return BatchEncoding(input_ids=ids, attention_mask=(ids != ord(" ") % VOCAB).long())


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids, attention_mask):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(hidden.mean(1))


torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Classifier().to(device)
model.eval()
inputs = tokenizer(
    ["good movie", "bad plot", "fine"],
    padding=True,
    return_tensors="pt",  # PyTorch tensors
).to(device)
with torch.no_grad():
    logits = model(**inputs)
print(logits.argmax(-1).tolist())
