# A scorer builds two of its layers on the GPU in __init__ (`.to("cuda")`, `.cuda()`) and
# leaves its embedding where modules start; exported for CPU serving, the embedding's output
# meets a layer on cuda:0 and fails with "cuda:0 and cpu".
# Run on 1 GPU: python layers_built_on_the_gpu_in_init.before.py
# devfix-flags: --select DF102 --unsafe-fixes
# devfix-expect: DF102
# devfix-golden: gpus=1 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self, vocab: int = 50, dims: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dims)
        self.hidden = nn.Linear(dims, dims)  # built where training ran
        self.score = nn.Sequential(nn.ReLU(), nn.Linear(dims, 1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.score(self.hidden(self.embed(ids))).squeeze(-1)


def serve_on_cpu() -> None:
    scorer = Scorer().eval()
    ids = torch.randint(0, 50, (3, 5))
    with torch.no_grad():
        scores = scorer(ids)
    print("scores", tuple(scores.shape), scores.device)


if __name__ == "__main__":
    serve_on_cpu()
