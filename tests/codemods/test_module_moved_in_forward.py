"""DF105 module-moved-in-forward: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF105"


def test_seed002_classifier_moved_to_pooled_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self, hidden):
                super().__init__()
                self.classifier = nn.Linear(hidden, 1, bias=True).to(torch.float16)

            def forward(self, pooled):
                logits = self.classifier.to(pooled.device)(pooled).squeeze(-1)  # head
                return logits
        """,
        """
        import torch
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self, hidden):
                super().__init__()
                self.classifier = nn.Linear(hidden, 1, bias=True).to(torch.float16)

            def forward(self, pooled):
                logits = self.classifier(pooled.to(self.classifier.weight.device)).squeeze(-1)  # head
                return logits
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_recurrent_layer_with_cuda_and_two_inputs_under_an_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch.nn as tnn

        class Tagger(tnn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = tnn.GRU(4, 4)

            def forward(self, x, h):
                out, h = self.rnn.cuda()(x * 2, h)
                return out
        """,
        """
        import torch.nn as tnn

        class Tagger(tnn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = tnn.GRU(4, 4)

            def forward(self, x, h):
                out, h = self.rnn((x * 2).to(self.rnn.weight_ih_l0.device), h.to(self.rnn.weight_ih_l0.device))
                return out
        """,
        unsafe=True,
    )


def test_device_keyword_and_literal_arguments() -> None:
    assert_fix(
        RULE,
        """
        from torch.nn import Module, MultiheadAttention

        class Block(Module):
            def __init__(self):
                super().__init__()
                self.attn = MultiheadAttention(8, 2)

            def forward(self, q, device):
                return self.attn.to(device=device)(q, q, q, None, need_weights=False)
        """,
        """
        from torch.nn import Module, MultiheadAttention

        class Block(Module):
            def __init__(self):
                super().__init__()
                self.attn = MultiheadAttention(8, 2)

            def forward(self, q, device):
                return self.attn(q.to(self.attn.out_proj.weight.device), q.to(self.attn.out_proj.weight.device), q.to(self.attn.out_proj.weight.device), None, need_weights=False)
        """,
        unsafe=True,
    )


def test_unknown_submodule_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x):
                return self.block.to(x.device)(x)
        """,
        reason="not a known layer",
    )


def test_move_that_also_casts_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(2, 2)

            def forward(self, x):
                return self.head.to(x.device, torch.float16)(x)
        """,
        reason="casts the submodule's dtype",
    )


def test_statement_form_in_forward_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(2, 2)

            def forward(self, x):
                self.head = self.head.to(x.device)
                return self.head(x)
        """,
        reason="moves a submodule inside `forward`",
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.head = nn.Linear(2, 2)
                self.head.to(device)
                self.pe = torch.zeros(3)

            def place(self, device):
                self.head.to(device)
                return self

            def forward(self, x):
                y = self.head.to(torch.float16)(x.half())
                z = self.pe.to(x.device)
                return self.head(x.to(self.head.weight.device)) + y.float() + z.sum()

        def helper(model, x):
            return model.head.to(x.device)(x)
        """,
    )


def test_a_part_the_module_dispatched_itself_is_reported_not_rewritten() -> None:
    assert_declined(
        "DF105",
        """
        import torch.nn as nn
        from accelerate import dispatch_model

        class Head(nn.Module):
            def __init__(self, body):
                super().__init__()
                self.body = body
                self.proj = nn.Linear(16, 2)
                dispatch_model(self.proj, device_map={"": 1})

            def forward(self, x):
                h = self.body(x)
                return self.proj.to(h.device)(h)
        """,
        reason="`dispatch_model` placed `self.proj` in `__init__`",
    )
