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


def test_a_wrapper_class_given_an_annotated_hugging_face_model_moves_to_its_device() -> None:
    # A library class receives the model from its user: the user picks the device, and the
    # model carries it as `.device`. Both `generate` on the encode call and `forward` on a name
    # bound to it need the move.
    assert_fix(
        RULE,
        """
        from transformers import PreTrainedModel, PreTrainedTokenizer


        class Completer:
            def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizer):
                self.model = model
                self.tokenizer = tokenizer

            def complete(self, text: str) -> str:
                out = self.model.generate(self.tokenizer.encode(text, return_tensors="pt"))
                return self.tokenizer.decode(out[0])

            def next_logits(self, text: str):
                ids = self.tokenizer.encode(text, return_tensors="pt")
                return self.model.forward(ids).logits[0, -1]
        """,
        """
        from transformers import PreTrainedModel, PreTrainedTokenizer


        class Completer:
            def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizer):
                self.model = model
                self.tokenizer = tokenizer

            def complete(self, text: str) -> str:
                out = self.model.generate(self.tokenizer.encode(text, return_tensors="pt").to(self.model.device))
                return self.tokenizer.decode(out[0])

            def next_logits(self, text: str):
                ids = self.tokenizer.encode(text, return_tensors="pt").to(self.model.device)
                return self.model.forward(ids).logits[0, -1]
        """,
    )


def test_noop_when_the_model_parameter_is_unannotated_or_filled_in_the_file() -> None:
    # Unannotated: nothing says the object has a `.device`. Filled by a call in this file with a
    # model left on the CPU: the file's own configuration is single-device CPU.
    assert_noop(
        RULE,
        """
        from transformers import AutoModelForCausalLM, PreTrainedModel


        class Scorer:
            def __init__(self, model):
                self.model = model

            def score(self, text):
                return self.model(tok.encode(text, return_tensors="pt"))


        def score(model: PreTrainedModel, text):
            return model(tok.encode(text, return_tensors="pt"))


        score(AutoModelForCausalLM.from_pretrained("gpt2"), "hi")
        """,
    )


def test_encoded_ids_wrapped_in_a_tensor_constructor_reach_an_adapter_model() -> None:
    # `encode` returns a Python list; `torch.LongTensor([ids])` makes a CPU tensor. The PEFT
    # adapter sits on the base model loaded over the GPUs, so it has that model's `.device`.
    assert_fix(
        RULE,
        """
        import torch
        from peft import PeftModel
        from transformers import AutoModel, AutoTokenizer

        base = AutoModel.from_pretrained(path, device_map="auto", load_in_8bit=True)
        model = PeftModel.from_pretrained(base, "./lora")
        tok = AutoTokenizer.from_pretrained(path)
        for prompt in prompts:
            token_ids = tok.encode(prompt)
            input_ids = torch.LongTensor([token_ids])
            print(tok.decode(model.generate(input_ids=input_ids, max_length=64)[0]))
        """,
        """
        import torch
        from peft import PeftModel
        from transformers import AutoModel, AutoTokenizer

        base = AutoModel.from_pretrained(path, device_map="auto", load_in_8bit=True)
        model = PeftModel.from_pretrained(base, "./lora")
        tok = AutoTokenizer.from_pretrained(path)
        for prompt in prompts:
            token_ids = tok.encode(prompt)
            input_ids = torch.LongTensor([token_ids]).to(model.device)
            print(tok.decode(model.generate(input_ids=input_ids, max_length=64)[0]))
        """,
    )


def test_an_encoding_helper_feeding_a_sampling_function_given_the_moved_model() -> None:
    # tiktoken-style `encode` in a helper that returns a batch of one; a sampling loop of the
    # file calls the model it is given. Before the move the same call is correct.
    assert_fix(
        RULE,
        """
        import tiktoken
        import torch


        def to_ids(text, enc):
            ids = enc.encode(text)
            return torch.tensor(ids).unsqueeze(0)


        def sample(model, idx, steps):
            for _ in range(steps):
                logits = model(idx)[:, -1, :]
                idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
            return idx


        enc = tiktoken.get_encoding("gpt2")
        net = TinyGPT()
        early = sample(net, to_ids("hello", enc), 5)
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net.to(dev)
        train(net)
        late = sample(model=net, idx=to_ids("hello", enc), steps=5)
        """,
        """
        import tiktoken
        import torch


        def to_ids(text, enc):
            ids = enc.encode(text)
            return torch.tensor(ids).unsqueeze(0)


        def sample(model, idx, steps):
            for _ in range(steps):
                logits = model(idx)[:, -1, :]
                idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
            return idx


        enc = tiktoken.get_encoding("gpt2")
        net = TinyGPT()
        early = sample(net, to_ids("hello", enc), 5)
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net.to(dev)
        train(net)
        late = sample(model=net, idx=to_ids("hello", enc).to(dev), steps=5)
        """,
    )


def test_noop_when_a_function_given_the_model_never_calls_it_or_ids_get_a_device() -> None:
    assert_noop(
        RULE,
        """
        import torch


        def report(model, ids):
            print(sum(p.numel() for p in model.parameters()), ids.shape)


        dev = torch.device("cuda")
        net = Net().to(dev)
        report(net, torch.tensor([tok.encode("hi")]))
        out = net(torch.tensor([tok.encode("hi")], device=dev))
        """,
    )


_ENCODER_WRAPPER = """
import os
import torch
from transformers import AutoModel, AutoTokenizer, BertModel, BertTokenizer

KNOWN = {"bert-base-cased": (BertModel, BertTokenizer)}


class SentenceEncoder:
    def __init__(self, name, device=torch.device("cpu")):
        self.device = device
        if name in KNOWN:
            model_class, tokenizer_class = KNOWN[name]
            self.model = model_class.from_pretrained(name)
            self.model.to(self.device)
            self.tokenizer = tokenizer_class.from_pretrained(name)
        elif os.path.isdir(name):
            self.model = AutoModel.from_pretrained(name)
            self.model.eval()
            self.model.to(self.device)
            self.tokenizer = AutoTokenizer.from_pretrained(name)
        else:
            raise ValueError(f"unknown model {name}")

    def embed(self, sentences):
        batch = self.tokenizer(sentences, padding=True, return_tensors="pt")
        return self.model(**batch).last_hidden_state
"""


def test_a_model_built_on_each_branch_then_moved_the_same_way_is_on_that_device() -> None:
    # Every branch that builds the model moves it to `self.device`; the last one raises.
    assert_fix(
        RULE,
        _ENCODER_WRAPPER,
        _ENCODER_WRAPPER.replace(
            'padding=True, return_tensors="pt")',
            'padding=True, return_tensors="pt").to(self.device)',
        ),
    )


def test_a_move_missing_from_one_branch_is_still_conditional() -> None:
    # The first branch leaves its model where it was loaded; the `else` falls through. Not
    # `self.device`, then: the model is a Hugging Face one, whose `.device` follows either path.
    for source in (
        _ENCODER_WRAPPER.replace(
            "            self.model = model_class.from_pretrained(name)\n"
            "            self.model.to(self.device)\n",
            "            self.model = model_class.from_pretrained(name)\n",
        ),
        _ENCODER_WRAPPER.replace(
            '        else:\n            raise ValueError(f"unknown model {name}")\n', ""
        ),
    ):
        assert_fix(
            RULE,
            source,
            source.replace(
                'return_tensors="pt")\n', 'return_tensors="pt").to(self.model.device)\n'
            ),
        )


def test_an_encoding_whose_lengths_are_packed_is_not_moved_whole() -> None:
    assert_declined(
        "DF202",
        """
import torch
from torch.nn.utils.rnn import pack_padded_sequence
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
encoder = AutoModel.from_pretrained("bert-base-uncased").to("cuda")

def embed(texts):
    enc = tokenizer(texts, return_tensors="pt", padding=True, return_length=True)
    hidden = encoder(input_ids=enc["input_ids"]).last_hidden_state
    return pack_padded_sequence(hidden, enc["length"], batch_first=True, enforce_sorted=False)
""",
        reason="stays on the CPU (it feeds `pack_padded_sequence`'s `lengths`",
    )


def test_a_tokenizer_of_the_file_that_returns_a_plain_dict_gets_each_value_moved() -> None:
    # A dict has no `.to()`: appending it would raise AttributeError.
    assert_fix(
        "DF202",
        """
        import torch
        from transformers import AutoModel

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModel.from_pretrained("tiny").to(device)

        class ByteTokenizer:
            def __call__(self, text, return_tensors=None):
                ids = list(text.encode())
                return dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)))

        tokenize = ByteTokenizer()
        batch = tokenize("héllo", return_tensors="pt")
        hidden = model(**batch)
        """,
        """
        import torch
        from transformers import AutoModel

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModel.from_pretrained("tiny").to(device)

        class ByteTokenizer:
            def __call__(self, text, return_tensors=None):
                ids = list(text.encode())
                return dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)))

        tokenize = ByteTokenizer()
        batch = {key: value.to(device) for key, value in tokenize("héllo", return_tensors="pt").items()}
        hidden = model(**batch)
        """,
    )


def test_an_own_tokenizer_that_hands_on_a_library_output_keeps_the_batch_move() -> None:
    assert_fix(
        "DF202",
        """
        import torch
        from transformers import AutoModel, AutoTokenizer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModel.from_pretrained("tiny").to(device)
        hf = AutoTokenizer.from_pretrained("tiny")

        def with_prefix(text, return_tensors=None):
            return hf("query: " + text, return_tensors=return_tensors)

        a = with_prefix("x", return_tensors="pt")
        first = model(**a)
        """,
        """
        import torch
        from transformers import AutoModel, AutoTokenizer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModel.from_pretrained("tiny").to(device)
        hf = AutoTokenizer.from_pretrained("tiny")

        def with_prefix(text, return_tensors=None):
            return hf("query: " + text, return_tensors=return_tensors)

        a = with_prefix("x", return_tensors="pt").to(device)
        first = model(**a)
        """,
    )


def test_an_own_tokenizer_whose_result_is_unknown_is_declined() -> None:
    assert_declined(
        "DF202",
        """
        import torch
        from transformers import AutoModel

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = AutoModel.from_pretrained("tiny").to(device)

        def from_cache(text, return_tensors=None):
            return CACHE[text]

        b = from_cache("x", return_tensors="pt")
        second = model(**b)
        """,
        reason="`from_cache` is this file's own code and what it returns",
    )


def test_a_model_a_trainer_was_built_with_carries_the_trainer_s_device() -> None:
    # `Trainer(model=...)` moves the model onto its device as it is built; a prompt encoded
    # after training goes to `model.device`. Before the Trainer exists the model is on the CPU.
    assert_fix(
        "DF202",
        """
        from trl import SFTTrainer
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("tiny")
        lm = AutoModelForCausalLM.from_pretrained("tiny")
        warmup = lm.generate(**tok("before", return_tensors="pt"))
        sft = SFTTrainer(lm, train_dataset=data)
        sft.train()
        prompt = tok("after", return_tensors="pt")
        reply = lm.generate(**prompt, max_new_tokens=8)
        """,
        """
        from trl import SFTTrainer
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("tiny")
        lm = AutoModelForCausalLM.from_pretrained("tiny")
        warmup = lm.generate(**tok("before", return_tensors="pt"))
        sft = SFTTrainer(lm, train_dataset=data)
        sft.train()
        prompt = tok("after", return_tensors="pt").to(lm.device)
        reply = lm.generate(**prompt, max_new_tokens=8)
        """,
    )


def test_a_model_loaded_in_4_bits_is_on_the_gpu_bitsandbytes_chose() -> None:
    # Without a device map, bitsandbytes places the model on the current GPU; only
    # `model.device` says where, and the model itself must not be moved.
    assert_fix(
        RULE,
        """
        from transformers import AutoModelForCausalLM as LM, BitsAndBytesConfig

        class Chat:
            def __init__(self, path, tokenizer):
                self.tokenizer = tokenizer
                self.model = LM.from_pretrained(
                    path, quantization_config=BitsAndBytesConfig(load_in_4bit=True)
                )

            def reply(self, text):
                ids = self.tokenizer(text, return_tensors="pt").input_ids  # prompt
                return self.model.generate(ids, max_length=64)
        """,
        """
        from transformers import AutoModelForCausalLM as LM, BitsAndBytesConfig

        class Chat:
            def __init__(self, path, tokenizer):
                self.tokenizer = tokenizer
                self.model = LM.from_pretrained(
                    path, quantization_config=BitsAndBytesConfig(load_in_4bit=True)
                )

            def reply(self, text):
                ids = self.tokenizer(text, return_tensors="pt").to(self.model.device).input_ids  # prompt
                return self.model.generate(ids, max_length=64)
        """,
    )


def test_a_model_loaded_with_quantization_config_none_stays_on_the_cpu() -> None:
    assert_noop(
        RULE,
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("m")
        model = AutoModelForCausalLM.from_pretrained("m", quantization_config=None, load_in_8bit=False)
        out = model.generate(**tok("hi", return_tensors="pt"))
        """,
    )


def test_a_model_prepared_by_accelerate_is_on_the_accelerators_device() -> None:
    assert_fix(
        RULE,
        """
        import accelerate
        from transformers import AutoModelForCausalLM, AutoTokenizer

        acc = accelerate.Accelerator(mixed_precision="bf16")
        tok = AutoTokenizer.from_pretrained("gpt2")
        lm, optim = acc.prepare(AutoModelForCausalLM.from_pretrained("gpt2"), optim)

        def perplexity(text):
            enc = tok(text, return_tensors="pt")
            return lm(**enc, labels=enc["input_ids"]).loss.exp()
        """,
        """
        import accelerate
        from transformers import AutoModelForCausalLM, AutoTokenizer

        acc = accelerate.Accelerator(mixed_precision="bf16")
        tok = AutoTokenizer.from_pretrained("gpt2")
        lm, optim = acc.prepare(AutoModelForCausalLM.from_pretrained("gpt2"), optim)

        def perplexity(text):
            enc = tok(text, return_tensors="pt").to(acc.device)
            return lm(**enc, labels=enc["input_ids"]).loss.exp()
        """,
    )


def test_prepare_of_an_object_that_is_not_an_accelerator_says_nothing() -> None:
    assert_noop(
        RULE,
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("gpt2")
        lm = pipeline_helper.prepare(AutoModelForCausalLM.from_pretrained("gpt2"))
        out = lm(**tok("hi", return_tensors="pt"))
        """,
    )


def test_inputs_of_a_model_whose_device_map_offloads_layers_stay_on_the_cpu() -> None:
    # accelerate's hook on the whole model moves the inputs to the execution device; the first
    # parameter of a model whose first entry is offloaded is on `meta`, and so is `model.device`.
    assert_fix(
        "DF202",
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        placement = {"shared": "cpu", "encoder": 0, "decoder": 1, "lm_head": 1}
        tok = AutoTokenizer.from_pretrained("org/t5")
        net = AutoModelForSeq2SeqLM.from_pretrained("org/t5", device_map=placement)
        batch = tok(["translate: hi"], return_tensors="pt").to(net.device)
        print(net.generate(**batch))
        """,
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        placement = {"shared": "cpu", "encoder": 0, "decoder": 1, "lm_head": 1}
        tok = AutoTokenizer.from_pretrained("org/t5")
        net = AutoModelForSeq2SeqLM.from_pretrained("org/t5", device_map=placement)
        batch = tok(["translate: hi"], return_tensors="pt")
        print(net.generate(**batch))
        """,
    )
    # Offloading at the tail only, or possibly (`offload_folder=`): `model.device` is a GPU, and
    # unmoved inputs are moved by the hook.
    assert_noop(
        "DF202",
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("org/lm")
        lm = AutoModelForCausalLM.from_pretrained("org/lm", device_map={"model": 0, "lm_head": "cpu"})
        print(lm.generate(**tok("hi", return_tensors="pt")))
        big = AutoModelForCausalLM.from_pretrained("org/big", device_map="auto", offload_folder="o")
        print(big.generate(**tok("hi", return_tensors="pt").to(big.device)))
        """,
    )


def test_tokenizer_output_sent_to_a_literal_gpu_follows_a_model_its_loading_placed() -> None:
    findings = assert_fix(
        RULE,
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        class Summarizer:
            def __init__(self, name, placement="auto"):
                self.tok = AutoTokenizer.from_pretrained(name)
                self.lm = AutoModelForSeq2SeqLM.from_pretrained(name, device_map=placement)

            def __call__(self, text):
                text = self.tok(text, return_tensors="pt")
                first = self.lm.generate(text.input_ids.cuda(), max_new_tokens=20)
                batch = self.tok([text], return_tensors="pt").to("cuda:1")
                return first, self.lm.generate(**batch)
        """,
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        class Summarizer:
            def __init__(self, name, placement="auto"):
                self.tok = AutoTokenizer.from_pretrained(name)
                self.lm = AutoModelForSeq2SeqLM.from_pretrained(name, device_map=placement)

            def __call__(self, text):
                text = self.tok(text, return_tensors="pt")
                first = self.lm.generate(text.input_ids.to(self.lm.device), max_new_tokens=20)
                batch = self.tok([text], return_tensors="pt").to(self.lm.device)
                return first, self.lm.generate(**batch)
        """,
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}


def test_a_model_streamed_from_a_thread_is_fed_the_keywords_the_thread_hands_it() -> None:
    # The streaming idiom: `generate` runs in a `Thread` on the keywords it is handed, by name
    # or inline; those keywords are the model's inputs like a direct call's.
    before = """
        import threading
        from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

        class Chat:
            def __init__(self, path, placement):
                self.tok = AutoTokenizer.from_pretrained(path)
                self.lm = AutoModelForCausalLM.from_pretrained(path, device_map=placement)

            def stream(self, prompt):
                ids = self.tok(prompt, return_tensors="pt").input_ids.cuda()
                streamer = TextIteratorStreamer(self.tok)
                job = dict(input_ids=ids, streamer=streamer, max_new_tokens=64)
                threading.Thread(target=self.lm.generate, kwargs=job).start()
                return streamer

            def stream_inline(self, prompt):
                mask = self.tok(prompt, return_tensors="pt").attention_mask.to("cuda")
                streamer = TextIteratorStreamer(self.tok)
                threading.Thread(
                    target=self.lm.generate, kwargs=dict(attention_mask=mask, streamer=streamer)
                ).start()
                return streamer
        """
    assert_fix(
        RULE,
        before,
        before.replace(".input_ids.cuda()", ".input_ids.to(self.lm.device)").replace(
            '.attention_mask.to("cuda")', ".attention_mask.to(self.lm.device)"
        ),
        unsafe=True,
    )


def test_a_model_rebound_from_a_helper_that_merges_it_keeps_the_map_its_loading_chose() -> None:
    # `self.lm` is loaded with the caller's map, then rebound from the class's own merge
    # helper: still placed by that map, so a literal GPU for its inputs follows `self.lm`.
    before = """
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        class Merged:
            def __init__(self, path, placement):
                self.placement = placement
                self.lm, self.tok = self._merged(path)

            def _merged(self, path):
                self.lm = AutoPeftModelForCausalLM.from_pretrained(path, device_map=self.placement)
                return self.lm.merge_and_unload(), AutoTokenizer.from_pretrained(path)

            def answer(self, prompt):
                ids = self.tok(prompt, return_tensors="pt").input_ids.to("cuda:0")
                return self.tok.decode(self.lm.generate(ids)[0])
        """
    assert_fix(RULE, before, before.replace('.to("cuda:0")', ".to(self.lm.device)"), unsafe=True)


def test_a_literal_gpu_for_a_model_the_code_moved_itself_is_not_this_rule() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from transformers import AutoModel, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("bert-base-uncased")
        encoder = AutoModel.from_pretrained("bert-base-uncased").to("cuda")
        batch = tok(["a"], return_tensors="pt").to("cuda")
        hidden = encoder(**batch)
        """,
        unsafe=True,
    )


def test_a_literal_gpu_beside_a_map_the_code_spells_is_reported_and_left() -> None:
    assert_declined(
        RULE,
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained("gpt2")
        lm = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto").eval()
        ids = tok("hello", return_tensors="pt").input_ids.cuda()
        out = lm.generate(ids, max_new_tokens=5)
        """,
        reason="right while the placement the code spells keeps its first layer there",
    )


def test_clip_token_ids_follow_the_device_the_clip_loader_put_the_model_on() -> None:
    # `open_clip.tokenize` makes CPU token ids; `create_model_and_transforms(..., device=...)`
    # put the model on `device`, and `encode_text` runs it.
    assert_fix(
        RULE,
        """
        import open_clip
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model, _, preprocess = open_clip.create_model_and_transforms(
            "ViT-B-32", pretrained="laion2b_s34b_b79k", device=device
        )
        labels = ["a photo of a dog", "a photo of a cat"]
        tokens = open_clip.tokenize(labels)
        with torch.no_grad():
            text_features = model.encode_text(tokens)
        """,
        """
        import open_clip
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model, _, preprocess = open_clip.create_model_and_transforms(
            "ViT-B-32", pretrained="laion2b_s34b_b79k", device=device
        )
        labels = ["a photo of a dog", "a photo of a cat"]
        tokens = open_clip.tokenize(labels).to(device)
        with torch.no_grad():
            text_features = model.encode_text(tokens)
        """,
    )


def test_clip_token_ids_are_left_when_moved_or_when_the_loader_names_no_device() -> None:
    assert_noop(
        RULE,
        """
        import clip
        import torch

        model, preprocess = clip.load("ViT-B/32")
        text = clip.tokenize(["a dog"])
        features = model.encode_text(text)
        gpu_model, _ = clip.load("ViT-B/32", device="cuda")
        moved = clip.tokenize(["a cat"]).to("cuda")
        more = gpu_model.encode_text(moved)
        """,
    )


def test_an_output_the_same_function_moves_elsewhere_for_the_same_model_is_moved() -> None:
    findings = assert_fix(
        RULE,
        """
        def run(encoder, tok, train_texts, val_texts, dev):
            for text in train_texts:
                enc = tok(text, return_tensors="pt").to(dev)
                encoder(**enc).loss.backward()
            for text in val_texts:
                enc = tok(text, return_tensors="pt")
                print(encoder(**enc).loss.item())
        """,
        """
        def run(encoder, tok, train_texts, val_texts, dev):
            for text in train_texts:
                enc = tok(text, return_tensors="pt").to(dev)
                encoder(**enc).loss.backward()
            for text in val_texts:
                enc = tok(text, return_tensors="pt").to(dev)
                print(encoder(**enc).loss.item())
        """,
        unsafe=True,
    )
    assert "moved to `dev` elsewhere in this function" in findings[0].message


def test_a_model_a_helper_of_the_file_loads_moves_and_returns_is_followed() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def build(checkpoint):
            tokenizer = AutoTokenizer.from_pretrained(checkpoint)
            net = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
            net = net.to(DEVICE).eval()
            return tokenizer, net

        def summarize(texts):
            tok, model = build("t5-small")
            batch = tok(texts, return_tensors="pt", padding=True)
            return tok.batch_decode(model.generate(**batch))
        """,
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def build(checkpoint):
            tokenizer = AutoTokenizer.from_pretrained(checkpoint)
            net = AutoModelForSeq2SeqLM.from_pretrained(checkpoint)
            net = net.to(DEVICE).eval()
            return tokenizer, net

        def summarize(texts):
            tok, model = build("t5-small")
            batch = tok(texts, return_tensors="pt", padding=True).to(DEVICE)
            return tok.batch_decode(model.generate(**batch))
        """,
    )


def test_a_field_of_the_encoding_left_beside_one_the_call_moves_is_moved_too() -> None:
    findings = assert_fix(
        RULE,
        """
        def answer(model, enc, device):
            out = model(enc["input_ids"].to(device), token_type_ids=enc["token_type_ids"])
            return out.logits
        """,
        """
        def answer(model, enc, device):
            out = model(enc["input_ids"].to(device), token_type_ids=enc["token_type_ids"].to(device))
            return out.logits
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_field_that_may_be_none_is_moved_only_as_an_unsafe_fix() -> None:
    source = """
    def reply(lm, features, **options):
        ids = features["input_ids"]
        mask = features.get("attention_mask")
        return lm.generate(input_ids=ids.to(lm.device), attention_mask=mask, **options)
    """
    findings = assert_fix(
        RULE,
        source,
        source.replace("attention_mask=mask,", "attention_mask=mask.to(lm.device),"),
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_fields_that_are_no_encoding_fields_are_left_where_they_are() -> None:
    assert_noop(
        RULE,
        """
        def tag(model, batch, device):
            return model(batch["tokens"].to(device), batch["lengths"], batch["chars"])
        """,
    )


def test_a_model_moved_under_the_entry_point_guard_is_moved_whenever_the_script_runs() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from transformers import AutoModel, AutoTokenizer

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def embed(text, tokenizer, model):
            tokens = tokenizer(text, return_tensors="pt")
            return model(**tokens).last_hidden_state.mean(1)

        if __name__ == "__main__":
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            model = AutoModel.from_pretrained("bert-base-uncased")
            model.to(DEVICE)
            print(embed("hello", tokenizer, model))
        """,
        """
        import torch
        from transformers import AutoModel, AutoTokenizer

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def embed(text, tokenizer, model):
            tokens = tokenizer(text, return_tensors="pt").to(DEVICE)
            return model(**tokens).last_hidden_state.mean(1)

        if __name__ == "__main__":
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            model = AutoModel.from_pretrained("bert-base-uncased")
            model.to(DEVICE)
            print(embed("hello", tokenizer, model))
        """,
    )


def test_tokens_for_a_module_a_library_function_is_handed_go_to_its_parameters_device() -> None:
    assert_fix(
        RULE,
        """
import torch


@torch.inference_mode()
def next_token(lm, tokenizer, prompt: str) -> str:
    lm.eval()
    encoded = tokenizer(prompt, return_tensors="pt")
    logits = lm(**encoded).logits
    return tokenizer.decode(logits[0, -1].argmax())
""",
        """
import torch


@torch.inference_mode()
def next_token(lm, tokenizer, prompt: str) -> str:
    lm.eval()
    encoded = tokenizer(prompt, return_tensors="pt").to(next(lm.parameters()).device)
    logits = lm(**encoded).logits
    return tokenizer.decode(logits[0, -1].argmax())
""",
    )


def test_a_device_map_put_in_the_loading_kwargs_places_the_model() -> None:
    # The map reaches `from_pretrained` through `**options`, set only when the caller gave none.
    assert_fix(
        RULE,
        """
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


class Translator:
    def __init__(self):
        self.net = None

    def load(self, name, options):
        options.setdefault("device_map", "auto")
        self.net = AutoModelForSeq2SeqLM.from_pretrained(name, **options)
        self.tok = AutoTokenizer.from_pretrained(name)

    def __call__(self, text):
        batch = self.tok([text], return_tensors="pt", padding=True)
        return self.tok.batch_decode(self.net.generate(**batch), skip_special_tokens=True)
""",
        """
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


class Translator:
    def __init__(self):
        self.net = None

    def load(self, name, options):
        options.setdefault("device_map", "auto")
        self.net = AutoModelForSeq2SeqLM.from_pretrained(name, **options)
        self.tok = AutoTokenizer.from_pretrained(name)

    def __call__(self, text):
        batch = self.tok([text], return_tensors="pt", padding=True).to(self.net.device)
        return self.tok.batch_decode(self.net.generate(**batch), skip_special_tokens=True)
""",
    )


def test_a_cpu_device_map_put_in_the_loading_kwargs_leaves_the_model_on_the_cpu() -> None:
    assert_noop(
        RULE,
        """
from transformers import AutoModelForCausalLM, AutoTokenizer


def answer(name, prompt, **options):
    options["device_map"] = "cpu"
    model = AutoModelForCausalLM.from_pretrained(name, **options)
    tok = AutoTokenizer.from_pretrained(name)
    return tok.decode(model.generate(**tok(prompt, return_tensors="pt"))[0])
""",
    )


def test_one_field_moved_in_place_before_the_whole_encoding_is_splatted_moves_it_whole() -> None:
    assert_fix(
        RULE,
        """
import torch
from transformers import AutoModel, AutoProcessor

device = "cuda" if torch.cuda.is_available() else "cpu"
processor = AutoProcessor.from_pretrained("clip")
model = AutoModel.from_pretrained("clip").to(device)


def similarity(image, captions):
    enc = processor(text=captions, images=image, return_tensors="pt", padding=True)
    enc["pixel_values"] = enc["pixel_values"].to(device)  # the image tower is the slow part
    return model(**enc).logits_per_image.softmax(-1)
""",
        """
import torch
from transformers import AutoModel, AutoProcessor

device = "cuda" if torch.cuda.is_available() else "cpu"
processor = AutoProcessor.from_pretrained("clip")
model = AutoModel.from_pretrained("clip").to(device)


def similarity(image, captions):
    enc = processor(text=captions, images=image, return_tensors="pt", padding=True)
    enc = enc.to(device)  # the image tower is the slow part
    return model(**enc).logits_per_image.softmax(-1)
""",
        unsafe=True,
    )


def test_a_field_moved_in_place_and_passed_by_name_is_left_to_the_sibling_check() -> None:
    # Only `input_ids` reaches the model: nothing else of the encoding is left behind.
    assert_noop(
        RULE,
        """
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda")


def complete(prompt):
    enc = tok(prompt, return_tensors="pt")
    enc["input_ids"] = enc["input_ids"].to("cuda")
    return tok.decode(model.generate(enc["input_ids"])[0])
""",
    )


def test_a_field_cast_to_another_dtype_in_place_is_no_move_of_the_encoding() -> None:
    # `.to(torch.float16)` keeps the device: the encoding still needs its move (and
    # `enc = enc.to(torch.float16)` would cast every floating field and move nothing).
    source = """
import torch
from transformers import AutoModelForVision2Seq, AutoProcessor

processor = AutoProcessor.from_pretrained("vlm")
model = AutoModelForVision2Seq.from_pretrained("vlm", device_map="auto")


def caption(image):
    enc = processor(images=image, text="a photo of", return_tensors="pt")
    enc["pixel_values"] = enc["pixel_values"].to(torch.float16)
    return processor.decode(model.generate(**enc)[0])
"""
    assert_fix(
        RULE,
        source,
        source.replace('return_tensors="pt")', 'return_tensors="pt").to(model.device)'),
        unsafe=True,
    )


_SCORER = """
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def load(name):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForSequenceClassification.from_pretrained(name).to(device).eval()
    return model, AutoTokenizer.from_pretrained(name)


def score(pairs, name):
    model, tokenizer = load(name)
    return [logits_of(model, tokenizer, pair) for pair in pairs]


def logits_of(model, tokenizer, pair):
    enc = tokenizer(*pair, return_tensors="pt", truncation=True)
    with torch.no_grad():
        return model(**enc).logits.softmax(-1).cpu()
"""


def test_a_pretrained_model_moved_where_its_device_cannot_be_written_gives_its_device() -> None:
    # The device is a local of `load`, two calls away; the model is a Hugging Face model
    # (loaded with `from_pretrained`), so `model.device` is where `load` put it.
    assert_fix(
        RULE,
        _SCORER,
        _SCORER.replace("truncation=True)\n", "truncation=True).to(model.device)\n"),
    )


def test_a_plain_module_moved_where_its_device_cannot_be_written_is_declined() -> None:
    source = _SCORER.replace(
        "AutoModelForSequenceClassification.from_pretrained(name)", "CrossEncoder(name)"
    )
    assert_declined(RULE, source, reason="is not visible in `logits_of`")
