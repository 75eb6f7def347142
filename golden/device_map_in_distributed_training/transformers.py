"""A tiny stand-in for the parts of Hugging Face `transformers` these golden scripts use.

The golden scripts import this module (it sits next to them, so it comes before the real
transformers of the test extra) with the real call shapes, on models that need no download:
`AutoModelForCausalLM.from_pretrained(name, device_map=..., load_in_4bit=...)`,
`TrainingArguments(...)`, `Trainer(model=..., args=..., train_dataset=...).train()`.

The placement rules are the real ones, reduced: a `device_map` places the model when it is
loaded (like accelerate's dispatch) and records `hf_device_map`; `Trainer` moves a model to the
process's device (`LOCAL_RANK` under torchrun) only when no device map placed it, and always
moves each batch there (huggingface/sentence-transformers#3207). The pinned transformers and
accelerate of the test extra move a model whose map has a single entry to the rank's GPU (the
real form is golden/hugging_face/seed000_llama_trainer_torchrun). A model loaded in 8 bits is
placed on the current GPU when no map is given (as bitsandbytes does) and refuses `.to()` and
`.cuda()` with transformers' own error; `AutoTokenizer` encodes characters.
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


_EIGHT_BIT_MOVE = (
    "`.to` is not supported for `8-bit` bitsandbytes models. Please use the model as it is, since "
    "the model has already been set to the correct devices and casted to the correct `dtype`."
)


class _EightBitCausalLM(_TinyCausalLM):
    is_loaded_in_8bit = True

    def to(self, *args: object, **kwargs: object) -> nn.Module:  # type: ignore[override]
        raise ValueError(_EIGHT_BIT_MOVE)

    def cuda(self, *args: object, **kwargs: object) -> nn.Module:  # type: ignore[override]
        raise ValueError(_EIGHT_BIT_MOVE.replace("`.to`", "`.cuda`"))

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int = 1) -> torch.Tensor:
        for _ in range(max_new_tokens):
            logits = self.lm_head(self.embed_tokens(input_ids))
            input_ids = torch.cat([input_ids, logits[:, -1:].argmax(-1)], dim=1)
        return input_ids


def _eight_bit(kwargs: dict[str, object]) -> bool:
    config = kwargs.get("quantization_config")
    return bool(kwargs.get("load_in_8bit")) or bool(getattr(config, "load_in_8bit", False))


class AutoModelForCausalLM:
    @classmethod
    def from_pretrained(cls, name: str, device_map: object = None, **kwargs: object) -> nn.Module:
        if _eight_bit(kwargs):
            eight_bit = _EightBitCausalLM()
            # bitsandbytes puts the weights on the current GPU when no map places them
            placed = _placement(0 if device_map is None else device_map)
            nn.Module.to(eight_bit, placed)
            eight_bit.hf_device_map = {"": placed}  # type: ignore[assignment]
            return eight_bit
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


class _Encoding(dict):  # type: ignore[type-arg]
    def to(self, device: object) -> _Encoding:
        return _Encoding({key: value.to(device) for key, value in self.items()})


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, name: str) -> AutoTokenizer:
        return cls()

    def __call__(self, text: str, return_tensors: str | None = None) -> _Encoding:
        return _Encoding(input_ids=torch.tensor([[ord(c) % 32 for c in text]]))
