# Seed 002: a ProtT5 encoder sharded over two GPUs by `device_map`, wrapped with LoRA, under a
# classification head that `dispatch_model` puts on the last shard (cuda:1), trained with
# `Trainer`: "Expected all tensors to be on the same device, but found at least two devices,
# cuda:0 and cuda:1!". The real transformers, accelerate and peft; a tiny encoder built by
# tiny_checkpoints.py next to this file. Run with plain `python` on 2 GPUs: the wrapper has no
# `hf_device_map`, so Trainer moves the whole model to cuda:0 (the shard on cuda:1 with it) and
# wraps it in DataParallel, while accelerate's hooks still send block 1's activations to cuda:1.
# The fix gives the wrapper the encoder's `hf_device_map`: Trainer then neither moves nor wraps
# it and trains it as model-parallel. The classifier's move in `forward` is reported, not
# rewritten: it brings the classifier to the encoder's output, where Trainer wants the loss.
# devfix-flags: --unsafe-fixes
# devfix-expect: DF305 DF106 DF105
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:0,cuda:1"
import tempfile

import torch
import torch.nn as nn
from accelerate import dispatch_model
from peft import LoraConfig, get_peft_model
from transformers import AutoTokenizer, T5EncoderModel, Trainer, TrainingArguments
from transformers.modeling_outputs import SequenceClassifierOutput

import tiny_checkpoints


class ProtT5ForClassification(nn.Module):
    def __init__(self, encoder, device_map):
        super().__init__()
        self.encoder = encoder  # already sharded
        hidden = self.encoder.config.d_model

        # create classifier but don’t push it to a device yet
        self.classifier = nn.Linear(hidden, 1, bias=True).to(torch.float16)

        # dispatch classifier to follow the encoder device map
        # simplest: put it entirely on the last shard (cuda:1 here)
        dispatch_model(self.classifier, device_map={"" : list(device_map.values())[-1]})

        self.loss_fn = nn.BCEWithLogitsLoss()

    def masked_mean_pool(self, hidden_states, attention_mask):
        mask = attention_mask.unsqueeze(-1).type_as(hidden_states)
        summed = (hidden_states * mask).sum(dim=1)
        denom = mask.sum(dim=1).clamp(min=1e-9)
        return summed / denom

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        # IMPORTANT: do not pass anything other than encoder-expected args to encoder
        enc_out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        last_hidden = enc_out.last_hidden_state
        pooled = self.masked_mean_pool(last_hidden, attention_mask)
        logits = self.classifier.to(pooled.device)(pooled).squeeze(-1)

        loss = None
        if labels is not None:
            labels = labels.float().view(-1)
            loss = self.loss_fn(logits, labels)

        return SequenceClassifierOutput(loss=loss, logits=logits)


checkpoint = tiny_checkpoints.prot_t5()  # stands in for "Rostlab/prot_t5_xl_uniref50"
two_shards = {
    "shared": 0,
    "encoder.embed_tokens": 0,
    "encoder.block.0": 0,
    "encoder.block.1": 1,
    "encoder.final_layer_norm": 1,
    "encoder.dropout": 1,
}
device_map = two_shards if torch.cuda.device_count() > 1 else {"": "cpu"}
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
encoder = T5EncoderModel.from_pretrained(checkpoint, device_map=device_map, dtype=torch.float16)
lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q", "v"], lora_dropout=0.0)
encoder = get_peft_model(encoder, lora)
model = ProtT5ForClassification(encoder, device_map)

sequences = ["M K T A Y I A K", "G A V L I", "M S T N P Q R", "K R H D E E"]
batch = tokenizer(sequences, padding=True, return_tensors="pt")
train_dataset = [
    {"input_ids": batch["input_ids"][i], "attention_mask": batch["attention_mask"][i],
     "labels": torch.tensor(i % 2)}
    for i in range(len(sequences))
]
training_args = TrainingArguments(
    output_dir=tempfile.mkdtemp(), per_device_train_batch_size=2, max_steps=2,
    learning_rate=1e-3, save_strategy="no", report_to=[],
)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
print(trainer.train())
