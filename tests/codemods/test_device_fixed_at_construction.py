"""DF102 device-fixed-at-construction: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF102"


def test_global_device_in_forward_follows_the_input() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 16, batch_first=True)

            def forward(self, x):
                h = torch.zeros(1, x.shape[0], 16).to(DEVICE)  # initial state
                return self.rnn(x, h)
        """,
        """
        import torch
        import torch.nn as nn

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 16, batch_first=True)

            def forward(self, x):
                h = torch.zeros(1, x.shape[0], 16).to(x.device)  # initial state
                return self.rnn(x, h)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_literal_cuda_device_keyword_in_forward() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, feats):
                bias = torch.ones(feats.shape[-1], device="cuda:0")
                return feats + bias
        """,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, feats):
                bias = torch.ones(feats.shape[-1], device=feats.device)
                return feats + bias
        """,
    )


def test_device_stored_in_init_and_torch_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch as T
        import torch.nn as nn

        class Embedder(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.emb = nn.Embedding(10, 4)

            def forward(self, ids):
                pos = T.arange(ids.shape[1], device=self.device)
                return self.emb(ids) + self.emb(pos)
        """,
        """
        import torch as T
        import torch.nn as nn

        class Embedder(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.emb = nn.Embedding(10, 4)

            def forward(self, ids):
                pos = T.arange(ids.shape[1], device=self.emb.weight.device)
                return self.emb(ids) + self.emb(pos)
        """,
    )


def test_bare_cuda_call_becomes_a_move_to_the_met_tensor() -> None:
    assert_fix(
        RULE,
        """
        import torch

        class Scaler(torch.nn.Module):
            def forward(self, x):
                scale = torch.ones(x.shape[-1]).cuda()
                return x * scale
        """,
        """
        import torch

        class Scaler(torch.nn.Module):
            def forward(self, x):
                scale = torch.ones(x.shape[-1]).to(x.device)
                return x * scale
        """,
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn
        import pytorch_lightning as pl

        device = torch.device("cuda")
        model = nn.Linear(2, 2).to(device)          # script code, not model code

        class Lit(pl.LightningModule):
            def training_step(self, batch, idx):
                return torch.zeros(2, device=self.device)  # Lightning's property is correct

        class M(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.table = torch.zeros(3).to(device)      # __init__ is DF103's business

            @property
            def device(self):
                return self.table.device

            def forward(self, x):
                y = x.to("cpu")                            # deliberate
                z = x.to(torch.float16)                    # a dtype, not a device
                w = x.to(self.device)                      # the class defines `device`
                return y, z, w, self.to(x.device)          # moving modules is DF105's
        """,
    )


def test_no_tensor_in_scope_declines() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        device = torch.device("cuda:0")

        class Cache(nn.Module):
            def reset(self, n):
                self.memory = torch.zeros(n).to(device)
        """,
        reason="no tensor or layer in scope",
    )


def test_classmethods_have_no_self_to_take_a_device_from() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(4, 2)

            @classmethod
            def build(cls):
                return cls().to("cuda:0")

            @staticmethod
            def ids(n):
                return torch.arange(n, device="cuda:0")
        """,
    )


def test_global_device_chosen_under_a_module_level_if() -> None:
    assert_fix(
        RULE,
        """
        import torch

        if torch.cuda.is_available():
            gpu = torch.device("cuda:0")
        else:
            gpu = torch.device("cpu")

        def shift(x):
            return x + torch.ones(x.shape[-1]).to(gpu)
        """,
        """
        import torch

        if torch.cuda.is_available():
            gpu = torch.device("cuda:0")
        else:
            gpu = torch.device("cpu")

        def shift(x):
            return x + torch.ones(x.shape[-1]).to(x.device)
        """,
    )
