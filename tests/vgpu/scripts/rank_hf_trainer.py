"""Rank 1 of a 2-process launch (LOCAL_RANK=1, WORLD_SIZE=2) training a tiny Llama with the
real transformers Trainer: accelerate sets up its nccl process group, wraps the model in
DistributedDataParallel on the rank's GPU and gives this rank its shard of the data."""

import tempfile

import hf_tiny
import torch
from torch.nn.parallel import DistributedDataParallel
from transformers import Trainer, TrainingArguments

model = hf_tiny.llama()
args = TrainingArguments(
    output_dir=tempfile.mkdtemp(prefix="trainer-"),
    per_device_train_batch_size=2,
    max_steps=2,
    report_to=[],
    save_strategy="no",
    logging_steps=1,
)
trainer = Trainer(model=model, args=args, train_dataset=hf_tiny.rows())
result = trainer.train()
assert trainer.args.world_size == 2, trainer.args.world_size
assert isinstance(trainer.model_wrapped, DistributedDataParallel), type(trainer.model_wrapped)
assert result.global_step == 2, result
assert torch.isfinite(torch.tensor(result.training_loss)), result
devices = {p.device for p in trainer.model.parameters()}
assert devices == {torch.device("cuda", 1)}, devices
print(
    f"trainer: rank {trainer.args.process_index} of {trainer.args.world_size}, "
    f"{type(trainer.model_wrapped).__name__} on {devices.pop()}, loss {result.training_loss:.4f}"
)
