"""DF101 tensor-factory-without-device: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF101"


def test_position_ids_fed_to_an_embedding_take_its_weight_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos_embedding = nn.Embedding(100, 8)

            def forward(self, src):
                pos = torch.arange(0, src.shape[1]).unsqueeze(0).repeat(src.shape[0], 1)  # positions
                return self.pos_embedding(pos)
        """,
        """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos_embedding = nn.Embedding(100, 8)

            def forward(self, src):
                pos = torch.arange(0, src.shape[1], device=self.pos_embedding.weight.device).unsqueeze(0).repeat(src.shape[0], 1)  # positions
                return self.pos_embedding(pos)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert (findings[0].line, findings[0].col) == (11, 15)


def test_mask_meets_scores_through_triu_and_a_local() -> None:
    assert_fix(
        RULE,
        """
        import torch as t
        from torch import nn

        class Attention(nn.Module):
            def forward(self, q, k):
                scores = q @ k.transpose(-2, -1)
                size = q.shape[1]
                mask = t.triu(t.ones(size, size), diagonal=1).bool()
                return scores.masked_fill(mask, float("-inf"))
        """,
        """
        import torch as t
        from torch import nn

        class Attention(nn.Module):
            def forward(self, q, k):
                scores = q @ k.transpose(-2, -1)
                size = q.shape[1]
                mask = t.triu(t.ones(size, size, device=scores.device), diagonal=1).bool()
                return scores.masked_fill(mask, float("-inf"))
        """,
    )


def test_from_import_alias_and_binary_operation() -> None:
    assert_fix(
        RULE,
        """
        from torch import randn as noise

        def add_noise(x):
            return x + noise(x.shape) * 0.1
        """,
        """
        from torch import randn as noise

        def add_noise(x):
            return x + noise(x.shape, device=x.device) * 0.1
        """,
    )


def test_rnn_hidden_state_meets_the_input_in_the_rnn_call() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8, batch_first=True)

            def forward(self, x):
                h0 = torch.zeros(1, x.size(0), 8)
                c0 = torch.zeros(1, x.size(0), 8)
                out, _ = self.lstm(x, (h0, c0))
                return out
        """,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8, batch_first=True)

            def forward(self, x):
                h0 = torch.zeros(1, x.size(0), 8, device=x.device)
                c0 = torch.zeros(1, x.size(0), 8, device=x.device)
                out, _ = self.lstm(x, (h0, c0))
                return out
        """,
    )


def test_init_hidden_without_tensor_argument_uses_the_rnn_weights_unsafely() -> None:
    before = """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 8)

            def init_hidden(self, batch_size):
                return torch.zeros(1, batch_size, 8)
        """
    findings = assert_fix(
        RULE,
        before,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(4, 8)

            def init_hidden(self, batch_size):
                return torch.zeros(1, batch_size, 8, device=self.gru.weight_ih_l0.device)
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_legacy_constructor_gets_a_move_and_keeps_its_dtype() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def scale(x, dim):
            return x / torch.sqrt(torch.FloatTensor([dim]))
        """,
        """
        import torch

        def scale(x, dim):
            return x / torch.sqrt(torch.FloatTensor([dim]).to(x.device))
        """,
    )


def test_multiline_call_with_trailing_comma_keeps_its_layout() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def pad(x):
            return torch.cat(
                [
                    x,
                    torch.zeros(
                        x.shape[0],
                        3,
                        dtype=x.dtype,  # same dtype
                    ),
                ],
                dim=1,
            )
        """,
        """
        import torch

        def pad(x):
            return torch.cat(
                [
                    x,
                    torch.zeros(
                        x.shape[0],
                        3,
                        dtype=x.dtype,  # same dtype
                        device=x.device,
                    ),
                ],
                dim=1,
            )
        """,
    )


def test_noops_a_naive_tool_would_break() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        x = torch.zeros(3)  # script level: not model code

        class M(nn.Module):
            def forward(self, x):
                a = torch.arange(x.shape[1], device=x.device)        # device given
                b = torch.zeros_like(x)                              # inherits the device
                c = x * torch.tensor(2.0)                            # 0-dim scalar is legal
                d = torch.ones(3).to(x.device)                       # moved explicitly
                e = torch.ones(3, **self.factory_kwargs)             # may hold device=
                f = torch.arange(4).tolist()                         # leaves the device world
                return a + b + c + d + e

        class Data(torch.utils.data.Dataset):
            def __getitem__(self, index):
                return torch.tensor([index, index]), torch.zeros(2)

        def collate(batch):
            return torch.stack([b for b in batch]), torch.tensor([len(b) for b in batch])

        def train(model, loader):
            total = torch.zeros(1)
            return total
        """,
    )


def test_nothing_in_scope_declines_with_a_reason() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Counter(nn.Module):
            def reset(self):
                self.count = torch.zeros(1)
        """,
        reason="no tensor or layer in scope",
    )


def test_shadowed_torch_name_is_not_torch() -> None:
    assert_noop(
        RULE,
        """
        import numpy as torch

        def f(x):
            return x + torch.zeros(x.shape)
        """,
    )


def test_tensor_used_only_as_an_index_may_stay_on_the_cpu() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def drop_rows(weights, count):
            rows = torch.randperm(weights.shape[0])[:count]
            weights[rows, :] = 0
            return weights
        """,
    )


def test_names_defined_in_terms_of_each_other_do_not_loop() -> None:
    import textwrap

    from devfix.engine import check_source
    from devfix.types import Options

    source = textwrap.dedent(
        """
        import torch

        def docs(x, n):
            a = "x"
            b = a + "y"
            a = b + "z"
            for _ in range(n):
                b = a + b
                a = b + a
            return x.shape, torch.zeros(3) + a
        """
    )
    findings = check_source(source, options=Options(select=(RULE,)))
    assert [f.code for f in findings] == ["DF101"]
    assert "first tensor argument" in findings[0].message


def test_arithmetic_with_an_input_gets_its_device_in_both_shapes() -> None:
    """`x * torch.ones(x.shape[-1])` (x proven a tensor by `x.shape`) and
    `return x + torch.zeros(3)` (x only met in arithmetic) both follow `x`; the second is a
    judgement (x could be a number), so its fix is unsafe."""
    before = """
        import torch
        from torch import nn

        class Scale(nn.Module):
            def forward(self, x):
                return x * torch.ones(x.shape[-1])

        class Shift(nn.Module):
            def forward(self, x):
                return x + torch.zeros(3)  # bias
        """
    after = """
        import torch
        from torch import nn

        class Scale(nn.Module):
            def forward(self, x):
                return x * torch.ones(x.shape[-1], device=x.device)

        class Shift(nn.Module):
            def forward(self, x):
                return x + torch.zeros(3, device=x.device)  # bias
        """
    findings = assert_fix(RULE, before, after, unsafe=True)
    assert [f.applicability for f in findings] == [Applicability.SAFE, Applicability.UNSAFE]
    assert "meets the input `x` in arithmetic" in findings[1].message


def test_arithmetic_with_a_number_argument_keeps_the_tensor_argument() -> None:
    """With a proven tensor argument, a number argument met in arithmetic (`step`) is never
    taken for a tensor: the product meets `x.sum()` next, which proves the device."""
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Step(nn.Module):
            def forward(self, x, step):
                return x.sum() + step * torch.ones(3)
        """,
        """
        import torch
        from torch import nn

        class Step(nn.Module):
            def forward(self, x, step):
                return x.sum() + step * torch.ones(3, device=x.device)
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_an_accumulator_added_to_an_input_later_follows_the_input() -> None:
    """A zero accumulator filled by `+=` and finally added to an input tensor (a loss passed in):
    the accumulator meets the input in arithmetic, so it is made on the input's device."""
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Regularized(nn.Module):
            def add_penalties(self, loss, weights):
                penalty = torch.zeros(1)
                for w in weights:
                    penalty += w.abs().sum()
                loss = loss + penalty
                return loss
        """,
        """
        import torch
        from torch import nn

        class Regularized(nn.Module):
            def add_penalties(self, loss, weights):
                penalty = torch.zeros(1, device=loss.device)
                for w in weights:
                    penalty += w.abs().sum()
                loss = loss + penalty
                return loss
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
