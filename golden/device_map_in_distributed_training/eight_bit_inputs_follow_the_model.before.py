# Inference with a model loaded in 8 bits: bitsandbytes already put it on the GPU, and such a
# model refuses `.to()` ("`.to` is not supported for `8-bit` bitsandbytes models"), so the fix
# is never to move the model: the prompt goes to `model.device` instead. The prompt stays on the
# CPU here and meets the embedding on cuda:0. `transformers` is the tiny stand-in next to this
# file, whose 8-bit model raises transformers' own error on `.to()` and `.cuda()`.
# Run on a GPU: python eight_bit_inputs_follow_the_model.before.py
# devfix-flags: --unsafe-fixes
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

device = "cuda" if torch.cuda.is_available() else "cpu"
tokenizer = AutoTokenizer.from_pretrained("org/tiny-chat")
model = AutoModelForCausalLM.from_pretrained(
    "org/tiny-chat", quantization_config=BitsAndBytesConfig(load_in_8bit=True)
)
model.eval()

prompt = tokenizer("the cat sat on", return_tensors="pt")
with torch.no_grad():
    out = model.generate(prompt["input_ids"], max_new_tokens=3)
print(out.tolist(), device)
