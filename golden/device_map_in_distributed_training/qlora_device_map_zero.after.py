# A QLoRA-style script loads the 4-bit model with `device_map={"": 0}` and trains with Trainer
# under torchrun: rank 1's model sits on GPU 0. A quantized model must be placed at load time,
# so the fix is `device_map={"": <LOCAL_RANK>}` (shared/design/fix-semantics.md B.6 point 2).
# Run on 2 GPUs: LOCAL_RANK=1 python qlora_device_map_zero.before.py
# devfix-flags: --select DF305
# devfix-expect: DF305
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
# devfix-example: examples/device_map_in_distributed_training.py is this case
import os

import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer, TrainingArguments

bnb_config = BitsAndBytesConfig(load_in_4bit=True)
model = AutoModelForCausalLM.from_pretrained(
    "org/base-7b",
    quantization_config=bnb_config,
    device_map={"": int(os.environ.get("LOCAL_RANK", "0"))},
)
data = [{"input_ids": torch.randint(0, 32, (4,)), "labels": torch.randint(0, 32, (4,))}]
trainer = Trainer(model=model, args=TrainingArguments(output_dir="qlora"), train_dataset=data)
print(trainer.train())
