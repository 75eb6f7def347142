# A perplexity scorer feeds its language model moved copies of the encoded batch
# (`**{k: v.to(self.device) ...}`) but takes the labels from the batch itself, still on the
# CPU; the loss and the count of valid tokens both meet the logits on the GPU:
# "cuda:0 and cpu". The labels move where they are taken, so the count follows.
# Run on a GPU: python perplexity_labels_from_unmoved_inputs.before.py
# devfix-flags: --select DF106
# devfix-expect: DF106
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn

PAD = 0


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 40, dims: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dims)
        self.head = nn.Linear(dims, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return {"logits": self.head(hidden)}


def encode(batch: list[list[int]]) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids in batch)
    ids = torch.tensor([ids + [PAD] * (width - len(ids)) for ids in batch])
    return {"input_ids": ids, "attention_mask": (ids != PAD).long()}


class Perplexity:
    def __init__(self, model: nn.Module) -> None:
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = model.to(self.device)
        self.loss_fct = nn.CrossEntropyLoss(reduction="none", ignore_index=PAD)

    def score(self, batch: list[list[int]]) -> list[float]:
        model_inputs = encode(batch)
        with torch.no_grad():
            output = self.model(**{k: v.to(self.device) for k, v in model_inputs.items()})
        logits = output["logits"]
        labels = model_inputs["input_ids"].to(logits.device)
        shift_logits = logits[:, :-1, :].contiguous()
        shift_labels = labels[:, 1:].contiguous()
        valid = (shift_labels != PAD).sum(-1)
        loss = self.loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        loss = loss.view(len(batch), -1).sum(-1) / valid
        return loss.exp().tolist()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(Perplexity(TinyLM()).score([[5, 7, 9, 11], [3, 4, 6]]))
