"""A tiny stand-in for the parts of Hugging Face `transformers` these golden scripts use.

The golden scripts import this module (it sits next to them, so it comes before the real
transformers of the test extra) with the real call shapes, on models that need no download:
`AutoModelForCausalLM.from_pretrained(name, device_map=..., load_in_4bit=...)`,
`TrainingArguments(...)`, `Trainer(model=..., args=..., train_dataset=...).train()`.

The placement rules are the real ones, reduced: a `device_map` places the model when it is
loaded (like accelerate's dispatch) and records `hf_device_map`; `Trainer` moves a model to the
process's device (`LOCAL_RANK` under torchrun) only when no device map placed it, and always
moves each batch there (huggingface/sentence-transformers#3207). The pinned transformers and
accelerate of the test extra move a model whose map has a single entry to the rank's GPU
(golden/_pending/README.md, seed 000).
"""

from __future__ import annotations

import os

import torch
from torch import nn


def _process_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def _placement(device_map: object) -> torch.device:
    """Where a (single-device) map puts the model; "auto" fills the first GPU first."""
    if isinstance(device_map, dict):
        return _placement(device_map.get("", 0))
    if isinstance(device_map, int):
        return torch.device("cuda", device_map) if torch.cuda.is_available() else torch.device("cpu")
    if device_map in ("auto", "balanced", "balanced_low_0", "sequential"):
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    return torch.device(str(device_map))


class _TinyCausalLM(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 16) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.lm_head(self.embed_tokens(input_ids))
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.to(logits.device).flatten())
        return {"loss": loss, "logits": logits}


class AutoModelForCausalLM:
    @classmethod
    def from_pretrained(cls, name: str, device_map: object = None, **kwargs: object) -> nn.Module:
        model = _TinyCausalLM()
        if device_map is not None:
            placed = _placement(device_map)
            model.to(placed)
            model.hf_device_map = {"": placed}  # type: ignore[assignment]
        return model


class LlamaForCausalLM(AutoModelForCausalLM):
    pass


class BitsAndBytesConfig:
    def __init__(self, load_in_4bit: bool = False, load_in_8bit: bool = False) -> None:
        self.load_in_4bit = load_in_4bit
        self.load_in_8bit = load_in_8bit


class TrainingArguments:
    def __init__(self, output_dir: str, per_device_train_batch_size: int = 2,
                 num_train_epochs: int = 1, learning_rate: float = 1e-3, **kwargs: object) -> None:
        self.output_dir = output_dir
        self.per_device_train_batch_size = per_device_train_batch_size
        self.num_train_epochs = num_train_epochs
        self.learning_rate = learning_rate


class Trainer:
    def __init__(self, model: nn.Module, args: TrainingArguments,
                 train_dataset: list[dict[str, torch.Tensor]]) -> None:
        self.model = model
        self.args = args
        self.train_dataset = train_dataset
        self.device = _process_device()
        if not hasattr(model, "hf_device_map"):
            model.to(self.device)

    def train(self) -> float:
        optimizer = torch.optim.SGD(self.model.parameters(), lr=self.args.learning_rate)
        size = self.args.per_device_train_batch_size
        loss = torch.zeros(())
        for _ in range(self.args.num_train_epochs):
            for start in range(0, len(self.train_dataset), size):
                rows = self.train_dataset[start:start + size]
                batch = {k: torch.stack([r[k] for r in rows]).to(self.device) for k in rows[0]}
                loss = self.model(**batch)["loss"]
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return float(loss)
