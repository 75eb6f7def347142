# A LoRA fine-tune of a Llama spread over two GPUs by its device map, under a classification head
# put on the last shard (cuda:1). accelerate's hooks hand the backbone's hidden states back on
# the device of its inputs (cuda:0), the head's input is moved to the head, and its logits come
# out on cuda:1, while the labels came with the batch to cuda:0: "Expected all tensors to be on
# the same device, but got target is on cuda:0, different from other tensors on cuda:1". The fix
# moves the labels to the logits' device, as Hugging Face's own heads do. The real transformers, accelerate and
# peft; a tiny Llama built by tiny_checkpoints.py next to this file.
# Run on 2 GPUs: python lora_head_on_the_last_shard.before.py
# devfix-flags: --select DF106
# devfix-expect: DF106
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="HF_HUB_OFFLINE=1"
import torch
import torch.nn as nn
from peft import LoraConfig, get_peft_model
from transformers import AutoModel, AutoTokenizer

import tiny_checkpoints


class LoraClassifier(nn.Module):
    def __init__(self, backbone, num_labels, head_device):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.config.hidden_size, num_labels).to(head_device)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, input_ids, attention_mask, labels=None):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self.head(hidden[:, -1].to(self.head.weight.device))
        loss = None if labels is None else self.loss_fn(logits, labels.to(logits.device))
        return loss, logits


checkpoint = tiny_checkpoints.llama()
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
two_gpus = torch.cuda.device_count() > 1
two_shards = {"embed_tokens": 0, "layers.0": 0, "layers.1": 1, "norm": 1, "rotary_emb": 1}
backbone = AutoModel.from_pretrained(
    checkpoint, dtype=torch.float32, device_map=two_shards if two_gpus else None
)
backbone = get_peft_model(backbone, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
last_shard = backbone.base_model.model.norm.weight.device
model = LoraClassifier(backbone, num_labels=2, head_device=last_shard)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)

texts = ["the cat sat on the mat", "a dog ran far", "the dog sat", "a cat ran on a mat"]
labels = torch.tensor([0, 1, 1, 0])
first = next(backbone.parameters()).device
for step in range(2):
    batch = tokenizer(texts, padding=True, return_tensors="pt", return_token_type_ids=False)
    loss, logits = model(**batch.to(first), labels=labels.to(first))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, loss.item(), logits.device)
