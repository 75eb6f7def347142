"""DF204 batch-not-moved-to-device: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF204"

HEADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
criterion = nn.CrossEntropyLoss()
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
"""


def test_tuple_batch_through_enumerate_is_moved_at_the_head_and_comments_stay() -> None:
    findings = assert_fix(
        RULE,
        HEADER
        + """
for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        # forward pass
        out = model(x)  # logits
        loss = criterion(out, y)
""",
        HEADER
        + """
for epoch in range(2):
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        # forward pass
        out = model(x)  # logits
        loss = criterion(out, y)
""",
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "`x`, `y`" in findings[0].message


def test_only_names_that_reach_the_model_are_moved() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
for x, y in loader:
    x = x.to(device)
    loss = criterion(model(x), y)
""",
        HEADER
        + """
for x, y in loader:
    y = y.to(device)
    x = x.to(device)
    loss = criterion(model(x), y)
""",
        unsafe=True,
    )


def test_unpacking_first_statement_gets_the_move_after_it() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
for i, data in enumerate(loader, 0):
    inputs, labels = data
    loss = criterion(model(inputs), labels)
""",
        HEADER
        + """
for i, data in enumerate(loader, 0):
    inputs, labels = data
    inputs, labels = inputs.to(device), labels.to(device)
    loss = criterion(model(inputs), labels)
""",
        unsafe=True,
    )


def test_dict_batch_gets_a_dict_comprehension() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader as DL

        model = Net()
        model.cuda()
        train_loader = DL(data, batch_size=2)
        for batch in train_loader:
            loss = model(**batch).loss
        """,
        """
        import torch
        from torch.utils.data import DataLoader as DL

        model = Net()
        model.cuda()
        train_loader = DL(data, batch_size=2)
        for batch in train_loader:
            batch = {k: v.cuda() for k, v in batch.items()}
            loss = model(**batch).loss
        """,
        unsafe=True,
    )


def test_indexed_batch_in_a_function_uses_the_device_parameter() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
def evaluate(net, dl, dev):
    correct = 0
    for batch in dl:
        logits = net(batch[0])
        correct += (logits.argmax(1) == batch[1]).sum().item()
    return correct

evaluate(model, loader, device)
""",
        HEADER
        + """
def evaluate(net, dl, dev):
    correct = 0
    for batch in dl:
        batch = [t.to(dev) for t in batch]
        logits = net(batch[0])
        correct += (logits.argmax(1) == batch[1]).sum().item()
    return correct

evaluate(model, loader, device)
""",
        unsafe=True,
    )


def test_trainer_class_uses_self_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.utils import data

        class Runner:
            def __init__(self, model, device):
                self.device = device
                self.model = model.to(device)
                self.loader = data.DataLoader(make(), batch_size=4)

            def train(self):
                for x, y in self.loader:
                    self.model(x).sum().backward()
        """,
        """
        import torch
        from torch.utils import data

        class Runner:
            def __init__(self, model, device):
                self.device = device
                self.model = model.to(device)
                self.loader = data.DataLoader(make(), batch_size=4)

            def train(self):
                for x, y in self.loader:
                    x = x.to(self.device)
                    self.model(x).sum().backward()
        """,
        unsafe=True,
    )


def test_data_parallel_wrapper_keeps_the_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        net = Net().to("cuda:0")
        net = nn.DataParallel(net)
        for x, y in DataLoader(ds):
            nn.functional.mse_loss(net(x), y).backward()
        """,
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        net = Net().to("cuda:0")
        net = nn.DataParallel(net)
        for x, y in DataLoader(ds):
            x, y = x.to("cuda:0"), y.to("cuda:0")
            nn.functional.mse_loss(net(x), y).backward()
        """,
        unsafe=True,
    )


def test_noop_when_the_loop_moves_or_hands_the_batch_to_a_helper() -> None:
    assert_noop(
        RULE,
        HEADER
        + """
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = criterion(model(x), y)
for batch in loader:
    batch = to_device(batch, device)
    model(batch[0])
for batch in loader:
    batch = tuple(t.to(device) for t in batch)
    model(batch[0])
""",
    )


def test_noop_for_cpu_models_prepared_loaders_and_plain_lists() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        model = nn.Linear(4, 2)
        loader = DataLoader(ds)
        for x, y in loader:
            model(x)
        cpu_model = nn.Linear(4, 2).to("cpu")
        for x, y in loader:
            cpu_model(x)
        gpu = nn.Linear(4, 2).to(device)
        prepared = DataLoader(ds)
        gpu, prepared = accelerator.prepare(gpu, prepared)
        for x, y in prepared:
            gpu(x)
        half = nn.Linear(4, 2).cuda()
        for x in [torch.randn(2, 4).cuda()]:
            half(x)
        """,
    )


def test_declined_when_the_device_is_a_local_of_another_function() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        def main():
            dev = pick()
            model = Net().to(dev)
            fit(model, DataLoader(ds))

        def fit(model, loader):
            for x, y in loader:
                model(x)
        """,
        reason="not visible in `fit`",
    )


def test_declined_when_the_batch_shape_is_unclear() -> None:
    assert_declined(
        RULE,
        HEADER
        + """
for batch in loader:
    out = model(batch[0])
    extra = batch["mask"]
""",
        reason="cannot tell whether `batch`",
    )


def test_batch_read_through_aliases_and_partly_moved_is_moved_whole() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
for batch in loader:
    inputs = batch["input_ids"].to(device)
    labels = batch["labels"]
    loss = model(inputs, labels=labels)
""",
        HEADER
        + """
for batch in loader:
    batch = {k: v.to(device) for k, v in batch.items()}
    inputs = batch["input_ids"].to(device)
    labels = batch["labels"]
    loss = model(inputs, labels=labels)
""",
        unsafe=True,
    )


def test_text_batches_fed_through_a_tokenizer_only_move_the_labels() -> None:
    assert_fix(
        RULE,
        HEADER
        + """
for texts, labels in loader:
    logits = model(**tokenizer(texts, return_tensors="pt"))
    loss = criterion(logits, labels)
""",
        HEADER
        + """
for texts, labels in loader:
    labels = labels.to(device)
    logits = model(**tokenizer(texts, return_tensors="pt"))
    loss = criterion(logits, labels)
""",
        unsafe=True,
    )


def test_declined_when_the_model_is_moved_only_under_a_condition() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        model = Net()
        if torch.cuda.is_available():
            model = model.cuda()
        for x, y in DataLoader(ds):
            model(x)
        """,
        reason="only when the `if` on line 6 holds",
    )


def test_one_line_loop_is_reported_and_starred_targets_are_left_alone() -> None:
    assert_declined(
        RULE,
        HEADER
        + """
for x, *rest in loader:
    model(x)
for x, y in loader: model(x)
""",
        reason="on the `for` line",
    )


def test_labels_moved_only_inside_the_loss_call_are_still_compared_on_the_cpu() -> None:
    # `y.to(device)` inside the loss moves that use only: the accuracy line compares the GPU
    # predictions with the CPU labels. The loaders come from a function returning a tuple.
    before = """
        import torch
        from torch.utils.data import DataLoader

        DEVICE = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

        def evaluate(net, loader):
            correct = 0
            with torch.no_grad():
                for images, labels in loader:
                    outputs = net(images.to(DEVICE))
                    loss = torch.nn.functional.cross_entropy(outputs, labels.to(DEVICE))
                    correct += (outputs.argmax(1) == labels).sum().item()
            return correct

        def load_data():
            return DataLoader(train_set, shuffle=True), DataLoader(test_set)

        net = Net().to(DEVICE)
        train_loader, test_loader = load_data()
        print(evaluate(net, test_loader))
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "for images, labels in loader:\n",
            "for images, labels in loader:\n                    labels = labels.to(DEVICE)\n",
        ),
        unsafe=True,
    )


def test_one_batch_taken_by_hand_moves_like_the_training_loop_of_the_class() -> None:
    # A trainer class given its model and loaders: the training loop moves its batch to
    # DEVICE before the model, so the model is there; the validation step takes one batch with
    # `next(iter(...))` and forgets the move.
    before = """
        import torch
        from torch.utils.data import DataLoader

        from .constants import DEVICE

        class Trainer:
            def __init__(self, model, train_loader: DataLoader, valid_loader: DataLoader):
                self.model = model
                self.train_loader = train_loader
                self.valid_loader = valid_loader

            def train(self):
                for inputs, target in self.train_loader:
                    inputs, target = inputs.to(DEVICE), target.to(DEVICE)
                    loss = torch.nn.functional.mse_loss(self.model(inputs), target)
                    loss.backward()

            def validation(self):
                with torch.no_grad():
                    inputs, target = next(iter(self.valid_loader))
                    output = self.model(inputs)
                    return torch.nn.functional.mse_loss(output, target).item()
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "inputs, target = next(iter(self.valid_loader))\n",
            "inputs, target = next(iter(self.valid_loader))\n"
            "                    inputs, target = inputs.to(DEVICE), target.to(DEVICE)\n",
        ),
        unsafe=True,
    )


def test_a_loop_moves_its_batch_with_the_helper_another_loop_of_the_class_uses() -> None:
    before = """
        from torch.utils.data import DataLoader

        class Forecaster:
            def _batch_to_device(self, batch):
                return tuple(t.to(self.device) if t is not None else None for t in batch)

            def _train(self, train_loader: DataLoader, val_loader: DataLoader):
                for train_batch in train_loader:
                    train_batch = self._batch_to_device(train_batch)
                    self._step(train_batch[:-1], train_batch[-1])
                return self._validate(val_loader)

            def _validate(self, val_loader: DataLoader):
                for val_batch in val_loader:
                    self._step(val_batch[:-1], val_batch[-1])
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "for val_batch in val_loader:\n",
            "for val_batch in val_loader:\n"
            "                    val_batch = self._batch_to_device(val_batch)\n",
        ),
        unsafe=True,
    )


def test_batches_already_on_the_device_are_left_alone() -> None:
    # A TensorDataset of tensors moved to the device serves device batches.
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        device = torch.device("cuda")
        x = torch.from_numpy(features).float().to(device)
        y = torch.from_numpy(targets).float().to(device)
        model = Net().to(device)
        loader = DataLoader(TensorDataset(x, y), batch_size=32, drop_last=True)
        for inputs, labels in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), labels)
        """,
    )
    # A batch that is a list of patches: each patch is moved after it is taken from the list.
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader

        model = Net().cuda()
        for img_list, target_list in DataLoader(patches, batch_size=1):
            for j in range(len(img_list)):
                img = img_list[j]
                img = img.cuda()
                output = model(img)
                gt = target_list[j].sum().cuda()
                err = abs(gt - output.sum())
        """,
    )


PACKING_MODEL = """
import torch
import torch.nn as nn
import torch.nn.utils.rnn as rnn_utils
from torch.utils.data import DataLoader


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.gru = nn.GRU(8, 8)

    def forward(self, ids, sizes=None):
        packed = rnn_utils.pack_padded_sequence(self.embed(ids), sizes.view(-1), enforce_sorted=False)
        return self.gru(packed)


dev = "cuda" if torch.cuda.is_available() else "cpu"
reader = Reader().to(dev)
"""


def test_lengths_a_model_packs_stay_on_the_cpu_while_the_rest_moves() -> None:
    findings = assert_fix(
        RULE,
        PACKING_MODEL
        + """
def run(loader: DataLoader):
    for ids, sizes, gold in loader:
        out, _ = reader.forward(ids, sizes=sizes)
        print(out, len(gold))
""",
        PACKING_MODEL
        + """
def run(loader: DataLoader):
    for ids, sizes, gold in loader:
        ids = ids.to(dev)
        out, _ = reader.forward(ids, sizes=sizes)
        print(out, len(gold))
""",
        unsafe=True,
    )
    assert "`sizes` stays on the CPU: it feeds `pack_padded_sequence`'s `lengths`" in (
        findings[0].message
    )


def test_lengths_kept_on_the_cpu_by_hand_are_correct_code() -> None:
    assert_noop(
        RULE,
        PACKING_MODEL
        + """
def run(loader: DataLoader):
    for ids, sizes in loader:
        reader(ids.to(dev), sizes)
    for ids, sizes in loader:
        packed = rnn_utils.pack_padded_sequence(reader.embed(ids.to(dev)), sizes)
    for ids, sizes in loader:
        ids = ids.to(dev)
        print(sizes.numpy(), reader(ids, sizes))
""",
    )


def test_a_dict_batch_is_moved_but_the_keys_that_must_stay_on_the_cpu() -> None:
    before = (
        PACKING_MODEL
        + """
def run(loader: DataLoader):
    for batch in loader:
        reader(batch["ids"], batch["n"])
        reader(batch["ids"], batch["m"].long())
"""
    )
    assert_fix(
        RULE,
        before,
        before.replace(
            "    for batch in loader:\n",
            "    for batch in loader:\n"
            '        batch = {k: v if k in ("n", "m") else v.to(dev) for k, v in batch.items()}\n',
        ),
        unsafe=True,
    )


def test_sampler_weights_are_no_model_input() -> None:
    # The weights meet no model; the sampler draws from them with a CPU generator.
    assert_noop(
        "DF101",
        """
import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

weights = torch.ones(10)
sampler = WeightedRandomSampler(weights, num_samples=10)
""",
    )


def test_a_loop_that_moves_its_inputs_shows_the_model_s_device_for_the_targets() -> None:
    before = """
import torch.nn.functional as F


def fit(net, train_loader, opts):
    for step, (feats, target, names) in enumerate(train_loader):
        feats = feats.to(opts.gpu)
        pred = net(feats)
        loss = F.mse_loss(pred, target)
        print(step, pred.mean(), names)
        loss.backward()
"""
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "        feats = feats.to(opts.gpu)\n",
            "        target = target.to(opts.gpu)\n        feats = feats.to(opts.gpu)\n",
        ),
        unsafe=True,
    )
    assert "batch `target` reaches `net` (on `opts.gpu`)" in findings[0].message


def test_an_unknown_iterable_counts_only_tensors_meeting_the_output_in_torch_calls() -> None:
    assert_noop(
        RULE,
        """
def show(net, sample_loader, dev):
    for image, caption in sample_loader:
        image = image.to(dev)
        print(net(image).argmax(), caption)
""",
    )


def test_a_recursive_function_s_model_parameter_is_no_endless_search() -> None:
    # `walk` passes `net` to itself: looking for the model's move through the callers must end
    # (it once exceeded the recursion limit: "nested too deeply to analyse").
    assert_noop(
        RULE,
        """
def walk(net, loader, depth):
    for batch, tags in loader:
        batch = batch.to("cuda")
        print(net(batch), tags)
    if depth:
        walk(net, loader, depth - 1)
""",
    )


def test_labels_later_copied_to_the_host_for_metrics_are_still_moved_for_the_loss() -> None:
    # `labels.cpu().numpy()` copies to the host on its own, and rebinding `labels` to that copy
    # after the loss is no move to the device: the loss still meets CPU labels.
    loop = """
def evaluate(model, loader):
    seen = []
    with torch.no_grad():
        for inputs, labels in loader:
            inputs = inputs.to(device)
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            labels = labels.data.cpu().numpy()
            seen.append(labels)
    return seen


evaluate(model, loader)
"""
    assert_fix(
        RULE,
        HEADER + loop,
        HEADER
        + loop.replace(
            "        for inputs, labels in loader:\n",
            "        for inputs, labels in loader:\n            labels = labels.to(device)\n",
        ),
        unsafe=True,
    )


def test_batches_from_a_library_the_file_only_calls_are_moved_unless_moved_in_place() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from project.data import build_loaders

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        regressor = nn.GRU(13, 32, batch_first=True).to(device)
        fit_loader, graph_loader = build_loaders("config.yaml")
        for step, pair in enumerate(fit_loader, 1):
            series, target = pair
            prediction, _ = regressor(series)
        for graphs in graph_loader:
            graphs.to(device)
            prediction, _ = regressor(graphs)
        for row in [torch.randn(4, 5, 13)]:
            prediction, _ = regressor(row)
        """,
        """
        import torch
        from torch import nn
        from project.data import build_loaders

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        regressor = nn.GRU(13, 32, batch_first=True).to(device)
        fit_loader, graph_loader = build_loaders("config.yaml")
        for step, pair in enumerate(fit_loader, 1):
            series, target = pair
            series = series.to(device)
            prediction, _ = regressor(series)
        for graphs in graph_loader:
            graphs.to(device)
            prediction, _ = regressor(graphs)
        for row in [torch.randn(4, 5, 13)]:
            prediction, _ = regressor(row)
        """,
        unsafe=True,
    )


def test_batches_from_the_files_own_function_or_a_parameter_are_not_guessed() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        device = "cuda"
        net = nn.Linear(3, 1).to(device)

        def batches():
            for _ in range(4):
                yield torch.randn(2, 3, device=device)

        def evaluate(stream):
            for x in stream:
                net(x)

        val_loader = batches()
        for x in val_loader:
            net(x)
        """,
        unsafe=True,
    )


def test_a_library_call_handed_the_loader_or_a_device_may_move_what_it_yields() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.utils.data import DataLoader
        from helpers import DeviceLoader, wrap

        device = torch.device("cuda")
        net = Net().to(device)
        raw_loader = DataLoader(dataset, batch_size=4)
        on_device = DeviceLoader(raw_loader, device)
        wrapped = wrap(raw_loader)
        placed = DeviceLoader(files, device=device)
        for x in on_device:
            net(x)
        for x in wrapped:
            net(x)
        for x in placed:
            net(x)
        """,
        unsafe=True,
    )


def test_inputs_moved_where_the_model_is_called_show_its_device_for_the_targets() -> None:
    before = """
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm


class Runner:
    def __init__(self, net, loss_fn, device):
        self.net, self.loss_fn, self.device = net, loss_fn, torch.device(device)

    def evaluate(self, loader: DataLoader):
        bar = tqdm(enumerate(loader), total=len(loader))
        hits = 0
        for i, (images, classes) in bar:
            scores = self.net(images.to(self.device))
            hits += (scores.argmax(1) == classes).sum().item()
            bar.set_postfix(loss=self.loss_fn(scores, classes).item())
        return hits
"""
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "            scores = self.net(images.to(self.device))\n",
            "            classes = classes.to(self.device)\n"
            "            scores = self.net(images.to(self.device))\n",
        ),
        unsafe=True,
    )
    assert "batch `classes` reaches `self.net` (on `self.device`)" in findings[0].message


def test_batches_of_an_iterator_class_that_makes_cpu_tensors_are_moved() -> None:
    before = """
import numpy as np
import torch


class Windows:
    def __init__(self, series, width):
        self.series, self.width, self.start = series, width, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.start + self.width >= len(self.series):
            raise StopIteration
        chunk = self.series[self.start : self.start + self.width]
        self.start += self.width
        return torch.from_numpy(np.asarray(chunk[:-1])), torch.tensor(chunk[-1])


def fit(net, series, gpu):
    net = net.cuda(gpu)
    opt = torch.optim.Adam(net.parameters())
    stream = Windows(series, 9)
    for past, nxt in stream:
        loss = (net(past.float()) - nxt).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    assert_fix(
        RULE,
        before,
        before.replace(
            "        loss = (net(past.float()) - nxt).pow(2).mean()\n",
            "        past, nxt = past.cuda(gpu), nxt.cuda(gpu)\n"
            "        loss = (net(past.float()) - nxt).pow(2).mean()\n",
        ),
        unsafe=True,
    )
    moving = before.replace(
        "torch.from_numpy(np.asarray(chunk[:-1])), torch.tensor(chunk[-1])",
        "torch.from_numpy(np.asarray(chunk[:-1])).cuda(), torch.tensor(chunk[-1]).cuda()",
    )
    assert_noop(RULE, moving)


def test_an_unpacked_dict_batch_behind_a_rebound_progress_bar_is_moved_value_by_value() -> None:
    before = """
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


class Scorer:
    def __init__(self, net, device):
        self.net = net.to(device)
        self.dev = torch.device(device)

    def score(self, rows, verbose=False):
        loader = DataLoader(rows, batch_size=8, collate_fn=self.pack)
        if verbose:
            loader = tqdm(loader)
        out = []
        for features, targets in loader:
            logits = self.net(**features).logits
            out.append(torch.nn.functional.cross_entropy(logits, targets).item())
        return out
"""
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "            logits = self.net(**features).logits\n",
            "            features = {k: v.to(self.dev) for k, v in features.items()}\n"
            "            targets = targets.to(self.dev)\n"
            "            logits = self.net(**features).logits\n",
        ),
        unsafe=True,
    )
    assert "(on `self.dev`)" in findings[0].message


def test_a_label_compared_with_what_another_library_makes_of_the_output_stays_put() -> None:
    source = """
        import torch
        from spikes import decode

        def train(net, loader, device):
            net.to(device)
            hits = 0
            for spikes, target, label in loader:
                spikes = spikes.to(device)
                target = target.to(device)
                output = net(spikes)
                hits += int((decode(output) == label).sum())
                loss = torch.nn.functional.mse_loss(output, target)
                loss.backward()
        """
    # `decode` may return its classes anywhere, the CPU included: nothing says `label` must
    # go to the GPU.
    assert_noop(RULE, source)
    # Compared with the output's own method, it meets the output on the device.
    own = source.replace("decode(output)", "output.argmax(1)")
    assert_fix(
        RULE,
        own,
        own.replace(
            "                spikes = spikes.to(device)\n",
            "                label = label.to(device)\n                spikes = spikes.to(device)\n",
        ),
        unsafe=True,
    )


def test_a_batch_drawn_by_hand_in_a_lightning_hook_is_moved_before_the_module_gets_it() -> None:
    before = """
        import lightning.pytorch as pl

        class Forecaster(pl.LightningModule):
            def score(self, batch):
                x, y = batch
                return {"mse": ((self(x) - y) ** 2).mean()}

            def on_validation_epoch_start(self):
                if self.trainer.val_dataloaders is None:
                    return
                probe = next(iter(self.trainer.val_dataloaders))
                # one probe batch per epoch
                self.log_dict(self.score(probe))

            def validation_step(self, batch, batch_idx):
                return self.score(batch)
        """
    # The trainer moves the batch it hands `validation_step`, never one drawn by hand.
    assert_fix(
        RULE,
        before,
        before.replace(
            "                # one probe batch per epoch\n",
            "                # one probe batch per epoch\n"
            "                probe = self.transfer_batch_to_device(probe, self.device, 0)\n",
        ),
        unsafe=True,
    )
    # Moved by the module itself first, or in a class Lightning does not drive: nothing to add.
    moved = before.replace(
        "self.score(probe)", "self.score(self.transfer_batch_to_device(probe, self.device, 0))"
    )
    assert_noop(RULE, moved)
    assert_noop(RULE, before.replace("(pl.LightningModule)", "(BaseForecaster)"))


def test_a_batch_moved_where_the_model_gets_it_stays_where_the_loop_also_reads_it() -> None:
    # `x` goes to the device only inside the model's call; the spectrogram difference reads it
    # beside a host copy of the output, so a move at the head of the loop would break it.
    assert_noop(
        RULE,
        HEADER
        + """
with torch.no_grad():
    for x, y in loader:
        y = y.to(device)
        if hasattr(model, "module"):
            out = model.module(x.float().to(device))
        else:
            out = model(x.float().to(device))
        err = criterion(out, y).item()
        delta = torch.clamp(torch.abs(x[0] - out[0].cpu()), min=1e-6, max=1.0)
        print(err, delta.numpy())
""",
    )


def test_a_batch_that_meets_only_a_host_copy_of_the_output_is_not_bound_to_the_device() -> None:
    findings = assert_fix(
        RULE,
        HEADER
        + """
for x, y in loader:
    out = model(x)
    gap = (y - out.detach().cpu()).abs().sum()
""",
        HEADER
        + """
for x, y in loader:
    x = x.to(device)
    out = model(x)
    gap = (y - out.detach().cpu()).abs().sum()
""",
        unsafe=True,
    )
    assert "`x`" in findings[0].message and "`y`" not in findings[0].message


def test_a_parameter_moved_in_a_call_beside_its_unmoved_self_is_left_as_it_is() -> None:
    # A file that also loads checkpoints with a `loader`; the loop walks parameter names and
    # tensors and hands a sharding helper a moved copy of each beside the original.
    assert_noop(
        RULE,
        """
from functools import partial

import torch
from helpers import shard


def load_all(model, files):
    loader = partial(torch.load, map_location="cpu")
    for path in files:
        model.load_state_dict(loader(path), strict=False)


def place(model, device_map):
    shard_device = list(device_map.values())[0]
    pending = {name: param for name, param in model.named_parameters() if "head" not in name}
    for name, param in pending.items():
        if param.device.type == "meta":
            continue
        shard(model, param.to(shard_device), param, name)
""",
    )


def test_a_library_function_handed_a_module_moves_its_own_loaders_batches_to_it() -> None:
    # Nothing in the file calls `predict`: the caller picks the model's device, and the
    # function builds the loader itself, so its batches are on the CPU wherever the model is.
    assert_fix(
        RULE,
        """
import torch
from torch.utils.data import DataLoader


@torch.no_grad()
def predict(classifier, samples, batch_size=32):
    classifier.eval()
    labels = []
    for pixels in DataLoader(samples, batch_size=batch_size):
        labels.append(classifier(pixels).argmax(-1))
    return torch.cat(labels)
""",
        """
import torch
from torch.utils.data import DataLoader


@torch.no_grad()
def predict(classifier, samples, batch_size=32):
    classifier.eval()
    labels = []
    for pixels in DataLoader(samples, batch_size=batch_size):
        pixels = pixels.to(next(classifier.parameters()).device)
        labels.append(classifier(pixels).argmax(-1))
    return torch.cat(labels)
""",
        unsafe=True,
    )


def test_a_handed_callable_that_may_not_be_a_module_is_reported_without_a_fix() -> None:
    assert_declined(
        RULE,
        """
from torch.utils.data import DataLoader


def collect(encoder, corpus):
    codes = []
    for tokens in DataLoader(corpus, batch_size=4):
        codes.append(encoder(tokens))
    return codes
""",
        reason="`encoder` is a parameter of `collect`, which nothing in this file calls",
    )


def test_a_handed_callback_whose_result_is_dropped_is_no_model() -> None:
    assert_noop(
        RULE,
        """
from torch.utils.data import DataLoader


def drive(on_batch, corpus):
    for tokens in DataLoader(corpus, batch_size=4):
        on_batch(tokens)
""",
    )


def test_a_handed_model_fed_from_a_loader_it_is_also_handed_is_left_to_the_caller() -> None:
    assert_noop(
        RULE,
        """
def drive(model, loader):
    outputs = []
    for tokens in loader:
        outputs.append(model(tokens))
    return outputs
""",
    )


def test_a_module_that_moves_itself_gets_its_own_methods_inputs_moved() -> None:
    findings = assert_fix(
        "DF204",
        """
        import torch
        from torch import nn

        class Embedder(nn.Module):
            def __init__(self, use_gpu=True):
                super().__init__()
                self.proj = nn.Linear(16, 4)
                if use_gpu and torch.cuda.is_available():
                    self.cuda()

            def forward(self, x):
                return self.proj(x)

            @torch.no_grad()
            def embed(self, features: torch.Tensor):
                return self.forward(features.float()).cpu()

            def embed_moved(self, features: torch.Tensor):
                features = features.to(next(self.parameters()).device)
                return self(features)
        """,
        """
        import torch
        from torch import nn

        class Embedder(nn.Module):
            def __init__(self, use_gpu=True):
                super().__init__()
                self.proj = nn.Linear(16, 4)
                if use_gpu and torch.cuda.is_available():
                    self.cuda()

            def forward(self, x):
                return self.proj(x)

            @torch.no_grad()
            def embed(self, features: torch.Tensor):
                return self.forward(features.float().to(next(self.parameters()).device)).cpu()

            def embed_moved(self, features: torch.Tensor):
                features = features.to(next(self.parameters()).device)
                return self(features)
        """,
        unsafe=True,
    )
    assert len(findings) == 1 and "moves itself to a device (line 10)" in findings[0].message


def test_inputs_of_a_self_moving_module_that_may_not_be_tensors_are_reported() -> None:
    assert_declined(
        "DF204",
        """
        import torch
        from torch import nn

        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 1)
                self.to("cuda" if torch.cuda.is_available() else "cpu")

            def forward(self, rows):
                return self.head(rows)

            def score(self, rows):
                return self(rows)
        """,
        reason="no fix: it may not be a tensor",
    )


def test_a_module_the_caller_moves_leaves_its_methods_inputs_alone() -> None:
    assert_noop(
        "DF204",
        """
        import torch
        from torch import nn

        class Embedder(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(16, 4)

            def forward(self, x):
                return self.proj(x)

            def embed(self, features: torch.Tensor):
                return self(features.float())

        class Placed(Embedder):
            def __init__(self, device):
                super().__init__()
                self.to(device)

            def cuda(self, device=None):
                return self.to("cuda")

            def embed(self, features: torch.Tensor):
                return self(features)

        model = Embedder().cuda()
        """,
    )


def test_a_tensor_a_helper_makes_for_the_placed_model_it_is_handed_goes_where_the_model_is() -> (
    None
):
    findings = assert_fix(
        "DF204",
        """
        import numpy as np
        import torch

        from nets import Scorer

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def score(rows, net):
            return net(torch.from_numpy(rows).float()).sigmoid().cpu().numpy()

        def main():
            net = Scorer().to(dev).eval()
            print(score(np.ones((4, 8)), net))
        """,
        """
        import numpy as np
        import torch

        from nets import Scorer

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def score(rows, net):
            return net(torch.from_numpy(rows).to(dev).float()).sigmoid().cpu().numpy()

        def main():
            net = Scorer().to(dev).eval()
            print(score(np.ones((4, 8)), net))
        """,
        unsafe=True,
    )
    assert "which this file moves to `dev` before handing it over" in findings[0].message
    assert_noop(
        "DF204",
        """
        import numpy as np
        import torch

        from nets import Scorer

        def score(rows, net):
            return net(torch.from_numpy(rows).float())

        def main():
            print(score(np.ones((4, 8)), Scorer().eval()))
        """,
    )


def test_lengths_the_placed_model_packs_by_stay_where_the_helper_makes_them() -> None:
    # The tokens go to the model's device; the lengths feed `pack_padded_sequence` in the
    # model's own `forward`, which wants them on the CPU: they are left there.
    before = """
        import torch
        import torch.nn as nn

        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 8)
                self.rnn = nn.GRU(8, 8)

            def forward(self, ids, sizes):
                packed = nn.utils.rnn.pack_padded_sequence(self.emb(ids), sizes)
                return self.rnn(packed)[1]

        def tag(tagger, ids):
            sizes = torch.tensor([len(ids)])
            return tagger(torch.tensor(ids).unsqueeze(1), sizes)

        def main():
            tagger = Tagger().to(dev)
            print(tag(tagger, [3, 4, 5]))
        """
    assert_fix(
        "DF204",
        before,
        before.replace("torch.tensor(ids).unsqueeze(1)", "torch.tensor(ids).to(dev).unsqueeze(1)"),
        unsafe=True,
    )
