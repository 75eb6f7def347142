"""DF202 tokenizer-output-not-moved: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF202"


def test_input_ids_attribute_fed_to_generate_gets_the_device_variable() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained("gpt2").to(device)
        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        input_ids = tokenizer(prompt, return_tensors="pt").input_ids  # the prompt
        output = model.generate(input_ids, max_new_tokens=20)
        """,
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained("gpt2").to(device)
        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        input_ids = tokenizer(prompt, return_tensors="pt").to(device).input_ids  # the prompt
        output = model.generate(input_ids, max_new_tokens=20)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_star_star_inputs_and_a_model_loaded_with_a_device_map() -> None:
    assert_fix(
        RULE,
        """
        from transformers import AutoModelForSeq2SeqLM as M

        model = M.from_pretrained("t5-small", device_map="auto")
        batch = tok(
            texts,
            padding=True,
            return_tensors="pt",
        )
        out = model.generate(**batch)
        """,
        """
        from transformers import AutoModelForSeq2SeqLM as M

        model = M.from_pretrained("t5-small", device_map="auto")
        batch = tok(
            texts,
            padding=True,
            return_tensors="pt",
        ).to(model.device)
        out = model.generate(**batch)
        """,
    )


def test_inline_call_and_subscript_through_a_derived_name() -> None:
    assert_fix(
        RULE,
        """
        import torch

        model = Classifier()
        model.cuda()
        logits = model(**tokenizer("a", return_tensors="pt"))
        enc = tokenizer.encode_plus("b", return_tensors="pt")
        ids = enc["input_ids"]
        model(ids)
        """,
        """
        import torch

        model = Classifier()
        model.cuda()
        logits = model(**tokenizer("a", return_tensors="pt").to("cuda"))
        enc = tokenizer.encode_plus("b", return_tensors="pt").to("cuda")
        ids = enc["input_ids"]
        model(ids)
        """,
    )


def test_function_parameter_device_is_used() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def answer(model, question, dev):
            inputs = tokenizer(question, return_tensors="pt")
            return model.generate(**inputs)

        device = "cuda:0"
        net = load().to(device)
        answer(net, "why?", device)
        """,
        """
        import torch

        def answer(model, question, dev):
            inputs = tokenizer(question, return_tensors="pt").to(dev)
            return model.generate(**inputs)

        device = "cuda:0"
        net = load().to(device)
        answer(net, "why?", device)
        """,
    )


def test_noop_when_moved_on_the_way_or_the_model_is_on_the_cpu() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from transformers import AutoModel

        device = "cuda"
        model = AutoModel.from_pretrained("bert").to(device)
        a = tokenizer("x", return_tensors="pt").to(device)
        model(**a)
        b = tokenizer("y", return_tensors="pt")
        b = {k: v.to(device) for k, v in b.items()}
        model(**b)
        c = tokenizer("z", return_tensors="pt")
        model(c["input_ids"].to(device))
        d = tokenizer("w", return_tensors="np")
        model(**d)
        cpu_model = AutoModel.from_pretrained("bert")
        cpu_model(**tokenizer("v", return_tensors="pt"))
        """,
    )


def test_declined_when_the_device_is_not_visible_and_the_model_has_no_device() -> None:
    assert_declined(
        RULE,
        """
        import torch

        def main():
            dev = pick()
            net = Net().to(dev)
            run(net)

        def run(net):
            inputs = tokenizer("q", return_tensors="pt")
            return net(**inputs)
        """,
        reason="not visible in `run`",
    )
