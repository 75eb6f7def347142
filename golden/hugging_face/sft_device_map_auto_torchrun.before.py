# A supervised fine-tuning script that kept the `device_map="auto"` of the inference example it
# was copied from, launched with torchrun. The model does not fit on one GPU, so "auto" spreads
# it over every GPU in each process, and accelerate refuses to train it on rank 1: "You can't
# train a model that has been loaded with `device_map='auto'` in any distributed mode." (the
# virtual GPUs report 80 KiB each here, so the tiny Llama spreads over both as a large model
# would). The fix (unsafe: a single-process run might have needed the split) loads it whole;
# Trainer then puts each process's copy on its own GPU under DistributedDataParallel.
# Run: torchrun --nproc_per_node=2 sft_device_map_auto_torchrun.before.py
# devfix-flags: --select DF305 --unsafe-fixes
# devfix-expect: DF305
# devfix-golden: gpus=2 fails-with="You can't train a model that has been loaded with `device_map='auto'` in any distributed mode" env="LOCAL_RANK=1 DEVFIX_VGPU_MEMORY=80KiB HF_HUB_OFFLINE=1"
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

import tiny_checkpoints


def main():
    checkpoint = tiny_checkpoints.llama()  # stands in for "meta-llama/Llama-3.1-70B"
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(
        checkpoint,
        dtype=torch.float32,
        device_map="auto",
    )
    texts = ["the cat sat on the mat", "a dog ran far", "the dog sat", "a cat ran on a mat"]
    batch = tokenizer(texts, padding="max_length", max_length=8, return_tensors="pt")
    rows = [
        {"input_ids": ids, "attention_mask": mask, "labels": ids.clone()}
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"])
    ]
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(), per_device_train_batch_size=2, max_steps=2,
        save_strategy="no", report_to=[],
    )
    return Trainer(model=model, args=args, train_dataset=rows).train()


if __name__ == "__main__":
    print(main())
