# Seed 000: fine-tuning Llama 3.1 with `Trainer` under `torchrun --nproc_per_node=4`, the model
# loaded with `device_map="cuda:0"`. Every process puts its copy on GPU 0; Trainer does not move
# a device-mapped model but moves rank 1's batches to cuda:1 (shared/design/fix-semantics.md B.6).
# `transformers` here is the tiny stand-in next to this file (same call shapes), placing as the
# releases the seed ran did; accelerate 1.x moves such a model to the rank's GPU instead, and the
# real form of this script is golden/hugging_face/seed000_llama_trainer_torchrun.
# Run on 2 GPUs: LOCAL_RANK=1 python seed000_llama_device_map_cuda0.before.py
# devfix-flags: --select DF305
# devfix-expect: DF305
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import torch
from transformers import LlamaForCausalLM, Trainer, TrainingArguments

model = LlamaForCausalLM.from_pretrained(
    "meta-llama/Llama-3.1-8B",
    device_map="cuda:0"  # 这会和多GPU训练冲突
)

train_dataset = [
    {"input_ids": torch.randint(0, 32, (6,)), "labels": torch.randint(0, 32, (6,))}
    for _ in range(4)
]
training_args = TrainingArguments(output_dir="./results", per_device_train_batch_size=2)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
print(trainer.train())
