"""Tiny checkpoints for the real-library seed scripts next to this file, built on first use in
the run's temporary directory: nothing comes from a hub. Each stands in for the model the
seed names (same classes, configs a few kilobytes in size) and comes with a tokenizer that
`from_pretrained` reads from the same folder."""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    T5Config,
    T5EncoderModel,
)

AMINO_ACIDS = list("ACDEFGHIKLMNPQRSTVWY")
WORDS = "the a cat dog sat on mat ran far".split()


def _publish(building: str, path: str) -> str:
    try:
        os.rename(building, path)  # whole, or not at all: another run may be reading it
    except OSError:  # another run built it first
        shutil.rmtree(building, ignore_errors=True)
    return path


def llama() -> str:
    """A Llama (2 layers, hidden size 32) and a word-level tokenizer of a few English words."""
    path = os.path.join(tempfile.gettempdir(), "devfix-tiny-llama")
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    building = tempfile.mkdtemp(prefix="devfix-tiny-llama-")
    vocab = {word: i for i, word in enumerate(["<pad>", "<unk>", "<s>", "</s>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
        eos_token="</s>",
    ).save_pretrained(building)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
    )
    LlamaForCausalLM(config).save_pretrained(building)
    return _publish(building, path)


def prot_t5() -> str:
    """A ProtT5-style encoder (T5, 2 blocks, d_model 32) and a tokenizer of amino acids
    separated by spaces, as ProtT5 reads sequences."""
    path = os.path.join(tempfile.gettempdir(), "devfix-tiny-prot-t5")
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    building = tempfile.mkdtemp(prefix="devfix-tiny-prot-t5-")
    vocab = {word: i for i, word in enumerate(["<pad>", "</s>", "<unk>", *AMINO_ACIDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(building)
    torch.manual_seed(0)
    config = T5Config(vocab_size=32, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    T5EncoderModel(config).save_pretrained(building)
    return _publish(building, path)
