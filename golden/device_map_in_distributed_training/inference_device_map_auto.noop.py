# Inference only: `device_map="auto"` is what Big Model Inference is for; no Trainer, DDP,
# torchrun or accelerate (shared/design/fix-semantics.md B.6). Nothing to change.
# devfix-flags: --select DF305
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("org/tiny-chat", device_map="auto")
first = next(model.parameters()).device
input_ids = torch.tensor([[1, 2, 3]]).to(first)
with torch.no_grad():
    logits = model(input_ids, labels=input_ids)["logits"]
print(logits.argmax(-1).tolist())
