# A causal LM head in the Hugging Face style (`loss_fct = CrossEntropyLoss()` on shifted logits
# and labels) inside a model split over two GPUs: the logits come from cuda:1, the labels from
# cuda:0 (huggingface/transformers#22561, PR#22591).
# Run: python causal_lm_shifted_labels.before.py
# devfix-flags: --select DF106
# devfix-expect: DF106
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0"
# devfix-example: examples/labels_not_on_logits_device.py is this case
import torch
from torch import nn
from torch.nn import CrossEntropyLoss

if torch.cuda.device_count() >= 2:
    FIRST, LAST = torch.device("cuda:0"), torch.device("cuda:1")
else:
    FIRST = LAST = torch.device("cpu")


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=32, dim=12):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, dim).to(FIRST)
        self.lm_head = nn.Linear(dim, vocab).to(LAST)

    def forward(self, input_ids, labels=None):
        hidden = self.embed(input_ids)
        logits = self.lm_head(hidden.to(self.lm_head.weight.device))
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss_fct = CrossEntropyLoss()
            loss = loss_fct(shift_logits.view(-1, self.vocab), shift_labels.view(-1))
        return loss, logits


def main():
    torch.manual_seed(0)
    model = TinyCausalLM()
    ids = torch.randint(0, 32, (2, 8), device=FIRST)
    loss, _ = model(ids, labels=ids)
    loss.backward()
    print("loss", round(loss.item(), 4))


if __name__ == "__main__":
    main()
