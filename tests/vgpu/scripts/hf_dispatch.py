"""accelerate's big-model placement across virtual GPUs: infer_auto_device_map with
max_memory over cuda:0, cuda:1 and the CPU, dispatch_model's AlignDevicesHooks (CPU offload
of the layers that did not fit), tied weights, cpu_offload, and from_pretrained with a
device map that sends a layer to disk."""

import tempfile

import hf_tiny
import torch
from accelerate import cpu_offload, dispatch_model, infer_auto_device_map
from accelerate.hooks import AlignDevicesHook
from transformers import LlamaForCausalLM

ids = torch.stack([r["input_ids"] for r in hf_tiny.rows(2)])

# 1. A map over both GPUs and the CPU, from max_memory.
config = hf_tiny.llama_config()
config.tie_word_embeddings = True  # tied weights: accelerate keeps them tied by data pointer


def tied_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


model = tied_llama()
reference = model(input_ids=ids, labels=ids).loss
device_map = infer_auto_device_map(
    model,
    max_memory={0: "50KB", 1: "50KB", "cpu": "1GB"},
    no_split_module_classes=["LlamaDecoderLayer"],
)
placed = set(device_map.values())
assert {0, 1} <= placed and "cpu" in placed, device_map
model = dispatch_model(model, device_map=device_map)
assert isinstance(model._hf_hook, AlignDevicesHook) and model._hf_hook.io_same_device
assert (
    model.lm_head.weight is model.model.embed_tokens.weight
    or model.lm_head.weight.device.type == "meta"
)
loss = model(input_ids=ids.to("cuda:0"), labels=ids.to("cuda:0")).loss
assert loss.device == torch.device("cuda", 0), loss.device  # back on the input's device
assert torch.allclose(loss.cpu(), reference, atol=1e-5), (loss, reference)
loss.backward()
on_gpu = [p for p in model.parameters() if p.device.type == "cuda"]
assert on_gpu and all(p.grad is not None and p.grad.device == p.device for p in on_gpu)
print("dispatch:", dict(device_map))

# 2. cpu_offload: weights stay on the CPU, each layer runs on cuda:1.
offloaded = cpu_offload(tied_llama(), execution_device=torch.device("cuda", 1))
out = offloaded(input_ids=ids, labels=ids)
assert torch.allclose(out.loss, reference, atol=1e-5), (out.loss, reference)
print("cpu_offload: loss on", out.loss.device)

# 3. from_pretrained with a layer on disk and the rest over both GPUs.
checkpoint = hf_tiny.llama_checkpoint()
disk_map = {
    "model.embed_tokens": 0,
    "model.rotary_emb": 0,
    "model.layers.0": "disk",
    "model.layers.1": 1,
    "model.norm": 1,
    "lm_head": 1,
}
loaded = LlamaForCausalLM.from_pretrained(
    checkpoint, device_map=disk_map, offload_folder=tempfile.mkdtemp(prefix="offload-")
)
assert loaded.hf_device_map == disk_map, loaded.hf_device_map
out = loaded(input_ids=ids.to(0), labels=ids.to(0))
plain = LlamaForCausalLM.from_pretrained(checkpoint)(input_ids=ids, labels=ids)
assert torch.allclose(out.loss.cpu(), plain.loss, atol=1e-5), (out.loss, plain.loss)
print("disk offload: loss", round(out.loss.item(), 4))

# 4. Inputs on a GPU of the map other than the embedding's: the embedding's hook moves them,
# so `model.device` (the first parameter's) serves as the inputs' device even where the first
# parameter is not the embedding's.
split_map = {
    "model.embed_tokens": 1,
    "model.rotary_emb": 0,
    "model.layers": 0,
    "model.norm": 0,
    "lm_head": 0,
}
split = LlamaForCausalLM.from_pretrained(checkpoint, device_map=split_map)
assert split.get_input_embeddings().weight.device == torch.device("cuda", 1)
out = split(input_ids=ids.to(0), labels=ids.to(0))
assert torch.allclose(out.loss.cpu(), plain.loss, atol=1e-5), (out.loss, plain.loss)
generated = split.generate(input_ids=ids.to(0), max_new_tokens=2, do_sample=False)
print("inputs off the embedding's GPU: loss on", out.loss.device, "generate on", generated.device)
