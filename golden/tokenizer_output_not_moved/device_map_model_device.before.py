# Inference with a model loaded with `device_map="auto"`: there is no device variable, so the
# inputs go to `model.device` (the device of the embeddings), as the transformers docs do.
# Run on a GPU: python device_map_model_device.before.py
# devfix-flags: --select DF202
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn

VOCAB = 40


class BatchEncoding(dict):
    def to(self, device):
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


class Tokenizer:
    def __call__(self, text, return_tensors=None):
        return BatchEncoding(input_ids=torch.tensor([[ord(c) % VOCAB for c in text]]))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.lm_head = nn.Linear(8, VOCAB)

    @property
    def device(self):
        return self.embed.weight.device

    @classmethod
    def from_pretrained(cls, name, device_map=None):
        torch.manual_seed(0)
        model = cls()
        if device_map == "auto" and torch.cuda.is_available():
            first_gpu = torch.device(torch.cuda.current_device())
            model.to(first_gpu)
        return model

    def generate(self, input_ids, max_new_tokens=3):
        for _ in range(max_new_tokens):
            next_id = self.lm_head(self.embed(input_ids))[:, -1].argmax(-1, keepdim=True)
            input_ids = torch.cat([input_ids, next_id], dim=1)
        return input_ids


tokenizer = Tokenizer()
model = TinyLM.from_pretrained("tiny-lm", device_map="auto")
encoded = tokenizer("hello", return_tensors="pt")
print(model.generate(encoded["input_ids"]).tolist())
