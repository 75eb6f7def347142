"""DF304 hard-coded-device."""

from __future__ import annotations

import textwrap

from devfix.fix_loop import check_source, fix_source
from devfix.types import Applicability, Options
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF304"

HELPER = '''

        def select_device() -> torch.device:
            """CUDA (the process's GPU under torchrun), else Apple MPS, else CPU."""
            if torch.cuda.is_available():
                return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if torch.backends.mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")'''


def test_device_variable_and_uses() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch
        device = torch.device("cuda:0")  # the GPU
        model = Net().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch, target in loader:
            x = torch.zeros(3, device="cuda:0")
            y = batch.cuda(0, non_blocking=True)
            criterion(model(y) + x, target).backward()
            optimizer.step()
        """,
        """
        import os
        import torch
        """
        + HELPER
        + """


        device = select_device()  # the GPU
        model = Net().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch, target in loader:
            x = torch.zeros(3, device=device)
            y = batch.to(device, non_blocking=True)
            criterion(model(y) + x, target).backward()
            optimizer.step()
        """,
        torch_version="2.5",  # before torch.accelerator: the helper
    )


def test_string_device_assignment() -> None:
    assert_fix(
        RULE,
        '''
        """A script."""
        import torch as t

        device = "cuda"
        model.to(device)
        opt = t.optim.Adam(model.parameters())
        for x, y in loader:
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
        ''',
        '''
        """A script."""
        import os

        import torch as t


        def select_device() -> t.device:
            """CUDA (the process's GPU under torchrun), else Apple MPS, else CPU."""
            if t.cuda.is_available():
                return t.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if t.backends.mps.is_available():
                return t.device("mps")
            return t.device("cpu")


        device = select_device()
        model.to(device)
        opt = t.optim.Adam(model.parameters())
        for x, y in loader:
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
        ''',
        torch_version="2.5",  # before torch.accelerator: the helper
    )


def test_inline_use_defines_the_device_once() -> None:
    result = assert_fix(
        RULE,
        """
        import os
        import torch

        def main():
            model.to("cuda:1")
            net.train(songs=songs, epoch=10)

        if __name__ == "__main__":
            main()
        """,
        """
        import os
        import torch
        """
        + HELPER
        + """


        device = select_device()

        def main():
            model.to(device)
            net.train(songs=songs, epoch=10)

        if __name__ == "__main__":
            main()
        """,
        unsafe=True,
        torch_version="2.5",  # before torch.accelerator: the helper
    )
    assert result[0].applicability is Applicability.UNSAFE
    assert "from cuda:1 to GPU 0" in result[0].message


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = model.to(device)
        cpu = torch.device("cpu")
        if torch.cuda.is_available():
            model = model.cuda(0)
        x = x.to("cuda") if torch.cuda.is_available() else x
        z = z.to(torch.device("cuda", local_rank))

        class Net(nn.Module):
            def forward(self, x):
                return x.to("cuda:0")

        def step(x: torch.Tensor):
            return x.cuda(0)

        loss.backward()
        """,
    )


def test_declines_model_parallel() -> None:
    assert_declined(
        RULE,
        """
        import torch
        encoder.to("cuda:0")

        class Net(torch.nn.Module):
            def forward(self, x):
                return self.dec(x.to("cuda:1"))

        Net()(x).sum().backward()
        """,
        reason="several GPUs on purpose",
    )


def test_declines_offload_of_a_helper_to_a_second_gpu() -> None:
    # A training script whose device falls back; one helper that takes a tensor builds its own
    # model and probes on the literal second GPU to spare the first one's memory.
    source = """
        import torch

        DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

        def worst_case(expr, grid):
            critic = build_critic(expr).to("cuda:1")
            probes = torch.rand(grid.shape[0], grid.shape[1]).to("cuda:1")
            return critic(probes).max()

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = criterion(model(x.to(DEVICE)), y.to(DEVICE))
                loss.backward()
                optimizer.step()
        """
    findings = check_source(textwrap.dedent(source), "train.py", Options(select=(RULE,)))
    assert [(f.line, f.applicability) for f in findings] == [
        (7, Applicability.DISPLAY_ONLY),
        (8, Applicability.DISPLAY_ONLY),
    ]
    for finding in findings:
        assert "`worst_case` offloads its own work to cuda:1 on purpose" in finding.message
        assert "torch.cuda.device_count() > 1" in finding.message


def test_offload_check_leaves_module_methods_and_gpu_zero() -> None:
    # Module methods are DF102's (or deliberate model parallelism); GPU 0 in a helper is the
    # script's one GPU, which DF102 judges against the helper's tensors.
    source = """
        import torch

        class Head(torch.nn.Module):
            def forward(self, x):
                return self.proj(x).to("cuda:1")

        def score(batch):
            return batch.sum().to("cuda:0")

        Head()(x).sum().backward()
        """
    assert not check_source(textwrap.dedent(source), "train.py", Options(select=(RULE,)))


def test_declines_string_comparison() -> None:
    assert_declined(
        RULE,
        """
        import torch
        device = "cuda"
        if device == "cuda":
            torch.backends.cudnn.benchmark = True
        model(x.to(device)).sum().backward()
        """,
        reason="compared as a string",
    )


def test_helper_goes_after_a_late_torch_import() -> None:
    assert_fix(
        RULE,
        """
        import sys
        sys.path.insert(0, ".")
        import torch

        x = torch.zeros(2, device="cuda:0")
        model(x).sum().backward()
        """,
        """
        import os
        import sys

        sys.path.insert(0, ".")
        import torch


        def select_device() -> torch.device:
            \"\"\"CUDA (the process's GPU under torchrun), else Apple MPS, else CPU.\"\"\"
            if torch.cuda.is_available():
                return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if torch.backends.mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")


        device = select_device()

        x = torch.zeros(2, device=device)
        model(x).sum().backward()
        """,
        torch_version="2.5",  # before torch.accelerator: the helper
    )


def test_data_pipeline_functions_are_left_to_df201() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def preprocess_function(examples):
            examples["labels"] = torch.tensor(examples["ids"]).to("cuda:0")
            return examples

        def pad(batch):
            return torch.stack(batch).to("cuda:0")

        dataset = dataset.map(preprocess_function, batched=True)
        loader = torch.utils.data.DataLoader(dataset, collate_fn=pad)
        for batch in loader:
            model(**batch).loss.backward()
        """,
    )


TRAINING_LOOP = """
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            criterion(model(x.to(device)), y.to(device)).backward()
            optimizer.step()
        """


def test_torch_from_a_star_import() -> None:
    assert_fix(
        RULE,
        """
        from utils import *

        model = Net()
        device = torch.device("cuda:0")
        model.to(device)
        """
        + TRAINING_LOOP,
        """
        import os
        import torch

        from utils import *
        """
        + HELPER
        + """


        model = Net()
        device = select_device()
        model.to(device)
        """
        + TRAINING_LOOP,
        torch_version="2.5",  # before torch.accelerator: the helper
    )


def test_a_fallback_that_pins_another_gpu_keeps_the_fallback() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        device = torch.device("cuda:1" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        """
        + TRAINING_LOOP,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        """
        + TRAINING_LOOP,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.UNSAFE]
    assert "pins GPU 1" in findings[0].message


def test_a_pinned_fallback_under_dataparallel_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from torch import nn

        device = torch.device("cuda:1" if torch.cuda.is_available() else "cpu")
        model = nn.DataParallel(Net()).to(device)
        """
        + TRAINING_LOOP,
        reason="`LOCAL_RANK`",
    )


def test_resume_map_location_goes_to_the_scripts_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        def main(args):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            optimizer = torch.optim.Adam(model.parameters())
            if args.resume:
                checkpoint = torch.load(args.resume, map_location="cuda:0")
                model.load_state_dict(checkpoint["model"])
                optimizer.load_state_dict(checkpoint["optimizer"])
            for x, y in loader:
                criterion(model(x.to(device)), y.to(device)).backward()
                optimizer.step()

        if __name__ == "__main__":
            main(parse_args())
        """,
        """
        import torch

        def main(args):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = Net().to(device)
            optimizer = torch.optim.Adam(model.parameters())
            if args.resume:
                checkpoint = torch.load(args.resume, map_location=device)
                model.load_state_dict(checkpoint["model"])
                optimizer.load_state_dict(checkpoint["optimizer"])
            for x, y in loader:
                criterion(model(x.to(device)), y.to(device)).backward()
                optimizer.step()

        if __name__ == "__main__":
            main(parse_args())
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_rank_that_may_be_none_uses_the_models_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import torch.nn.functional as F

        class Trainer:
            def __init__(self, model, optimizer, gpu_id):
                self.gpu_id = gpu_id
                self.model = model.to(gpu_id)
                self.optimizer = optimizer

            def run_epoch(self, batches):
                for x, y in batches:
                    x = x.to(f"cuda:{self.gpu_id}")
                    F.cross_entropy(self.model(x), y).backward()
                    self.optimizer.step()

        def main(rank=None):
            trainer = Trainer(Net(), opt, gpu_id=rank)
            if trainer.gpu_id is None:
                print("one process")
        """,
        """
        import torch
        import torch.nn.functional as F

        class Trainer:
            def __init__(self, model, optimizer, gpu_id):
                self.gpu_id = gpu_id
                self.model = model.to(gpu_id)
                self.optimizer = optimizer

            def run_epoch(self, batches):
                for x, y in batches:
                    x = x.to(next(self.model.parameters()).device)
                    F.cross_entropy(self.model(x), y).backward()
                    self.optimizer.step()

        def main(rank=None):
            trainer = Trainer(Net(), opt, gpu_id=rank)
            if trainer.gpu_id is None:
                print("one process")
        """,
    )


def test_programs_that_choose_their_gpu_are_left_alone() -> None:
    # An inference script that picks its GPU.
    assert_noop(
        RULE,
        """
        import torch

        def predict(path):
            model = Net()
            model.load_state_dict(torch.load(path, map_location="cuda:0"))
            model.to("cuda:0")
            model.eval()
            with torch.no_grad():
                return model(torch.randn(1, 3, device="cuda:0"))

        if __name__ == "__main__":
            print(predict("model.pt"))
        """,
    )
    # A CUDA check kept in a variable: the selection falls back.
    assert_noop(
        RULE,
        """
        import torch

        use_cuda = torch.cuda.is_available()
        model = Net()
        if use_cuda:
            model = model.cuda(0)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            if use_cuda:
                x, y = x.cuda(0), y.cuda(0)
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    )
    # One process per GPU after `set_device`: "cuda" is the rank's GPU.
    assert_noop(
        RULE,
        """
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
        model = DDP(Net().cuda(), device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            x, y = x.to("cuda"), y.cuda()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    )
    # A library's training step: its caller chooses the device.
    assert_noop(
        RULE,
        """
        import torch.nn.functional as F

        def train_step(model, optimizer, x, y, device="cuda"):
            x, y = x.to(device), y.to(device)
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        """,
    )


def test_defaults_every_call_overrides_and_the_users_own_switch() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def train_one_epoch(model, optimizer, loader, device=torch.device("cuda")):
            for x, y in loader:
                criterion(model(x.to(device)), y.to(device)).backward()
                optimizer.step()

        if args.gpu:
            device = torch.device("cuda:0")
        else:
            device = torch.device("cpu")
        train_one_epoch(model, optimizer, loader, device=device)
        """,
    )


def test_notebooks_are_left_alone() -> None:
    source = "import torch\ndevice = torch.device('cuda:0')\n" + textwrap.dedent(TRAINING_LOOP)
    assert check_source(source, "train.py", Options(select=(RULE,)))
    assert not check_source(source, "train.ipynb", Options(select=(RULE,)))


def test_map_location_without_a_device_variable_loads_to_the_cpu() -> None:
    before = """
        import torch
        model = Net().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        state = torch.load("last.pt", map_location="cuda:0")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        for x, y in loader:
            criterion(model(x.cuda()), y.cuda()).backward()
            optimizer.step()
        """
    findings = assert_fix(RULE, before, before.replace('"cuda:0"', '"cpu"'))
    assert findings[0].applicability is Applicability.SAFE
    # A tensor used straight from the checkpoint now arrives on the CPU: unsafe.
    used = before.replace("for x, y", 'weights = state["class_weights"]\n        for x, y')
    findings = assert_fix(RULE, used, used.replace('"cuda:0"', '"cpu"'), unsafe=True)
    assert findings[0].applicability is Applicability.UNSAFE


def test_a_device_spelled_from_is_cuda_becomes_the_tensor_s_own_device() -> None:
    # "cuda" is the current GPU, not the one the tensor is on (in model code and helpers too).
    before = """
        import torch

        def propagate(adj, feats):
            device = torch.device("cuda" if adj.is_cuda else "cpu")
            eye = torch.eye(adj.size(0), device=device)
            where = "cpu" if not feats.is_cuda else "cuda"
            return (adj + eye).to(where) @ feats
        """
    assert_fix(
        RULE,
        before,
        before.replace('torch.device("cuda" if adj.is_cuda else "cpu")', "adj.device").replace(
            '"cpu" if not feats.is_cuda else "cuda"', "feats.device"
        ),
    )


def test_a_device_type_from_is_cuda_is_right_as_a_type() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def step(model, batch):
            with torch.autocast("cuda" if batch.is_cuda else "cpu", dtype=torch.bfloat16):
                return model(batch)
        """,
    )


_RANK_ZERO_EVALUATION = """
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp


    def validate(net, loader):
        for batch in loader:
            net(batch.cuda({index}))


    def worker(gpu, world):
        dist.init_process_group("nccl", rank=gpu, world_size=world)
        torch.cuda.set_device(gpu)
        net = build().cuda(gpu)
        for epoch in range(10):
            train_one_epoch(net, gpu)
            if gpu == 0:
                validate(net, val_loader)
                torch.save(net.state_dict(), "last.pt")


    if __name__ == "__main__":
        assert torch.cuda.is_available()
        mp.spawn(worker, args=(torch.cuda.device_count(),), nprocs=torch.cuda.device_count())
    """


def test_gpu_zero_in_code_only_rank_zero_runs_is_that_process_own_gpu() -> None:
    assert_noop(RULE, _RANK_ZERO_EVALUATION.format(index=0))


def test_another_gpu_in_rank_zero_code_is_still_hard_coded() -> None:
    source = textwrap.dedent(_RANK_ZERO_EVALUATION.format(index=1))
    findings = check_source(source, "train.py", Options(select=(RULE,), unsafe_fixes=True))
    assert [(f.code, f.line) for f in findings] == [(RULE, 9)]


def test_with_torch_2_6_or_newer_the_selection_is_torch_accelerator() -> None:
    # No helper: PyTorch's own API, the process's LOCAL_RANK device under torchrun.
    assert_fix(
        RULE,
        """
        import torch as t

        device = t.device("cuda:0")  # the GPU
        model = Net().to(device)
        opt = t.optim.Adam(model.parameters())
        for x, y in loader:
            crit(model(x.to("cuda:0")), y.to(device)).backward()
            opt.step()
        """,
        """
        import os

        import torch as t

        device = (
            t.device(t.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK", 0)))
            if t.accelerator.is_available()
            else t.device("cpu")
        )  # the GPU
        model = Net().to(device)
        opt = t.optim.Adam(model.parameters())
        for x, y in loader:
            crit(model(x.to(device)), y.to(device)).backward()
            opt.step()
        """,
        torch_version="2.6.0+cpu",
    )


def test_with_torch_2_6_an_inline_use_defines_the_device_after_the_imports() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def main():
            model.to("cuda:0")
            for x in data:
                model(x).sum().backward()
        """,
        """
        import os

        import torch

        device = (
            torch.device(torch.accelerator.current_accelerator().type, int(os.environ.get("LOCAL_RANK", 0)))
            if torch.accelerator.is_available()
            else torch.device("cpu")
        )

        def main():
            model.to(device)
            for x in data:
                model(x).sum().backward()
        """,
        torch_version="2.7",
    )


def test_a_function_that_ignores_the_device_it_is_given_uses_it() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        def evaluate(net, loader, dev):
            with torch.no_grad():
                return [net(batch.to("cuda")) for batch in loader]

        def evaluate_on(net, loader, dev):
            return [net(batch.to(dev)) for batch in loader]
        """,
        """
        import torch

        def evaluate(net, loader, dev):
            with torch.no_grad():
                return [net(batch.to(dev)) for batch in loader]

        def evaluate_on(net, loader, dev):
            return [net(batch.to(dev)) for batch in loader]
        """,
        unsafe=True,
    )
    assert "takes `dev`, which it never reads" in findings[0].message
    assert findings[0].applicability is Applicability.UNSAFE


def test_inputs_sent_to_a_literal_gpu_for_a_model_the_class_was_handed() -> None:
    # A pipeline class keeps the model its constructor is given; `generate` makes it a model
    # that has `.device`. The prompt ids reach a model through a helper of the file, too, which
    # reads its output's `logits`.
    findings = assert_fix(
        RULE,
        """
        import torch

        def sample(net, ids, steps):
            for _ in range(steps):
                ids = torch.cat([ids, net(ids).logits.argmax(-1)[:, -1:]], dim=1)
            return ids

        class Pipeline:
            def __init__(self, model, tokenizer):
                self.model = model
                self.tokenizer = tokenizer

            def __call__(self, text):
                ids = self.tokenizer(text, return_tensors="pt").input_ids.to("cuda:0")
                return self.model.generate(ids, max_new_tokens=8)

        def complete(model, ids):
            ids = ids.cuda()
            return sample(model, ids, steps=4)
        """,
        """
        import torch

        def sample(net, ids, steps):
            for _ in range(steps):
                ids = torch.cat([ids, net(ids).logits.argmax(-1)[:, -1:]], dim=1)
            return ids

        class Pipeline:
            def __init__(self, model, tokenizer):
                self.model = model
                self.tokenizer = tokenizer

            def __call__(self, text):
                ids = self.tokenizer(text, return_tensors="pt").input_ids.to(self.model.device)
                return self.model.generate(ids, max_new_tokens=8)

        def complete(model, ids):
            ids = ids.to(next(model.parameters()).device)
            return sample(model, ids, steps=4)
        """,
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}
    assert "the caller chose that model's device" in findings[0].message


_PLACED_ONLY_WITH_A_FLAG = """
import numpy as np
import torch

def predict_once(model, image):
    x = torch.from_numpy(image.astype(np.float32)).permute(2, 0, 1).cuda()
    x = x / 255.0
    x = normalize(x).unsqueeze(0)
    return model(x)[0].cpu().numpy()

def predict_all(model, images):
    return [predict_once(model, image) for image in images]

def main(args):
    model = MattingNet()
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    if args.cuda:
        model = model.cuda()
    model.eval()
    return predict_all(model, args.images)
"""


def test_literal_gpu_inputs_of_a_model_the_file_places_only_under_a_flag_follow_the_model() -> None:
    # The model goes to the GPU only `if args.cuda:`; its input always does, two calls down
    # and through a transform: without the flag the image meets a CPU model.
    findings = assert_fix(
        RULE,
        _PLACED_ONLY_WITH_A_FLAG,
        _PLACED_ONLY_WITH_A_FLAG.replace(
            ".permute(2, 0, 1).cuda()", ".permute(2, 0, 1).to(next(model.parameters()).device)"
        ),
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}


def test_literal_gpu_inputs_moved_under_the_flag_the_model_is_placed_under_are_left() -> None:
    # The same test guards both moves, or every branch places the model: they agree.
    assert_noop(
        RULE,
        _PLACED_ONLY_WITH_A_FLAG.replace(
            "    x = torch.from_numpy(image.astype(np.float32)).permute(2, 0, 1).cuda()\n",
            "    x = torch.from_numpy(image.astype(np.float32)).permute(2, 0, 1)\n"
            "    if args.cuda:\n        x = x.cuda()\n",
        ).replace("def predict_once(model, image):", "def predict_once(model, image, args=ARGS):"),
    )
    assert_noop(
        RULE,
        _PLACED_ONLY_WITH_A_FLAG.replace(
            "        model = model.cuda()\n",
            "        model = model.cuda()\n    else:\n        model = model.half().cuda()\n",
        ),
    )


def test_literal_gpu_inputs_left_where_the_file_places_the_model_or_feeds_no_model() -> None:
    # The file moves the model it hands over; a loss and an augmentation are no models; a
    # device variable is not a literal GPU.
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        def evaluate(model, loader, criterion, device_index):
            for images, labels in loader:
                images = images.cuda(non_blocking=True)
                labels = labels.cuda(non_blocking=True)
                output = model(images)
                print(criterion(output, labels).item())
                print(model(images.cuda(device_index)).shape)

        def augment(mixup_fn, images, labels):
            images, labels = images.cuda(), labels.cuda()
            return mixup_fn(images, labels)

        net = nn.Linear(4, 2)
        net.cuda()
        evaluate(net, [], nn.CrossEntropyLoss(), 0)
        """,
    )


def test_literal_gpu_tensors_a_function_uses_with_a_model_it_was_handed() -> None:
    # Targets built on "cuda" and labels moved there meet the outputs of a model the caller
    # placed; a tokenizer's `decode` runs no model.
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.nn.functional as F

        def accuracy(classifier, tokenizer, batch):
            targets = torch.as_tensor(batch["y"], device="cuda")
            weights = batch["w"].cuda()
            print(tokenizer.decode(batch["ids"][0]))
            logits = classifier(batch["ids"]).logits
            return (F.cross_entropy(logits, targets, reduction="none") * weights).mean()
        """,
        """
        import torch
        import torch.nn.functional as F

        def accuracy(classifier, tokenizer, batch):
            targets = torch.as_tensor(batch["y"], device=next(classifier.parameters()).device)
            weights = batch["w"].to(next(classifier.parameters()).device)
            print(tokenizer.decode(batch["ids"][0]))
            logits = classifier(batch["ids"]).logits
            return (F.cross_entropy(logits, targets, reduction="none") * weights).mean()
        """,
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}
    assert all("uses with `classifier`" in f.message for f in findings)


def test_literal_gpu_left_to_the_script_where_the_function_places_the_model_itself() -> None:
    findings = check_source(
        textwrap.dedent(
            """
            import torch

            def run(model, batch):
                model.cuda()
                mask = torch.ones(4, device="cuda")
                return model(batch).logits * mask
            """
        ),
        "train.py",
        Options(select=(RULE,)),
    )
    assert not any("uses with `model`" in f.message for f in findings)


def test_a_gpu_numbered_by_a_setting_follows_a_model_a_runner_was_handed() -> None:
    # The base runner is handed the model; a subclass's step runs it on the batch the base's
    # loop sends to `cuda:<local rank>`, wherever the caller put the model (the CPU, cuda:0).
    findings = assert_fix(
        RULE,
        """
        import torch

        class Runner:
            def __init__(self, model, settings):
                self.model = model
                self.settings = settings

            def evaluate(self, loader):
                self.model.eval()
                for batch in loader:
                    batch = batch.to("cuda:{}".format(self.settings.local_rank))
                    self.step(batch)

            def warm_up(self, batch):
                return self.model(batch.to(f"cuda:{self.settings.local_rank}"))

        class Classifier(Runner):
            def __init__(self, model, settings, classes):
                super().__init__(model, settings)
                self.classes = classes

            def step(self, batch):
                return self.model(batch).argmax(-1)
        """,
        """
        import torch

        class Runner:
            def __init__(self, model, settings):
                self.model = model
                self.settings = settings

            def evaluate(self, loader):
                self.model.eval()
                for batch in loader:
                    batch = batch.to(next(self.model.parameters()).device)
                    self.step(batch)

            def warm_up(self, batch):
                return self.model(batch.to(next(self.model.parameters()).device))

        class Classifier(Runner):
            def __init__(self, model, settings, classes):
                super().__init__(model, settings)
                self.classes = classes

            def step(self, batch):
                return self.model(batch).argmax(-1)
        """,
        unsafe=True,
    )
    assert all("the GPU `self.settings.local_rank` numbers" in f.message for f in findings)


def test_a_gpu_numbered_by_a_setting_is_left_where_the_runner_places_the_model() -> None:
    assert_noop(
        RULE,
        """
        import torch

        class Runner:
            def __init__(self, model, local_rank):
                self.model = model
                self.local_rank = local_rank

            def evaluate(self, loader):
                self.model.to(f"cuda:{self.local_rank}").eval()
                for batch in loader:
                    self.model(batch.to("cuda:{}".format(self.local_rank)))
        """,
    )


def test_a_move_helper_left_at_its_gpu_default_gets_the_handed_models_device() -> None:
    # `to_device(batch)` sends the batch to its default `"cuda"` (the current GPU); the scorer
    # runs a model its caller placed, so the batch goes where that model is.
    findings = assert_fix(
        RULE,
        """
        import torch

        def to_device(batch, non_blocking=False, device="cuda"):
            return {k: v.to(device, non_blocking=non_blocking) for k, v in batch.items()}

        def score(model, loader):
            total = 0.0
            for batch in loader:
                batch = to_device(batch, True)
                total += model(**batch).loss.item()
            return total

        def evaluate(model, loader, device):
            for batch in loader:
                model(**to_device(batch, device=device))
        """,
        """
        import torch

        def to_device(batch, non_blocking=False, device="cuda"):
            return {k: v.to(device, non_blocking=non_blocking) for k, v in batch.items()}

        def score(model, loader):
            total = 0.0
            for batch in loader:
                batch = to_device(batch, True, device=next(model.parameters()).device)
                total += model(**batch).loss.item()
            return total

        def evaluate(model, loader, device):
            for batch in loader:
                model(**to_device(batch, device=device))
        """,
        unsafe=True,
    )
    assert [f.line for f in findings] == [10]
    assert "leaves `device` at its default" in findings[0].message


def test_cuda_of_a_device_that_may_be_the_cpu_becomes_to() -> None:
    # A tensor's device, a `torch.device(...)` and a parameter named for a device are never
    # None; `.to()` is the same move for a GPU and works for the CPU.
    assert_fix(
        RULE,
        """
        import torch

        def align(x, reference, target_device):
            y = x.cuda(reference.device)
            z = x.cuda(torch.device("cuda", 1 if torch.cuda.device_count() > 1 else 0))
            return y, z, x.cuda(target_device, non_blocking=True)
        """,
        """
        import torch

        def align(x, reference, target_device):
            y = x.to(reference.device)
            z = x.to(torch.device("cuda", 1 if torch.cuda.device_count() > 1 else 0))
            return y, z, x.to(target_device, non_blocking=True)
        """,
    )


def test_cuda_of_a_device_that_may_be_none_is_left() -> None:
    # `.cuda(None)` is the current GPU but `.to(None)` keeps the CPU; a settings object's
    # device and a rebound name may be None; a GPU id is not a device name.
    assert_noop(
        RULE,
        """
        import torch

        class Runner:
            def __init__(self, args, device=None):
                self.device = device
                self.args = args

            def step(self, x, device=None, gpu=0):
                a = x.cuda(device)
                b = x.cuda(self.device)
                c = x.cuda(self.args.device)
                d = x.cuda(gpu)
                return a, b, c, d

        def place(x, device):
            if device == "auto":
                device = None
            return x.cuda(device)
        """,
    )


def test_cuda_of_a_device_parameter_every_caller_hands_a_gpu_is_left() -> None:
    # The spawn index (through a settings field) and a literal index are GPUs: `.cuda(device)`
    # is right there, and `.to(device)` would only churn.
    assert_noop(
        RULE,
        """
        import torch
        import torch.multiprocessing as mp

        def fit(net, loader, device):
            for inputs, targets in loader:
                inputs = inputs.cuda(device)
                targets = targets.cuda(device, non_blocking=True)
                net(inputs).sum().backward()

        def evaluate(net, batch, device):
            return net(batch.cuda(device))

        def worker(gpu, ngpus, args):
            args.gpu = gpu
            torch.cuda.set_device(args.gpu)
            net = build().cuda(args.gpu)
            fit(net, make_loader(args), args.gpu)
            evaluate(net, next(iter(make_loader(args))), 0)

        if __name__ == "__main__":
            mp.spawn(worker, nprocs=torch.cuda.device_count(), args=(2, parse()))
        """,
    )


def test_cuda_of_a_device_parameter_is_fixed_when_one_caller_may_hand_the_cpu() -> None:
    assert_fix(
        RULE,
        """
        import torch

        def evaluate(net, batch, device):
            return net(batch.cuda(device))

        evaluate(build(), load(), 0)
        evaluate(build(), load(), torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        """,
        """
        import torch

        def evaluate(net, batch, device):
            return net(batch.to(device))

        evaluate(build(), load(), 0)
        evaluate(build(), load(), torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        """,
    )


def test_cuda_of_an_inputs_device_in_model_code_becomes_to_that_device() -> None:
    # DF102 leaves it: `x.device` is the input's own device, only `.cuda` is wrong for the CPU.
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x):
                return x * torch.ones(x.shape[-1]).cuda(x.device)
        """
    )
    result = fix_source(source, Options(select=("DF102", RULE)))
    assert result.output == source.replace(".cuda(x.device)", ".to(x.device)")
    assert [f.code for f in result.findings] == [RULE]


def test_a_prompt_rebound_to_its_encoding_follows_the_model_not_the_tokenizer() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        def complete(lm, tok, prompt, n=32):
            prompt = tok.encode(prompt, return_tensors="pt").cuda()
            return lm.generate(prompt, max_new_tokens=n, pad_token_id=tok.encode("[PAD]")[0])
        """,
        """
        import torch

        def complete(lm, tok, prompt, n=32):
            prompt = tok.encode(prompt, return_tensors="pt").to(lm.device)
            return lm.generate(prompt, max_new_tokens=n, pad_token_id=tok.encode("[PAD]")[0])
        """,
        unsafe=True,
    )
    assert "puts the inputs of `lm`" in findings[0].message


def test_a_model_class_overriding_train_does_not_make_an_inference_script_train() -> None:
    # `super().train(mode)` only switches the mode: the file still only predicts, and picks
    # its GPU for itself.
    assert_noop(
        RULE,
        """
import torch
from torch import nn

CPU = torch.device("cpu")


class Predictor:
    def setup(self):
        self.device = torch.device("cuda")
        self.model = FrozenCaptioner().to(self.device).eval()

    def predict(self, features):
        with torch.no_grad():
            return self.model(features.to(self.device))


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        return self.head(self.encoder(x))


class FrozenCaptioner(Captioner):
    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()
        return self
""",
    )


def test_bare_cuda_in_a_script_whose_device_falls_back_goes_to_that_device() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        from nets import Segmenter, loaders

        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        net = Segmenter().to(device)
        opt = torch.optim.Adam(net.parameters())
        for image, mask in loaders.train:
            image, mask = image.cuda(), mask.cuda(non_blocking=True)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(image), mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        """
        import torch

        from nets import Segmenter, loaders

        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        net = Segmenter().to(device)
        opt = torch.optim.Adam(net.parameters())
        for image, mask in loaders.train:
            image, mask = image.to(device), mask.to(device, non_blocking=True)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(image), mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    )
    assert [f.applicability for f in findings] == [Applicability.SAFE] * 2


def test_bare_cuda_beside_a_switch_chosen_in_if_branches_in_an_inference_script() -> None:
    # Not a training program, and the move sits under a test of something else (the reader).
    findings = assert_fix(
        RULE,
        """
        import argparse

        import torch

        from asr import Recognizer, reader

        def main():
            args = argparse.ArgumentParser().parse_args()
            if args.host_only:
                where = torch.device("cpu")
            else:
                where = torch.device("cuda")
            net = Recognizer().to(where).eval()
            for clip in reader(args.clips):
                if args.fast_reader:
                    feats = clip.features
                else:
                    feats = clip.wave.cuda()
                print(net(feats).argmax(-1))

        if __name__ == "__main__":
            main()
        """,
        """
        import argparse

        import torch

        from asr import Recognizer, reader

        def main():
            args = argparse.ArgumentParser().parse_args()
            if args.host_only:
                where = torch.device("cpu")
            else:
                where = torch.device("cuda")
            net = Recognizer().to(where).eval()
            for clip in reader(args.clips):
                if args.fast_reader:
                    feats = clip.features
                else:
                    feats = clip.wave.to(where)
                print(net(feats).argmax(-1))

        if __name__ == "__main__":
            main()
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_bare_cuda_under_the_device_switch_or_a_cuda_check_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        from nets import Net, batches

        use_gpu = torch.cuda.is_available()
        device = "cuda" if use_gpu else "cpu"
        net = Net().to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in batches():
            if use_gpu:
                x, y = x.cuda(), y.cuda()
            if torch.cuda.device_count() > 0:
                x = x.cuda()
            y = y.cuda() if device != "cpu" else y
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        """,
    )


def test_bare_cuda_in_a_gpu_only_script_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        from nets import Net, batches

        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in batches():
            x, y = x.cuda(), y.cuda()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        """,
    )


def test_bare_cuda_beside_a_pinned_fallback_or_in_a_function_reading_the_entry_points_device() -> (
    None
):
    findings = assert_fix(
        RULE,
        """
        import torch

        from nets import Net, batches

        def fit(net, opt):
            for x, y in batches():
                x, y = x.cuda(), y.cuda()
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(x), y).backward()
                opt.step()

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = Net().to(device)
            fit(net, torch.optim.SGD(net.parameters(), lr=0.1))
        """,
        """
        import torch

        from nets import Net, batches

        def fit(net, opt):
            for x, y in batches():
                x, y = x.to(device), y.to(device)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(x), y).backward()
                opt.step()

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            net = Net().to(device)
            fit(net, torch.optim.SGD(net.parameters(), lr=0.1))
        """,
        unsafe=True,
    )
    # `fit` imported elsewhere would find no `device`: the caller's choice.
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}


def test_a_notebook_or_inference_script_pinned_past_the_first_gpu_is_reported_without_a_fix() -> (
    None
):
    notebook = textwrap.dedent(
        """
        import torch
        from transformers import AutoModelForCausalLM
        lm = AutoModelForCausalLM.from_pretrained("gpt2").to("cuda:2")
        first = torch.zeros(3, device="cuda:0")
        """
    )
    findings = check_source(notebook, "explore.ipynb", Options(select=(RULE,)))
    assert [(f.line, f.applicability) for f in findings] == [(4, Applicability.DISPLAY_ONLY)]
    assert "pins GPU 2, which a machine with fewer GPUs lacks" in findings[0].message
    assert_declined(
        RULE,
        """
        import torch
        from nets import Net

        net = Net().eval().cuda(1)
        probe = torch.load("probe.pt", map_location="cpu")
        if torch.cuda.device_count() > 1:
            print(net(probe.cuda(1)))
        """,
        reason="pins GPU 1",
    )


def test_setting_a_literal_current_gpu_past_the_first_is_reported_without_a_fix() -> None:
    finding = assert_declined(
        RULE,
        """
        import torch
        from nets import Net, batches

        torch.cuda.set_device(3)
        net = Net().cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in batches():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x.cuda()), y.cuda()).backward()
            opt.step()
        if torch.cuda.device_count() > 1:
            torch.cuda.set_device(1)
        torch.cuda.set_device(0)
        """,
        reason="`torch.cuda.set_device(3)` pins GPU 3",
    )
    assert finding.line == 5
