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
    # `x` is a tensor argument, but the zeros never meet it: no device is guessed from it.
    assert "no tensor or layer in scope tells" in findings[0].message


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


def test_list_valued_data_in_a_loss_forward_meets_the_loss() -> None:
    """`torch.tensor(self.levels)`: a list the loss takes `len()` of, not a scalar; it meets
    `err` (a tensor computed from the inputs) through `torch.where`."""
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class QuantileLoss(nn.Module):
            def __init__(self, levels):
                super().__init__()
                self.levels = levels

            def forward(self, pred, target):
                target = target.unsqueeze(-1).expand(-1, -1, len(self.levels))
                err = target - pred
                up = torch.tensor(self.levels) * err
                down = (torch.tensor(self.levels) - 1) * err
                return torch.where(err >= 0, up, down).mean()
        """,
        """
        import torch
        from torch import nn

        class QuantileLoss(nn.Module):
            def __init__(self, levels):
                super().__init__()
                self.levels = levels

            def forward(self, pred, target):
                target = target.unsqueeze(-1).expand(-1, -1, len(self.levels))
                err = target - pred
                up = torch.tensor(self.levels, device=err.device) * err
                down = (torch.tensor(self.levels, device=err.device) - 1) * err
                return torch.where(err >= 0, up, down).mean()
        """,
    )


def test_numpy_class_weights_in_a_plain_loss_function() -> None:
    assert_fix(
        RULE,
        """
        import numpy as np
        import torch
        import torch.nn.functional as F

        def balanced_bce(logits, labels, counts, beta=0.99):
            effective = 1.0 - np.power(beta, counts)
            w = (1.0 - beta) / np.array(effective)
            targets = F.one_hot(labels, len(counts)).float()
            w = torch.tensor(w).float().unsqueeze(0) * targets
            return F.binary_cross_entropy_with_logits(logits, targets, weight=w)
        """,
        """
        import numpy as np
        import torch
        import torch.nn.functional as F

        def balanced_bce(logits, labels, counts, beta=0.99):
            effective = 1.0 - np.power(beta, counts)
            w = (1.0 - beta) / np.array(effective)
            targets = F.one_hot(labels, len(counts)).float()
            w = torch.tensor(w, device=targets.device).float().unsqueeze(0) * targets
            return F.binary_cross_entropy_with_logits(logits, targets, weight=w)
        """,
    )


def test_type_as_goes_to_its_argument_s_device() -> None:
    """`arange(n).type_as(lengths)` is `arange(n).to(lengths.options())`: on `lengths`' device
    (the virtual GPUs agree: `type_as` of a `cuda:1` tensor lands on `cuda:1` while the current
    device is `cuda:0`), in plain functions and Lightning modules alike."""
    for source in (
        """
        import torch

        def length_mask(lengths, max_len=None):
            max_len = max_len or lengths.max()
            steps = torch.arange(0, max_len).type_as(lengths)
            return steps.unsqueeze(0) < lengths.unsqueeze(1)
        """,
        """
        import torch
        import pytorch_lightning as pl

        class Tagger(pl.LightningModule):
            def mask(self, lengths):
                steps = torch.arange(0, int(lengths.max())).type_as(lengths)
                return steps.unsqueeze(0) < lengths.unsqueeze(1)
        """,
    ):
        assert_noop(RULE, source)


def test_accumulator_filled_with_plus_equals_and_its_sizing_input() -> None:
    """`acc += self.head(x)`: the accumulator meets the layer's output (proof). Zero states
    in a dict comprehension are shaped after the comprehension's tensor (a judgement)."""
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Mixer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.head = nn.Linear(d, d)

            def forward(self, inputs):
                acc = torch.zeros(inputs["x"].shape[0], 4)
                acc += self.head(inputs["x"])
                return acc

            def init_states(self, feats):
                return {k: torch.zeros(v.shape[0], 4) for k, v in feats.items()}
        """,
        """
        import torch
        from torch import nn

        class Mixer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.head = nn.Linear(d, d)

            def forward(self, inputs):
                acc = torch.zeros(inputs["x"].shape[0], 4, device=self.head.weight.device)
                acc += self.head(inputs["x"])
                return acc

            def init_states(self, feats):
                return {k: torch.zeros(v.shape[0], 4, device=v.device) for k, v in feats.items()}
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.SAFE, Applicability.UNSAFE]
    assert "shaped after `v`" in findings[1].message


def test_lightning_module_falls_back_on_its_own_device_property() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import pytorch_lightning as pl

        class Forecaster(pl.LightningModule):
            def training_step(self, batch, idx):
                ids = torch.tensor([self.ids[name] for name in batch["names"]])
                return self(batch["x"], ids)
        """,
        """
        import torch
        import pytorch_lightning as pl

        class Forecaster(pl.LightningModule):
            def training_step(self, batch, idx):
                ids = torch.tensor([self.ids[name] for name in batch["names"]], device=self.device)
                return self(batch["x"], ids)
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_hidden_state_returned_to_the_rnn_is_proven_by_the_caller() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8)

            def init_hidden(self, batch_size):
                return (torch.zeros(1, batch_size, 8), torch.zeros(1, batch_size, 8))

            def forward(self, x):
                hidden = self.init_hidden(x.size(1))
                out, _ = self.lstm(x, hidden)
                return out
        """,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 8)

            def init_hidden(self, batch_size):
                return (torch.zeros(1, batch_size, 8, device=self.lstm.weight_ih_l0.device), torch.zeros(1, batch_size, 8, device=self.lstm.weight_ih_l0.device))

            def forward(self, x):
                hidden = self.init_hidden(x.size(1))
                out, _ = self.lstm(x, hidden)
                return out
        """,
    )
    assert all(f.applicability is Applicability.SAFE for f in findings)


def test_construction_helpers_and_move_helpers_are_left_alone() -> None:
    """A helper only `__init__` calls builds state (DF103's business); a value handed to the
    file's own move helper (`to_var`) is moved by it."""
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        def to_var(x):
            if torch.cuda.is_available():
                x = x.cuda()
            return x

        class VAE(nn.Module):
            def __init__(self, z):
                super().__init__()
                self.fc = nn.Linear(z, z)
                self._make_tables(z)

            def _make_tables(self, z):
                self.table = torch.zeros(z, z)

            def sample(self, mu):
                eps = to_var(torch.randn(*mu.size()))
                return mu + eps
        """,
    )


def test_a_factory_that_meets_nothing_gets_no_guessed_device() -> None:
    """The positions only leave the function: the caller moves them. A number passed as
    `max=` is not a tensor argument, so nothing here is model code."""
    assert_noop(
        RULE,
        """
        import torch

        def relative_positions(length, max_distance):
            span = torch.arange(length)
            dist = span[None, :] - span[:, None]
            clipped = torch.clamp(dist, min=-max_distance, max=max_distance)
            return clipped + max_distance
        """,
    )


def test_one_element_denominator_in_an_accuracy_helper() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def masked_accuracy(preds, y, pad):
            top = preds.argmax(dim=1, keepdim=True)
            keep = (y != pad).nonzero()
            correct = top[keep].squeeze(1).eq(y[keep])
            return correct.sum() / torch.FloatTensor([y[keep].shape[0]])
        """,
        """
        import torch

        def masked_accuracy(preds, y, pad):
            top = preds.argmax(dim=1, keepdim=True)
            keep = (y != pad).nonzero()
            correct = top[keep].squeeze(1).eq(y[keep])
            return correct.sum() / torch.FloatTensor([y[keep].shape[0]]).to(correct.device)
        """,
    )


def test_script_noise_fed_to_a_model_on_the_device_takes_its_device() -> None:
    # A GAN sampling script: the generator went to the script's device, the latent batch not.
    findings = assert_fix(
        RULE,
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        netG = Generator(nz=100).to(device)
        netG.load_state_dict(state)
        latent = torch.randn(64, 100, 1, 1)
        images = netG(latent)
        """,
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        netG = Generator(nz=100).to(device)
        netG.load_state_dict(state)
        latent = torch.randn(64, 100, 1, 1, device=device)
        images = netG(latent)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_script_noise_for_a_submodule_of_a_conditionally_moved_model_uses_the_move_helper() -> None:
    # Notebook style: the model moves only when CUDA is there, inputs go through the file's own
    # helper; sampling feeds the decoder directly.
    assert_fix(
        RULE,
        """
        import torch
        from torch.autograd import Variable

        def as_input(t):
            if torch.cuda.is_available():
                t = t.cuda()
            return Variable(t)

        autoencoder = AutoEncoder(latent=16)
        if torch.cuda.is_available():
            autoencoder.cuda()

        z = Variable(torch.rand(32, 16))
        decoded = autoencoder.dec(z)
        """,
        """
        import torch
        from torch.autograd import Variable

        def as_input(t):
            if torch.cuda.is_available():
                t = t.cuda()
            return Variable(t)

        autoencoder = AutoEncoder(latent=16)
        if torch.cuda.is_available():
            autoencoder.cuda()

        z = Variable(as_input(torch.rand(32, 16)))
        decoded = autoencoder.dec(z)
        """,
    )


def test_script_noise_for_a_conditionally_moved_model_without_helper_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        model = Decoder()
        if torch.cuda.is_available():
            model.cuda()
        z = torch.randn(8, 16)
        out = model(z)
        """,
        reason="moved only when the `if` on line 4 holds",
    )


def test_script_tensors_not_fed_to_a_moved_model_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = Decoder().to(device)
        z = torch.randn(8, 16).to(device)
        out = model(z)
        grid = torch.linspace(0, 1, 10)
        plot(grid, torch.zeros(10))
        cpu_model = Decoder()
        print(cpu_model(torch.randn(2, 16)))
        """,
    )


def test_a_script_name_bound_again_before_the_model_call_is_another_tensor() -> None:
    # A tutorial notebook: `t` first names a CPU step for a plot helper that never meets the
    # model; the training loop binds `t` afresh (on the device) before the model reads it.
    assert_noop(
        RULE,
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = Denoiser().to(device)
        t = torch.tensor([40])
        show(noisy(image, t))
        for batch in loader:
            t = torch.randint(0, 200, (batch.shape[0],), device=device)
            loss = loss_of(model, batch.to(device), t)
        for step, (x, t) in enumerate(pairs):
            model(x, t)
        """,
    )
    # Rebinding from itself keeps the tensor: it still reaches the model.
    assert_fix(
        RULE,
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = Denoiser().to(device)
        t = torch.tensor([40])
        t = t.long()
        model(x, t)
        """,
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = Denoiser().to(device)
        t = torch.tensor([40], device=device)
        t = t.long()
        model(x, t)
        """,
    )


def test_a_tensor_made_on_a_named_device_tells_its_partner_argument_where_to_go() -> None:
    # Class labels drawn next to noise that was made on the caller's device, both handed to a
    # network the method received: the labels go where the noise is.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class ConditionalSampler(nn.Module):
            def draw(self, net, count, device):
                z = torch.randn(count, 16, device=device)
                classes = torch.randint(0, 10, (count,))
                return net(z, classes)
        """,
        """
        import torch
        from torch import nn

        class ConditionalSampler(nn.Module):
            def draw(self, net, count, device):
                z = torch.randn(count, 16, device=device)
                classes = torch.randint(0, 10, (count,), device=z.device)
                return net(z, classes)
        """,
    )
    # `device=None` is the default device: it tells nothing.
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        class ConditionalSampler(nn.Module):
            def draw(self, net, count):
                z = torch.randn(count, 16, device=None)
                classes = torch.randint(0, 10, (count,))
                return net(z, classes)
        """,
        reason="no tensor or layer in scope tells which device it needs",
    )


def test_a_length_field_of_the_input_reshaped_for_a_comparison_gives_the_mask_its_device() -> None:
    # The input is a batch object, not a tensor; its `lengths` field is reshaped with `view`,
    # which only tensors have. The mask also indexes, but the comparison needs the device first.
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class MaskedNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)

            def forward(self, batch):
                values = batch.values
                lengths = batch.lengths
                steps = values.size(1)
                keep = torch.arange(steps)[None, :] < lengths.view(-1, 1)
                values[keep] = self.norm(values[keep])
                return values
        """,
        """
        import torch
        from torch import nn

        class MaskedNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(8)

            def forward(self, batch):
                values = batch.values
                lengths = batch.lengths
                steps = values.size(1)
                keep = torch.arange(steps, device=lengths.device)[None, :] < lengths.view(-1, 1)
                values[keep] = self.norm(values[keep])
                return values
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_tensor_its_author_moves_a_few_statements_later_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import math
        import torch
        from torch import nn

        class Sinusoid(nn.Module):
            def forward(self, position):
                freq = torch.exp(torch.arange(0, 16, 2).float() * (-math.log(1e4) / 16))
                freq = freq.unsqueeze(0).unsqueeze(0)
                freq = freq.to(device=position.device)
                return torch.sin(position.unsqueeze(2) * freq)
        """,
    )
    # Moved only on one branch: the other branch still meets `position` on its device.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Sinusoid(nn.Module):
            def forward(self, position, fast=False):
                freq = torch.arange(0, 16, 2).float()
                if fast:
                    freq = freq.to(position.device)
                return torch.sin(position.unsqueeze(2) * freq)
        """,
        """
        import torch
        from torch import nn

        class Sinusoid(nn.Module):
            def forward(self, position, fast=False):
                freq = torch.arange(0, 16, 2, device=position.device).float()
                if fast:
                    freq = freq.to(position.device)
                return torch.sin(position.unsqueeze(2) * freq)
        """,
    )


def test_lengths_a_model_packs_are_made_on_the_cpu_on_purpose() -> None:
    assert_noop(
        "DF101",
        """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 4)

    def forward(self, x, lengths):
        return self.lstm(pack_padded_sequence(x, lengths, enforce_sorted=False))


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
encoder = Encoder().to(device)
x = torch.randn(5, 3, 4, device=device)
lengths = torch.tensor([5, 2, 4])
encoder(x, lengths)
""",
    )


def test_type_as_puts_a_new_tensor_on_the_other_tensor_s_device() -> None:
    # `a.type_as(b)` is `a.to(b.options())`: b's dtype and b's device.
    assert_noop(
        "DF101",
        """
import torch
import torch.nn as nn


class Warp(nn.Module):
    def forward(self, feat):
        ramp = torch.linspace(-1, 1, feat.size(-1)).type_as(feat)
        return feat * ramp
""",
    )


def test_a_solver_class_that_moves_its_models_runs_script_code() -> None:
    # Not a module: it holds the models, moves them to its device and trains them. Its methods
    # are the script around the models, and its device is the script's own choice.
    source = """
import torch
import torch.nn as nn


class Solver:
    def __init__(self, net):
        self.net = net
        self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.net.to(self.dev)
        self.opt = torch.optim.Adam(self.net.parameters())

    def smooth_targets(self, labels):
        return torch.full(labels.size(), 0.9) * labels

    def penalty(self, real):
        grad_weight = torch.ones(real.size()).to(self.dev)
        return (grad_weight * self.net(real.to(self.dev))).mean()
"""
    assert_noop("DF101", source)
    assert_noop("DF102", source)


def test_a_helper_nested_in_a_solver_step_is_the_solver_s_code_too() -> None:
    # The solver moves its networks by its own flag and its nested helper moves the mixing
    # weights by the same flag: the program's placement, not model code. The same helper
    # nested in a module's `forward` is model code and still gets its device.
    solver = """
import torch
import torch.nn as nn


class Solver:
    def __init__(self, critic, on_gpu):
        self.on_gpu = on_gpu
        self.critic = critic
        if self.on_gpu: self.critic.cuda()
        self.optim = torch.optim.RMSprop(self.critic.parameters())

    def critic_step(self, real, fake):
        def mix(a, b):
            w = torch.rand(a.size(0), 1)
            w = w.cuda() if self.on_gpu else w
            return a + w * (b - a)
        return self.critic(mix(real, fake)).mean()
"""
    assert_noop("DF101", solver)
    assert_noop("DF102", solver)
    module = """
import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 1)

    def forward(self, real, fake):
        def mix(a, b):
            w = torch.rand(a.size(0), 1)
            return a + w * (b - a)
        return self.head(mix(real, fake))
"""
    assert_fix(
        RULE,
        module,
        module.replace("torch.rand(a.size(0), 1)", "torch.rand(a.size(0), 1, device=a.device)"),
    )


def test_the_device_never_comes_from_a_name_bound_only_in_a_skipped_branch() -> None:
    # `base` meets `penalty`, which is bound before it only in the branch that continues: on
    # the path that makes `base`, `penalty` is not bound yet, and a fix naming it would raise
    # NameError on the first iteration. The shape's source gives the device instead.
    before = """
        import torch
        import torch.nn as nn

        class Criterion(nn.Module):
            def forward(self, scores, masks):
                losses = []
                for k in range(scores.shape[0]):
                    s = scores[k]
                    if masks[k].sum() == 0:
                        penalty = -(torch.log(1.0 - s))
                        losses.append(penalty.sum())
                        continue
                    base = torch.ones(s.shape) * 0.5
                    penalty = -(torch.log(s))
                    losses.append((base * penalty).sum())
                return losses
        """
    assert_fix(
        RULE,
        before,
        before.replace("torch.ones(s.shape)", "torch.ones(s.shape, device=s.device)"),
        unsafe=True,
    )


_AGENT = """
    import argparse

    import numpy as np
    import torch
    import torch.nn as nn

    class Critic(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.body = nn.Linear(n, 3)

        def forward(self, obs):
            return self.body(obs)

    class Player:
        def __init__(self, n):
            self.critic = Critic(n)

        def choose(self, obs):
            return self.critic(obs).argmax(-1)

        def remember(self, obs):
            self.memory = obs

    def play(opts, player, frames):
        for frame in frames:
            pick = player.choose(torch.from_numpy(frame))
            player.remember(torch.from_numpy(frame))
            noise = player.critic(torch.tensor(np.zeros(4, dtype=np.float32)))
        return pick, noise

    def main():
        opts = argparse.ArgumentParser().parse_args()
        opts.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        player = Player(4)
        player.critic.to(opts.device)
        play(opts, player, [])
"""


def test_a_training_function_feeds_an_agents_model_through_a_method_of_the_agent() -> None:
    # `choose` hands its argument straight to `self.critic`, which `main` moved to the
    # device `opts` carries into `play`; `remember` only stores it (no model reads it).
    findings = assert_fix(
        RULE,
        _AGENT,
        _AGENT.replace(
            "pick = player.choose(torch.from_numpy(frame))",
            "pick = player.choose(torch.from_numpy(frame).to(opts.device))",
        ).replace(
            "torch.tensor(np.zeros(4, dtype=np.float32))",
            "torch.tensor(np.zeros(4, dtype=np.float32), device=opts.device)",
        ),
    )
    assert len(findings) == 2


def test_lengths_for_a_ctc_loss_and_lengths_sent_back_to_the_cpu_stay_where_they_are() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8)

            def forward(self, x, lengths):
                packed = nn.utils.rnn.pack_padded_sequence(x, lengths.to("cpu"))
                return self.rnn(packed)

        def step(model, criterion, batch, n):
            x, log_probs, targets, target_lengths = batch
            lengths = torch.LongTensor([n] * len(targets))
            out = model(x, torch.LongTensor([n]))
            return criterion(log_probs, targets, lengths, target_lengths), out

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Tagger()
        model = model.to(device)
        criterion = nn.CTCLoss()
        criterion.to(device)
        step(model, criterion, (None, None, [], None), 3)
        """,
    )


def test_a_factory_meeting_a_host_copy_stays_on_the_cpu() -> None:
    # The module's scores are copied to the host before the grid meets them: the grid's CPU
    # default is right, and a device taken from a layer would break the product on a GPU.
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        class Scorer(nn.Module):
            def __init__(self, bins):
                super().__init__()
                self.head = nn.Linear(16, bins)

            def expected_value(self, features, low, high):
                probs = self.head(features).softmax(-1).detach().cpu()
                probs = probs[:, :-1]
                weighted = probs * torch.linspace(low, high, probs.shape[-1])
                return weighted.sum(-1)

            def rescaled(self, features):
                scores = self.head(features).data.cpu()
                scores = scores * torch.arange(scores.shape[-1])
                return scores

            def histogram(self, features):
                counts = self.head(features).to("cpu").long().flatten()
                table = torch.zeros(64)
                table.index_add_(0, counts, counts.float() * 2)
                return table
        """,
    )


def test_a_factory_meeting_a_device_tensor_and_no_host_copy_is_still_fixed() -> None:
    # The host-copy rule must not hide a real mismatch: `spread` never leaves the device.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Scorer(nn.Module):
            def forward(self, features):
                summary = features.mean(0).cpu()
                spread = features.std(0)
                return spread * torch.linspace(0, 1, spread.shape[0]), summary
        """,
        """
        import torch
        from torch import nn

        class Scorer(nn.Module):
            def forward(self, features):
                summary = features.mean(0).cpu()
                spread = features.std(0)
                return spread * torch.linspace(0, 1, spread.shape[0], device=spread.device), summary
        """,
    )


def test_a_lambda_bound_at_module_level_is_the_script_s_move_helper() -> None:
    # RL tutorial style: `Variable` is rebound to a lambda that moves its argument when CUDA is
    # there; what goes through it is moved, and script noise is wrapped in it.
    assert_fix(
        RULE,
        """
        import torch
        import torch.autograd as autograd

        USE_CUDA = torch.cuda.is_available()
        to_device = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)

        policy = Policy(4, 2)
        if USE_CUDA:
            policy = policy.cuda()

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)

            def act(self, state):
                state = to_device(torch.FloatTensor(state).unsqueeze(0))
                return self.fc(state)

        noise = torch.randn(1, 4)
        scores = policy(noise)
        """,
        """
        import torch
        import torch.autograd as autograd

        USE_CUDA = torch.cuda.is_available()
        to_device = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)

        policy = Policy(4, 2)
        if USE_CUDA:
            policy = policy.cuda()

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)

            def act(self, state):
                state = to_device(torch.FloatTensor(state).unsqueeze(0))
                return self.fc(state)

        noise = to_device(torch.randn(1, 4))
        scores = policy(noise)
        """,
    )


def test_a_trainer_subclass_step_makes_its_tensors_where_the_model_outputs_are() -> None:
    """`prediction_step` of a Trainer subclass: the Trainer placed the model, and what the step
    returns is gathered with the logits across processes."""
    findings = assert_fix(
        RULE,
        """
        import torch
        from trl import RewardTrainer


        class PairwiseTrainer(RewardTrainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                with torch.no_grad():
                    loss, scores = self.compute_loss(model, inputs, return_outputs=True)
                dummy = torch.ones(scores.size(0), dtype=torch.long)
                return loss, scores, dummy
        """,
        """
        import torch
        from trl import RewardTrainer


        class PairwiseTrainer(RewardTrainer):
            def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
                with torch.no_grad():
                    loss, scores = self.compute_loss(model, inputs, return_outputs=True)
                dummy = torch.ones(scores.size(0), dtype=torch.long, device=scores.device)
                return loss, scores, dummy
        """,
        unsafe=True,
    )
    # A judgement: the shape says where the tensor belongs, not that it meets `scores`.
    assert findings[0].applicability is Applicability.UNSAFE


def test_sizes_unpacked_from_an_inputs_shape_give_it_the_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, feats):
                rows, cols = feats.shape[-2:]
                ys, xs = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
                return torch.stack((xs, ys), 0)  # a grid for the caller
        """,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, feats):
                rows, cols = feats.shape[-2:]
                ys, xs = torch.meshgrid(torch.arange(rows, device=feats.device), torch.arange(cols, device=feats.device), indexing="ij")
                return torch.stack((xs, ys), 0)  # a grid for the caller
        """,
        unsafe=True,
    )


def test_the_device_the_function_gives_its_other_factories_beats_a_shape() -> None:
    """A loss helper that makes its tensors on `targets.device` twice: a third factory, sized
    after a module attribute that may sit elsewhere, goes there too."""
    findings = assert_fix(
        RULE,
        """
        import torch

        def match(preds, targets, priors):
            gain = torch.ones(6, device=targets.device)
            offsets = torch.zeros(4, 2, device=targets.device)
            count = priors.shape[0]
            index = torch.arange(count).view(count, 1)
            keep = (targets[None, :, 4:6] / priors[:, None]).max(2)[0] < 4.0
            return index[keep], gain, offsets
        """,
        """
        import torch

        def match(preds, targets, priors):
            gain = torch.ones(6, device=targets.device)
            offsets = torch.zeros(4, 2, device=targets.device)
            count = priors.shape[0]
            index = torch.arange(count, device=targets.device).view(count, 1)
            keep = (targets[None, :, 4:6] / priors[:, None]).max(2)[0] < 4.0
            return index[keep], gain, offsets
        """,
        unsafe=True,
    )
    assert "makes its other tensors on `targets.device`" in findings[0].message


def test_factories_on_several_devices_choose_nothing_for_the_others() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def match(preds, targets, priors):
            gain = torch.ones(6, device=targets.device)
            offsets = torch.zeros(4, 2, device=preds.device)
            count = priors.shape[0]
            index = torch.arange(count).view(count, 1)
            keep = (targets[None, :, 4:6] / priors[:, None]).max(2)[0] < 4.0
            return index[keep], gain, offsets
        """,
        """
        import torch

        def match(preds, targets, priors):
            gain = torch.ones(6, device=targets.device)
            offsets = torch.zeros(4, 2, device=preds.device)
            count = priors.shape[0]
            index = torch.arange(count, device=priors.device).view(count, 1)
            keep = (targets[None, :, 4:6] / priors[:, None]).max(2)[0] < 4.0
            return index[keep], gain, offsets
        """,
        unsafe=True,
    )


def test_a_factory_handed_to_a_library_move_helper_is_placed_by_it() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from detectron2.layers import move_device_like as like
        from accelerate.utils import send_to_device

        class Grid(nn.Module):
            def forward(self, feature, stride):
                xs = like(torch.arange(feature.shape[-1], dtype=torch.float32), feature) * stride
                ys = like(torch.arange(feature.shape[-2], dtype=torch.float32), feature)
                zs = send_to_device(torch.arange(feature.shape[-3]), feature.device)
                ws = place(torch.arange(feature.shape[-1]), feature)
                return feature + xs + ys[:, None] + zs[:, None, None] + ws
        """,
        """
        import torch
        from torch import nn
        from detectron2.layers import move_device_like as like
        from accelerate.utils import send_to_device

        class Grid(nn.Module):
            def forward(self, feature, stride):
                xs = like(torch.arange(feature.shape[-1], dtype=torch.float32), feature) * stride
                ys = like(torch.arange(feature.shape[-2], dtype=torch.float32), feature)
                zs = send_to_device(torch.arange(feature.shape[-3]), feature.device)
                ws = place(torch.arange(feature.shape[-1], device=feature.device), feature)
                return feature + xs + ys[:, None] + zs[:, None, None] + ws
        """,
    )


def test_an_agents_tensor_attribute_follows_the_policy_output_it_scales() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import optim

        class Agent:
            def __init__(self, env, device):
                self.device = torch.device(device)
                self.actor = Actor(env.obs_dim, env.act_dim).to(self.device)
                self.actor_opt = optim.Adam(self.actor.parameters(), lr=3e-4)
                self.bound = torch.tensor(list(env.action_bound), dtype=torch.float32)
                self.unit = torch.tensor(1.0)
                self.offset = torch.FloatTensor(env.action_offset)
                self.spare = torch.tensor(env.action_bound)

            def act(self, obs):
                return torch.tanh(self.actor(obs)) * self.bound * self.unit + self.offset

            def describe(self):
                return self.spare.numpy()
        """,
        """
        import torch
        from torch import optim

        class Agent:
            def __init__(self, env, device):
                self.device = torch.device(device)
                self.actor = Actor(env.obs_dim, env.act_dim).to(self.device)
                self.actor_opt = optim.Adam(self.actor.parameters(), lr=3e-4)
                self.bound = torch.tensor(list(env.action_bound), dtype=torch.float32, device=self.device)
                self.unit = torch.tensor(1.0)
                self.offset = torch.FloatTensor(env.action_offset).to(self.device)
                self.spare = torch.tensor(env.action_bound)

            def act(self, obs):
                return torch.tanh(self.actor(obs)) * self.bound * self.unit + self.offset

            def describe(self):
                return self.spare.numpy()
        """,
    )
    assert len(findings) == 2


def test_an_agents_tensor_attribute_made_before_the_device_is_set_is_reported_without_a_fix() -> (
    None
):
    finding = assert_declined(
        RULE,
        """
        import torch

        class Agent:
            def __init__(self, env, device):
                self.bound = torch.FloatTensor(env.action_bound)
                self.device = device
                self.actor = Actor().to(self.device)
                self.opt = torch.optim.SGD(self.actor.parameters(), lr=0.1)

            def act(self, obs):
                return self.actor(obs) * self.bound
        """,
        reason="not set where it is made",
    )
    assert "`self.bound`" in finding.message


def test_a_window_made_in_forward_takes_the_device_of_the_signal_it_tapers() -> None:
    assert_fix(
        RULE,
        """
        import torch as th

        class Denoiser(th.nn.Module):
            def __init__(self, hop):
                super().__init__()
                self.hop = hop

            def forward(self, noisy):
                win = th.blackman_window(4 * self.hop)
                spec = th.stft(noisy, 4 * self.hop, self.hop, window=win, return_complex=True)
                return spec.abs()
        """,
        """
        import torch as th

        class Denoiser(th.nn.Module):
            def __init__(self, hop):
                super().__init__()
                self.hop = hop

            def forward(self, noisy):
                win = th.blackman_window(4 * self.hop, device=noisy.device)
                spec = th.stft(noisy, 4 * self.hop, self.hop, window=win, return_complex=True)
                return spec.abs()
        """,
    )


def test_a_constructor_star_imported_from_torch_is_torchs() -> None:
    assert_fix(
        RULE,
        """
        from torch import *
        from torch.nn import Module, Parameter

        class ChainScorer(Module):
            def __init__(self, tags):
                super().__init__()
                self.transitions = Parameter(randn(tags, tags))

            def forward(self, emissions):
                total = LongTensor(emissions.size(0)).zero_()
                return emissions.sum(-1) + total
        """,
        """
        from torch import *
        from torch.nn import Module, Parameter

        class ChainScorer(Module):
            def __init__(self, tags):
                super().__init__()
                self.transitions = Parameter(randn(tags, tags))

            def forward(self, emissions):
                total = LongTensor(emissions.size(0)).to(emissions.device).zero_()
                return emissions.sum(-1) + total
        """,
    )


def test_a_name_two_star_imports_could_bind_is_nobodys() -> None:
    assert_noop(
        RULE,
        """
        from torch import *
        from torch.nn import Module
        from mylib.layers import *

        class ChainScorer(Module):
            def forward(self, emissions):
                total = LongTensor(emissions.size(0)).zero_()
                return emissions.sum(-1) + total
        """,
    )


def test_a_factory_the_module_stores_as_an_attribute_is_called_with_the_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class SpectralLoss(nn.Module):
            def __init__(self, sizes=(256, 1024)):
                super().__init__()
                self.sizes = sizes
                self.window_fn = torch.hamming_window
                self.name = "spectral"

            def forward(self, fake, real):
                total = 0.0
                for n in self.sizes:
                    a = torch.stft(fake, n, window=self.window_fn(n), return_complex=True)
                    b = torch.stft(real, n, window=self.window_fn(n), return_complex=True)
                    total = total + (a.abs() - b.abs()).pow(2).mean()
                return total
        """,
        """
        import torch
        from torch import nn

        class SpectralLoss(nn.Module):
            def __init__(self, sizes=(256, 1024)):
                super().__init__()
                self.sizes = sizes
                self.window_fn = torch.hamming_window
                self.name = "spectral"

            def forward(self, fake, real):
                total = 0.0
                for n in self.sizes:
                    a = torch.stft(fake, n, window=self.window_fn(n, device=fake.device), return_complex=True)
                    b = torch.stft(real, n, window=self.window_fn(n, device=real.device), return_complex=True)
                    total = total + (a.abs() - b.abs()).pow(2).mean()
                return total
        """,
    )


def test_a_tensor_type_taken_as_a_parameter_with_a_cpu_default_makes_cpu_targets() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class AdversarialLoss(nn.Module):
            def __init__(self, real=1.0, tensor_type=torch.FloatTensor):
                super().__init__()
                self.real = real
                self.make = tensor_type
                self.mse = nn.MSELoss()

            def forward(self, prediction):
                target = self.make(prediction.size()).fill_(self.real)
                return self.mse(prediction, target)
        """,
        """
        import torch
        import torch.nn as nn

        class AdversarialLoss(nn.Module):
            def __init__(self, real=1.0, tensor_type=torch.FloatTensor):
                super().__init__()
                self.real = real
                self.make = tensor_type
                self.mse = nn.MSELoss()

            def forward(self, prediction):
                target = self.make(prediction.size()).to(prediction.device).fill_(self.real)
                return self.mse(prediction, target)
        """,
    )


def test_a_replay_batch_that_meets_a_held_networks_output_in_a_method_takes_its_device() -> None:
    agent = """
        import torch
        from torch import nn

        class ActorCritic:
            def __init__(self, n_obs, n_act):
                self.pi = nn.Linear(n_obs, n_act)
                self.v = nn.Linear(n_obs, 1)

            def update(self, obs, act, ret, mask):
                logp = self.pi(obs).log_softmax(-1).gather(1, act.long().unsqueeze(1))
                values = self.v(obs).squeeze(1)
                advantage = ret - values * mask
                return -(logp.squeeze(1) * advantage.detach()).mean() + advantage.pow(2).mean()

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        agent = ActorCritic(4, 2)
        agent.pi.to(device)
        agent.v.to(device)
        for o, a, r, m in batches:
    """
    assert_fix(
        RULE,
        agent
        + """
            obs = torch.tensor(o, device=device)
            act = torch.tensor(a)
            ret = torch.tensor(r)
            m = torch.tensor(m)
            agent.update(obs, act, ret, m).backward()
        """,
        agent
        + """
            obs = torch.tensor(o, device=device)
            act = torch.tensor(a, device=device)
            ret = torch.tensor(r, device=device)
            m = torch.tensor(m, device=device)
            agent.update(obs, act, ret, m).backward()
        """,
    )


def test_a_factory_shaped_after_a_tensor_the_module_adopts_follows_it() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Adapter(nn.Module):
            def __init__(self, conv, rank=4):
                super().__init__()
                self.conv = conv
                self.down = nn.Parameter(torch.zeros(rank, conv.weight.size(1)))
                self.up = nn.Parameter(torch.randn(conv.weight.size(0), rank) * 0.01)

            def forward(self, x):
                return self.conv(x) + (self.up @ self.down).sum()

        class Plain(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(n))

            def forward(self, x):
                return x * self.scale
        """,
        """
        import torch
        from torch import nn

        class Adapter(nn.Module):
            def __init__(self, conv, rank=4):
                super().__init__()
                self.conv = conv
                self.down = nn.Parameter(torch.zeros(rank, conv.weight.size(1), device=conv.weight.device))
                self.up = nn.Parameter(torch.randn(conv.weight.size(0), rank, device=conv.weight.device) * 0.01)

            def forward(self, x):
                return self.conv(x) + (self.up @ self.down).sum()

        class Plain(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(n))

            def forward(self, x):
                return x * self.scale
        """,
    )


def test_a_data_tensor_weighting_a_moved_models_errors_in_an_updater_follows_them() -> None:
    updater = """
        import numpy as np
        import torch

        class PrioritizedUpdater:
            def __init__(self, policy, device):
                self.policy = policy.to(device)
                self.device = device

            def loss(self, states, returns, priorities):
                states = torch.as_tensor(states, dtype=torch.float32, device=self.device)
                values = self.policy(states).squeeze(-1)
                errors = (values - returns) ** 2
                if isinstance(priorities, (list, np.ndarray)):
                    scale = torch.tensor(priorities, dtype=torch.float32)
                    return (scale * errors).mean()
                return (torch.tensor(0.5) * errors).mean() + (torch.tensor(priorities) * errors.cpu()).sum()
        """
    assert_fix(
        RULE,
        updater,
        updater.replace(
            "torch.tensor(priorities, dtype=torch.float32)",
            "torch.tensor(priorities, dtype=torch.float32, device=errors.device)",
        ),
    )


def test_a_tensor_made_with_another_s_dtype_is_made_on_its_device_too() -> None:
    before = """
        import torch

        class Ranker:
            def rank(self, scores, groups):
                parts = []
                for group in groups:
                    picked = torch.index_select(scores, 0, group)
                    if picked.numel() == 0:
                        parts.append(torch.full((len(group),), -1.0, dtype=picked.dtype))
                        continue
                    parts.append(picked.softmax(0))
                return torch.cat(parts)
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace("dtype=picked.dtype)", "dtype=picked.dtype, device=picked.device)"),
        unsafe=True,
    )
    assert "it takes the dtype of `picked`" in findings[0].message
    assert findings[0].applicability is Applicability.UNSAFE


def test_tensors_that_meet_a_model_output_a_few_steps_later_are_made_on_its_device() -> None:
    before = """
        import numpy as np
        import torch

        class Embedder:
            def __init__(self, net, device):
                self.device = device
                self.net = net.to(device)

            def embed(self, ids, lengths):
                hidden = self.net(ids.to(self.device))
                sizes = torch.from_numpy(np.asarray(lengths))
                width = int(sizes.max())
                keep = torch.arange(width).expand(len(lengths), width) < sizes.unsqueeze(1)
                weights = keep.float()
                return (hidden * weights.unsqueeze(-1)).sum(1) / sizes.unsqueeze(-1)
        """
    after = before.replace(
        "torch.from_numpy(np.asarray(lengths))",
        "torch.from_numpy(np.asarray(lengths)).to(hidden.device)",
    ).replace("torch.arange(width)", "torch.arange(width, device=hidden.device)")
    findings = assert_fix(RULE, before, after)
    assert all("meets `hidden` in arithmetic" in f.message for f in findings)
    # Summed to a 0-dim scalar first, a CPU value may meet a tensor on any device.
    assert_noop(
        RULE,
        """
        import numpy as np
        import torch

        class Embedder:
            def __init__(self, net, device):
                self.device = device
                self.net = net.to(device)

            def embed(self, ids, lengths):
                hidden = self.net(ids.to(self.device))
                sizes = torch.from_numpy(np.asarray(lengths))
                return hidden.sum(1) / sizes.sum()
        """,
    )


def test_a_record_read_only_for_its_shape_and_dtype_names_no_device() -> None:
    # `info` may be a tensor, a NumPy array or a record of a tensor's metadata; only a tensor
    # has `.device`.
    assert_declined(
        RULE,
        """
import torch


def rebuild(infos):
    def make(info):
        return torch.empty(*info.shape, dtype=info.dtype)

    return [make(info) for info in infos]
""",
        reason="no tensor or layer in scope tells",
    )


def test_a_numpy_array_that_sizes_a_new_tensor_names_no_device() -> None:
    assert_declined(
        RULE,
        """
import numpy as np
import torch
from torch import nn


class Lookup(nn.Module):
    def forward(self, ids):
        table = np.load("table.npy")
        counts = torch.zeros(table.shape[0], dtype=torch.long)
        return counts
""",
        reason="no tensor or layer in scope tells",
    )


def test_a_name_checked_not_to_be_a_tensor_is_no_device_before_it_is_converted() -> None:
    # At the first conversion `std` may still be a list: `device=std.device` would raise.
    assert_noop(
        RULE,
        """
import numpy as np
import torch
from helpers import is_torch_tensor


def normalize(image, mean, std):
    if is_torch_tensor(image):
        if not isinstance(mean, torch.Tensor):
            mean = torch.from_numpy(mean) if isinstance(mean, np.ndarray) else torch.tensor(mean)
        if not isinstance(std, torch.Tensor):
            std = torch.from_numpy(std) if isinstance(std, np.ndarray) else torch.tensor(std)
    return (image - mean[:, None, None]) / std[:, None, None]
""",
        unsafe=True,
    )


def test_a_sibling_made_on_the_cpu_beside_it_is_no_evidence() -> None:
    findings = assert_fix(
        RULE,
        """
import torch
from torch import nn


class Biquad(nn.Module):
    def forward(self, w0: torch.Tensor) -> torch.Tensor:
        b0 = w0 / 2
        b = torch.tensor([b0, 0, -b0], dtype=torch.float64)
        a = torch.tensor([1 + b0, 2 * b0, 1 - b0], dtype=torch.float64)
        return torch.stack([b, a], dim=0) * w0
""",
        """
import torch
from torch import nn


class Biquad(nn.Module):
    def forward(self, w0: torch.Tensor) -> torch.Tensor:
        b0 = w0 / 2
        b = torch.tensor([b0, 0, -b0], dtype=torch.float64, device=w0.device)
        a = torch.tensor([1 + b0, 2 * b0, 1 - b0], dtype=torch.float64, device=w0.device)
        return torch.stack([b, a], dim=0) * w0
""",
        unsafe=True,
    )
    assert len(findings) == 2


def test_a_scalar_accumulator_written_in_place_follows_what_is_added_to_it() -> None:
    # A 0-dim CPU tensor may be read next to CUDA tensors, but `total += cuda_value` writes
    # into it and fails; what is added is the class's own computation on `anchor`.
    findings = assert_fix(
        RULE,
        """
import torch
from torch import nn


class MultiViewLoss(nn.Module):
    def pair_loss(self, a, b):
        return (a - b).pow(2).mean()

    def forward(self, views, target: torch.Tensor):
        anchor = target.detach()
        total = torch.tensor(0.0)
        for view in views[1:]:
            total += self.pair_loss(view, anchor)
        count = torch.tensor(0.0)
        count += 1
        return total / len(views), count
""",
        """
import torch
from torch import nn


class MultiViewLoss(nn.Module):
    def pair_loss(self, a, b):
        return (a - b).pow(2).mean()

    def forward(self, views, target: torch.Tensor):
        anchor = target.detach()
        total = torch.tensor(0.0, device=anchor.device)
        for view in views[1:]:
            total += self.pair_loss(view, anchor)
        count = torch.tensor(0.0)
        count += 1
        return total / len(views), count
""",
        unsafe=True,
    )
    assert len(findings) == 1 and findings[0].applicability is Applicability.UNSAFE


def test_the_result_of_a_file_function_returning_tensors_is_a_tensor_it_meets() -> None:
    assert_fix(
        RULE,
        """
import torch
from torch import nn


def normalize(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True)


class Similarity(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def forward(self, features):
        z = normalize(features)
        off_diagonal = 1 - torch.eye(self.size)
        return (z @ z.T) * off_diagonal
""",
        """
import torch
from torch import nn


def normalize(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True)


class Similarity(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def forward(self, features):
        z = normalize(features)
        off_diagonal = 1 - torch.eye(self.size, device=z.device)
        return (z @ z.T) * off_diagonal
""",
        unsafe=True,
    )


def test_a_tensor_read_only_for_its_shape_lays_the_new_one_over_it() -> None:
    # A helper outside any module that sizes a mask after its argument: the mask is applied
    # to that argument, so it is made where the argument is.
    assert_fix(
        RULE,
        """
import torch


def band(logits, width: int):
    rows = torch.arange(logits.shape[-2]).unsqueeze(-1)
    cols = torch.arange(logits.shape[-1])
    return (rows - cols).abs() > width
""",
        """
import torch


def band(logits, width: int):
    rows = torch.arange(logits.shape[-2], device=logits.device).unsqueeze(-1)
    cols = torch.arange(logits.shape[-1], device=logits.device)
    return (rows - cols).abs() > width
""",
        unsafe=True,
    )


def test_a_parameter_annotated_as_a_tensor_is_a_tensor_whose_metadata_is_copied() -> None:
    assert_fix(
        RULE,
        """
import torch
from torch import Tensor


def noise_like(sample: Tensor, scale: float) -> Tensor:
    return torch.randn(sample.shape, dtype=sample.dtype) * scale
""",
        """
import torch
from torch import Tensor


def noise_like(sample: Tensor, scale: float) -> Tensor:
    return torch.randn(sample.shape, dtype=sample.dtype, device=sample.device) * scale
""",
        unsafe=True,
    )


def test_a_tensor_fed_to_a_sequential_is_made_where_its_first_layer_is() -> None:
    assert_fix(
        RULE,
        """
import torch
from torch import nn


class Codebook(nn.Module):
    def __init__(self, entries, dim):
        super().__init__()
        self.entries = entries
        self.embed = nn.Sequential(nn.Linear(entries, dim), nn.Tanh(), nn.Linear(dim, dim))

    def forward(self, weights):
        codes = self.embed(torch.eye(self.entries))
        return weights @ codes
""",
        """
import torch
from torch import nn


class Codebook(nn.Module):
    def __init__(self, entries, dim):
        super().__init__()
        self.entries = entries
        self.embed = nn.Sequential(nn.Linear(entries, dim), nn.Tanh(), nn.Linear(dim, dim))

    def forward(self, weights):
        codes = self.embed(torch.eye(self.entries, device=self.embed[0].weight.device))
        return weights @ codes
""",
        unsafe=True,
    )


def test_a_sequential_that_opens_with_no_parameters_names_no_device() -> None:
    assert_declined(
        RULE,
        """
import torch
from torch import nn


class Codebook(nn.Module):
    def __init__(self, entries, dim):
        super().__init__()
        self.entries = entries
        self.embed = nn.Sequential(nn.Dropout(0.1), nn.Linear(entries, dim))

    def forward(self):
        return self.embed(torch.eye(self.entries))
""",
        reason="no tensor or layer in scope tells",
    )


_CONTRAST_LOSS = """
import torch


def build_loss(temperature):
    def loss(queries, keys, owners):
        n, m = queries.shape[0], keys.shape[0]
        positives = torch.zeros(n, m)
        for row, column in enumerate(owners):
            positives[row, column] = 1.0
        scores = torch.matmul(queries, keys.T) / temperature
        return -(scores.log_softmax(-1) * positives).sum() / n

    return loss
"""


def test_a_mask_meeting_a_product_of_the_inputs_bound_later_is_made_on_its_operand() -> None:
    # `scores` is bound after the mask, so it cannot be named there; it is a torch product of
    # the inputs, computed on the device they share: the mask goes on `queries.device`, a
    # proof (the mask meets it), not the judgement of its shape.
    findings = assert_fix(
        RULE,
        _CONTRAST_LOSS,
        _CONTRAST_LOSS.replace("torch.zeros(n, m)", "torch.zeros(n, m, device=queries.device)"),
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "shaped after" not in findings[0].message


def test_a_mask_meeting_a_product_of_non_tensors_keeps_the_judgement_of_its_shape() -> None:
    # `np.matmul` is not torch's: its operands say nothing of a device; only the shape does.
    source = _CONTRAST_LOSS.replace("import torch\n", "import numpy as np\nimport torch\n")
    source = source.replace("torch.matmul(queries, keys.T)", "np.matmul(q_rows, k_rows)")
    findings = assert_fix(
        RULE,
        source,
        source.replace("torch.zeros(n, m)", "torch.zeros(n, m, device=queries.device)"),
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "shaped after `queries`" in findings[0].message


_RANKING_LOSS = """
import torch
from torch import nn


class PairwiseLoss(nn.Module):
    def forward(self, scores, times):
        allowed = torch.ones(times.shape[0], times.shape[0])
        allowed[times.unsqueeze(1) < times.unsqueeze(0)] = 0
        return (scores.exp() * allowed).sum()
"""


def test_a_new_tensor_indexed_by_a_mask_of_an_input_is_made_on_that_input() -> None:
    # A CPU tensor indexed by a mask on a GPU fails ("indices should be either on cpu or on
    # the same device as the indexed tensor"): a proof, ahead of what it meets later.
    findings = assert_fix(
        RULE,
        _RANKING_LOSS,
        _RANKING_LOSS.replace(
            "torch.ones(times.shape[0], times.shape[0])",
            "torch.ones(times.shape[0], times.shape[0], device=times.device)",
        ),
    )
    assert findings[0].applicability is Applicability.SAFE


def test_indices_copied_to_the_host_say_nothing_of_the_indexed_tensor() -> None:
    # `torch.eye(c)[labels.cpu()]` takes host indices anywhere; what the one-hot rows meet
    # later (`probs`) still decides.
    source = """
    import torch
    from torch import nn


    class SoftDice(nn.Module):
        def forward(self, probs, labels):
            one_hot = torch.eye(probs.shape[1])[labels.cpu()]
            return 1 - (2 * (probs * one_hot).sum() + 1) / ((probs + one_hot).sum() + 1)
    """
    assert_fix(
        RULE,
        source,
        source.replace(
            "torch.eye(probs.shape[1])", "torch.eye(probs.shape[1], device=probs.device)"
        ),
    )


def test_a_set_of_ids_tested_against_an_input_with_isin_is_made_on_that_input() -> None:
    # `torch.isin(tokens, ...)` and `torch.masked_select(tokens, ...)` take tensors only, so
    # `tokens` is one, and the new id table meets it there.
    source = """
    import torch
    from torch import nn


    class TextFilter(nn.Module):
        def __init__(self, special):
            super().__init__()
            self.special = dict(special)

        def forward(self, tokens):
            special_ids = torch.tensor(list(self.special.values()))
            keep = torch.logical_not(torch.isin(tokens, special_ids))
            return torch.masked_select(tokens, keep)
    """
    assert_fix(
        RULE,
        source,
        source.replace(
            "torch.tensor(list(self.special.values()))",
            "torch.tensor(list(self.special.values()), device=tokens.device)",
        ),
    )


def test_a_sparse_tensor_built_from_its_parts_is_where_they_are() -> None:
    # `torch.sparse_coo_tensor(indices, values, size)` takes the device of its parts: no
    # CPU factory to give a device.
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn


        class SparseAttention(nn.Module):
            def forward(self, edges, scores, features):
                n = features.shape[0]
                weights = torch.sparse_coo_tensor(edges, scores.exp(), (n, n))
                return torch.sparse.mm(weights, features)
        """,
    )
