"""DF106 labels-not-on-logits-device: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF106"


def test_seed002_loss_module_attribute() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch.nn as nn
        from accelerate import dispatch_model

        class ProtT5ForClassification(nn.Module):
            def __init__(self, encoder, hidden):
                super().__init__()
                self.encoder = encoder
                self.classifier = nn.Linear(hidden, 1)
                dispatch_model(self.classifier, device_map={"": "cuda:1"})
                self.loss_fn = nn.BCEWithLogitsLoss()

            def forward(self, input_ids=None, labels=None):
                logits = self.classifier(self.encoder(input_ids)).squeeze(-1)
                loss = None
                if labels is not None:
                    labels = labels.float().view(-1)
                    loss = self.loss_fn(logits, labels)  # BCE
                return loss, logits
        """,
        """
        import torch.nn as nn
        from accelerate import dispatch_model

        class ProtT5ForClassification(nn.Module):
            def __init__(self, encoder, hidden):
                super().__init__()
                self.encoder = encoder
                self.classifier = nn.Linear(hidden, 1)
                dispatch_model(self.classifier, device_map={"": "cuda:1"})
                self.loss_fn = nn.BCEWithLogitsLoss()

            def forward(self, input_ids=None, labels=None):
                logits = self.classifier(self.encoder(input_ids)).squeeze(-1)
                loss = None
                if labels is not None:
                    labels = labels.float().view(-1)
                    loss = self.loss_fn(logits, labels.to(logits.device))  # BCE
                return loss, logits
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_hugging_face_head_with_local_loss_fct() -> None:
    assert_fix(
        RULE,
        """
        from torch.nn import CrossEntropyLoss
        from transformers import PreTrainedModel

        class MyLM(PreTrainedModel):
            _no_split_modules = ["Block"]

            def forward(self, input_ids, labels=None):
                lm_logits = self.lm_head(self.body(input_ids))
                shift_logits = lm_logits[..., :-1, :].contiguous()
                shift_labels = labels[..., 1:].contiguous()
                loss_fct = CrossEntropyLoss()
                return loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        """,
        """
        from torch.nn import CrossEntropyLoss
        from transformers import PreTrainedModel

        class MyLM(PreTrainedModel):
            _no_split_modules = ["Block"]

            def forward(self, input_ids, labels=None):
                lm_logits = self.lm_head(self.body(input_ids))
                shift_logits = lm_logits[..., :-1, :].contiguous()
                shift_labels = labels[..., 1:].contiguous()
                loss_fct = CrossEntropyLoss()
                return loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1).to(shift_logits.device))
        """,
    )


def test_functional_loss_with_weight_and_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.nn import functional as fn

        def compute_loss(outputs, targets):
            logits = outputs.logits
            weights = torch.bincount(targets).float().reciprocal()
            return fn.cross_entropy(input=logits, target=targets, weight=weights)

        model = load(device_map="auto")
        """,
        """
        import torch
        from torch.nn import functional as fn

        def compute_loss(outputs, targets):
            logits = outputs.logits
            weights = torch.bincount(targets).float().reciprocal()
            return fn.cross_entropy(input=logits, target=targets.to(logits.device), weight=weights.to(logits.device))

        model = load(device_map="auto")
        """,
    )


def test_module_level_criterion_in_training_step() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        FIRST, LAST = "cuda:0", "cuda:1"

        def training_step(model, batch):
            out = model(batch["x"])
            return criterion(out, batch["y"])
        """,
        """
        import torch
        import torch.nn as nn

        criterion = nn.CrossEntropyLoss()
        FIRST, LAST = "cuda:0", "cuda:1"

        def training_step(model, batch):
            out = model(batch["x"])
            return criterion(out, batch["y"].to(out.device))
        """,
    )


def test_unnamed_logits_are_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn.functional as F

        n = torch.cuda.device_count()

        def loss(model, x, y):
            return F.cross_entropy(model(x), y)
        """,
        reason="assign them to a variable",
    )


def test_single_device_files_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x, labels):
                logits = self.fc(x)
                return nn.functional.cross_entropy(logits, labels)
        """,
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        DEVICES = ["cuda:0", "cuda:1"]

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.loss_fn = nn.CrossEntropyLoss()
                self.ctc = nn.CTCLoss()

            def forward(self, x, labels, weight=None, lengths=None):
                logits = self.fc(x)
                a = self.loss_fn(logits, labels.to(logits.device))
                b = F.mse_loss(logits, torch.zeros_like(logits))
                y = labels.cuda()
                c = F.cross_entropy(logits, y)
                d = F.cross_entropy(logits.cpu(), labels)
                e = F.mse_loss(logits, logits.detach())
                f = self.ctc(logits, labels, lengths, lengths)
                g = F.cross_entropy(logits, labels.to(logits.device), weight=weight)
                h = F.mse_loss(logits, torch.tensor([1.0, 2.0, 3.0]))
                return a + b + c + d + e + f + g + h

        def main(model, loader):
            for x, y in loader:
                logits = model(x)
                print(F.cross_entropy(logits, y).item())
        """,
    )


def test_a_model_family_that_cannot_take_a_device_map_is_left_alone() -> None:
    # transformers places a model with `device_map="auto"` only when its classes declare
    # `_no_split_modules`; a family without it ("does not support `device_map`") keeps its
    # logits and labels on one device, so its heads are not rewritten.
    family = """
        from torch.nn import CrossEntropyLoss
        from ...modeling_utils import PreTrainedModel

        class SmallPreTrainedModel(PreTrainedModel):
            base_model_prefix = "small"
            supports_gradient_checkpointing = True{declared}

        class SmallForMaskedLM(SmallPreTrainedModel):
            def forward(self, input_ids, labels=None):
                prediction_scores = self.cls(self.small(input_ids))
                loss_fct = CrossEntropyLoss()
                return loss_fct(prediction_scores.view(-1, self.vocab), labels.view(-1))
        """
    assert_noop(RULE, family.format(declared=""))
    assert_noop(RULE, family.format(declared="\n            _no_split_modules = None"))
    declared = family.format(declared='\n            _no_split_modules: list = ["SmallLayer"]')
    assert_fix(
        RULE,
        declared,
        declared.replace("labels.view(-1))", "labels.view(-1).to(prediction_scores.device))"),
    )


def test_head_of_a_model_family_base_in_remote_code() -> None:
    # Remote/vendored modeling code: `XForCausalLM(XPreTrainedModel)`, `XPreTrainedModel` on
    # `transformers.modeling_utils.PreTrainedModel`, the loss on labels sliced and made contiguous.
    before = """
        import torch
        from torch.nn import CrossEntropyLoss
        from transformers.modeling_utils import PreTrainedModel

        class TinyPreTrainedModel(PreTrainedModel):
            base_model_prefix = "transformer"
            _no_split_modules = ["TinyBlock"]

        class TinyForCausalLM(TinyPreTrainedModel):
            def forward(self, input_ids, labels=None):
                lm_logits = self.lm_head(self.transformer(input_ids)).to(torch.float32)
                loss = None
                if labels is not None:
                    shift_logits = lm_logits[..., :-1, :].contiguous()
                    shift_labels = labels[..., 1:].contiguous()
                    loss_fct = CrossEntropyLoss()
                    loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
                return loss, lm_logits
        """
    assert_fix(
        RULE,
        before,
        before.replace("shift_labels.view(-1))", "shift_labels.view(-1).to(shift_logits.device))"),
    )
    # The same file vendored inside a copy of transformers (a relative import).
    vendored = before.replace(
        "from transformers.modeling_utils import PreTrainedModel",
        "from ...modeling_utils import PreTrainedModel",
    )
    assert_fix(
        RULE,
        vendored,
        vendored.replace(
            "shift_labels.view(-1))", "shift_labels.view(-1).to(shift_logits.device))"
        ),
    )
    # A `PreTrainedModel` of the project's own (not Hugging Face's) says nothing.
    assert_noop(
        RULE,
        vendored.replace(
            "from ...modeling_utils import PreTrainedModel", "from .base import PreTrainedModel"
        ),
    )


# -- labels that index the logits (`gather`) in a helper given both ------------------------------

_PREFERENCE_TRAINER = '''
import torch
import torch.nn.functional as F
from transformers import Trainer


class PairwiseTrainer(Trainer):
    @staticmethod
    def sequence_logprobs(logits, labels, pad_id: int = -100):
        """Sum of the log-probabilities of the label tokens."""
        labels = labels[:, 1:].clone()
        logits = logits[:, :-1, :]
        mask = labels != pad_id
        labels[~mask] = 0
        picked = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2))
        return (picked.squeeze(2) * mask).sum(-1)

    def sft_loss(self, logits, labels):
        logits = logits.view(-1, logits.size(-1))
        labels = labels.view(-1).to(logits.device)
        return F.cross_entropy(logits, labels)
'''


def test_gather_helper_moves_its_labels_parameter_first() -> None:
    # The file moves a loss target to its logits' device elsewhere (the SFT term): the model
    # may be split over GPUs, and the helper's index and mask must follow the logits too.
    findings = assert_fix(
        RULE,
        _PREFERENCE_TRAINER,
        _PREFERENCE_TRAINER.replace(
            '''        """Sum of the log-probabilities of the label tokens."""
''',
            '''        """Sum of the log-probabilities of the label tokens."""
        labels = labels.to(logits.device)
''',
        ),
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "masks built from it" in findings[0].message


def test_gather_as_a_method_under_a_device_map_and_an_alias() -> None:
    before = """
        import torch as t
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")

        def token_logps(logits: t.Tensor, labels: t.Tensor) -> t.Tensor:
            # one log-probability per label token
            return logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)

        def gathered(logits, labels):
            return t.gather(logits, 1, labels)
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "            # one log-probability per label token\n",
            "            labels = labels.to(logits.device)\n"
            "            # one log-probability per label token\n",
        ).replace(
            "            return t.gather(logits, 1, labels)",
            "            labels = labels.to(logits.device)\n"
            "            return t.gather(logits, 1, labels)",
        ),
    )


def test_gather_and_a_loss_on_the_same_labels_move_them_once() -> None:
    before = """
        import torch
        import torch.nn.functional as F

        GPUS = torch.cuda.device_count()

        def logps_and_nll(logits, labels):
            picked = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2))
            nll = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
            return picked.squeeze(2).sum(-1), nll
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "            picked = torch.gather",
            "            labels = labels.to(logits.device)\n            picked = torch.gather",
        ),
    )


def test_gather_helpers_left_alone() -> None:
    # No sign of a model split over devices (a weight moved to the logits is not a target).
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn
        from transformers import Trainer

        class WeightedTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False):
                labels = inputs.pop("labels")
                logits = model(**inputs).logits
                loss_fct = nn.CrossEntropyLoss(weight=self.class_weights.to(logits.device))
                return loss_fct(logits, labels)

            @staticmethod
            def logps(logits, labels):
                return torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
        """,
    )
    assert_noop(
        RULE,
        """
        import asyncio
        import torch
        import torch.nn.functional as F

        n = torch.cuda.device_count()

        def moved_already(logits, labels):
            labels = labels.to(logits.device)
            return torch.gather(logits, 2, labels.unsqueeze(2))

        def optional_labels(logits, labels=None):
            if labels is not None:
                return torch.gather(logits, 2, labels.unsqueeze(2))

        def rebuilt(logits, labels):
            labels = torch.where(labels < 0, 0, labels)
            return torch.gather(logits, 2, labels.unsqueeze(2))

        def local_index(logits, k):
            index = torch.topk(logits, k).indices
            return torch.gather(logits, -1, index)

        async def fetch(a, b):
            return await asyncio.gather(a, b)
        """,
    )


def test_a_target_moved_to_its_logits_speaks_for_gather_helpers_only() -> None:
    # In a training loop `y.to(out.device)` may just be the batch sent to the one GPU; the other
    # loss of the file (a batch left on the CPU, if anything) is not a model split over devices.
    assert_noop(
        RULE,
        """
        import torch.nn.functional as F

        def train_step(model, x, y):
            out = model(x)
            return F.cross_entropy(out, y.to(out.device))

        def eval_loss(logits, labels):
            return F.cross_entropy(logits, labels)
        """,
    )


def test_targets_computed_from_the_logits_are_on_their_device_already() -> None:
    assert_noop(
        RULE,
        """
        import torch.nn as nn

        GPUS = ["cuda:0", "cuda:1"]

        class SelfTraining(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.criterion = nn.CrossEntropyLoss()

            def forward(self, x):
                scores = self.fc(x)
                pseudo = scores.detach().argmax(dim=-1)
                return self.criterion(scores, pseudo)
        """,
    )


def test_a_language_model_scored_on_its_own_inputs_moves_the_cut_labels() -> None:
    # A scoring helper in a file that never names a device map: the model it is given may have
    # been loaded with one, and then its logits come out of the last GPU.
    assert_fix(
        "DF106",
        """
        import torch.nn.functional as F

        def sequence_logprob(lm, ids):
            out = lm(input_ids=ids)
            logits = out.logits[:, :-1]
            targets = ids[:, 1:]
            return -F.cross_entropy(logits.transpose(1, 2), targets, reduction="sum")
        """,
        """
        import torch.nn.functional as F

        def sequence_logprob(lm, ids):
            out = lm(input_ids=ids)
            logits = out.logits[:, :-1]
            targets = ids[:, 1:]
            return -F.cross_entropy(logits.transpose(1, 2), targets.to(logits.device), reduction="sum")
        """,
    )


def test_labels_that_are_not_the_model_s_inputs_need_a_placement_in_the_file() -> None:
    assert_noop(
        "DF106",
        """
        import torch.nn.functional as F

        def score(lm, ids, answers):
            logits = lm(input_ids=ids).logits
            first = F.cross_entropy(logits[:, -1], answers)
            moved = ids[:, 1:].to(logits.device)
            return first + F.cross_entropy(logits[:, :-1].transpose(1, 2), moved)
        """,
    )


def test_a_model_the_scoring_function_loads_and_moves_itself_is_on_one_device() -> None:
    assert_noop(
        "DF106",
        """
        import torch
        from transformers import AutoModelForCausalLM

        def perplexity(name, ids, device):
            model = AutoModelForCausalLM.from_pretrained(name).to(device)
            ids = ids.to(device)
            logits = model(ids).logits[:, :-1]
            labels = ids[:, 1:]
            return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels).exp()
        """,
    )


def test_labels_selected_from_the_inputs_of_a_handed_model_move_in_the_loss_call() -> None:
    # A `Trainer` loss callable: the logits come from `outputs["logits"]` (or the first
    # element), the labels from `torch.where` over the input ids, read once: moved in the call.
    # Labels already moved to the logits' device where they are taken are left alone.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class TargetLoss:
            def __init__(self, ignore_index):
                self.ignore_index = ignore_index
                self.loss_fn = nn.CrossEntropyLoss(ignore_index=ignore_index)

            def __call__(self, model, inputs):
                ids = inputs["input_ids"]
                outputs = model(input_ids=ids, attention_mask=inputs["attention_mask"])
                logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
                labels = torch.where(inputs["target_mask"] == 1, ids, self.ignore_index)
                return self.loss_fn(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())

        def nll(model, ids):
            logits = model(ids).logits
            labels = ids.to(logits.device)
            shifted = labels[:, 1:]
            return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), shifted.flatten())
        """,
        """
        import torch
        from torch import nn

        class TargetLoss:
            def __init__(self, ignore_index):
                self.ignore_index = ignore_index
                self.loss_fn = nn.CrossEntropyLoss(ignore_index=ignore_index)

            def __call__(self, model, inputs):
                ids = inputs["input_ids"]
                outputs = model(input_ids=ids, attention_mask=inputs["attention_mask"])
                logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
                labels = torch.where(inputs["target_mask"] == 1, ids, self.ignore_index)
                return self.loss_fn(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten().to(logits.device))

        def nll(model, ids):
            logits = model(ids).logits
            labels = ids.to(logits.device)
            shifted = labels[:, 1:]
            return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), shifted.flatten())
        """,
    )


def test_labels_cut_from_the_encoding_a_moved_model_is_given_a_moved_copy_of() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from transformers import GPT2LMHeadModel, GPT2TokenizerFast

        device = "cuda"
        scorer = GPT2LMHeadModel.from_pretrained("gpt2").to(device)
        tokenizer = GPT2TokenizerFast.from_pretrained("gpt2")
        loss_fct = torch.nn.CrossEntropyLoss()

        def surprisal(sentence):
            batch = tokenizer(sentence, return_tensors="pt")
            input_ids = batch["input_ids"].to(device)
            gold = batch["input_ids"][:, 1:]
            out = scorer(input_ids)
            return loss_fct(out.logits[0, :-1], gold[0])
        """,
        """
        import torch
        from transformers import GPT2LMHeadModel, GPT2TokenizerFast

        device = "cuda"
        scorer = GPT2LMHeadModel.from_pretrained("gpt2").to(device)
        tokenizer = GPT2TokenizerFast.from_pretrained("gpt2")
        loss_fct = torch.nn.CrossEntropyLoss()

        def surprisal(sentence):
            batch = tokenizer(sentence, return_tensors="pt")
            input_ids = batch["input_ids"].to(device)
            gold = batch["input_ids"][:, 1:]
            out = scorer(input_ids)
            return loss_fct(out.logits[0, :-1], gold[0].to(out.logits.device))
        """,
    )
    assert "cut from `batch`, which stays on the CPU" in findings[0].message
    assert findings[0].applicability is Applicability.SAFE


def test_labels_cut_from_the_moved_copy_or_a_moved_encoding_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from transformers import GPT2LMHeadModel, GPT2TokenizerFast

        device = "cuda"
        scorer = GPT2LMHeadModel.from_pretrained("gpt2").to(device)
        tokenizer = GPT2TokenizerFast.from_pretrained("gpt2")
        loss_fct = torch.nn.CrossEntropyLoss()

        def from_the_copy(sentence):
            batch = tokenizer(sentence, return_tensors="pt")
            input_ids = batch["input_ids"].to(device)
            gold = input_ids[:, 1:]
            out = scorer(input_ids)
            return loss_fct(out.logits[0, :-1], gold[0])

        def from_a_moved_encoding(sentence):
            batch = tokenizer(sentence, return_tensors="pt").to(device)
            input_ids = batch["input_ids"].to(device)
            gold = batch["input_ids"][:, 1:]
            out = scorer(input_ids)
            return loss_fct(out.logits[0, :-1], gold[0])
        """,
    )


_PSEUDO_LIKELIHOOD = """
import torch
import torch.nn.functional as F
from transformers import AutoModelForMaskedLM, AutoTokenizer


class Scorer:
    def __init__(self, path):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.lm = AutoModelForMaskedLM.from_pretrained(path).to(self.device)
        self.tok = AutoTokenizer.from_pretrained(path)

    def score(self, text, batches):
        logits = []
        for ids, mask in batches:
            logits.append(self.lm(input_ids=ids, attention_mask=mask).logits)
        logits = torch.cat(logits, dim=0).diagonal(dim1=0, dim2=1).unsqueeze(0)
        labels = self.tok.encode(text, return_tensors="pt")[:, 1:-1]
        return -F.cross_entropy(logits, labels)
"""


def test_labels_a_tokenizer_returns_meet_logits_of_a_placed_model_on_their_device() -> None:
    # One device is enough: the tokenizer's tensors are on the CPU, the logits (gathered
    # from the batches of a model moved to `self.device`) are not.
    findings = assert_fix(
        RULE,
        _PSEUDO_LIKELIHOOD,
        _PSEUDO_LIKELIHOOD.replace(
            "F.cross_entropy(logits, labels)", "F.cross_entropy(logits, labels.to(logits.device))"
        ),
    )
    assert "is a tokenizer's output, which is on the CPU" in findings[0].message


def test_tokenized_labels_of_a_model_left_on_the_cpu_or_already_moved_are_left() -> None:
    assert_noop(RULE, _PSEUDO_LIKELIHOOD.replace(".to(self.device)", ""))
    assert_noop(
        RULE,
        _PSEUDO_LIKELIHOOD.replace(
            'return_tensors="pt")[:, 1:-1]', 'return_tensors="pt")[:, 1:-1].to(self.device)'
        ),
    )
