# Seed 003 (方案三 1, "分词器输出需要手动转移"): the causal LM is moved to `device`, the prompt's
# input_ids come from the tokenizer on the CPU and go straight into generate(). Stand-ins with
# the Hugging Face call shapes (Hugging Face is not installed here): a tokenizer returning a
# BatchEncoding-like object with `.to()` and `.input_ids`, a model with `from_pretrained`.
# Run on a GPU: python seed003_generate_input_ids.before.py
# devfix-flags: --select DF202
# devfix-expect: DF202
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cpu"
import torch
import torch.nn as nn

VOCAB = 40


class BatchEncoding(dict):
    def __getattr__(self, name):
        return self[name]

    def to(self, device):
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def __call__(self, text, return_tensors=None):
        ids = torch.tensor([[ord(c) % VOCAB for c in text]])
        return BatchEncoding(input_ids=ids, attention_mask=torch.ones_like(ids))


class AutoModelForCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.lm_head = nn.Linear(8, VOCAB)

    @classmethod
    def from_pretrained(cls, name):
        torch.manual_seed(0)
        return cls()

    def generate(self, input_ids, max_new_tokens=3):
        for _ in range(max_new_tokens):
            logits = self.lm_head(self.embed(input_ids))[:, -1]
            input_ids = torch.cat([input_ids, logits.argmax(-1, keepdim=True)], dim=1)
        return input_ids


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = AutoModelForCausalLM.from_pretrained("model_name").to(device)
tokenizer = AutoTokenizer.from_pretrained("model_name")
prompt = "device"
input_ids = tokenizer(prompt, return_tensors="pt").to(device).input_ids
print(model.generate(input_ids, max_new_tokens=4).tolist())
