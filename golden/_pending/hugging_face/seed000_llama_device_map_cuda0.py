# Seed 000 in its real form: fine-tuning Llama with `Trainer`, the model loaded with
# `device_map="cuda:0"`, the dataset tokenized on the CPU; the seed launched it with
# `torchrun --nproc_per_node=4` and got "... found at least two devices, cuda:3 and cuda:0!".
# With transformers 4.57.6 and accelerate 1.15.0 this does not fail (see README.md here):
# with plain `python` on 2 GPUs Trainer trains it with DataParallel, and on a rank other than
# 0 accelerate's `prepare_model` moves a model whose `hf_device_map` has one entry to the
# rank's GPU: `devfix verify --env LOCAL_RANK=1 ...` trains it as rank 1 of 2, wrapped in
# DistributedDataParallel on cuda:1.
import tempfile

from transformers import AutoTokenizer, LlamaForCausalLM, Trainer, TrainingArguments

import tiny_checkpoints

checkpoint = tiny_checkpoints.llama()  # stands in for "meta-llama/Llama-3.1-8B"
tokenizer = AutoTokenizer.from_pretrained(checkpoint)


def preprocess_function(examples):
    inputs = tokenizer(examples["text"], truncation=True, padding="max_length", max_length=8,
                       return_tensors="pt")
    inputs["labels"] = inputs["input_ids"].clone()
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
