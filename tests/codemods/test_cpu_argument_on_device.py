"""DF107 cpu-argument-on-device: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF107"


def test_lengths_sorted_on_the_device_are_packed_from_a_host_copy() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pack_padded_sequence as pack

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(8, 8, batch_first=True)

            def forward(self, embedded, sizes):
                sizes = torch.as_tensor(sizes, device=DEVICE)
                sizes, order = torch.sort(sizes, descending=True)
                packed = pack(embedded.index_select(0, order), sizes, batch_first=True)  # packed
                return self.gru(packed)
        """,
        """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pack_padded_sequence as pack

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(8, 8, batch_first=True)

            def forward(self, embedded, sizes):
                sizes = torch.as_tensor(sizes, device=DEVICE)
                sizes, order = torch.sort(sizes, descending=True)
                packed = pack(embedded.index_select(0, order), sizes.cpu(), batch_first=True)  # packed
                return self.gru(packed)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "is on a device" in findings[0].message


def test_lengths_counted_from_the_tokens_are_packed_from_a_host_copy() -> None:
    assert_fix(
        RULE,
        """
        import torch.nn as nn
        import torch.nn.utils.rnn as rnn_utils

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 8)

            def forward(self, tokens, pad):
                n = (tokens != pad).long().sum(dim=1)
                return rnn_utils.pack_padded_sequence(self.emb(tokens), lengths=n, enforce_sorted=False)
        """,
        """
        import torch.nn as nn
        import torch.nn.utils.rnn as rnn_utils

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 8)

            def forward(self, tokens, pad):
                n = (tokens != pad).long().sum(dim=1)
                return rnn_utils.pack_padded_sequence(self.emb(tokens), lengths=n.cpu(), enforce_sorted=False)
        """,
    )


def test_lengths_counted_by_a_comparison_method_in_a_helper_of_forward_are_packed_from_a_host_copy() -> (
    None
):
    findings = assert_fix(
        RULE,
        """
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence as pack

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.lookup = nn.Embedding(50, 4)
                self.lstm = nn.LSTM(4, 4, batch_first=True)

            def _features(self, words):
                filled = words.gt(0)
                sizes, rank = filled.sum(-1).sort(descending=True)
                return self.lstm(pack(self.lookup(words[rank]), sizes, batch_first=True))

            def forward(self, words):
                return self._features(words)
        """,
        """
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence as pack

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.lookup = nn.Embedding(50, 4)
                self.lstm = nn.LSTM(4, 4, batch_first=True)

            def _features(self, words):
                filled = words.gt(0)
                sizes, rank = filled.sum(-1).sort(descending=True)
                return self.lstm(pack(self.lookup(words[rank]), sizes.cpu(), batch_first=True))

            def forward(self, words):
                return self._features(words)
        """,
    )
    assert "a tensor whose device the caller chooses" in findings[0].message


def test_a_lengths_input_another_module_hands_as_a_tensor_is_packed_from_a_host_copy() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Rnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 4, batch_first=True)

            def forward(self, x, seq_len):
                out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(x, seq_len, batch_first=True))
                return out

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Rnn()

            def forward(self, x, seq_len):
                steps = torch.arange(x.size(1), device=seq_len.device)
                mask = steps[None, :] < seq_len.unsqueeze(1)
                return self.body(x * mask[..., None], seq_len)
        """,
        """
        import torch
        from torch import nn

        class Rnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 4, batch_first=True)

            def forward(self, x, seq_len):
                out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(x, seq_len.cpu(), batch_first=True))
                return out

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = Rnn()

            def forward(self, x, seq_len):
                steps = torch.arange(x.size(1), device=seq_len.device)
                mask = steps[None, :] < seq_len.unsqueeze(1)
                return self.body(x * mask[..., None], seq_len)
        """,
    )
    assert "the caller chooses" in findings[0].message


def test_sampler_weights_computed_on_the_gpu_are_drawn_from_a_host_copy() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import WeightedRandomSampler

        device = "cuda" if torch.cuda.is_available() else "cpu"
        labels = torch.randint(0, 2, (90,))
        class_weights = torch.tensor([0.2, 0.8], device=device)
        sampler = WeightedRandomSampler(class_weights[labels], num_samples=90)
        """,
        """
        import torch
        from torch.utils.data import WeightedRandomSampler

        device = "cuda" if torch.cuda.is_available() else "cpu"
        labels = torch.randint(0, 2, (90,))
        class_weights = torch.tensor([0.2, 0.8], device=device)
        sampler = WeightedRandomSampler(class_weights[labels].cpu(), num_samples=90)
        """,
    )


def test_lengths_on_the_host_or_not_provably_tensors_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import pack_padded_sequence

        class Encoder(nn.Module):
            def forward(self, x, lengths, extra):
                a = pack_padded_sequence(x, [len(s) for s in extra])
                b = pack_padded_sequence(x, torch.tensor([len(s) for s in extra]))
                c = pack_padded_sequence(x, lengths.cpu(), enforce_sorted=False)
                d = pack_padded_sequence(x, lengths.to("cpu").long())
                ordered, _ = lengths.tolist(), None
                f = pack_padded_sequence(x, ordered)
                return a, b, c, d, f
        """,
    )


def test_a_lengths_parameter_bound_again_later_is_the_parameter_where_it_is_packed() -> None:
    assert_declined(
        RULE,
        """
        from torch import nn
        from torch.nn.utils.rnn import pack_padded_sequence

        class Encoder(nn.Module):
            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths, batch_first=True)
                lengths = x.new_tensor(lengths)
                return packed, lengths
        """,
        reason="`lengths` is an input whose caller chooses its device",
    )


def test_what_the_files_own_calls_hand_the_model_decides_where_its_lengths_are() -> None:
    model = """
        import torch
        from torch import nn

        class Speller(nn.Module):
            def __init__(self):
                super().__init__()
                self.chars = nn.Embedding(40, 8)
                self.lstm = nn.LSTM(8, 8, batch_first=True)

            def forward(self, chars, n_chars):
                packed = nn.utils.rnn.pack_padded_sequence(
                    self.chars(chars), n_chars.long(), batch_first=True, enforce_sorted=False
                )
                return self.lstm(packed)[1][0]

        net = Speller().to("cuda")
        """
    assert_noop(
        RULE,
        model
        + """
        for chars, n_chars in batches:
            net(chars.cuda(), n_chars)
        """,
    )
    assert_fix(
        RULE,
        model
        + """
        for batch in batches:
            batch = {key: value.cuda() for key, value in batch.items()}
            net(batch["chars"], n_chars=batch["n_chars"])
        """,
        model.replace("n_chars.long(), batch_first", "n_chars.long().cpu(), batch_first")
        + """
        for batch in batches:
            batch = {key: value.cuda() for key, value in batch.items()}
            net(batch["chars"], n_chars=batch["n_chars"])
        """,
    )


def test_a_module_input_only_another_file_hands_is_reported_without_a_fix() -> None:
    # DataParallel scatters a tensor input to each replica's GPU; a list has no `.cpu()`,
    # so the input is named, never rewritten.
    finding = assert_declined(
        RULE,
        """
        import torch.nn.utils.rnn as rnn

        from torch import nn

        class MaskedTokenLoss(nn.Module):
            def forward(self, scores, gold, true_lengths):
                packed_scores = rnn.pack_padded_sequence(
                    scores, lengths=true_lengths, batch_first=True, enforce_sorted=False
                ).data
                return nn.functional.cross_entropy(packed_scores, gold)
        """,
        reason="`true_lengths` is an input whose caller chooses its device",
    )
    assert "DataParallel" in finding.message


def test_lengths_a_method_of_the_module_computes_from_its_input_are_packed_from_a_host_copy() -> (
    None
):
    # `self.out_lengths(frames)` returns arithmetic on the input, cast with `.long()`: a
    # tensor (lists have no `.long()`) wherever the caller put it, the GPU once a batch is
    # moved whole. Arithmetic alone proves nothing about a list: reported, not rewritten.
    before = """
        import torch.nn as nn
        from torch.nn.utils.rnn import pack_padded_sequence

        class Listener(nn.Module):
            def __init__(self):
                super().__init__()
                self.subsample = nn.Conv1d(80, 80, 5, stride=2, padding=2)
                self.rnn = nn.LSTM(80, 64, batch_first=True)

            def out_lengths(self, n):
                for layer in [self.subsample]:
                    n = (n + 2 * layer.padding[0] - layer.kernel_size[0]) // layer.stride[0] + 1
                return n.long()

            def forward(self, feats, frames):
                steps = self.out_lengths(frames)
                h = self.subsample(feats).transpose(1, 2)
                return self.rnn(pack_padded_sequence(h, steps, batch_first=True, enforce_sorted=False))
        """
    assert_fix(RULE, before, before.replace("(h, steps,", "(h, steps.cpu(),"))
    assert_declined(
        RULE,
        before.replace("return n.long()", "return n"),
        reason="`steps` is an input whose caller chooses its device",
    )
