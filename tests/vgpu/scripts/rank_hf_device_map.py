"""Rank 1 of a 2-process launch, a model loaded with a device_map over both GPUs: accelerate
refuses to train it with its own ValueError, in `Accelerator.prepare` under Trainer and in
`Accelerator.prepare_model` called directly (the script dies of the second)."""

import traceback

import hf_tiny
from accelerate import Accelerator
from transformers import LlamaForCausalLM, Trainer, TrainingArguments

checkpoint = hf_tiny.llama_checkpoint()
device_map = {
    "model.embed_tokens": 0,
    "model.layers.0": 0,
    "model.layers.1": 1,
    "model.norm": 1,
    "model.rotary_emb": 1,
    "lm_head": 1,
}
model = LlamaForCausalLM.from_pretrained(checkpoint, device_map=device_map)
print("loaded over", sorted(set(model.hf_device_map.values())))
args = TrainingArguments(
    output_dir=checkpoint, per_device_train_batch_size=2, max_steps=2, report_to=[],
    save_strategy="no",
)  # fmt: skip
try:
    Trainer(model=model, args=args, train_dataset=hf_tiny.rows()).train()
except ValueError as error:
    where = traceback.extract_tb(error.__traceback__)[-1]
    print(f"Trainer: {where.name} raised: {error}")
Accelerator().prepare_model(model)
