"""DF103 tensor-attribute-not-buffer: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF103"


def test_custom_loss_weight_becomes_a_non_persistent_buffer() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class CustomLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.Tensor([1.0, 2.0])  # class weights

            def forward(self, input, target):
                return ((input - target) ** 2 * self.weight).mean()
        """,
        """
        import torch
        import torch.nn as nn

        class CustomLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("weight", torch.Tensor([1.0, 2.0]), persistent=False)  # class weights

            def forward(self, input, target):
                return ((input - target) ** 2 * self.weight).mean()
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert (findings[0].line, findings[0].col) == (8, 9)


def test_positional_table_built_from_locals_with_aliases() -> None:
    assert_fix(
        RULE,
        """
        import math
        import torch as t
        from torch import nn as tnn

        class PositionalEncoding(tnn.Module):
            def __init__(self, d_model, max_len=64):
                super(PositionalEncoding, self).__init__()
                pe = t.zeros(max_len, d_model)
                position = t.arange(0, max_len).unsqueeze(1).float()
                div = t.exp(t.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
                pe[:, 0::2] = t.sin(position * div)
                pe[:, 1::2] = t.cos(position * div)
                self.pe = pe.unsqueeze(0)

            def forward(self, x):
                return x + self.pe[:, : x.size(1)]
        """,
        """
        import math
        import torch as t
        from torch import nn as tnn

        class PositionalEncoding(tnn.Module):
            def __init__(self, d_model, max_len=64):
                super(PositionalEncoding, self).__init__()
                pe = t.zeros(max_len, d_model)
                position = t.arange(0, max_len).unsqueeze(1).float()
                div = t.exp(t.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
                pe[:, 0::2] = t.sin(position * div)
                pe[:, 1::2] = t.cos(position * div)
                self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

            def forward(self, x):
                return x + self.pe[:, : x.size(1)]
        """,
        unsafe=True,
    )


def test_scale_moved_in_init_keeps_its_move_and_setattr_is_rewritten() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.nn import Module, Linear

        class Attention(Module):
            def __init__(self, dim, device):
                super().__init__()
                self.fc = Linear(dim, dim)
                self.scale = torch.sqrt(torch.FloatTensor([dim])).to(device)
                for i in range(2):
                    setattr(self, f"anchor{i}", torch.ones(3) * i)

            def forward(self, q, k):
                return self.fc(q) @ k.transpose(-1, -2) * self.scale
        """,
        """
        import torch
        from torch.nn import Module, Linear

        class Attention(Module):
            def __init__(self, dim, device):
                super().__init__()
                self.fc = Linear(dim, dim)
                self.register_buffer("scale", torch.sqrt(torch.FloatTensor([dim])).to(device), persistent=False)
                for i in range(2):
                    self.register_buffer(f"anchor{i}", torch.ones(3) * i, persistent=False)

            def forward(self, q, k):
                return self.fc(q) @ k.transpose(-1, -2) * self.scale
        """,
        unsafe=True,
    )


def test_not_applied_without_unsafe_fixes() -> None:
    source = """
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.ones(4, 4).triu(1).bool()
    """
    assert_fix(RULE, source, source)


def test_trainable_tensor_is_reported_as_a_parameter() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Darts(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.alphas = 1e-3 * torch.randn(k, 8, requires_grad=True)
        """,
        reason="make it `nn.Parameter(...)`",
    )


def test_requires_grad_set_later_is_reported_as_a_parameter() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.zeros(3)
                self.w.requires_grad = True
        """,
        reason="nn.Parameter",
    )


def test_tensors_in_a_list_are_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.tables = [torch.zeros(3) for _ in range(4)]
        """,
        reason="plain container",
    )


def test_before_super_init_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                self.w = torch.zeros(3)
                super().__init__()
        """,
        reason="before `super().__init__()`",
    )


def test_attribute_also_assigned_a_non_tensor_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = torch.zeros(3)

            def reset(self):
                self.cache = []
        """,
        reason="not provably a tensor in `reset`",
    )


def test_class_attribute_with_the_same_name_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            table = None

            def __init__(self):
                super().__init__()
                self.table = torch.zeros(3)
        """,
        reason="also defined in the class body",
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import numpy as np
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self, weight: float, device):
                super().__init__()
                self.n = 3
                self.device = torch.device("cpu")
                self.anchors = np.zeros(3)
                self.register_buffer("pe", torch.zeros(3))
                self.gain = nn.Parameter(torch.ones(3))
                self.fc = nn.Linear(3, 3)
                self.weight = weight
                self.shape = torch.zeros(3).shape
                self.value = torch.zeros(3).sum().item()

            def forward(self, x):
                self.pe = self.pe.to(x.device)
                self.last = x.detach()
                return self.fc(x) * self.gain

        class NotAModule:
            def __init__(self):
                self.t = torch.zeros(3)

        class P(nn.Module):
            def __init__(self):
                super().__init__()
                w = torch.zeros(3)
                self.w = nn.Parameter(w)
        """,
    )


def test_reassigned_tensor_in_forward_is_still_fixed() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.pe = torch.zeros(1, 8)

            def forward(self, x):
                if x.size(1) > self.pe.size(1):
                    pe = torch.zeros(1, x.size(1))
                    self.pe = pe.to(x.device)
                return x + self.pe[:, : x.size(1)]
        """,
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("pe", torch.zeros(1, 8), persistent=False)

            def forward(self, x):
                if x.size(1) > self.pe.size(1):
                    pe = torch.zeros(1, x.size(1))
                    self.pe = pe.to(x.device)
                return x + self.pe[:, : x.size(1)]
        """,
        unsafe=True,
    )


def test_annotated_assignment_is_reported_only() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import Tensor, nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.mask: Tensor = torch.ones(4, 4).tril()
        """,
        reason="annotated assignment",
    )


def test_variable_with_requires_grad_is_reported_as_a_parameter() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        class Network(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.alphas_normal = Variable(1e-3 * torch.randn(k, 8).cuda(), requires_grad=True)
        """,
        reason="make it `nn.Parameter(...)`",
    )


def test_cache_slot_set_to_none_and_filled_in_forward_becomes_a_buffer() -> None:
    """The cached encoding is made in `forward` and returned on later calls: as a plain
    attribute it stays where the first call made it."""
    before = """
        import torch
        import torch.nn as nn

        class SinusoidalEncoding(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.channels = channels
                self.cache = None

            def forward(self, x):
                if self.cache is not None and self.cache.shape == x.shape:
                    return self.cache
                pos = torch.arange(x.shape[1], device=x.device).float()
                table = torch.sin(pos[:, None] / (1 + torch.arange(self.channels, device=x.device)))
                self.cache = table[None].expand(x.shape[0], -1, -1)
                return self.cache
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.cache = None",
            'self.register_buffer("cache", None, persistent=False)',
        ),
        unsafe=True,
    )


def test_cuda_copy_cached_in_forward_is_registered_like_its_source() -> None:
    before = """
        import torch
        import torch.nn as nn

        class Normalize(nn.Module):
            def __init__(self, mean):
                super().__init__()
                self.register_buffer("mean", torch.tensor(mean).view(-1, 1, 1))
                self.mean_gpu = None

            def forward(self, x):
                if x.is_cuda:
                    if self.mean_gpu is None:
                        self.mean_gpu = self.mean.cuda()
                    return x - self.mean_gpu
                return x - self.mean
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.mean_gpu = None",
            'self.register_buffer("mean_gpu", None, persistent=False)',
        ),
        unsafe=True,
    )


def test_slots_that_forward_only_writes_are_left_alone() -> None:
    """Attention maps kept for the caller to inspect are never read back by the module."""
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qk = nn.Linear(d, 2 * d)
                self.last_attention = None

            def forward(self, x):
                q, k = self.qk(x).chunk(2, dim=-1)
                attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                self.last_attention = attn.detach()
                return attn @ x
        """,
    )


def test_cache_built_by_a_train_override() -> None:
    before = """
        import torch
        import torch.nn as nn

        class RelativeBias(nn.Module):
            def __init__(self, heads, size):
                super().__init__()
                self.biases = nn.Parameter(torch.zeros(heads, size * size))
                self.register_buffer("index", torch.arange(size * size).view(size, size))

            @torch.no_grad()
            def train(self, mode=True):
                super().train(mode)
                if mode and hasattr(self, "cached"):
                    del self.cached
                else:
                    self.cached = self.biases[:, self.index]

            def forward(self, scores):
                return scores + (self.biases[:, self.index] if self.training else self.cached)
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.cached = self.biases[:, self.index]",
            'self.register_buffer("cached", self.biases[:, self.index], persistent=False)',
        ),
        unsafe=True,
    )


def test_helper_called_from_init_sets_tables_with_setattr() -> None:
    """`_reset_parameters` runs only while the module is built; the table comes from a static
    method that returns a tensor."""
    before = """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self, levels=(0, 1), size=8, dim=16):
                super().__init__()
                self.levels, self.size, self.dim = levels, size, dim
                self.proj = nn.Linear(dim, dim)
                self._reset_parameters()

            def _reset_parameters(self):
                for level in self.levels:
                    table = self.grid_embedding(self.size >> level, self.dim)
                    setattr(self, f"pos{level}", table)

            @staticmethod
            def grid_embedding(n, dim, temperature=10000.0):
                omega = torch.arange(dim // 2, dtype=torch.float32) / (dim // 2)
                omega = 1.0 / (temperature**omega)
                grid = torch.arange(n, dtype=torch.float32)[:, None] @ omega[None]
                return torch.cat([grid.sin(), grid.cos()], dim=1)[None]

            def forward(self, x, level):
                return self.proj(x) + getattr(self, f"pos{level}")
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            'setattr(self, f"pos{level}", table)',
            'self.register_buffer(f"pos{level}", table, persistent=False)',
        ),
        unsafe=True,
    )


def test_table_built_in_a_local_and_class_weights_of_a_loss() -> None:
    assert_fix(
        RULE,
        """
        import math
        import torch
        import torch.nn as nn

        class Positions(nn.Module):
            def __init__(self, d, n=100):
                super().__init__()
                pe = torch.zeros(n, d)
                for pos in range(n):
                    pe[pos, 0] = math.sin(pos)
                pe = pe.unsqueeze(0)
                self.pe = pe

            def forward(self, x):
                return x + self.pe[:, : x.size(1)]

        class WeightedNLL(nn.Module):
            def __init__(self, weights):
                super().__init__()
                self.weights = torch.tensor(weights)

            def forward(self, logp, y):
                return -(self.weights[y] * logp.gather(1, y[:, None]).squeeze(1)).mean()
        """,
        """
        import math
        import torch
        import torch.nn as nn

        class Positions(nn.Module):
            def __init__(self, d, n=100):
                super().__init__()
                pe = torch.zeros(n, d)
                for pos in range(n):
                    pe[pos, 0] = math.sin(pos)
                pe = pe.unsqueeze(0)
                self.register_buffer("pe", pe, persistent=False)

            def forward(self, x):
                return x + self.pe[:, : x.size(1)]

        class WeightedNLL(nn.Module):
            def __init__(self, weights):
                super().__init__()
                self.register_buffer("weights", torch.tensor(weights), persistent=False)

            def forward(self, logp, y):
                return -(self.weights[y] * logp.gather(1, y[:, None]).squeeze(1)).mean()
        """,
        unsafe=True,
    )


def test_a_scale_put_on_the_one_device_a_script_runs_on_is_a_latent_hazard() -> None:
    source = """
        import torch
        import torch.nn as nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Attention(nn.Module):
            def __init__(self, d, device):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.scale = torch.sqrt(torch.FloatTensor([d])).to(device)

            def forward(self, x):
                return self.fc(x) / self.scale

        model = Attention(8, device).to(device)
        """
    # Right on the script's one device today; a replica or a later `model.to()` would not move
    # it. A non-persistent buffer changes nothing today (not in the state dict either).
    for script in (source, source + "model = nn.DataParallel(model)\n"):
        assert_fix(
            RULE,
            script,
            script.replace(
                "self.scale = torch.sqrt(torch.FloatTensor([d])).to(device)",
                'self.register_buffer("scale", torch.sqrt(torch.FloatTensor([d])).to(device), '
                "persistent=False)",
            ),
            unsafe=True,
        )


def test_an_attribute_first_set_by_unpacking_cannot_become_a_buffer() -> None:
    # `register_buffer("basis", ...)` would raise KeyError: the attribute already exists.
    assert_declined(
        RULE,
        """
        import numpy as np
        import torch
        from torch import nn

        class Filter(nn.Module):
            def __init__(self, pair):
                super().__init__()
                (self.basis, [self.other, *self.rest]) = pair
                self.width = int(np.shape(self.basis)[1])
                self.basis = torch.tensor(self.basis)
        """,
        reason="`self.basis` is first set by unpacking (line 9), so `register_buffer` would raise",
    )


def test_a_list_repeating_one_tensor_per_level_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self, levels):
                super().__init__()
                self.grids = [torch.zeros(1)] * len(levels)  # rebuilt in forward

            def forward(self, feats, k):
                return feats + self.grids[k]
        """,
        reason="holds tensors in a plain container",
    )


def test_a_signal_window_stored_by_a_spectrogram_layer_becomes_a_buffer() -> None:
    assert_fix(
        RULE,
        """
        from torch import hamming_window, nn, stft

        class MelFrontend(nn.Module):
            def __init__(self, n_fft: int = 400) -> None:
                super().__init__()
                self.n_fft = n_fft
                self.taper = hamming_window(n_fft, periodic=False)

            def forward(self, audio):
                return stft(audio, self.n_fft, window=self.taper, return_complex=True).abs()
        """,
        """
        from torch import hamming_window, nn, stft

        class MelFrontend(nn.Module):
            def __init__(self, n_fft: int = 400) -> None:
                super().__init__()
                self.n_fft = n_fft
                self.register_buffer("taper", hamming_window(n_fft, periodic=False), persistent=False)

            def forward(self, audio):
                return stft(audio, self.n_fft, window=self.taper, return_complex=True).abs()
        """,
        unsafe=True,
    )


def test_a_table_a_caller_loads_onto_the_built_module_becomes_a_buffer() -> None:
    # `net.set_priors(path)` runs after `net.to(device)` or before it; either way a later move
    # leaves a plain attribute behind. Loaded from data, read by `forward`: a buffer.
    assert_fix(
        RULE,
        """
        import numpy as np
        import torch
        from torch import nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 4)

            def set_priors(self, path):
                self.priors = torch.from_numpy(np.load(path)).float()

            def forward(self, x):
                return self.head(x) + self.priors
        """,
        """
        import numpy as np
        import torch
        from torch import nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 4)

            def set_priors(self, path):
                self.register_buffer("priors", torch.from_numpy(np.load(path)).float(), persistent=False)

            def forward(self, x):
                return self.head(x) + self.priors
        """,
        unsafe=True,
    )


def test_tensors_stored_at_run_time_or_set_while_built_are_left_to_their_own_rules() -> None:
    # A statistic computed from the inputs, a method the class calls itself, a private
    # helper, and a name `__init__` sets plainly (register_buffer would raise there).
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        class Tracker(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = 2.0
                self.layer = nn.Linear(4, 4)

            def observe(self, batch):
                self.mean = batch.mean(0)

            def reload(self, path):
                self.table = torch.load(path)

            def _restore(self, path):
                self.codes = torch.load(path)

            def rescale(self, values):
                self.scale = torch.tensor(values)

            def forward(self, x):
                self.reload("t.pt")
                return self.layer(x - self.mean) * self.scale + self.table + self.codes
        """,
    )


def test_recurrent_state_carried_through_norm_layers_and_reductions_becomes_a_buffer() -> None:
    # The state `forward` writes back is a reduction of a norm layer's output and a pairwise
    # maximum of two tensors: tensors, so the buffer keeps accepting them.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Recurrent(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.norm = nn.GroupNorm(1, width)
                self.gate = nn.Linear(width, width)
                self.reset(width)

            def reset(self, width):
                self.carry = torch.zeros(1, width)
                self.peak = torch.full((1, width), -1e4)

            def forward(self, x):
                gate = torch.sigmoid(self.gate(x))
                carry = gate * self.carry + x
                self.carry = torch.sum(self.norm(carry), 0, keepdim=True).detach()
                self.peak = torch.max(self.peak, torch.log(gate)).detach()
                return carry * self.peak
        """,
        """
        import torch
        from torch import nn

        class Recurrent(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.norm = nn.GroupNorm(1, width)
                self.gate = nn.Linear(width, width)
                self.reset(width)

            def reset(self, width):
                self.register_buffer("carry", torch.zeros(1, width), persistent=False)
                self.register_buffer("peak", torch.full((1, width), -1e4), persistent=False)

            def forward(self, x):
                gate = torch.sigmoid(self.gate(x))
                carry = gate * self.carry + x
                self.carry = torch.sum(self.norm(carry), 0, keepdim=True).detach()
                self.peak = torch.max(self.peak, torch.log(gate)).detach()
                return carry * self.peak
        """,
        unsafe=True,
    )


def test_state_from_a_max_over_a_dimension_or_a_recurrent_layer_is_declined() -> None:
    # `torch.max(x, 0)` is a (values, indices) pair and `nn.GRU` returns (output, hidden):
    # neither is a tensor a buffer accepts.
    for value in ("torch.max(x, 0)", "self.rnn(x)"):
        assert_declined(
            RULE,
            f"""
            import torch
            from torch import nn

            class Tracker(nn.Module):
                def __init__(self, width):
                    super().__init__()
                    self.rnn = nn.GRU(width, width)
                    self.state = torch.zeros(1, width)

                def forward(self, x):
                    self.state = {value}
                    return x
            """,
            reason="not provably a tensor in `forward`",
        )


def test_a_tensor_nothing_in_the_file_reads_is_reported_and_left_alone() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        class QuantileHead(nn.Module):
            def __init__(self, hidden, levels):
                super().__init__()
                self.levels = torch.linspace(0.0, 1.0, levels + 2)[1:-1]
                self.proj = nn.Linear(hidden, levels)

            def forward(self, h):
                return self.proj(h).sort(-1).values
        """,
        reason="nothing in this file reads it, so it is left as it is",
    )


def test_a_table_its_readers_index_with_cpu_copies_is_kept_on_the_cpu() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        def take(table, steps):
            return table[steps.cpu()].to(steps.device)

        class Noiser(nn.Module):
            def __init__(self, n=100):
                super().__init__()
                self.scale = torch.linspace(1e-4, 0.02, n).cumsum(0)

            def forward(self, x, steps):
                return x * take(self.scale, steps)[:, None]
        """,
        reason="it is kept on the CPU on purpose: `take`, which `forward` hands it to",
    )


def test_a_subclass_of_a_model_base_from_another_package_holds_its_statistics_as_buffers() -> None:
    # The base cannot be read here; its resolved name (a `models` package, "Net" in the class
    # name) and `forward` say the class is a module, though it builds no layer of its own.
    for base_import, base in (
        ("from kalman.models.core import Estimator", "Estimator"),
        ("from kalman import nets", "nets.BaseNet"),
    ):
        before = f"""
            import torch
            {base_import}

            class RunningScaler({base}):
                def __init__(self, width):
                    super().__init__()
                    self.total = torch.zeros(width)
                    self.precision = torch.eye(width)

                def refit(self, covariance):
                    self.precision = torch.linalg.inv(self.precision + covariance)

                def forward(self, x):
                    return x @ self.precision / (self.total + 1)
            """
        assert_fix(
            RULE,
            before,
            before.replace(
                "self.total = torch.zeros(width)",
                'self.register_buffer("total", torch.zeros(width), persistent=False)',
            ).replace(
                "self.precision = torch.eye(width)",
                'self.register_buffer("precision", torch.eye(width), persistent=False)',
            ),
            unsafe=True,
        )
    # A class from a package named for something else, building no layer: no evidence.
    assert_noop(
        RULE,
        """
        import torch
        from kalman.filters import Smoother

        class RunningScaler(Smoother):
            def __init__(self, width):
                super().__init__()
                self.total = torch.zeros(width)

            def forward(self, x):
                return x / (self.total + 1)
        """,
    )


def test_tables_unpacked_from_a_helper_that_returns_a_pair_become_buffers() -> None:
    before = """
        import torch
        from torch import nn

        def window_pair(size):
            rising = torch.linspace(0, 1, size)
            return rising, rising.flip(0)

        class Crossfade(nn.Module):
            def __init__(self, size, device):
                super().__init__()
                fade_in, fade_out = window_pair(size)
                self.fade_in = fade_in.to(device)
                self.fade_out = fade_out.to(device)
                self.proj = nn.Linear(size, size)

            def forward(self, a, b):
                return self.proj(a * self.fade_in + b * self.fade_out)
        """
    after = before.replace(
        "self.fade_in = fade_in.to(device)",
        'self.register_buffer("fade_in", fade_in.to(device), persistent=False)',
    ).replace(
        "self.fade_out = fade_out.to(device)",
        'self.register_buffer("fade_out", fade_out.to(device), persistent=False)',
    )
    assert_fix(RULE, before, after, unsafe=True)
    # A helper that also returns a non-tensor in that place proves nothing: `fade_out` stays.
    maybe = before.replace("return rising, rising.flip(0)", "return rising, None")
    assert_fix(
        RULE,
        maybe,
        maybe.replace(
            "self.fade_in = fade_in.to(device)",
            'self.register_buffer("fade_in", fade_in.to(device), persistent=False)',
        ),
        unsafe=True,
    )


def test_a_tensor_made_trainable_on_one_path_only_is_a_buffer_on_the_other() -> None:
    before = """
        import torch
        from torch import nn

        class Denoiser(nn.Module):
            def __init__(self, steps, learn_scale=False):
                super().__init__()
                self.net = nn.Linear(8, 8)
                self.scale = torch.ones(steps)
                if learn_scale:
                    self.scale = nn.Parameter(self.scale)

            def forward(self, x, t):
                return self.net(x) * self.scale[t, None]
        """
    # `nn.Parameter` takes the buffer's name over where it is learnt; elsewhere the buffer
    # follows `model.to()`.
    assert_fix(
        RULE,
        before,
        before.replace(
            "self.scale = torch.ones(steps)",
            'self.register_buffer("scale", torch.ones(steps), persistent=False)',
        ),
        unsafe=True,
    )
    always = before.replace(
        "                if learn_scale:\n                    self.scale = nn.Parameter(self.scale)",
        "                self.scale = nn.Parameter(self.scale)",
    )
    assert_noop(RULE, always)


def test_a_helper_that_unpacks_its_own_result_proves_nothing_and_ends() -> None:
    # `a, b = pair(n - 1)` inside `pair`: the judge asks about the same return again.
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        def pair(n):
            if n == 0:
                return torch.ones(2), torch.zeros(2)
            a, b = pair(n - 1)
            return a, b

        class Halves(nn.Module):
            def __init__(self, n):
                super().__init__()
                first, _ = pair(n)
                self.first = first

            def forward(self, t):
                return t * self.first
        """,
    )


def test_a_table_each_reader_first_rebinds_to_its_input_follows_the_inputs() -> None:
    source = """
import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, shift=(0.4, 0.5, 0.6)):
        super().__init__()
        self.shift = torch.tensor(shift).view(1, -1, 1, 1)
        self.body = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, img):
        self.shift = self.shift.to(img)
        return self.body(img - self.shift) + self.shift
"""
    assert_declined(RULE, source, reason="follows the inputs in every replica")
    # A reader that does not rebind it first still needs the buffer.
    reader = (
        source
        + """
    def undo(self, out):
        return out + self.shift
"""
    )
    assert_fix(
        RULE,
        reader,
        reader.replace(
            "self.shift = torch.tensor(shift).view(1, -1, 1, 1)",
            'self.register_buffer("shift", torch.tensor(shift).view(1, -1, 1, 1), persistent=False)',
        ),
        unsafe=True,
    )


def test_a_table_from_a_function_annotated_to_return_a_tensor_becomes_a_buffer() -> None:
    source = """
import math

import torch
from torch import Tensor, nn


def distance_bias(heads: int, side: int) -> Tensor:
    cells = [(i, j) for i in range(side) for j in range(side)]
    slopes = torch.Tensor([2.0 ** -(h + 1) for h in range(heads)]).unsqueeze(1)
    rows = [math.dist(a, b) * -slopes for a in cells for b in cells]
    return torch.cat(rows, dim=1).view(1, heads, side * side, side * side)


def learned_bias(heads: int) -> Tensor:
    return nn.Parameter(torch.zeros(heads))


class Encoder(nn.Module):
    def __init__(self, heads: int = 4, side: int = 3):
        super().__init__()
        self.bias = distance_bias(heads, side)
        self.scale = learned_bias(heads)
        self.attn = nn.MultiheadAttention(16, heads, batch_first=True)

    def forward(self, x):
        mask = self.bias[0] + self.scale.view(-1, 1, 1)
        return self.attn(x, x, x, attn_mask=mask.repeat(x.shape[0], 1, 1))[0]
"""
    findings = assert_fix(
        RULE,
        source,
        source.replace(
            "self.bias = distance_bias(heads, side)",
            'self.register_buffer("bias", distance_bias(heads, side), persistent=False)',
        ),
        unsafe=True,
    )
    assert len(findings) == 1


def test_a_cache_handed_out_moved_to_the_callers_device_is_reported_not_rewritten() -> None:
    assert_declined(
        RULE,
        """
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.bias_table = None

    def table(self, n, device):
        if self.bias_table is not None and self.bias_table.shape[0] >= n:
            return self.bias_table[:n].to(device)
        table = torch.linspace(0, 1, n, device=device)
        self.bias_table = table
        return table

    def forward(self, x):
        return self.proj(x) + self.table(x.shape[-1], x.device)
""",
        reason="hands it out moved to the device its caller names",
    )


def test_a_table_reshaped_then_moved_to_a_submodules_device_at_each_read_is_reported() -> None:
    assert_declined(
        RULE,
        """
import torch
import torch.nn as nn


class SoftPrompt(nn.Module):
    def __init__(self, n_virtual, width):
        super().__init__()
        self.embed = nn.Embedding(n_virtual, width)
        self.virtual_ids = torch.arange(n_virtual).long()

    def forward(self, hidden):
        rows = hidden.size(0)
        ids = self.virtual_ids.unsqueeze(0).repeat(rows, 1).to(self.embed.weight.device)
        return torch.cat([self.embed(ids), hidden], dim=1)
""",
        reason="hands it out moved to the device its caller names",
    )


def test_a_cache_read_back_unmoved_in_one_place_is_still_registered() -> None:
    assert_fix(
        RULE,
        """
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.bias_table = None

    def table(self, n, device):
        if self.bias_table is not None:
            return self.bias_table[:n].to(device)
        self.bias_table = torch.linspace(0, 1, n, device=device)
        return self.bias_table

    def forward(self, x):
        return self.proj(x) + self.table(x.shape[-1], x.device)
""",
        """
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("bias_table", None, persistent=False)

    def table(self, n, device):
        if self.bias_table is not None:
            return self.bias_table[:n].to(device)
        self.bias_table = torch.linspace(0, 1, n, device=device)
        return self.bias_table

    def forward(self, x):
        return self.proj(x) + self.table(x.shape[-1], x.device)
""",
        unsafe=True,
    )


def test_a_table_indexed_by_a_tensor_before_its_move_is_still_registered() -> None:
    # `self.table[steps]` indexes the CPU table with the caller's (GPU) steps before `.to`.
    source = """
import torch
from torch import nn


class StepEmbedding(nn.Module):
    def __init__(self, steps, dim):
        super().__init__()
        self.table = torch.randn(steps, dim)

    def forward(self, steps):
        return self.table[steps].to(steps.device)
"""
    assert_fix(
        RULE,
        source,
        source.replace(
            "self.table = torch.randn(steps, dim)",
            'self.register_buffer("table", torch.randn(steps, dim), persistent=False)',
        ),
        unsafe=True,
    )


def test_a_cache_whose_reads_only_change_its_dtype_is_still_registered() -> None:
    source = """
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.freqs = None

    def forward(self, x):
        if self.freqs is None:
            self.freqs = torch.arange(x.shape[-1], device=x.device).float()
        return x * self.freqs.to(dtype=x.dtype)
"""
    assert_fix(
        RULE,
        source,
        source.replace(
            "self.freqs = None",
            'self.register_buffer("freqs", None, persistent=False)',
            1,
        ),
        unsafe=True,
    )


def test_a_module_built_inside_another_forward_reads_its_table_on_the_input_device() -> None:
    # `Weighting(...)` is made per call inside `Head.forward`: `model.to()` never reaches the
    # instance, so a buffer would stay where it was made; `.cuda()` fails on a CPU host.
    assert_fix(
        RULE,
        """
import torch
from torch import nn


class Weighting(nn.Module):
    def __init__(self, bins):
        super().__init__()
        self.centres = torch.linspace(0, 1, bins).view(1, -1).cuda()

    def forward(self, probs):
        return (probs * self.centres).sum(-1)


class Head(nn.Module):
    def __init__(self, dim, bins):
        super().__init__()
        self.bins = bins
        self.proj = nn.Linear(dim, bins)

    def forward(self, x):
        return Weighting(self.bins)(self.proj(x).softmax(-1))
""",
        """
import torch
from torch import nn


class Weighting(nn.Module):
    def __init__(self, bins):
        super().__init__()
        self.centres = torch.linspace(0, 1, bins).view(1, -1)

    def forward(self, probs):
        return (probs * self.centres.to(probs.device)).sum(-1)


class Head(nn.Module):
    def __init__(self, dim, bins):
        super().__init__()
        self.bins = bins
        self.proj = nn.Linear(dim, bins)

    def forward(self, x):
        return Weighting(self.bins)(self.proj(x).softmax(-1))
""",
        unsafe=True,
    )


def test_a_module_built_as_a_submodule_gets_its_table_registered() -> None:
    source = """
import torch
from torch import nn


class Weighting(nn.Module):
    def __init__(self, bins):
        super().__init__()
        self.centres = torch.linspace(0, 1, bins).view(1, -1)

    def forward(self, probs):
        return (probs * self.centres).sum(-1)


class Head(nn.Module):
    def __init__(self, dim, bins):
        super().__init__()
        self.proj = nn.Linear(dim, bins)
        self.weighting = Weighting(bins)

    def forward(self, x):
        return self.weighting(self.proj(x).softmax(-1))
"""
    assert_fix(
        RULE,
        source,
        source.replace(
            "self.centres = torch.linspace(0, 1, bins).view(1, -1)",
            'self.register_buffer("centres", torch.linspace(0, 1, bins).view(1, -1), '
            "persistent=False)",
        ),
        unsafe=True,
    )


_GRAPH_RECOMMENDER = """
import numpy as np
import torch
from torch import nn


class GraphRecommender(nn.Module):
    def __init__(self, interactions, dim, device):
        super().__init__()
        self.device = device
        self.embedding = nn.Embedding(interactions.shape[0], dim)
        self.adjacency = self._as_sparse(interactions).to(self.device)

    def _as_sparse(self, matrix):
        coo = matrix.tocoo()
        indices = torch.from_numpy(np.vstack([coo.row, coo.col])).long()
        return torch.sparse_coo_tensor(indices, torch.from_numpy(coo.data).float(), coo.shape)

    def forward(self, users):
        return torch.sparse.mm(self.adjacency, self.embedding.weight)[users]
"""


def test_a_sparse_adjacency_a_helper_builds_is_a_tensor_attribute_too() -> None:
    # `torch.sparse_coo_tensor(...)` is a tensor: kept as a plain attribute on the device of
    # the construction, it stays there when the model moves; a buffer follows it.
    findings = assert_fix(
        RULE,
        _GRAPH_RECOMMENDER,
        _GRAPH_RECOMMENDER.replace(
            "        self.adjacency = self._as_sparse(interactions).to(self.device)\n",
            '        self.register_buffer("adjacency", self._as_sparse(interactions).to(self.device)'
            ", persistent=False)\n",
        ),
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_a_module_whose_nn_comes_from_a_star_import_registers_its_tensors() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from models.common import *

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(4)

            def forward(self, feats):
                return feats * self.scale
        """,
        """
        import torch
        from models.common import *

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", torch.ones(4), persistent=False)

            def forward(self, feats):
                return feats * self.scale
        """,
        unsafe=True,
    )
