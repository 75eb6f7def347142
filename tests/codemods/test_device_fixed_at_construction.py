"""DF102 device-fixed-at-construction: inline cases."""

from __future__ import annotations

import textwrap

from devfix.engine import check_source
from devfix.types import Applicability, Options
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


def test_construction_helpers_discarded_moves_and_module_moves_are_left_alone() -> None:
    """`.cuda()` in a helper only `__init__` calls places what `__init__` places (after a
    `torch.cuda.set_device`, on the chosen GPU); a `.cuda()` whose result is thrown away moves
    nothing; `Net(...).cuda()` moves a module (DF105's business)."""
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Search(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.fc = nn.Linear(k, k)
                self._init_alphas(k)

            def _init_alphas(self, k):
                self.alphas = (1e-3 * torch.randn(k, 4).cuda()).requires_grad_()

            def new(self):
                return Search(4).cuda()

            def forward(self, x):
                pe = self.fc.weight[:, : x.size(1)]
                if x.is_cuda:
                    pe.cuda()
                return x + pe
        """,
    )


ONE_DEVICE_SCRIPT = """
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Encoder(nn.Module):
    def __init__(self, vocab, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(vocab, 8)
        self.pos = nn.Embedding(64, 8)

    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0).to(self.device)
        return self.tok(src) + self.pos(pos)


model = Encoder(100, device).to(device)
"""


def test_a_stored_device_is_a_latent_hazard_even_in_a_script_that_runs_on_it() -> None:
    # It works on the script's one device today, and breaks once the model is replicated or
    # moved after construction: reported, and fixed with a device the model already has.
    for script in (ONE_DEVICE_SCRIPT, ONE_DEVICE_SCRIPT + "model = nn.DataParallel(model)\n"):
        assert_fix(
            RULE,
            script,
            script.replace(".to(self.device)", ".to(self.pos.weight.device)"),
        )


def test_legacy_cuda_constructor_becomes_a_factory_on_the_labels_device() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def one_hot(labels, classes):
            canvas = torch.cuda.FloatTensor(labels.size(0), classes, labels.size(2)).zero_()
            return canvas.scatter_(1, labels.unsqueeze(1), 1)

        def offsets(labels):
            return labels.view(-1, 1) + torch.cuda.LongTensor([1, 2])
        """,
        """
        import torch

        def one_hot(labels, classes):
            canvas = torch.zeros(labels.size(0), classes, labels.size(2), dtype=torch.float32, device=labels.device)
            return canvas.scatter_(1, labels.unsqueeze(1), 1)

        def offsets(labels):
            return labels.view(-1, 1) + torch.tensor([1, 2], dtype=torch.int64, device=labels.device)
        """,
    )


def test_legacy_cuda_constructor_with_an_ambiguous_argument_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch

        def shift(x, values):
            return x.float() + torch.cuda.FloatTensor(values)
        """,
        reason="may be sizes or data",
    )


MARGIN_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class MarginHead(nn.Module):
    def __init__(self, d, n, gpu_ids):
        super().__init__()
        self.gpu_ids = gpu_ids
        self.weight = nn.Parameter(torch.randn(n, d))

    def forward(self, feats, label):
        parts = torch.chunk(self.weight, len(self.gpu_ids), dim=0)
        logits = F.linear(feats.cuda(self.gpu_ids[0]), parts[0].cuda(self.gpu_ids[0]))
        for i in range(1, len(self.gpu_ids)):
            part = F.linear(feats.cuda(self.gpu_ids[i]), parts[i].cuda(self.gpu_ids[i]))
            logits = torch.cat((logits, part.cuda(self.gpu_ids[0])), dim=1)
        mask = torch.zeros_like(logits)
        mask.scatter_(1, label.view(-1, 1), 1.0)
        return logits - 0.2 * mask
"""


def test_model_parallel_head_keeps_its_placement_and_moves_the_label() -> None:
    """The head splits its weight over `self.gpu_ids` on purpose: those moves stay. Under
    DataParallel the label stays on the replica's GPU, so it goes where the mask is."""
    findings = assert_fix(
        RULE,
        MARGIN_HEAD,
        MARGIN_HEAD.replace(
            "mask.scatter_(1, label.view(-1, 1), 1.0)",
            "mask.scatter_(1, label.view(-1, 1).to(mask.device), 1.0)",
        ),
    )
    assert len(findings) == 1 and "spreads its work" in findings[0].message


def test_a_model_class_whose_base_lives_in_another_file() -> None:
    source = """
        import torch
        import torch.nn as nn
        from base_model import BaseModel

        class BiLstmTagger(BaseModel):
            def __init__(self, args):
                super().__init__(args.bert_dir)
                self.device = torch.device("cuda:" + args.gpu_ids.split(",")[0])
                self.lstm = nn.LSTM(768, 128, bidirectional=True, batch_first=True)

            def init_hidden(self, batch_size):
                h0 = torch.zeros(2, batch_size, 128).to(self.device)
                return h0, h0.clone()

            def forward(self, seq):
                hidden = self.init_hidden(seq.size(0))
                out, _ = self.lstm(seq, hidden)
                return out
        """
    findings = assert_fix(
        RULE,
        source,
        source.replace(".to(self.device)", ".to(self.lstm.weight_ih_l0.device)"),
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_helpers_deliberate_offload_to_a_second_gpu_is_left_to_df304() -> None:
    """A helper of a training script that builds its own model and probes on `cuda:1`: the
    device is a choice (DF304 reports it), not a device that should follow an argument, and
    one rule reports the literal, not two."""
    assert_noop(
        RULE,
        """
        import torch

        DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

        def worst_case(expr, grid):
            critic = build_critic(expr).to("cuda:1")
            probes = torch.rand(grid.shape[0], grid.shape[1]).to("cuda:1")
            return critic(probes).max().cuda(1)

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = criterion(model(x.to(DEVICE)), y.to(DEVICE))
                loss.backward()
                optimizer.step()
        """,
    )


def test_a_tensor_moved_on_to_an_input_s_device_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        GPU = torch.device("cuda:0")

        class Positions(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.table = nn.Embedding(64, 4)

            def forward(self, ids):
                first = torch.arange(ids.size(1), device=self.device).to(device=ids.device)
                second = torch.arange(ids.size(1), device=GPU).unsqueeze(0).to(ids.device)
                return self.table(first) + self.table(second)
        """,
    )


def test_a_dtype_conversion_after_the_fixed_device_is_no_move() -> None:
    findings = check_source(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn

            class Positions(nn.Module):
                def __init__(self, device):
                    super().__init__()
                    self.device = device

                def forward(self, ids):
                    return ids + torch.arange(ids.size(1), device=self.device).to(torch.float32)
            """
        ),
        options=Options(select=(RULE,)),
    )
    assert [f.code for f in findings] == [RULE]


def test_a_lightning_module_s_own_device_string_is_fixed_but_its_device_property_is_not() -> None:
    findings = check_source(
        textwrap.dedent(
            """
            import torch
            from lightning.pytorch import LightningModule

            class Denoiser(LightningModule):
                def __init__(self, net, compute_device="cpu"):
                    super().__init__()
                    self.net = net
                    self.compute_device = compute_device

                def validation_step(self, batch, batch_idx):
                    sigma = torch.rand(batch.size(0), 1).to(self.compute_device)
                    clean = torch.ones(1).to(self.device)
                    return self.net(batch + sigma) - clean
            """
        ),
        options=Options(select=(RULE,)),
    )
    assert [(f.line, f.code) for f in findings] == [(12, RULE)]
    assert "`self.compute_device`, stored in `__init__`" in findings[0].message


def test_devices_read_from_kept_options_and_global_options_objects() -> None:
    before = """
        import torch
        import torch.nn as nn

        cfg = load_config()

        class Memory(nn.Module):
            def __init__(self, hparams):
                super().__init__()
                self.hparams_ = hparams
                self.cell = nn.GRUCell(4, 4)

            def forward(self, x):
                state = torch.zeros(x.size(0), 4).to(self.hparams_.device)
                gate = torch.ones(x.size(0), 1, device=cfg.DEVICE)
                return self.cell(x * gate, state)
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(".to(self.hparams_.device)", ".to(x.device)").replace(
            "device=cfg.DEVICE", "device=x.device"
        ),
    )
    assert [f.message.split(";")[0] for f in findings] == [
        "`forward` moves a tensor to `self.hparams_.device`, an option the constructor keeps",
        "`forward` moves a tensor to the global `cfg.DEVICE`",
    ]


def test_a_submodule_s_own_device_is_no_stored_option() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder

            def forward(self, x):
                return self.encoder(x) + torch.zeros(1, device=self.encoder.device)
        """,
    )


_TARGET_BUILDER = """
    import torch
    import torch.nn as nn

    class AnchorTargets:
        def __init__(self, net, anchors=3):
            self.per_cell = anchors
            self.device = next(net.parameters()).device

        def assign(self, preds, boxes):
            k, n = self.per_cell, boxes.shape[0]
            scale = torch.ones(6, device=self.device)
            idx = torch.arange(k, device=self.device).float().view(k, 1).repeat(1, n)
            return torch.cat((boxes.repeat(k, 1, 1), idx[..., None]), 2) * scale
"""


def test_an_object_built_around_a_placed_model_follows_that_models_device() -> None:
    # Built by the script after placing `net` (a loss, a target assigner), outside any replica:
    # the device read from the model's parameters is where its inputs are.
    assert_noop(
        RULE,
        _TARGET_BUILDER
        + """
    net = nn.Linear(6, 6).to("cuda")
    targets = AnchorTargets(net)
    """,
    )


def test_the_same_object_built_inside_a_model_reads_a_device_too_early() -> None:
    # Built in the model's own __init__, the parameters it reads are still on the CPU.
    before = (
        _TARGET_BUILDER
        + """
    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(6, 6)
            self.targets = AnchorTargets(self)

        def forward(self, x, boxes):
            return self.targets.assign(self.head(x), boxes)
    """
    )
    findings = assert_fix(
        RULE,
        before,
        before.replace("arange(k, device=self.device)", "arange(k, device=boxes.device)"),
    )
    # `scale` meets only the result of `torch.cat`: reported, with no device to take.
    assert [(f.line, f.has_fix) for f in findings] == [(12, False), (13, True)]


def test_a_cast_to_another_tensors_type_name_becomes_a_move_to_that_tensor() -> None:
    # `torch.cuda.FloatTensor` names no GPU: `.type(x.type())` lands on the current device.
    before = """
        import torch
        import torch.nn as nn

        class Smoothing(nn.Module):
            def __init__(self, eps):
                super().__init__()
                self.eps = eps

            def forward(self, scores, hits):
                floor = torch.tensor(self.eps).type(scores.type())
                mask = hits.unsqueeze(-1).type(scores[0].type())
                return torch.maximum(scores * mask, floor)
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(".type(scores.type())", ".to(scores)").replace(
            ".type(scores[0].type())", ".to(scores[0])"
        ),
    )
    assert all(f.applicability is Applicability.SAFE for f in findings)
    # A module cast (`Module.type`) is the module's own business.
    assert_noop(
        RULE,
        """
        import torch.nn as nn

        class Wrapper(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                self.inner.type(x.type())
                return self.inner(x)
        """,
    )


def test_with_nothing_else_in_scope_the_modules_own_layer_gives_the_device() -> None:
    # No tensor in `init_state` tells where the state goes; the module's work runs where its
    # parameters are (in each replica, after `model.to()`), so a layer of its own does.
    before = """
        import torch
        import torch.nn as nn

        class Cell(nn.Module):
            def __init__(self, channels, size):
                super().__init__()
                self.channels, self.size = channels, size
                self.gates = nn.Conv2d(2 * channels, 4 * channels, 3, padding=1)

            def init_state(self, batch):
                return torch.zeros(batch, self.channels, self.size, self.size).cuda()
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(".cuda()", ".to(self.gates.weight.device)"),
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "a judgement" in findings[0].message
    # A module that puts its own layers on devices of its choosing: a layer's device says
    # nothing about where another method's tensor belongs.
    assert_declined(
        RULE,
        before.replace(
            "padding=1)\n",
            'padding=1)\n                self.gates.to("cuda:1")\n',
        ),
        reason="no tensor or layer in scope tells",
    )


def test_a_local_device_set_to_a_cuda_literal_in_model_code_follows_the_input() -> None:
    before = """
        import torch

        def shifted(points):
            n = points.size(0)
            where = torch.device("cuda")
            base = torch.arange(0, n, device=where).view(-1, 1, 1) * points.size(1)
            return points + base
        """
    findings = assert_fix(RULE, before, before.replace("device=where)", "device=points.device)"))
    assert '`where`, set to `torch.device("cuda")`' in findings[0].message
    # A local set to a device only some branches choose is not a literal of the function's own.
    assert_noop(
        RULE,
        before.replace(
            'where = torch.device("cuda")',
            'where = torch.device("cuda") if points.is_cuda else torch.device("cpu")',
        ),
    )


def test_a_literal_gpu_in_a_library_helper_class_takes_the_device_the_class_reads() -> None:
    # A library's matcher around a model (no training here): the empty result is pinned to
    # GPU 0, which breaks a CPU run and every DDP rank but the first; the class already takes
    # its device from `boxes` in `__call__`.
    findings = assert_fix(
        "DF102",
        """
        import torch

        class Matcher:
            def __init__(self, model):
                self.strides = [p.shape[0] for p in model.parameters()]

            def __call__(self, preds, boxes):
                device = boxes.device
                keep = self.match(preds, boxes)
                return [k.to(device) for k in keep]

            def match(self, preds, boxes):
                found = []
                for level, pred in enumerate(preds):
                    if boxes.shape[0] == 0:
                        found.append(torch.zeros(0, dtype=torch.long, device="cuda:0"))
                    else:
                        found.append((pred[:, 0] > level).nonzero())
                return found
        """,
        """
        import torch

        class Matcher:
            def __init__(self, model):
                self.strides = [p.shape[0] for p in model.parameters()]

            def __call__(self, preds, boxes):
                device = boxes.device
                keep = self.match(preds, boxes)
                return [k.to(device) for k in keep]

            def match(self, preds, boxes):
                found = []
                for level, pred in enumerate(preds):
                    if boxes.shape[0] == 0:
                        found.append(torch.zeros(0, dtype=torch.long, device=boxes.device))
                    else:
                        found.append((pred[:, 0] > level).nonzero())
                return found
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.UNSAFE]


def test_a_value_type_checked_as_a_tensor_and_sent_to_a_literal_gpu_follows_the_model() -> None:
    # A sampler keeps schedule tensors beside the model it wraps: `isinstance` says the
    # argument is a tensor; the class reads `self.net.device` elsewhere, and never the moved
    # value's own device.
    findings = assert_fix(
        "DF102",
        """
        import torch

        class Schedule:
            def __init__(self, net):
                self.net = net

            def keep(self, name, value):
                if isinstance(value, torch.Tensor):
                    value = value.float().to(torch.device("cuda"))
                setattr(self, name, value)

            def build(self, betas):
                self.keep("betas", betas.to(self.net.device))
        """,
        """
        import torch

        class Schedule:
            def __init__(self, net):
                self.net = net

            def keep(self, name, value):
                if isinstance(value, torch.Tensor):
                    value = value.float().to(self.net.device)
                setattr(self, name, value)

            def build(self, betas):
                self.keep("betas", betas.to(self.net.device))
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.UNSAFE]


def test_a_literal_gpu_beside_values_brought_to_a_device_parameter_follows_the_parameter() -> None:
    # A sampler takes the device its caller trains on and sends the positives there, but the
    # anchors to the current GPU: with `device="cuda:1"` the two part.
    findings = assert_fix(
        "DF102",
        """
        import torch

        def sample_pairs(pool: torch.Tensor, size: int, device="cpu"):
            ix = torch.randint(len(pool) - 1, (size,))
            anchors = torch.stack([pool[i] for i in ix])
            positives = torch.stack([pool[i + 1] for i in ix])
            if str(device).startswith("cuda"):
                anchors = anchors.pin_memory().to("cuda", non_blocking=True)
            return anchors, positives.to(device)
        """,
        """
        import torch

        def sample_pairs(pool: torch.Tensor, size: int, device="cpu"):
            ix = torch.randint(len(pool) - 1, (size,))
            anchors = torch.stack([pool[i] for i in ix])
            positives = torch.stack([pool[i + 1] for i in ix])
            if str(device).startswith("cuda"):
                anchors = anchors.pin_memory().to(device, non_blocking=True)
            return anchors, positives.to(device)
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.UNSAFE]
    assert "brings its other values to its parameter `device`" in findings[0].message


def test_a_literal_gpu_in_a_function_that_only_makes_tensors_on_its_device_parameter_is_not_fixed() -> (
    None
):
    # `device` is only where the function's own factories go: no value is brought there, so
    # nothing says the literal GPU must follow it.
    findings = check_source(
        textwrap.dedent(
            """
            import torch

            def buffers(x: torch.Tensor, device):
                table = torch.zeros(x.shape[0]).to(device)
                return table, torch.ones(x.shape[0]).to("cuda")
            """
        ),
        "helpers.py",
        Options(select=("DF102",)),
    )
    assert [f.code for f in findings] == ["DF102"]
    assert "parameter `device`" not in findings[0].message


def test_a_device_variable_in_a_library_helper_class_is_left_to_the_script() -> None:
    assert_noop(
        "DF102",
        """
        import torch

        class Matcher:
            def __init__(self, model, device):
                self.device = device
                self.strides = [p.shape[0] for p in model.parameters()]

            def match(self, preds, boxes):
                if boxes.shape[0] == 0:
                    return torch.zeros(0, dtype=torch.long, device=self.device)
                return (preds[:, 0] > 0).nonzero()
        """,
    )


def test_an_openmmlab_style_model_built_from_registries_moves_to_its_own_parameters() -> None:
    """`forward` lives in the project's base class; the parts come from config registries, so
    no layer type is in the file: the device is the module's parameters' (a judgement)."""
    findings = assert_fix(
        RULE,
        """
        import torch
        from .base import BaseDetector
        from ..builder import build_backbone, build_head


        class TwoStage(BaseDetector):
            def __init__(self, backbone, head, init_cfg=None):
                super().__init__(init_cfg)
                self.backbone = build_backbone(backbone)
                self.head = build_head(head)

            def forward_train(self, img, gt_boxes):
                boxes = gt_boxes.cuda()
                return self.head.loss(self.backbone(img), boxes)
        """,
        """
        import torch
        from .base import BaseDetector
        from ..builder import build_backbone, build_head


        class TwoStage(BaseDetector):
            def __init__(self, backbone, head, init_cfg=None):
                super().__init__(init_cfg)
                self.backbone = build_backbone(backbone)
                self.head = build_head(head)

            def forward_train(self, img, gt_boxes):
                boxes = gt_boxes.to(next(self.parameters()).device)
                return self.head.loss(self.backbone(img), boxes)
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE


def test_a_class_with_forward_train_but_no_registry_parts_is_not_taken_for_a_model() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from .base import Runner


        class Loop(Runner):
            def __init__(self, cfg):
                super().__init__(cfg)
                self.steps = cfg.steps

            def forward_train(self, batch):
                return batch.cuda()
        """,
    )


def test_what_a_layer_of_the_module_returned_is_already_on_its_device() -> None:
    # The move is dropped, not rewritten to the layer's weight: under DataParallel the
    # replica's layer already put it there. A move that also casts keeps its cast.
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn as tnn

        class Tagger(tnn.Module):
            def __init__(self, vocab, dev):
                super().__init__()
                self.device = dev
                self.emb = tnn.Embedding(vocab, 8)
                self.proj = tnn.Linear(8, 4)

            def forward(self, ids):
                vectors = self.emb(ids).to(self.device)  # look-up
                half = self.proj(vectors).to(self.device, dtype=torch.float16)
                return vectors, half
        """,
        """
        import torch
        from torch import nn as tnn

        class Tagger(tnn.Module):
            def __init__(self, vocab, dev):
                super().__init__()
                self.device = dev
                self.emb = tnn.Embedding(vocab, 8)
                self.proj = tnn.Linear(8, 4)

            def forward(self, ids):
                vectors = self.emb(ids)  # look-up
                half = self.proj(vectors).to(self.emb.weight.device, dtype=torch.float16)
                return vectors, half
        """,
        unsafe=True,
    )
    assert "already on that layer's device" in findings[0].message
    assert findings[0].applicability is Applicability.SAFE


def test_a_move_guarded_by_an_inputs_is_cuda_goes_to_that_input() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch.autograd import Variable

        def warp(image, flow):
            n, c, h, w = image.size()
            grid = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w)), 0).float()
            if image.is_cuda:
                grid = grid.cuda()  # same GPU
            else:
                grid = grid.cuda()
            return Variable(grid) + flow
        """,
        """
        import torch
        from torch.autograd import Variable

        def warp(image, flow):
            n, c, h, w = image.size()
            grid = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w)), 0).float()
            if image.is_cuda:
                grid = grid.to(image.device)  # same GPU
            else:
                grid = grid.cuda()
            return Variable(grid) + flow
        """,
        unsafe=True,
    )
    assert "runs only when `image.is_cuda`" in findings[0].message
    assert findings[0].applicability is Applicability.SAFE


def test_a_helper_handed_the_stored_device_gets_the_inputs_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from search import BeamSearch

        class Decoder(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.out = nn.Linear(8, 8)

            def forward(self, memory):
                beam = BeamSearch(width=4, device=self.device)  # the beams' tensors
                return beam.run(self.out, memory.transpose(0, 1))
        """,
        """
        import torch
        from torch import nn
        from search import BeamSearch

        class Decoder(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.out = nn.Linear(8, 8)

            def forward(self, memory):
                beam = BeamSearch(width=4, device=memory.device)  # the beams' tensors
                return beam.run(self.out, memory.transpose(0, 1))
        """,
        unsafe=True,
    )
    assert "hands `BeamSearch` `self.device`" in findings[0].message


def test_a_helper_handed_the_stored_device_with_several_inputs_is_reported() -> None:
    assert_declined(
        RULE,
        """
        from torch import nn
        from search import BeamSearch

        class Decoder(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.out = nn.Linear(8, 8)

            def forward(self, memory, prefix):
                beam = BeamSearch(width=4, device=self.device)
                return beam.run(self.out, memory.transpose(0, 1), prefix.unsqueeze(1))
        """,
        reason="no single tensor argument tells which",
    )


def test_a_method_choosing_its_own_gpu_in_a_local_follows_the_tensor_its_moves_meet() -> None:
    # The local is bound once, from `torch.cuda.is_available()`: it names the default GPU
    # whatever device the emissions are on (a replica's, or the CPU after `model.cpu()`).
    assert_fix(
        "DF102",
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def decode(self, emissions):
                device = "cuda" if torch.cuda.is_available() else "cpu"
                best = torch.zeros(emissions.size(0), dtype=torch.long).to(device)
                steps = torch.ones(emissions.size(0), dtype=torch.long).to(device)
                return best + steps * emissions.argmax(-1)
        """,
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def decode(self, emissions):
                device = emissions.device
                best = torch.zeros(emissions.size(0), dtype=torch.long).to(device)
                steps = torch.ones(emissions.size(0), dtype=torch.long).to(device)
                return best + steps * emissions.argmax(-1)
        """,
        unsafe=True,
    )


def test_a_local_gpu_choice_made_before_the_tensor_exists_is_fixed_at_each_move() -> None:
    findings = assert_fix(
        "DF102",
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def decode(self, tokens):
                device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                scores = self.emit(tokens)
                return scores + torch.zeros(scores.shape[0], 1).to(device)
        """,
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def decode(self, tokens):
                device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                scores = self.emit(tokens)
                return scores + torch.zeros(scores.shape[0], 1).to(scores.device)
        """,
        unsafe=True,
    )
    assert "chooses its own device" not in findings[0].message


def test_a_cuda_move_of_a_name_follows_the_tensor_its_current_value_was_shaped_after() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Masked(nn.Module):
            def forward(self, seq, lengths=None):
                if lengths is None:
                    lengths = torch.full((seq.size(0),), seq.size(1), dtype=torch.long, device=seq.device)
                    if self.on_gpu:
                        lengths = lengths.cuda()
                steps = torch.arange(8)
                if self.on_gpu:
                    steps = steps.cuda()
                return seq, lengths, steps
        """,
        """
        import torch
        from torch import nn

        class Masked(nn.Module):
            def forward(self, seq, lengths=None):
                if lengths is None:
                    lengths = torch.full((seq.size(0),), seq.size(1), dtype=torch.long, device=seq.device)
                    if self.on_gpu:
                        lengths = lengths.to(seq.device)
                steps = torch.arange(8)
                if self.on_gpu:
                    steps = steps.cuda()
                return seq, lengths, steps
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings if f.edits] == [Applicability.UNSAFE]


def test_a_tensor_made_at_import_follows_the_model_tensor_it_meets() -> None:
    assert_fix(
        RULE,
        """
        import torch as th
        from torch import nn

        PIXEL_MEAN = th.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        CORNERS = th.tensor([[0, 0], [0, 1], [1, 0], [1, 1]], device="cuda")
        SCALE = th.tensor(2.0)

        def corner_indices(cells: th.Tensor) -> th.Tensor:
            base = cells.floor().long()
            return base.unsqueeze(1) + CORNERS

        def halve(cells: th.Tensor) -> th.Tensor:
            return cells / SCALE

        class Backbone(nn.Module):
            def forward(self, images):
                return (images - PIXEL_MEAN) * 2
        """,
        """
        import torch as th
        from torch import nn

        PIXEL_MEAN = th.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        CORNERS = th.tensor([[0, 0], [0, 1], [1, 0], [1, 1]], device="cuda")
        SCALE = th.tensor(2.0)

        def corner_indices(cells: th.Tensor) -> th.Tensor:
            base = cells.floor().long()
            return base.unsqueeze(1) + CORNERS.to(base.device)

        def halve(cells: th.Tensor) -> th.Tensor:
            return cells / SCALE

        class Backbone(nn.Module):
            def forward(self, images):
                return (images - PIXEL_MEAN.to(images.device)) * 2
        """,
    )


def test_a_global_tensor_shadowed_or_met_by_nothing_known_is_not_rewritten() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        TABLE = torch.arange(10, device="cuda")

        class Lookup(nn.Module):
            def forward(self, x):
                TABLE = torch.arange(10, device=x.device)
                return x + TABLE

        def offset(x, k):
            return x + k * 0 + TABLE[k] if False else x
        """,
    )


def test_a_cuda_move_of_a_tensor_already_sent_to_the_callers_device_is_dropped() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        @torch.no_grad()
        def score(model, ids, device, window=512):
            losses = []
            for start in range(0, ids.size(1), window):
                chunk = ids[:, start : start + window].to(device)
                out = model(chunk.cuda(), labels=chunk.cuda())
                losses.append(out.loss)
            return torch.stack(losses).mean()
        """,
        """
        import torch

        @torch.no_grad()
        def score(model, ids, device, window=512):
            losses = []
            for start in range(0, ids.size(1), window):
                chunk = ids[:, start : start + window].to(device)
                out = model(chunk, labels=chunk)
                losses.append(out.loss)
            return torch.stack(losses).mean()
        """,
        unsafe=True,
    )
    assert "already on `device`" in findings[0].message


def test_layer_of_a_star_import_built_on_the_gpu_in_init_is_built_in_place() -> None:
    # `Block` comes from a star import: that `forward` calls `self.block` makes it a layer.
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from blocks import *

        class Forecaster(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.block = Block(dims, hidden=2 * dims).to('cuda:0')
                self.scale = torch.ones(dims).to('cuda:0')

            def forward(self, x):
                return self.block(x) * self.scale.to(x.device)
        """,
        """
        import torch
        from torch import nn
        from blocks import *

        class Forecaster(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.block = Block(dims, hidden=2 * dims)
                self.scale = torch.ones(dims).to('cuda:0')

            def forward(self, x):
                return self.block(x) * self.scale.to(x.device)
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.UNSAFE]
    assert "`__init__` builds `self.block` on `'cuda:0'`" in findings[0].message


def test_layers_built_on_two_gpus_by_hand_are_model_parallelism() -> None:
    source = textwrap.dedent(
        """
        from torch import nn

        class TwoStage(nn.Module):
            def __init__(self):
                super().__init__()
                self.first = nn.Linear(8, 8).to("cuda:0")
                self.second = nn.Linear(8, 2).cuda(1)

            def forward(self, x):
                return self.second(self.first(x.to("cuda:0")).to("cuda:1"))
        """
    )
    findings = check_source(source, options=Options(select=(RULE,), unsafe_fixes=True))
    assert not [f for f in findings if f.line in (7, 8)], [f.message for f in findings]


def test_layer_moved_to_a_device_parameter_in_init_is_left() -> None:
    # The caller names the device: the layer goes where the rest of the model is sent.
    assert_noop(
        RULE,
        """
        from torch import nn

        class Head(nn.Module):
            def __init__(self, dims, device):
                super().__init__()
                self.proj = nn.Linear(dims, 2).to(device)

            def forward(self, x):
                return self.proj(x)
        """,
    )


def test_flagged_gpu_move_of_a_mask_follows_the_tensor_it_meets_later() -> None:
    # `x.cuda() if flag else x`: the whole conditional goes (the move to the emissions'
    # device is right with the flag set or not); the emissions' slice is bound only after the
    # mask, but it is on the device of `emissions`, which the mask statement can name.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self, labels, use_gpu):
                super().__init__()
                self.transitions = nn.Parameter(torch.randn(labels, labels))
                self.use_gpu = use_gpu

            def _step(self, emissions, mask, t):
                mask_t = mask[:, t]
                mask_t = mask_t.cuda() if self.use_gpu else mask_t
                score_t = emissions[:, t].sum(-1)
                return score_t * mask_t
        """,
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self, labels, use_gpu):
                super().__init__()
                self.transitions = nn.Parameter(torch.randn(labels, labels))
                self.use_gpu = use_gpu

            def _step(self, emissions, mask, t):
                mask_t = mask[:, t]
                mask_t = mask_t.to(emissions.device)
                score_t = emissions[:, t].sum(-1)
                return score_t * mask_t
        """,
        unsafe=True,
    )


def test_gpu_move_meets_the_output_of_a_layer_without_parameters() -> None:
    # `nn.LogSoftmax` holds no parameters, but what it returns is a tensor on the input's
    # device: the smoothed targets follow it.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class SmoothedLoss(nn.Module):
            def __init__(self, classes, eps=0.1):
                super().__init__()
                self.classes, self.eps = classes, eps
                self.log_softmax = nn.LogSoftmax(dim=1)

            def forward(self, logits, labels):
                log_probs = self.log_softmax(logits)
                onehot = torch.zeros(log_probs.size()).scatter_(1, labels.unsqueeze(1).cpu(), 1)
                onehot = onehot.cuda()
                onehot = (1 - self.eps) * onehot + self.eps / self.classes
                return (-onehot * log_probs).sum(1).mean()
        """,
        """
        import torch
        from torch import nn

        class SmoothedLoss(nn.Module):
            def __init__(self, classes, eps=0.1):
                super().__init__()
                self.classes, self.eps = classes, eps
                self.log_softmax = nn.LogSoftmax(dim=1)

            def forward(self, logits, labels):
                log_probs = self.log_softmax(logits)
                onehot = torch.zeros(log_probs.size()).scatter_(1, labels.unsqueeze(1).cpu(), 1)
                onehot = onehot.to(log_probs.device)
                onehot = (1 - self.eps) * onehot + self.eps / self.classes
                return (-onehot * log_probs).sum(1).mean()
        """,
        unsafe=True,
    )


def test_cpu_tensor_a_plain_loss_object_makes_in_init_follows_what_it_meets() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        class PinballLoss:
            def __init__(self, taus):
                self.taus = torch.tensor(taus)

            def __call__(self, pred, target):
                diff = target.unsqueeze(-1) - pred
                under = self.taus * diff
                return torch.max(under, (self.taus - 1) * diff)
        """,
        """
        import torch

        class PinballLoss:
            def __init__(self, taus):
                self.taus = torch.tensor(taus)

            def __call__(self, pred, target):
                diff = target.unsqueeze(-1) - pred
                under = self.taus.to(diff.device) * diff
                return torch.max(under, (self.taus.to(diff.device) - 1) * diff)
        """,
    )
    assert {f.applicability for f in findings} == {Applicability.SAFE}


def test_plain_object_tensors_left_when_scalar_moved_by_the_object_or_a_dataset() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import Dataset

        class MarginLoss:
            def __init__(self):
                self.margin = torch.tensor(0.5)

            def __call__(self, pos, neg):
                return (self.margin - pos + neg).clamp(min=0).mean()

        class Scaler:
            def __init__(self, scale):
                self.scale = torch.tensor(scale)

            def to(self, device):
                self.scale = self.scale.to(device)
                return self

            def __call__(self, x):
                return x * self.scale

        class Normalized(Dataset):
            def __init__(self, images):
                self.images = images
                self.mean = torch.tensor([0.5, 0.5, 0.5])

            def __getitem__(self, i):
                return self.images[i] - self.mean
        """,
    )


def test_cpu_table_indexed_with_a_literal_or_without_tensors_at_hand_is_left() -> None:
    assert_noop(
        RULE,
        """
        import torch

        class Schedule:
            def __init__(self, steps):
                self.betas = torch.linspace(1e-4, 0.02, steps)
                self.alphas = 1 - self.betas

            def first(self, x):
                return self.alphas[0] * x.new_ones(())

            def at(self, step):
                return self.alphas[step].item()
        """,
    )


def test_legacy_type_chosen_by_is_cuda_becomes_a_factory_on_that_tensors_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x):
                LongTensor = torch.cuda.LongTensor if x.is_cuda else torch.LongTensor
                FloatTensor = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor
                boxes = FloatTensor(x.shape[0], 4)
                order = LongTensor([2, 0, 1])
                return boxes.zero_() + x[:, order].sum()
        """,
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x):
                LongTensor = torch.cuda.LongTensor if x.is_cuda else torch.LongTensor
                FloatTensor = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor
                boxes = torch.empty(x.shape[0], 4, dtype=torch.float32, device=x.device)
                order = torch.tensor([2, 0, 1], dtype=torch.int64, device=x.device)
                return boxes.zero_() + x[:, order].sum()
        """,
    )


def test_move_of_what_a_layer_handed_to_the_constructor_returned_is_dropped() -> None:
    # `self.inner = inner` is a module the wrapper is given: it is called and its parameters
    # are read, so its output is already on its own device.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Frozen(nn.Module):
            def __init__(self, inner, device):
                super().__init__()
                self.inner = inner
                self.device = device
                for p in self.inner.parameters():
                    p.requires_grad_(False)

            def forward(self, x):
                return self.inner(x).to(self.device)
        """,
        """
        import torch
        from torch import nn

        class Frozen(nn.Module):
            def __init__(self, inner, device):
                super().__init__()
                self.inner = inner
                self.device = device
                for p in self.inner.parameters():
                    p.requires_grad_(False)

            def forward(self, x):
                return self.inner(x)
        """,
    )


def test_literal_gpu_in_a_function_that_runs_a_model_it_was_handed_follows_that_model() -> None:
    # `direction` is a tensor argument, so this is model code; what it puts on "cuda" meets
    # the outputs of the Hugging Face model the caller placed (annotated, so it has `.device`).
    findings = assert_fix(
        RULE,
        """
        import torch
        from transformers import PreTrainedModel

        def steer(lm: PreTrainedModel, ids, direction: torch.Tensor, scale):
            bias = torch.full((lm.config.hidden_size,), scale, device="cuda")
            hidden = lm(ids.cuda(), output_hidden_states=True).hidden_states[-1]
            return hidden + bias, direction.norm()
        """,
        """
        import torch
        from transformers import PreTrainedModel

        def steer(lm: PreTrainedModel, ids, direction: torch.Tensor, scale):
            bias = torch.full((lm.config.hidden_size,), scale, device=lm.device)
            hidden = lm(ids.to(lm.device), output_hidden_states=True).hidden_states[-1]
            return hidden + bias, direction.norm()
        """,
        unsafe=True,
    )
    assert all("runs `lm` (line 7)" in f.message for f in findings)


def test_move_to_a_device_parameter_follows_the_tensor_argument_the_value_meets() -> None:
    # The mask meets `labels` (through a comparison bound after it): a caller passing another
    # device, or keeping the "cpu" default, makes `&` fail. The meeting proves the device.
    findings = assert_fix(
        RULE,
        """
        import torch

        def pair_mask(labels, device="cpu"):
            distinct = torch.eye(labels.size(0), dtype=torch.bool).to(device)
            same = labels.unsqueeze(0) == labels.unsqueeze(1)
            return same & ~distinct
        """,
        """
        import torch

        def pair_mask(labels, device="cpu"):
            distinct = torch.eye(labels.size(0), dtype=torch.bool).to(labels.device)
            same = labels.unsqueeze(0) == labels.unsqueeze(1)
            return same & ~distinct
        """,
    )
    assert "its parameter `device`" in findings[0].message


def test_move_to_a_device_parameter_without_a_tensor_it_meets_is_the_callers_choice() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def noise_like(x, device):
            return torch.randn(x.shape).to(device)

        def offset(labels, device):
            if device is None:
                device = labels.device
            return labels + torch.ones(labels.shape).to(device)

        def scaled(labels, target):
            return labels * torch.ones(labels.shape).to(target)

        def valid_pairs(scores, labels, device):
            # brings its inputs to `device` itself: that is where they meet
            labels = labels.reshape(-1).to(device)
            keep = torch.where(labels >= 0)[0].to(device)
            return torch.gather(scores, 0, keep), torch.gather(labels, 0, keep)

        def ramp(start: torch.Tensor, steps, device=None):
            # a factory's `device=` is the function's API
            return start + torch.linspace(0, 1, steps, device=device)

        def copy_to(x: torch.Tensor, device):
            flat = torch.as_strided(x, (x.numel(),), (1,))
            return torch.as_strided(flat.to(device, copy=True), x.size(), x.stride())
        """,
    )


def test_functional_data_parallel_makes_a_stored_device_a_bug_not_a_hazard() -> None:
    source = """
        import torch
        from torch import nn

        gpu = torch.device("cuda:0")

        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, feats):
                offset = torch.full((4,), 0.5).to(gpu)
                return self.proj(feats) + offset

        scorer = Scorer().to(gpu)
        scores = nn.parallel.data_parallel(scorer, torch.randn(8, 4).to(gpu), device_ids=[0, 1])
        """
    findings = [
        f
        for f in check_source(textwrap.dedent(source), options=Options(select=("DF102",)))
        if f.code == "DF102"
    ]
    assert len(findings) == 1
    assert "forward` moves a tensor to the global `gpu`" in findings[0].message
    assert "one device today" not in findings[0].message


def test_a_helper_handed_the_global_device_by_position_gets_the_input_s_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn

        DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def band(width, n, dev):
            return torch.ones(n, n, device=dev).tril(width).triu(-width)

        class Local(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)

            def forward(self, h):
                print("running on", DEV)
                weights = band(2, h.size(1), DEV)
                return weights @ self.proj(h)
        """,
        """
        import torch
        import torch.nn as nn

        DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def band(width, n, dev):
            return torch.ones(n, n, device=dev).tril(width).triu(-width)

        class Local(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)

            def forward(self, h):
                print("running on", DEV)
                weights = band(2, h.size(1), h.device)
                return weights @ self.proj(h)
        """,
        unsafe=True,
    )


def test_a_literal_gpu_beside_a_new_tensor_moved_to_the_input_follows_that_tensor() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def denoise(net, z, steps):
            h = z
            for k in range(steps):
                level = (torch.ones(z.size(0)) * k).to(z.device)
                h = h.to("cuda")
                h = h - net(h, level.float())
            return h
        """,
        """
        import torch

        def denoise(net, z, steps):
            h = z
            for k in range(steps):
                level = (torch.ones(z.size(0)) * k).to(z.device)
                h = h.to(level.device)
                h = h - net(h, level.float())
            return h
        """,
        unsafe=True,
    )


def test_a_batch_read_by_string_keys_is_a_mapping_whose_entries_hold_the_tensors() -> None:
    # `batch["x"].shape` says nothing about `batch` itself: `batch.device` would raise.
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Denoiser(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.net = nn.Linear(4, 4)

            def forward(self, batch):
                n = batch["x"].shape[0]
                scale = torch.full((n, 1), 0.5, device=self.device)
                return self.net(batch["x"] * scale)
        """,
        """
        import torch
        from torch import nn

        class Denoiser(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.device = device
                self.net = nn.Linear(4, 4)

            def forward(self, batch):
                n = batch["x"].shape[0]
                scale = torch.full((n, 1), 0.5, device=self.net.weight.device)
                return self.net(batch["x"] * scale)
        """,
    )


def test_a_cast_to_a_cpu_tensor_type_in_forward_becomes_the_dtype_cast_alone() -> None:
    source = """
        import torch as th
        from torch import nn
        from torch.utils.data import Dataset

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.tags = nn.Embedding(10, 4)

            def forward(self, ids, weights):
                ids = ids.type(th.LongTensor)
                return self.tags(ids) * weights.type(th.cuda.FloatTensor)

        class Rows(Dataset):
            def __getitem__(self, i):
                return self.rows[i].type(th.FloatTensor)
        """
    findings = assert_fix(
        RULE,
        source,
        source.replace("ids = ids.type(th.LongTensor)", "ids = ids.to(th.int64)"),
        unsafe=True,
    )
    assert [f.applicability for f in findings if "CPU tensor type" in f.message] == [
        Applicability.UNSAFE
    ]


def test_a_plain_object_s_table_built_by_a_helper_method_follows_the_index_it_is_read_with() -> (
    None
):
    before = """
        import torch

        class DropSampler:
            def __init__(self, rates):
                self.keep = self.keep_table(rates)

            def keep_table(self, rates):
                rows = [1.0 - r for r in rates]
                return torch.tensor(rows).float()

            def sample(self, scores, kinds):
                return torch.bernoulli(self.keep[kinds]).expand(scores.shape) * scores
        """
    assert_fix(
        RULE,
        before,
        before.replace("self.keep[kinds]", "self.keep.to(scores.device)[kinds]"),
        unsafe=True,
    )


def test_inputs_sent_to_the_gpu_under_a_test_of_where_they_are_are_left_alone() -> None:
    # The function moves its CPU inputs to the GPU for its own work; `blocks.to(scales.device)`
    # would keep them on the CPU.
    assert_noop(
        RULE,
        """
import torch
from torch import nn


def dequantize(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    if not blocks.is_cuda and torch.cuda.is_available():
        blocks = blocks.cuda()
        scales = scales.cuda()
    return blocks.float() * scales


class Dequant(nn.Module):
    def forward(self, blocks, scales):
        return dequantize(blocks, scales)
""",
    )


def test_an_input_sent_to_a_literal_gpu_without_a_test_that_one_is_there_is_fixed() -> None:
    findings = assert_fix(
        RULE,
        """
import torch


class Sampler:
    def __init__(self, model):
        self.model = model

    def keep(self, name, value):
        if isinstance(value, torch.Tensor) and value.device != torch.device("cuda"):
            value = value.to(torch.device("cuda"))
        setattr(self, name, value)

    def schedule(self, betas):
        self.keep("betas", betas.to(self.model.device))
        return self.model(betas)
""",
        """
import torch


class Sampler:
    def __init__(self, model):
        self.model = model

    def keep(self, name, value):
        if isinstance(value, torch.Tensor) and value.device != torch.device("cuda"):
            value = value.to(self.model.device)
        setattr(self, name, value)

    def schedule(self, betas):
        self.keep("betas", betas.to(self.model.device))
        return self.model(betas)
""",
        unsafe=True,
    )
    assert findings


def test_a_lone_is_cuda_branch_binding_the_move_becomes_unconditional() -> None:
    # On the CPU `offsets` was never bound: the move to the input's device is right there too.
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Shift(nn.Module):
            def forward(self, feats, steps):
                offsets = torch.arange(steps).float().view(1, -1, 1, 1)
                # offsets follow the features
                if feats.is_cuda:
                    offsets = offsets.cuda()
                return feats + offsets
        """,
        """
        import torch
        from torch import nn

        class Shift(nn.Module):
            def forward(self, feats, steps):
                offsets = torch.arange(steps).float().view(1, -1, 1, 1)
                # offsets follow the features
                offsets = offsets.to(feats.device)
                return feats + offsets
        """,
        unsafe=True,
    )
    assert "the `if` goes" in findings[0].message


def test_an_is_cuda_branch_doing_more_than_the_move_keeps_its_if() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Shift(nn.Module):
            def forward(self, feats, steps):
                offsets = torch.arange(steps).float().view(1, -1, 1, 1)
                if feats.is_cuda:
                    offsets = offsets.cuda()
                    torch.cuda.synchronize()
                return feats + offsets
        """,
        """
        import torch
        from torch import nn

        class Shift(nn.Module):
            def forward(self, feats, steps):
                offsets = torch.arange(steps).float().view(1, -1, 1, 1)
                if feats.is_cuda:
                    offsets = offsets.to(feats.device)
                    torch.cuda.synchronize()
                return feats + offsets
        """,
        unsafe=True,
    )


def test_a_local_device_from_a_project_function_called_without_arguments_is_fixed() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        from .runtime import pick_device

        class Tagger(nn.Module):
            def __init__(self, vocab, width):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)

            def forward(self, tokens):
                where = pick_device()
                mask = torch.ones(tokens.shape, dtype=torch.bool, device=where)
                return self.embed(tokens) * mask.unsqueeze(-1)
        """,
        """
        import torch
        from torch import nn

        from .runtime import pick_device

        class Tagger(nn.Module):
            def __init__(self, vocab, width):
                super().__init__()
                self.embed = nn.Embedding(vocab, width)

            def forward(self, tokens):
                where = pick_device()
                mask = torch.ones(tokens.shape, dtype=torch.bool, device=self.embed.weight.device)
                return self.embed(tokens) * mask.unsqueeze(-1)
        """,
        unsafe=True,
    )
    assert "set by `pick_device()`" in findings[0].message


def test_a_local_device_from_a_function_given_the_inputs_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        from .runtime import device_of

        class Tagger(nn.Module):
            def forward(self, tokens):
                where = device_of(tokens)
                return torch.ones(tokens.shape, device=where)
        """,
    )


def test_an_argument_moved_beside_it_says_nothing_of_where_the_unmoved_input_is() -> None:
    # `noisy` stays where the caller keeps it (the CPU); only its copy goes to the device, so
    # `level` must not follow `noisy.device` (that would hand the GPU model a CPU index).
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Denoiser(nn.Module):
            def __init__(self, device, steps=10, width=4):
                super().__init__()
                self.device = device
                self.level_embed = nn.Embedding(steps, width)

            def forward(self, x, level):
                return x + self.level_embed(level)

            @torch.no_grad()
            def denoise(self, noisy: torch.Tensor):
                level = noisy.to(self.device).abs().sum(-1).long() % 10
                moved = noisy.to(self.device)
                return self(moved, level.to(self.device)).cpu()
        """,
        """
        import torch
        from torch import nn

        class Denoiser(nn.Module):
            def __init__(self, device, steps=10, width=4):
                super().__init__()
                self.device = device
                self.level_embed = nn.Embedding(steps, width)

            def forward(self, x, level):
                return x + self.level_embed(level)

            @torch.no_grad()
            def denoise(self, noisy: torch.Tensor):
                level = noisy.to(self.level_embed.weight.device).abs().sum(-1).long() % 10
                moved = noisy.to(self.level_embed.weight.device)
                return self(moved, level.to(moved.device)).cpu()
        """,
        unsafe=True,
    )
    assert not any("meets `noisy`" in finding.message for finding in findings)


def test_an_operand_moved_to_a_tensors_device_meets_that_tensor() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        DEVICE = torch.device("cuda")

        class Mixer(nn.Module):
            def forward(self, source: torch.Tensor, target: torch.Tensor):
                gate = torch.rand(target.shape[0], 1).to(DEVICE)
                return gate * source.to(target.device)
        """,
        """
        import torch
        from torch import nn

        DEVICE = torch.device("cuda")

        class Mixer(nn.Module):
            def forward(self, source: torch.Tensor, target: torch.Tensor):
                gate = torch.rand(target.shape[0], 1).to(target.device)
                return gate * source.to(target.device)
        """,
    )


def test_results_of_a_host_fallback_go_back_where_their_inputs_were_copied_from() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Matcher(nn.Module):
            def forward(self, scores, boxes):
                try:
                    picked = self.assign(scores, boxes)
                except torch.cuda.OutOfMemoryError:
                    host_scores = scores.detach().cpu()
                    host_boxes = boxes.cpu().float()
                    picked = self.assign(host_scores, host_boxes)
                    picked = picked.cuda()
                return picked
        """,
        """
        import torch
        from torch import nn

        class Matcher(nn.Module):
            def forward(self, scores, boxes):
                try:
                    picked = self.assign(scores, boxes)
                except torch.cuda.OutOfMemoryError:
                    host_scores = scores.detach().cpu()
                    host_boxes = boxes.cpu().float()
                    picked = self.assign(host_scores, host_boxes)
                    picked = picked.to(scores.device)
                return picked
        """,
        unsafe=True,
    )
    assert "returns to where `scores` was copied to the CPU from (line 10)" in findings[0].message


def test_a_host_fallback_that_rebinds_its_inputs_to_the_copies_names_no_device() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        class Matcher(nn.Module):
            def forward(self, scores, boxes):
                try:
                    picked = self.assign(scores, boxes)
                except torch.cuda.OutOfMemoryError:
                    scores = scores.detach().cpu()
                    boxes = boxes.cpu()
                    extras = [e.cpu() for e in self.extras]
                    picked = self.assign(scores, boxes, extras)
                    picked = picked.cuda()
                return picked
        """,
        reason="no tensor or layer in scope tells which device it should follow",
    )


def test_a_move_of_tensors_made_here_goes_where_their_factories_are_needed() -> None:
    # `.cuda()` of a table a factory made two statements up (through `Variable`, `.long()`),
    # and a global device given to a `stack` of pieces sized after an input, cached in a dict:
    # the move goes where the factories' own tensors are needed, the input's device, not to
    # a guess at the module's weights.
    before = """
        import torch
        import torch.nn as nn
        from torch.autograd import Variable

        _cache = {}
        place = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Decoder(nn.Module):
            def __init__(self, use_gpu):
                super().__init__()
                self.use_gpu = use_gpu
                self.proj = nn.Linear(8, 8)

            def backtrack(self, emissions):
                steps, batch = emissions.size(0), emissions.size(1)
                best = Variable(torch.LongTensor(steps, batch)).long()
                if self.use_gpu:
                    best = best.cuda()
                best[0] = emissions[0].argmax(-1)
                return best

        def ramps(feat):
            across = torch.arange(feat.shape[-1], device=place).expand(feat.shape[0], -1)
            down = torch.arange(feat.shape[-1], device=place).expand(feat.shape[0], -1)
            _cache[feat.shape] = torch.stack((across, down), 1).to(place)
        """
    after = (
        before.replace("best = best.cuda()", "best = best.to(emissions.device)")
        .replace("across = torch.arange(feat.shape[-1], device=place)",
                 "across = torch.arange(feat.shape[-1], device=feat.device)")
        .replace("down = torch.arange(feat.shape[-1], device=place)",
                 "down = torch.arange(feat.shape[-1], device=across.device)")
        .replace("1).to(place)", "1).to(feat.device)")
    )  # fmt: skip
    assert_fix(RULE, before, after, unsafe=True)
