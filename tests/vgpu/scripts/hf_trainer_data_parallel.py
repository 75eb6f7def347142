"""The real transformers Trainer on 2 virtual GPUs, started with plain `python`: it sees
n_gpu == 2 and wraps the model in DataParallel itself; 2 steps, then save_model and a reload
onto cuda:1 (safetensors reads the tensors' storage pointers)."""

import os
import tempfile

import hf_tiny
import torch
from transformers import LlamaForCausalLM, Trainer, TrainingArguments

out = tempfile.mkdtemp(prefix="trainer-")
args = TrainingArguments(
    output_dir=out,
    per_device_train_batch_size=2,
    max_steps=2,
    report_to=[],
    save_strategy="no",
    logging_steps=1,
)
trainer = Trainer(model=hf_tiny.llama(), args=args, train_dataset=hf_tiny.rows())
result = trainer.train()
assert args.n_gpu == 2, args.n_gpu
assert type(trainer.model_wrapped).__name__ == "DataParallel", type(trainer.model_wrapped)
assert torch.isfinite(torch.tensor(result.training_loss)), result
assert result.global_step == 2, result
assert next(trainer.model.parameters()).device == torch.device("cuda", 0)
trainer.save_model(out)
assert "model.safetensors" in os.listdir(out), os.listdir(out)
reloaded = LlamaForCausalLM.from_pretrained(out, device_map={"": 1})
assert reloaded.device == torch.device("cuda", 1), reloaded.device
for (name, a), b in zip(trainer.model.state_dict().items(), reloaded.state_dict().values()):
    assert torch.equal(a.cpu(), b.cpu()), name
print(
    f"trainer: DataParallel over {args.n_gpu} GPUs, loss {result.training_loss:.4f}, reloaded on {reloaded.device}"
)
