# A scoring helper is handed the model by its caller but sends the inputs to the current GPU
# with `.cuda()`; a caller that keeps the model on the CPU (here: a quick CPU check of the
# scorer) fails with "cuda:0 and cpu". The inputs follow the model instead.
# Run on 1 GPU: python inputs_sent_to_the_gpu_for_a_handed_model.before.py
# devfix-flags: --select DF304 --unsafe-fixes
# devfix-expect: DF304
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class Ranker(nn.Module):
    def __init__(self, vocab: int = 30, dims: int = 8) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dims)
        self.score = nn.Linear(dims, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.score(self.embed(ids)).squeeze(-1)


def rank(model, batches):
    model.eval()
    ranked = []
    with torch.no_grad():
        for ids in batches:
            ids = ids.cuda(non_blocking=True)
            ranked.append(model(ids).argsort(descending=True).tolist())
    return ranked


def check_on_cpu() -> None:
    torch.manual_seed(0)
    model = Ranker()
    batches = [torch.randint(0, 30, (4, 6)) for _ in range(3)]
    print("ranked", rank(model, batches))


if __name__ == "__main__":
    check_on_cpu()
