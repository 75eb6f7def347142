# Inference with a model spread by `device_map="auto"` (the virtual GPUs report 80 KiB each, so
# the tiny Llama spreads over both): the prompt goes to the device of the input embedding,
# accelerate's hooks carry the activations from GPU to GPU, and nothing here trains or runs as
# several processes. A naive tool would drop the device map or move the model.
# devfix-flags: --unsafe-fixes
# devfix-golden: gpus=2 env="DEVFIX_VGPU_MEMORY=80KiB HF_HUB_OFFLINE=1"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import tiny_checkpoints

checkpoint = tiny_checkpoints.llama()
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, device_map="auto")
model.eval()

prompt = tokenizer(["the cat sat on"], return_tensors="pt", return_token_type_ids=False)
prompt = prompt.to(model.get_input_embeddings().weight.device)
with torch.no_grad():
    out = model.generate(**prompt, max_new_tokens=4, do_sample=False, pad_token_id=0)
print(tokenizer.batch_decode(out))
print(sorted({str(p.device) for p in model.parameters()}))
