"""DF206 move-result-discarded."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF206"


def test_tensor_built_by_torch_is_assigned_back() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch as t
        from torch import from_numpy

        images = from_numpy(array).float()
        images.to(device, non_blocking=True)  # to the GPU
        masks = t.zeros(4, 5); masks.cuda()
        out = model(images, masks)
        """,
        """
        import torch as t
        from torch import from_numpy

        images = from_numpy(array).float()
        images = images.to(device, non_blocking=True)  # to the GPU
        masks = t.zeros(4, 5); masks = masks.cuda()
        out = model(images, masks)
        """,
    )
    assert {f.applicability for f in findings} == {Applicability.SAFE}


def test_tensor_by_use_in_a_loop_is_unsafe() -> None:
    findings = assert_fix(
        RULE,
        """
        def evaluate(model, loader, device):
            for inputs, labels in loader:
                inputs.to(device)
                logits = model(inputs.view(inputs.size(0), -1))
        """,
        """
        def evaluate(model, loader, device):
            for inputs, labels in loader:
                inputs = inputs.to(device)
                logits = model(inputs.view(inputs.size(0), -1))
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "`inputs.view` is used" in findings[0].message


def test_values_from_the_same_loader_as_a_tensor() -> None:
    assert_fix(
        RULE,
        """
        cam = read_images(path_a)
        prj = read_images(path_b)
        cam.to(device)
        prj.to(device)
        surface = reference.expand_as(cam)
        """,
        """
        cam = read_images(path_a)
        prj = read_images(path_b)
        cam = cam.to(device)
        prj = prj.to(device)
        surface = reference.expand_as(cam)
        """,
        unsafe=True,
    )


def test_modules_and_in_place_objects_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn
        from transformers import AutoModel, AutoTokenizer

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("pe", torch.zeros(10, 4))

            def forward(self, x):
                pe = self.pe[: x.size(0)]
                if x.is_cuda:
                    pe.cuda()
                return x + pe

        net = Net()
        net.to(device)
        layer = nn.Linear(4, 2).eval()
        layer.cuda()
        bert = AutoModel.from_pretrained("bert-base-uncased")
        bert.to(device)
        tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
        encoded = tokenizer(texts, return_tensors="pt")
        encoded.to(device)
        wrapped = nn.DataParallel(net)
        wrapped.cuda()
        graph = load_graph()
        graph.to(device)
        print(graph.edge_index)
        helper = build()
        helper.to(device)
        out = helper(torch.ones(2))
        x = torch.ones(3)
        x.to(torch.float16)
        x.to("cpu")
        """,
    )


def test_declines_loop_variable_not_read_after_the_move() -> None:
    assert_declined(
        RULE,
        """
        import torch
        tensors = [torch.zeros(2), torch.ones(2)]
        for t in tensors:
            t.to(device)
        """,
        reason="moves nothing in `tensors`",
    )


def test_declines_global_moved_inside_a_function() -> None:
    assert_declined(
        RULE,
        """
        import torch
        weights = torch.ones(3)

        def setup(device):
            weights.to(device)
        """,
        reason="module-level name",
    )


def test_ids_encoded_to_a_tensor_are_a_tensor_but_a_batch_encoding_moves_in_place() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        class Scorer:
            def __init__(self, tok, net):
                self.tok, self.net = tok, net
                self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

            def score(self, text):
                ids = self.tok.encode(text, return_tensors="pt")
                ids.to(self.dev)
                return self.net(ids)
        """,
        """
        import torch

        class Scorer:
            def __init__(self, tok, net):
                self.tok, self.net = tok, net
                self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

            def score(self, text):
                ids = self.tok.encode(text, return_tensors="pt")
                ids = ids.to(self.dev)
                return self.net(ids)
        """,
    )
    assert 'encode(..., return_tensors="pt")' in findings[0].message
    assert_noop(
        RULE,
        """
        def score(tok, net, text, dev):
            batch = tok(text, return_tensors="pt")
            batch.to(dev)
            return net(**batch)
        """,
    )


def test_a_batch_whose_collate_fn_returns_a_tensor_is_a_tensor() -> None:
    # Nothing but the loader says what `ids` is: its collate_fn pads and returns one tensor.
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader as Loader

        def pad(rows):
            width = max(len(r) for r in rows)
            return torch.tensor([r + [0] * (width - len(r)) for r in rows])

        def run(model, rows, dev):
            for step, ids in enumerate(Loader(rows, batch_size=4, collate_fn=pad)):
                ids.to(dev)  # meant to move the batch
                model(input_ids=ids, labels=ids)
        """,
        """
        import torch
        from torch.utils.data import DataLoader as Loader

        def pad(rows):
            width = max(len(r) for r in rows)
            return torch.tensor([r + [0] * (width - len(r)) for r in rows])

        def run(model, rows, dev):
            for step, ids in enumerate(Loader(rows, batch_size=4, collate_fn=pad)):
                ids = ids.to(dev)  # meant to move the batch
                model(input_ids=ids, labels=ids)
        """,
    )


def test_a_batch_whose_collate_fn_returns_a_dict_is_not_known_to_be_a_tensor() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        def pad(rows):
            return {"ids": torch.tensor(rows)}

        def run(model, rows, dev):
            for batch in DataLoader(rows, collate_fn=pad):
                batch.to(dev)
                model(**batch)
        """,
    )


def test_a_moved_copy_rebound_from_the_original_before_it_is_read_is_read_instead() -> None:
    before = """
        import torch
        from torch import nn

        class Weighted(nn.Module):
            def __init__(self, weights):
                super().__init__()
                self.class_weights = weights

            def forward(self, scores, targets):
                w = self.class_weights.to(scores.device)
                picked = scores.gather(1, targets[:, None])
                w = self.class_weights[targets]  # per-sample weight
                return -(w * picked.squeeze(1)).mean()
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace("w = self.class_weights[targets]", "w = w[targets]"),
    )
    assert "line 13 rebinds it from `self.class_weights` itself" in findings[0].message
    # Read before it is rebound, or rebound on one path only: the copy is used.
    assert_noop(
        RULE,
        before.replace("picked = scores.gather", "picked = w[0] * scores.gather"),
    )
    assert_noop(
        RULE,
        before.replace(
            "                w = self.class_weights[targets]",
            "                if targets.dim() == 1:\n                    w = self.class_weights[targets]",
        ),
    )
