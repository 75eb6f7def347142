"""DF305 device-map-in-distributed-training."""

from __future__ import annotations

import textwrap

from devfix.engine import check_source
from devfix.types import Applicability, Options
from tests.helpers import assert_fix, assert_noop

RULE = "DF305"


def test_seed_000_fixed_device_map_with_trainer_is_removed() -> None:
    findings = assert_fix(
        RULE,
        """
        from transformers import LlamaForCausalLM, Trainer
        model = LlamaForCausalLM.from_pretrained(
            "meta-llama/Llama-3.1-8B",
            device_map="cuda:0"  # conflicts with multi-GPU training
        )
        trainer = Trainer(model=model)
        """,
        """
        from transformers import LlamaForCausalLM, Trainer
        model = LlamaForCausalLM.from_pretrained(
            "meta-llama/Llama-3.1-8B",
        )
        trainer = Trainer(model=model)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "Trainer" in findings[0].message


def test_trailing_comma_layout_and_comment_of_previous_argument_kept() -> None:
    assert_fix(
        RULE,
        """
        import transformers
        model = transformers.AutoModelForCausalLM.from_pretrained(
            name,  # hub id
            device_map="auto",
        )
        trainer = transformers.Trainer(model=model)
        """,
        """
        import transformers
        model = transformers.AutoModelForCausalLM.from_pretrained(
            name,  # hub id
        )
        trainer = transformers.Trainer(model=model)
        """,
        unsafe=True,
    )


def test_auto_is_unsafe() -> None:
    findings = assert_fix(
        RULE,
        """
        from transformers import AutoModelForCausalLM as M
        from trl import SFTTrainer
        model = M.from_pretrained(name, device_map="auto", torch_dtype=dtype)
        SFTTrainer(model=model).train()
        """,
        """
        from transformers import AutoModelForCausalLM as M
        from trl import SFTTrainer
        model = M.from_pretrained(name, torch_dtype=dtype)
        SFTTrainer(model=model).train()
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "FSDP" in findings[0].message
    # A Trainer treats a spread model as model-parallel: the message says why it may be meant.
    assert "treats a model spread over several GPUs as model-parallel" in findings[0].message


def test_quantized_gets_local_rank() -> None:
    assert_fix(
        RULE,
        """
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer
        model = AutoModelForCausalLM.from_pretrained(
            name, quantization_config=BitsAndBytesConfig(load_in_4bit=True), device_map={"": 0}
        )
        Trainer(model=model).train()
        """,
        """
        import os

        from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer

        model = AutoModelForCausalLM.from_pretrained(
            name, quantization_config=BitsAndBytesConfig(load_in_4bit=True), device_map={"": int(os.environ.get("LOCAL_RANK", "0"))}
        )
        Trainer(model=model).train()
        """,
    )


def test_manual_ddp_without_move_uses_local_rank_variable() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from transformers import AutoModel
        local_rank = int(os.environ["LOCAL_RANK"])
        model = AutoModel.from_pretrained(name, device_map=0)
        model = DDP(model, device_ids=[local_rank])
        """,
        """
        import os
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from transformers import AutoModel
        local_rank = int(os.environ["LOCAL_RANK"])
        model = AutoModel.from_pretrained(name, device_map={"": local_rank})
        model = DDP(model, device_ids=[local_rank])
        """,
    )


def test_manual_ddp_with_move_removes_map() -> None:
    assert_fix(
        RULE,
        """
        import torch.distributed as dist
        from transformers import AutoModel
        dist.init_process_group("nccl")
        model = AutoModel.from_pretrained(name, device_map="cuda")
        model.to(device)
        """,
        """
        import torch.distributed as dist
        from transformers import AutoModel
        dist.init_process_group("nccl")
        model = AutoModel.from_pretrained(name)
        model.to(device)
        """,
    )


def test_noops() -> None:
    # Inference only.
    assert_noop(
        RULE,
        """
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(name, device_map="auto")
        print(model.generate(**inputs))
        """,
    )
    # Correct maps, unknown maps, other libraries.
    assert_noop(
        RULE,
        """
        import os
        from accelerate import PartialState
        from transformers import AutoModel, Trainer
        from diffusers import UNet2DModel
        a = AutoModel.from_pretrained(name, device_map={"": PartialState().local_process_index})
        b = AutoModel.from_pretrained(name, device_map=get_kbit_device_map())
        c = AutoModel.from_pretrained(name, device_map="cpu")
        d = UNet2DModel.from_pretrained(name, device_map="auto")
        e = AutoModel.from_pretrained(name)
        Trainer(model=a).train()
        """,
    )


def test_cuda_after_set_device_is_the_ranks_gpu() -> None:
    assert_noop(
        RULE,
        """
        import os
        import torch
        from transformers import AutoModel, Trainer
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        model = AutoModel.from_pretrained(name, device_map="cuda")
        Trainer(model=model).train()
        """,
    )


_NOTEBOOK_TRAINING = """\
# ~~devfix-cell~~ 1
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer
# ~~devfix-cell~~ 2
model = AutoModelForCausalLM.from_pretrained(
    name, quantization_config=BitsAndBytesConfig(load_in_8bit=True), device_map="auto"
)
# ~~devfix-cell~~ 3
trainer = Trainer(model=model, args=args, train_dataset=train_ds)
trainer.train()
"""


def test_a_notebook_is_one_process() -> None:
    # A notebook's kernel is one process: the map places its only copy of the model.
    options = Options(select=(RULE,), unsafe_fixes=True)
    for path in ("finetune.ipynb", "<string>"):
        assert check_source(_NOTEBOOK_TRAINING, path, options) == []


def test_a_notebook_that_launches_workers_is_not_one_process() -> None:
    source = _NOTEBOOK_TRAINING.replace(
        "trainer.train()", "from accelerate import notebook_launcher\nnotebook_launcher(run)"
    )
    findings = check_source(source, "finetune.ipynb", Options(select=(RULE,), unsafe_fixes=True))
    assert [f.code for f in findings] == [RULE]


def test_declared_single_process_model_parallelism_is_left_alone() -> None:
    # `model_parallel = True` tells Trainer the model is split over this process's GPUs on purpose
    # (it then neither moves it nor wraps it in DataParallel): the map is the point.
    assert_noop(
        RULE,
        """
        import transformers
        def train():
            model = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="auto")
            model.is_parallelizable = True
            model.model_parallel = True
            trainer = transformers.Trainer(model=model, args=training_args)
            trainer.train()
        """,
    )
    # ... which says nothing about another model of the script.
    findings = check_source(
        textwrap.dedent(
            """
            import transformers
            policy = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="auto")
            reference = transformers.AutoModelForCausalLM.from_pretrained(path, device_map="auto")
            policy.model_parallel = True
            transformers.Trainer(model=policy, ref=reference).train()
            """
        ),
        options=Options(select=(RULE,), unsafe_fixes=True),
    )
    assert [f.line for f in findings] == [4]


def test_a_merge_after_training_keeps_its_device_map() -> None:
    assert_noop(
        RULE,
        """
        import os

        import torch
        from peft import PeftModel, get_peft_model
        from transformers import AutoModelForCausalLM, Trainer

        def train(args):
            rank = int(os.environ.get("LOCAL_RANK", 0))
            model = AutoModelForCausalLM.from_pretrained(args.base, device_map={"": rank})
            Trainer(model=get_peft_model(model, args.lora), args=args.training).train()

        def export(args):
            base = AutoModelForCausalLM.from_pretrained(args.base, device_map="auto")
            PeftModel.from_pretrained(base, args.out).merge_and_unload().save_pretrained(args.dst)

        if __name__ == "__main__":
            train(ARGS)
            if int(os.environ.get("RANK", 0)) == 0:
                export(ARGS)
        """,
    )


def test_a_loader_that_hands_the_model_to_training_is_still_fixed() -> None:
    findings = check_source(
        textwrap.dedent(
            """
            from transformers import AutoModelForCausalLM, Trainer

            def load(path):
                model = AutoModelForCausalLM.from_pretrained(path, device_map="auto")
                return model

            Trainer(model=load("base"), args=ARGS).train()
            """
        ),
        options=Options(select=(RULE,), unsafe_fixes=True),
    )
    assert [f.code for f in findings] == [RULE]


def test_a_trl_value_head_class_chosen_into_a_local_name_is_a_library_model() -> None:
    """TRL's value-head models pass `device_map` on to transformers; `PPOTrainer` runs on
    accelerate, which puts each process's model on its GPU."""
    findings = assert_fix(
        RULE,
        """
        from trl import (
            AutoModelForCausalLMWithValueHead as CausalHead,
            AutoModelForSeq2SeqLMWithValueHead as Seq2SeqHead,
            PPOTrainer,
        )

        head_class = Seq2SeqHead if args.seq2seq else CausalHead
        policy = head_class.from_pretrained(args.model, device_map={"": 0})
        trainer = PPOTrainer(config, policy, None, tokenizer, dataset=dataset)
        for batch in trainer.dataloader:
            trainer.step(batch["query"], batch["response"], batch["reward"])
        """,
        """
        from trl import (
            AutoModelForCausalLMWithValueHead as CausalHead,
            AutoModelForSeq2SeqLMWithValueHead as Seq2SeqHead,
            PPOTrainer,
        )

        head_class = Seq2SeqHead if args.seq2seq else CausalHead
        policy = head_class.from_pretrained(args.model)
        trainer = PPOTrainer(config, policy, None, tokenizer, dataset=dataset)
        for batch in trainer.dataloader:
            trainer.step(batch["query"], batch["response"], batch["reward"])
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_local_class_name_bound_to_something_else_is_not_taken_for_a_library_model() -> None:
    assert_noop(
        RULE,
        """
        from trl import AutoModelForCausalLMWithValueHead, PPOTrainer
        from .models import CustomHead

        head_class = CustomHead if args.custom else AutoModelForCausalLMWithValueHead
        policy = head_class.from_pretrained(args.model, device_map={"": 0})
        trainer = PPOTrainer(config, policy, None, tokenizer, dataset=dataset)
        """,
    )


def test_a_quantized_load_in_an_accelerate_script_gets_the_accelerators_process_index() -> None:
    assert_fix(
        RULE,
        """
        import accelerate
        from transformers import AutoModelForCausalLM

        acc = accelerate.Accelerator()
        model = AutoModelForCausalLM.from_pretrained(path, device_map="auto", load_in_8bit=True)
        model, opt = acc.prepare(model, opt)
        for batch in loader:
            acc.backward(model(**batch).loss)
        """,
        """
        import accelerate
        from transformers import AutoModelForCausalLM

        acc = accelerate.Accelerator()
        model = AutoModelForCausalLM.from_pretrained(path, device_map={"": acc.local_process_index}, load_in_8bit=True)
        model, opt = acc.prepare(model, opt)
        for batch in loader:
            acc.backward(model(**batch).loss)
        """,
        unsafe=True,
    )


def test_a_wrapper_handed_to_trainer_gets_the_map_of_the_spread_model_it_holds() -> None:
    findings = assert_fix(
        "DF305",
        """
        import torch.nn as nn
        from transformers import AutoModel, Trainer

        class Scorer(nn.Module):
            def __init__(self, backbone, width):
                super().__init__()
                self.backbone = backbone
                self.out = nn.Linear(width, 1)

            def forward(self, input_ids, labels=None):
                return self.out(self.backbone(input_ids).last_hidden_state[:, 0])

        body = AutoModel.from_pretrained("org/encoder", device_map="balanced")
        Trainer(model=Scorer(width=64, backbone=body), args=args, train_dataset=rows).train()
        """,
        """
        import torch.nn as nn
        from transformers import AutoModel, Trainer

        class Scorer(nn.Module):
            def __init__(self, backbone, width):
                super().__init__()
                self.backbone = backbone
                self.hf_device_map = backbone.hf_device_map
                self.out = nn.Linear(width, 1)

            def forward(self, input_ids, labels=None):
                return self.out(self.backbone(input_ids).last_hidden_state[:, 0])

        body = AutoModel.from_pretrained("org/encoder", device_map="balanced")
        Trainer(model=Scorer(width=64, backbone=body), args=args, train_dataset=rows).train()
        """,
        unsafe=True,
    )
    assert "takes it for a model on one device" in findings[0].message
    # One device, or a wrapper that already says it is model-parallel: nothing to add.
    assert_noop(
        "DF305",
        """
        import torch.nn as nn
        from transformers import AutoModel, Trainer

        class Scorer(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone
                self.is_parallelizable = True

        class Plain(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone

        spread = AutoModel.from_pretrained("org/encoder", device_map={"embed": 0, "layers": 1})
        whole = AutoModel.from_pretrained("org/encoder")
        Trainer(model=Scorer(spread), args=args).train()
        Trainer(model=Plain(whole), args=args).train()
        """,
    )
