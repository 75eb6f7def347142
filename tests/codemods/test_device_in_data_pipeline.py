"""DF201 device-in-data-pipeline: inline cases."""

from __future__ import annotations

from devfix.engine import check_source, fix_source
from devfix.types import Applicability, Options
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF201"

HEADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


def test_getitem_move_is_removed_and_the_loop_moves_the_batch() -> None:
    findings = assert_fix(
        RULE,
        HEADER
        + """
class Pairs(Dataset):
    def __getitem__(self, i):
        return self.x[i].to("cuda:0"), self.y[i]  # one sample

model = nn.Linear(4, 2).to(device)
for x, y in DataLoader(Pairs(), batch_size=4):
    loss = nn.functional.cross_entropy(model(x), y)
""",
        HEADER
        + """
class Pairs(Dataset):
    def __getitem__(self, i):
        return self.x[i], self.y[i]  # one sample

model = nn.Linear(4, 2).to(device)
for x, y in DataLoader(Pairs(), batch_size=4):
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
""",
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "`Pairs.__getitem__`" in findings[0].message


def test_collate_fn_cuda_and_device_keyword_and_dtype_kept() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
def collate(items):
    ids = torch.stack(items).to(device, torch.float32)
    mask = torch.ones(len(items), device="cuda")
    return {"input": ids.cuda(), "mask": mask}

model = nn.Linear(4, 2).to(device)
loader = DataLoader(data, batch_size=4, collate_fn=collate, num_workers=2)
for batch in loader:
    out = model(batch["input"]) * batch["mask"].unsqueeze(1)
""",
        HEADER
        + """
def collate(items):
    ids = torch.stack(items).to(torch.float32)
    mask = torch.ones(len(items))
    return {"input": ids, "mask": mask}

model = nn.Linear(4, 2).to(device)
loader = DataLoader(data, batch_size=4, collate_fn=collate, num_workers=2)
for batch in loader:
    batch = {k: v.to(device) for k, v in batch.items()}
    out = model(batch["input"]) * batch["mask"].unsqueeze(1)
""",
        unsafe=True,
    )


def test_map_function_with_a_hugging_face_trainer_is_only_removed() -> None:
    findings = assert_fix(
        RULE,
        """
        from transformers import Trainer

        def preprocess_function(examples):
            inputs = tokenizer(examples["text"], truncation=True, return_tensors="pt")
            inputs["labels"] = inputs["input_ids"].clone().to('cuda:0')
            return inputs

        train_dataset = raw["train"].map(preprocess_function, batched=True)
        trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
        """,
        """
        from transformers import Trainer

        def preprocess_function(examples):
            inputs = tokenizer(examples["text"], truncation=True, return_tensors="pt")
            inputs["labels"] = inputs["input_ids"].clone()
            return inputs

        train_dataset = raw["train"].map(preprocess_function, batched=True)
        trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "trainer moves batches" in findings[0].message


def test_helper_called_from_getitem_and_loop_that_already_moves() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
def load(path):
    return torch.load(path, map_location="cpu").cuda()

class Files(Dataset):
    def __getitem__(self, i):
        return load(self.paths[i])

model = nn.Linear(4, 2).cuda()
for x in DataLoader(Files(), num_workers=4):
    x = x.cuda(non_blocking=True)
    model(x)
""",
        HEADER
        + """
def load(path):
    return torch.load(path, map_location="cpu")

class Files(Dataset):
    def __getitem__(self, i):
        return load(self.paths[i])

model = nn.Linear(4, 2).cuda()
for x in DataLoader(Files(), num_workers=4):
    x = x.cuda(non_blocking=True)
    model(x)
""",
    )


def test_aliased_imports_and_a_collator_class() -> None:
    assert_fix(
        RULE,
        """
        import torch as t
        from torch.utils import data as tud

        class Collator:
            def __call__(self, rows):
                return t.stack(rows).to(dev)

        dev = t.device("cuda:1")
        net = Net().to(dev)
        for xb in tud.DataLoader(rows, collate_fn=Collator(), pin_memory=True):
            net(xb)
        """,
        """
        import torch as t
        from torch.utils import data as tud

        class Collator:
            def __call__(self, rows):
                return t.stack(rows)

        dev = t.device("cuda:1")
        net = Net().to(dev)
        for xb in tud.DataLoader(rows, collate_fn=Collator(), pin_memory=True):
            xb = xb.to(dev)
            net(xb)
        """,
        unsafe=True,
    )


def test_noop_for_cpu_moves_model_code_and_the_training_loop() -> None:
    assert_noop(
        RULE,
        HEADER
        + """
class Pairs(Dataset):
    def __getitem__(self, i):
        return self.x[i].to("cpu"), self.y[i].cpu(), self.z[i].to(torch.float16)

class Net(nn.Module):
    def forward(self, x):
        return x.to(device)

model = Net().to(device)
for x, y, z in DataLoader(Pairs()):
    x = x.to(device)
    model(x)
""",
    )


def test_declined_when_no_loop_can_take_over_the_move() -> None:
    assert_declined(
        RULE,
        HEADER
        + """
def collate(items):
    return torch.stack(items).to(device)

loader = DataLoader(data, collate_fn=collate, num_workers=2)
batch = next(iter(loader))
""",
        reason="no loop over its DataLoader",
    )


def test_declined_when_the_model_device_is_not_visible_in_the_loop() -> None:
    assert_declined(
        RULE,
        HEADER
        + """
class Pairs(Dataset):
    def __getitem__(self, i):
        return self.x[i].cuda()

def main():
    dev = pick()
    model = Net().to(dev)
    fit(model, DataLoader(Pairs(), num_workers=8))

def fit(model, loader):
    for x in loader:
        model(x)
""",
        reason="not visible in `fit`",
    )


def test_dataset_preloading_in_init_is_reported_without_a_fix() -> None:
    finding = assert_declined(
        RULE,
        HEADER
        + """
class Cached(Dataset):
    def __init__(self, x):
        self.x = x.to(device)

    def __getitem__(self, i):
        return self.x[i]
""",
        reason="num_workers=0",
    )
    assert finding.applicability is Applicability.DISPLAY_ONLY


def test_safe_run_removes_nothing_that_needs_a_loop_move() -> None:
    source = (
        HEADER
        + """
class Pairs(Dataset):
    def __getitem__(self, i):
        return self.x[i].cuda()

model = Net().to(device)
for x in DataLoader(Pairs()):
    model(x)
"""
    )
    result = fix_source(source, Options(select=(RULE,)))
    assert result.output == source
    assert check_source(source, options=Options(select=(RULE,)))


def test_transform_keyword_of_a_dataset_links_to_its_loader() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torchvision
        from torch.utils.data import DataLoader

        def to_gpu(image):
            return torchvision.transforms.functional.to_tensor(image).cuda()

        train_set = torchvision.datasets.MNIST("data", transform=to_gpu)
        model = Net().cuda()
        for images, labels in DataLoader(train_set, batch_size=8, num_workers=2):
            loss = criterion(model(images), labels)
        """,
        """
        import torch
        import torchvision
        from torch.utils.data import DataLoader

        def to_gpu(image):
            return torchvision.transforms.functional.to_tensor(image)

        train_set = torchvision.datasets.MNIST("data", transform=to_gpu)
        model = Net().cuda()
        for images, labels in DataLoader(train_set, batch_size=8, num_workers=2):
            images, labels = images.cuda(), labels.cuda()
            loss = criterion(model(images), labels)
        """,
        unsafe=True,
    )


def test_collate_method_with_pinned_loaders_moves_in_every_loop_of_the_class() -> None:
    # A library's model class: the collate is a bound method, the loaders pin memory (the pin
    # thread cannot pin CUDA tensors), and the loops live in private methods that receive the
    # loaders as arguments. The batch is a tuple of tensors, `None`s and lists.
    before = """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        class Forecaster:
            def __init__(self, net):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                self.net = net.to(self.device)

            def _collate(self, samples):
                out = []
                for i, first in enumerate(samples[0]):
                    if isinstance(first, np.ndarray):
                        out.append(torch.from_numpy(np.stack([s[i] for s in samples])).to(self.device))
                    elif first is None:
                        out.append(None)
                    else:
                        out.append([s[i] for s in samples])
                return tuple(out)

            def fit(self, train_set, val_set=None):
                train = DataLoader(train_set, batch_size=32, pin_memory=True, collate_fn=self._collate)
                val = None if val_set is None else DataLoader(val_set, pin_memory=True, collate_fn=self._collate)
                self._train(train, val)

            def _train(self, train_loader, val_loader):
                for step, batch in enumerate(train_loader):
                    self._step(batch[:-1], batch[-1])
                if val_loader is not None:
                    self._validate(val_loader)

            def _validate(self, loader):
                for batch in loader:
                    self._step(batch[:-1], batch[-1])
        """
    moved = (
        "{indent}batch = tuple(\n"
        "{indent}    t.to(self.device) if isinstance(t, torch.Tensor) else t\n"
        "{indent}    for t in batch\n"
        "{indent})\n"
    )
    after = (
        before.replace(
            "np.stack([s[i] for s in samples])).to(self.device))",
            "np.stack([s[i] for s in samples])))",
        )
        .replace(
            "for step, batch in enumerate(train_loader):\n",
            "for step, batch in enumerate(train_loader):\n" + moved.format(indent=" " * 20),
        )
        .replace("for batch in loader:\n", "for batch in loader:\n" + moved.format(indent=" " * 20))
    )
    assert_fix(RULE, before, after, unsafe=True)


def test_collate_installed_by_assignment_in_a_library_is_reported() -> None:
    # The DataLoaders come from the library's users (any `num_workers`): the collate must not
    # touch CUDA, but the loop that would take over the move is not in view.
    finding = assert_declined(
        RULE,
        """
        import torch

        class Encoder(torch.nn.Module):
            def fit(self, objectives):
                loaders = [loader for loader, _ in objectives]
                for loader in loaders:
                    loader.collate_fn = self.smart_collate

            def smart_collate(self, batch):
                labels = torch.tensor([example.label for example in batch]).to(self._target_device)
                return [example.texts for example in batch], labels
        """,
        reason="worker processes",
    )
    assert "`Encoder.smart_collate`" in finding.message or "collate_fn" in finding.message


def test_project_dataset_helper_called_from_getitem_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from .base import TableDataset

        class Labelled(TableDataset):
            def __init__(self, table, device=torch.device("cuda" if torch.cuda.is_available() else "cpu")):
                self.device = device
                self.table = table

            def __getitem__(self, index):
                return self._pair(self.table.iloc[index])

            def _pair(self, row):
                return row.name, torch.tensor(list(row.values), device=self.device)
        """,
        reason="no DataLoader in this file is known to run it",
    )


def test_single_process_loaders_without_workers_on_the_models_device_are_fine() -> None:
    # One process, no worker processes, nothing pinned, the data goes where the model is.
    assert_noop(
        RULE,
        HEADER
        + """
def collate(rows):
    ids = torch.tensor([r[0] for r in rows], dtype=torch.long, device=device)
    return ids, torch.tensor([r[1] for r in rows], device=device)

model = nn.Linear(4, 2).to(device)
loader = DataLoader(data, batch_size=16, shuffle=True, collate_fn=collate)
for ids, labels in loader:
    loss = nn.functional.cross_entropy(model(ids), labels)
""",
    )
    # Under torchrun each process builds its batches on its own GPU, in the main process.
    assert_noop(
        RULE,
        """
        import os
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        torch.distributed.init_process_group(backend="nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank)

        def collate(rows):
            return torch.tensor(rows, dtype=torch.long, device=device)

        model = Net().to(device)
        loader = DataLoader(data, sampler=DistributedSampler(data), collate_fn=collate)
        for batch in loader:
            model(batch).sum().backward()
        """,
    )


def test_map_function_that_runs_the_model_itself_keeps_its_moves() -> None:
    # Feature extraction inside `datasets.map`: the moved inputs feed the GPU model there.
    assert_noop(
        RULE,
        """
        import torch
        from transformers import AutoModel, Trainer

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModel.from_pretrained(checkpoint).to(device)

        def hidden_states(batch):
            inputs = {k: v.to(device) for k, v in batch.items() if k in names}
            with torch.no_grad():
                last = model(**inputs).last_hidden_state
            return {"hidden_state": last[:, 0].cpu().numpy()}

        features = encoded.map(hidden_states, batched=True)
        Trainer(model=classifier, train_dataset=features["train"]).train()
        """,
    )


def test_the_loop_move_that_replaces_the_collate_move_leaves_packed_lengths_on_the_cpu() -> None:
    before = """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 4, batch_first=True)

    def forward(self, x, sizes):
        return self.rnn(pack_padded_sequence(x, sizes, batch_first=True, enforce_sorted=False))


def collate(samples):
    x = torch.stack([s[0] for s in samples]).to(device)
    sizes = torch.tensor([s[1] for s in samples]).to(device)
    return {"x": x, "sizes": sizes}


reader = Reader().to(device)
for batch in DataLoader(SAMPLES, batch_size=4, collate_fn=collate, num_workers=2):
    out, h = reader(batch["x"], batch["sizes"])
    h.sum().backward()
"""
    after = before.replace("]).to(device)\n", "])\n").replace(
        "num_workers=2):\n",
        'num_workers=2):\n    batch = {k: v if k == "sizes" else v.to(device) for k, v in batch.items()}\n',
    )
    assert_fix(RULE, before, after, unsafe=True)


def test_what_becomes_the_trainer_s_dataset_keeps_its_tensors_on_the_cpu() -> None:
    # No DataLoader, no `.map`: the function's tensors reach `train_dataset=` through names and
    # a comprehension; the Trainer's DataLoader pins them and moves each batch itself.
    findings = assert_fix(
        "DF201",
        """
        from transformers import Seq2SeqTrainer

        def encode(pairs, tokenizer):
            features = tokenizer([src for src, _ in pairs], return_tensors="pt", padding=True)
            features["labels"] = tokenizer([tgt for _, tgt in pairs], return_tensors="pt")["input_ids"].cuda()
            return features

        features = encode(train_pairs, tokenizer)
        rows = [{k: v[i] for k, v in features.items()} for i in range(len(train_pairs))]
        trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=rows)
        """,
        """
        from transformers import Seq2SeqTrainer

        def encode(pairs, tokenizer):
            features = tokenizer([src for src, _ in pairs], return_tensors="pt", padding=True)
            features["labels"] = tokenizer([tgt for _, tgt in pairs], return_tensors="pt")["input_ids"]
            return features

        features = encode(train_pairs, tokenizer)
        rows = [{k: v[i] for k, v in features.items()} for i in range(len(train_pairs))]
        trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=rows)
        """,
    )
    assert "pins its batches" in findings[0].message
    # A function that only scores with the trained model is not data preparation.
    assert_noop(
        "DF201",
        """
        from transformers import Trainer

        def evaluate(model, batch):
            return model(**batch.to("cuda")).loss

        trainer = Trainer(model=model, args=args, train_dataset=rows)
        print(evaluate(trainer.model, held_out))
        """,
    )
