# A supervised fine-tuning script copied from an inference example keeps `device_map="auto"`;
# launched with torchrun, "auto" fills GPU 0 in every process and rank 1's batches meet it there
# (shared/design/fix-semantics.md B.6; huggingface/accelerate#1167). The fix is unsafe: a
# single-process run might have split a model that does not fit on one GPU.
# Run on 2 GPUs: LOCAL_RANK=1 python sft_device_map_auto.before.py
# devfix-flags: --select DF305 --unsafe-fixes
# devfix-expect: DF305
# devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" devices="cuda:1,cuda:0" env="LOCAL_RANK=1"
import torch
import transformers


def main():
    model = transformers.AutoModelForCausalLM.from_pretrained(
        "org/tiny-chat",
        torch_dtype=torch.float32,
    )
    rows = [{"input_ids": torch.arange(i, i + 5) % 32, "labels": torch.arange(i + 1, i + 6) % 32}
            for i in range(6)]
    args = transformers.TrainingArguments(output_dir="out", num_train_epochs=1)
    return transformers.Trainer(model=model, args=args, train_dataset=rows).train()


if __name__ == "__main__":
    print(main())
