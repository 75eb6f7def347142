"""peft's get_peft_model on a Llama sharded over both virtual GPUs by from_pretrained's
device_map: each LoRA adapter lands on its layer's GPU, and the Trainer, seeing a model
spread over two devices, trains it as it is (naive model parallelism: no DataParallel)."""

import tempfile

import hf_tiny
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaForCausalLM, Trainer, TrainingArguments

device_map = {
    "model.embed_tokens": 0,
    "model.rotary_emb": 0,
    "model.layers.0": 0,
    "model.layers.1": 1,
    "model.norm": 1,
    "lm_head": 1,
}
base = LlamaForCausalLM.from_pretrained(hf_tiny.llama_checkpoint(), device_map=device_map)
model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
for name, param in model.named_parameters():
    if "lora_" in name:
        layer = 0 if ".layers.0." in name else 1
        assert param.device == torch.device("cuda", layer), (name, param.device)
        assert param.requires_grad, name
args = TrainingArguments(
    output_dir=tempfile.mkdtemp(prefix="peft-"),
    per_device_train_batch_size=2,
    max_steps=2,
    report_to=[],
    save_strategy="no",
    learning_rate=1e-2,
)
before = {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}
trainer = Trainer(model=model, args=args, train_dataset=hf_tiny.rows())
assert trainer.is_model_parallel, (trainer.is_model_parallel, args.n_gpu)
result = trainer.train()
assert type(trainer.model_wrapped).__name__ != "DataParallel", type(trainer.model_wrapped)
moved = [
    n
    for n, p in model.named_parameters()
    if p.requires_grad and not torch.equal(p.detach().cpu(), before[n])
]
assert moved, "the adapters did not train"
frozen = model.base_model.model.model.layers[1].mlp.up_proj.weight
assert frozen.device == torch.device("cuda", 1) and not frozen.requires_grad
print(
    f"peft: {len(moved)} adapter tensors trained over cuda:0 and cuda:1, loss {result.training_loss:.4f}"
)
