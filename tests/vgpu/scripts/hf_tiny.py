"""Tiny Hugging Face models and a tokenizer built here, for the scripts that run the real
transformers/accelerate/peft under the virtual GPUs (nothing comes from a hub)."""

from __future__ import annotations

import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

WORDS = [
    "<pad>",
    "<unk>",
    "<s>",
    "</s>",
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "far",
]


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {word: i for i, word in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
    )


def llama_config() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
    )


def llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(llama_config())


def llama_checkpoint() -> str:
    """A saved tiny Llama with its tokenizer, in a folder of this run's temporary directory."""
    path = tempfile.mkdtemp(prefix="tiny-llama-")
    llama().save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


def rows(n: int = 8, length: int = 6) -> list[dict[str, torch.Tensor]]:
    texts = ["the cat sat on the mat", "a dog ran far", "the dog sat", "a cat ran on a mat"]
    enc = tokenizer()(
        [texts[i % len(texts)] for i in range(n)],
        padding="max_length",
        max_length=length,
        truncation=True,
        return_tensors="pt",
    )
    return [
        {
            "input_ids": enc["input_ids"][i],
            "attention_mask": enc["attention_mask"][i],
            "labels": enc["input_ids"][i].clone(),
        }
        for i in range(n)
    ]
