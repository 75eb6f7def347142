# Seed 000 in its real form: fine-tuning Llama with `Trainer` under torchrun, the labels moved to
# `cuda:0` while the dataset is tokenized and the model loaded with `device_map="cuda:0"`. The
# real transformers and accelerate; a tiny Llama built by tiny_checkpoints.py next to this file.
# Rank 1 of `torchrun --nproc_per_node=2` dies in the Trainer's DataLoader, which pins every
# batch: "cannot pin 'torch.cuda.LongTensor' only dense CPU tensors can be pinned". The fix is
# the seed answer's steps 1 and 2: the dataset stays on the CPU (Trainer moves each batch to its
# process's GPU) and the model is loaded without a device map (Trainer puts it on the rank's GPU).
# Run: torchrun --nproc_per_node=2 seed000_llama_trainer_torchrun.before.py
# devfix-flags: --unsafe-fixes
# devfix-expect: DF201 DF305
# devfix-golden: gpus=2 fails-with="cannot pin 'torch.cuda.LongTensor' only dense CPU tensors can be pinned" env="LOCAL_RANK=1 HF_HUB_OFFLINE=1"
import tempfile

from transformers import AutoTokenizer, LlamaForCausalLM, Trainer, TrainingArguments

import tiny_checkpoints

checkpoint = tiny_checkpoints.llama()  # stands in for "meta-llama/Llama-3.1-8B"
tokenizer = AutoTokenizer.from_pretrained(checkpoint)


def preprocess_function(examples):
    inputs = tokenizer(examples["text"], truncation=True, padding="max_length", max_length=8,
                       return_tensors="pt")
    inputs["labels"] = inputs["input_ids"].clone().to('cuda:0')  # 禁止手动指定设备
    return inputs


model = LlamaForCausalLM.from_pretrained(
    checkpoint,
    device_map="cuda:0"  # 这会和多GPU训练冲突
)

texts = ["the cat sat on the mat", "a dog ran far", "the dog sat", "a cat ran on a mat"]
encoded = preprocess_function({"text": texts})
train_dataset = [{key: value[i] for key, value in encoded.items()} for i in range(len(texts))]
training_args = TrainingArguments(
    output_dir=tempfile.mkdtemp(), per_device_train_batch_size=2, max_steps=2,
    save_strategy="no", report_to=[],
)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
print(trainer.train())
