# Generation with a model whose device map keeps the input embedding in CPU memory (offloaded:
# accelerate loads it onto the GPU for each call) and spreads the blocks over two GPUs. The
# prompt is moved to `model.device`, the device of the first parameter, which is `meta` for an
# offloaded layer, and `generate` dies: "Tensor.item() cannot be called on meta tensors". The
# fix leaves the prompt on the CPU: the hook accelerate puts on the whole model moves its inputs
# to the execution device (cuda:0) and its outputs back.
# devfix-flags: --select DF202
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Tensor.item() cannot be called on meta tensors" env="HF_HUB_OFFLINE=1"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import tiny_checkpoints

checkpoint = tiny_checkpoints.llama()
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
embeddings_offloaded = {
    "model.embed_tokens": "cpu",
    "model.layers.0": 0,
    "model.layers.1": 1,
    "model.norm": 1,
    "model.rotary_emb": 1,
    "lm_head": 1,
}
model = AutoModelForCausalLM.from_pretrained(
    checkpoint,
    dtype=torch.float32,
    device_map=embeddings_offloaded if torch.cuda.device_count() > 1 else None,
)
model.eval()

prompt = tokenizer(["the cat sat on"], return_tensors="pt", return_token_type_ids=False)
prompt = prompt.to(model.device)
with torch.no_grad():
    out = model.generate(**prompt, max_new_tokens=4, do_sample=False, pad_token_id=0)
print(tokenizer.batch_decode(out))
