"""DF401 data-parallel: inline cases, one per item of the conversion checklist."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devfix.engine import check_source, fix_source
from devfix.types import Applicability, Options
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF401"


def _convert(source: str, **pass_options: object) -> str:
    """The converted text; it parses, a second run changes nothing, the finding is unsafe."""
    options = Options(
        select=(RULE,), unsafe_fixes=True, pass_options={RULE: pass_options} if pass_options else {}
    )
    source = textwrap.dedent(source)
    result = fix_source(source, options)
    assert result.changed, [f.message for f in result.findings]
    assert [f.applicability for f in result.findings] == [Applicability.UNSAFE]
    cst.parse_module(result.output)
    assert fix_source(result.output, options).output == result.output
    return result.output


FLAT = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


loader = DataLoader(dataset, batch_size=32, shuffle=True)  # training data
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if torch.cuda.device_count() > 1:
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    model = nn.DataParallel(model, device_ids=[0, 1])
for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        if torch.cuda.device_count() > 1:
            loss = loss.mean()  # average over the replicas
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
torch.save(model.state_dict(), "model.pt")
"""

FLAT_AFTER = """
# devfix DF401: launch with
# `torchrun --standalone --nproc_per_node=<GPUs> train.py` (`python train.py`
# runs one process)
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


if __name__ == "__main__":
    # One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if torch.cuda.is_available():
        # before the process group and any CUDA tensor
        torch.cuda.set_device(local_rank)
    if distributed:
        dist.init_process_group(
            backend="nccl" if torch.cuda.is_available() else "gloo"
        )

    # DataParallel's batch of 32 was global; each of the world_size processes
    # now takes 32 // world_size of it (when that does not divide, the global
    # batch is smaller). Each process reads its own shard of the data set.
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0
    )
    loader = DataLoader(
        dataset, batch_size=32 // world_size, sampler=sampler
    )  # training data
    model = Net().to(device)
    if distributed:
        if torch.cuda.is_available():
            model = model.to(torch.device("cuda", local_rank))
            model = DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank
            )
        else:
            model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(epoch, loss.item())
    if rank == 0:
        torch.save(
            (model.module if distributed else model).state_dict(), "model.pt"
        )
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
"""


def test_flat_script_is_converted_item_by_item() -> None:
    findings = assert_fix(RULE, FLAT, FLAT_AFTER, unsafe=True)
    assert findings[0].applicability is Applicability.UNSAFE
    assert findings[0].line == 23


def test_the_fix_is_unsafe_and_not_applied_without_unsafe_fixes() -> None:
    result = fix_source(textwrap.dedent(FLAT), Options(select=(RULE,)))
    assert not result.changed
    assert result.hidden_unsafe == 1


def test_from_import_alias() -> None:
    out = _convert(
        FLAT.replace(
            "import torch.nn as nn\n",
            "import torch.nn as nn\nfrom torch.nn import DataParallel as DP\n",
        ).replace("nn.DataParallel(", "DP(")
    )
    assert "DP(" not in out
    assert "DataParallel as DP" not in out  # the import the wrap used goes with it
    assert "model, device_ids=[local_rank], output_device=local_rank" in out


def test_torch_nn_parallel_spelling_and_torch_alias() -> None:
    source = FLAT.replace("import torch\n", "import torch as t\n")
    for name in ("device(", "cuda.", "optim.", "save("):
        source = source.replace(f"torch.{name}", f"t.{name}")
    source = source.replace("nn.DataParallel(", "t.nn.parallel.DataParallel(")
    out = _convert(source)
    assert "t.cuda.set_device(local_rank)" in out
    assert 'model = model.to(t.device("cuda", local_rank))' in out
    assert "import torch\n" not in out


def test_wrap_without_guard_keeps_the_inner_expression() -> None:
    out = _convert(
        """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=8)
        model = nn.DataParallel(Net().cuda())
        opt = torch.optim.Adam(model.parameters())
        for x in loader:
            model(x.cuda()).sum().backward()
            opt.step()
        """
    )
    assert "    model = Net().cuda()\n    if distributed:" in out
    assert "DataParallel(" not in out.replace("DistributedDataParallel(", "")
    assert "shuffle=False" in out  # the loader did not shuffle: the sampler does not either


def test_function_entry_point_gets_setup_and_teardown() -> None:
    out = _convert(
        """
        import argparse
        import torch
        from torch.utils.data import DataLoader

        def main():
            \"\"\"Train.\"\"\"
            args = argparse.ArgumentParser().parse_args()
            loader = DataLoader(ds, batch_size=args.batch_size, shuffle=args.shuffle)
            model = torch.nn.DataParallel(Net()).to("cuda:0")
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                train_one_epoch(model, loader, opt)
            return model

        def train_one_epoch(model, loader, opt):
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                opt.step()
            print("epoch done")

        if __name__ == "__main__":
            main()
        """
    )
    # After the command line is parsed: `torchrun train.py --help` starts no process group.
    assert (
        '    """Train."""\n    args = argparse.ArgumentParser().parse_args()\n'
        "    # One process per device:"
    ) in out
    assert "shuffle=args.shuffle, seed=0\n" in out
    assert "batch_size=args.batch_size // world_size, sampler=sampler\n" in out
    assert "        sampler.set_epoch(epoch)" in out
    assert 'model = Net().to("cuda")' in out
    assert "        dist.destroy_process_group()\n    return model\n" in out
    assert '    if os.environ.get("RANK", "0") == "0":\n        print("epoch done")' in out
    assert out.count('if __name__ == "__main__":') == 1


def test_setup_binds_only_the_names_the_training_code_reads() -> None:
    """The loader comes from a factory (which reads its own share), nothing in `main` prints:
    `main` reads neither `rank` nor `world_size`, so binding them would be dead code (F841)."""
    out = _convert(
        """
        import torch
        from torch.utils.data import DataLoader

        def get_loader(bs):
            loader = DataLoader(ds, batch_size=bs, shuffle=True)
            return loader

        def main():
            loader = get_loader(64)
            model = torch.nn.DataParallel(Net()).cuda()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                for x, y in loader:
                    model(x).sum().backward()
                    opt.step()

        if __name__ == "__main__":
            main()
        """
    )
    factory, main = out.split("def main():")
    assert 'world_size = int(os.environ.get("WORLD_SIZE", "1"))' in factory
    assert "local_rank = int(" in main
    assert "world_size" not in main.split("if __name__")[0]
    assert "rank = int(" not in main.replace("local_rank = int(", "")


def test_bare_call_of_main_moves_under_a_main_guard() -> None:
    out = _convert(
        """
        import torch
        from torch.utils.data import DataLoader

        def main():
            loader = DataLoader(ds, batch_size=4)
            model = torch.nn.DataParallel(Net())
            for x in loader:
                model(x).sum().backward()

        main()
        """
    )
    assert out.endswith('if __name__ == "__main__":\n    main()\n')


def test_existing_main_block_gets_the_setup() -> None:
    out = _convert(
        """
        import torch
        from torch.utils.data import DataLoader

        if __name__ == "__main__":
            loader = DataLoader(ds, batch_size=4)
            model = torch.nn.DataParallel(Net())
            for x in loader:
                model(x).sum().backward()
        """
    )
    assert out.count('if __name__ == "__main__":') == 1
    assert '    distributed = "RANK" in os.environ' in out


def test_optimizer_built_before_the_wrap_moves_after_it() -> None:
    out = _convert(FLAT)
    assert out.index("DistributedDataParallel(model)") < out.index("optimizer = torch.optim.SGD")


def test_optimizer_stays_when_something_between_uses_it() -> None:
    source = FLAT.replace(
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)\n",
    )
    out = _convert(source)
    assert out.index("optimizer = torch.optim.SGD") < out.index("DistributedDataParallel(model)")


def test_loss_mean_is_kept_when_not_under_a_gpu_count_guard() -> None:
    source = FLAT.replace(
        "        if torch.cuda.device_count() > 1:\n            loss = loss.mean()  # average over the replicas\n",
        "        loss = loss.mean()\n",
    )
    out = _convert(source)
    assert "loss = loss.mean()" in out


def test_n_gpu_guard_around_loss_mean_is_removed() -> None:
    source = FLAT.replace(
        "if torch.cuda.device_count() > 1:\n            loss",
        "if args.n_gpu > 1:\n            loss",
    )
    out = _convert(source)
    assert "mean()" not in out


def test_keep_per_process_batch_option() -> None:
    out = _convert(FLAT, keep_per_process_batch=True)
    assert "batch_size=32, sampler=sampler" in out
    assert "the global batch is 32 * world_size" in out


def test_batch_size_expression_is_parenthesised() -> None:
    out = _convert(FLAT.replace("batch_size=32", "batch_size=BATCH * 2"))
    assert "batch_size=(BATCH * 2) // world_size" in out


def test_evaluation_loader_is_left_whole() -> None:
    source = FLAT.replace(
        'torch.save(model.state_dict(), "model.pt")\n',
        'torch.save(model.state_dict(), "model.pt")\n'
        "test_loader = DataLoader(test_set, batch_size=64)\n"
        "with torch.no_grad():\n"
        "    correct = sum((model(x).argmax(1) == y).sum().item() for x, y in test_loader)\n"
        "print(correct)\n",
    )
    out = _convert(source)
    assert "    test_loader = DataLoader(test_set, batch_size=64)\n" in out
    assert out.count("DistributedSampler(") == 1


def test_checkpoint_read_back_gets_a_barrier_and_dp_prefix_is_stripped() -> None:
    source = FLAT.replace(
        'torch.save(model.state_dict(), "model.pt")\n',
        'torch.save(model.module.state_dict(), "model.pt")\n'
        'model.load_state_dict(torch.load("model.pt", map_location="cpu"), strict=False)\n',
    )
    out = _convert(source)
    assert (
        "    if rank == 0:\n"
        "        torch.save(\n"
        '            (model.module if distributed else model).state_dict(), "model.pt"\n'
        "        )\n"
        "    if distributed:\n"
        "        dist.barrier()  # the other processes read this file\n"
        '    loaded_state = torch.load("model.pt", map_location="cpu")\n'
        "    # saved by DataParallel\n"
        '    if any(key.startswith("module.") for key in loaded_state):\n'
        '        consume_prefix_in_state_dict_if_present(loaded_state, "module.")\n'
        "    (model.module if distributed else model).load_state_dict(\n"
        "        loaded_state, strict=False\n"
        "    )\n"
    ) in out
    assert "from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present" in out


def test_loading_into_the_bare_model_before_the_wrap() -> None:
    source = FLAT.replace(
        "model = Net().to(device)\n",
        "model = Net().to(device)\nmodel.load_state_dict(torch.load(path))\n",
    )
    out = _convert(source)
    # Loaded before the wrap, the keys never had DataParallel's prefix: nothing to strip.
    assert "    model.load_state_dict(torch.load(path))\n" in out
    assert "consume_prefix_in_state_dict_if_present" not in out


def test_logging_goes_to_rank_zero() -> None:
    source = FLAT.replace(
        "    print(epoch, loss.item())\n",
        "    logger.info('epoch %d', epoch)\n    logging.warning('done')\n",
    ).replace(
        "import torch\n", "import logging\nimport torch\nlogger = logging.getLogger(__name__)\n", 1
    )
    out = _convert(source)
    assert (
        "        if rank == 0:\n"
        "            logger.info('epoch %d', epoch)\n"
        "            logging.warning('done')\n"
    ) in out


def test_cuda_zero_method_becomes_current_device() -> None:
    out = _convert(FLAT.replace("model = Net().to(device)", "model = Net().cuda(0)"))
    assert "model = Net().cuda()\n" in out


def test_comments_survive() -> None:
    out = _convert(FLAT)
    assert "# training data" in out


def test_no_dataparallel_is_a_noop() -> None:
    assert_noop(
        RULE,
        """
        import torch
        model = torch.nn.Linear(2, 2)
        DataParallel = None  # a name, never called
        """,
    )


def test_dataparallel_of_another_library_is_a_noop() -> None:
    assert_noop(
        RULE,
        """
        from mylib import DataParallel
        model = DataParallel(net)
        """,
    )


# -- declines ------------------------------------------------------------------------------


def test_declines_inside_a_class() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        class Wrapper(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = nn.DataParallel(net)
        """,
        reason="inside a class (library code)",
    )


def test_declines_a_function_never_called() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn

        def build(net):
            model = nn.DataParallel(net)
            return model
        """,
        reason="which this file never runs",
    )


def test_declines_mp_spawn() -> None:
    assert_declined(
        RULE,
        """
        import torch.multiprocessing as mp
        import torch.nn as nn
        model = nn.DataParallel(Net())
        mp.spawn(run, nprocs=2)
        """,
        reason="mp.spawn",
    )


def test_declines_hugging_face_trainer() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn
        from transformers import Trainer
        model = nn.DataParallel(Net())
        Trainer(model=model).train()
        """,
        reason="Hugging Face Trainer",
    )


def test_declines_already_distributed() -> None:
    assert_declined(
        RULE,
        """
        import torch.distributed as dist
        import torch.nn as nn
        dist.init_process_group("nccl")
        model = nn.DataParallel(Net())
        """,
        reason="already uses torch.distributed",
    )


def test_declines_without_a_training_loader() -> None:
    assert_declined(
        RULE,
        """
        import torch.nn as nn
        model = nn.DataParallel(Net())
        for i in range(0, len(X), 32):
            model(X[i:i + 32]).sum().backward()
        """,
        reason="no DataLoader feeding the training loop",
    )


def test_declines_other_hard_coded_gpu() -> None:
    source = FLAT.replace('"cuda:0" if', '"cuda:1" if')
    assert_declined(RULE, source, reason="hard-codes GPU `cuda:1`")


def test_declines_a_taken_name() -> None:
    source = FLAT.replace("for epoch in range(3):", "rank = 3\nfor epoch in range(rank):")
    assert_declined(RULE, source, reason="already uses the name `rank`")


def test_findings_report_the_wrap() -> None:
    findings = check_source(textwrap.dedent(FLAT), options=Options(select=(RULE,)))
    assert [(f.code, f.line) for f in findings] == [(RULE, 23)]


def test_a_notebook_is_reported_with_what_to_do_instead() -> None:
    findings = check_source(
        textwrap.dedent(FLAT), "train.ipynb", Options(select=(RULE,), unsafe_fixes=True)
    )
    assert len(findings) == 1 and not findings[0].has_fix
    assert "a notebook cannot be launched with torchrun" in findings[0].message
    assert "notebook_launcher" in findings[0].message


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("    train(0)\n    train(1)\n", "`train` is called 2 times"),
        ("    for fold in range(5):\n        train(fold)\n", "`train` is called in a loop"),
    ],
)
def test_declines_a_function_run_more_than_once(entry: str, reason: str) -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch.utils.data import DataLoader

        def train(fold):
            loader = DataLoader(folds[fold], batch_size=16)
            model = torch.nn.DataParallel(Net())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                model(x).sum().backward()
                opt.step()

        if __name__ == "__main__":
        """
    )
    assert_declined(RULE, source + entry, reason=reason)


def test_declines_inference_only() -> None:
    assert_declined(
        RULE,
        """
        import torch
        model = torch.nn.DataParallel(Net()).cuda()
        model.requires_grad_(False)
        with torch.no_grad():
            print(model(torch.randn(4, 3).cuda()))
        """,
        reason="no optimizer trains the wrapped model",
    )


# -- shapes real scripts use ------------------------------------------------------------------

TRAIN_IN_FUNCTION = """
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def train(args, dataset):
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    n_gpu = torch.cuda.device_count()
    model = Model(args).to(args.device)
    if n_gpu > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for batch in loader:
            loss = model(**batch).loss
            if n_gpu > 1:
                loss = loss.mean()  # mean() to average on multi-gpu parallel training
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model_to_save = model.module if hasattr(model, "module") else model
    torch.save(model_to_save.state_dict(), args.output)


def main():
    args = argparse.ArgumentParser().parse_args()
    print(args)
    train(args, load_dataset(args))


if __name__ == "__main__":
    main()
"""


def test_training_in_a_function_that_main_calls() -> None:
    out = _convert(TRAIN_IN_FUNCTION)
    # The setup goes where the model is wrapped; the loader is made in the caller.
    assert "def train(args, dataset):\n    # One process per device" in out
    assert "    if n_gpu > 1:\n        model" not in out
    assert "loss.mean()" not in out
    # `model.module if hasattr(model, "module") else model` already unwraps either way.
    assert 'model_to_save = model.module if hasattr(model, "module") else model' in out
    assert "    if rank == 0:\n        torch.save(model_to_save.state_dict(), args.output)" in out
    assert '    if os.environ.get("RANK", "0") == "0":\n        print(args)' in out


def test_declines_a_loader_made_by_the_caller() -> None:
    source = TRAIN_IN_FUNCTION.replace(
        "def train(args, dataset):\n"
        "    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)\n",
        "def train(args, loader):\n",
    ).replace(
        "    train(args, load_dataset(args))\n",
        "    loader = DataLoader(load_dataset(args), batch_size=args.batch_size, shuffle=True)\n"
        "    train(args, loader)\n",
    )
    assert_declined(RULE, source, reason="the training DataLoader is built in `main`")


def test_cpu_fallback_branch_is_kept() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        if torch.cuda.is_available():
            model = nn.DataParallel(Net()).cuda()
        else:
            model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(10):
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
        """
    )
    assert (
        "    if torch.cuda.is_available():\n"
        "        model = Net().cuda()\n"
        "    else:\n"
        "        model = Net()\n"
        "    if distributed:"
    ) in out


def test_wrap_in_the_else_branch_of_a_single_gpu_check() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net().cuda()
        if torch.cuda.device_count() == 1:
            print("one GPU")
        else:
            model = nn.DataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        """
    )
    assert (
        "    if torch.cuda.device_count() == 1:\n"
        "        if rank == 0:\n"
        '            print("one GPU")\n'
        "    if distributed:"
    ) in out


@pytest.mark.parametrize(
    "guard",
    [
        "if n_gpu > 1:",
        "if args.n_gpu > 1:",
        "if len(device_ids) > 1:",
        "if torch.cuda.device_count() >= 2:",
        "if args.multi_gpu:",
        "if args.cuda and torch.cuda.device_count() > 1:",
    ],
)
def test_any_guard_of_the_wrap_goes(guard: str) -> None:
    out = _convert(
        f"""
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net().cuda()
        {guard}
            model = nn.DataParallel(model, device_ids=device_ids)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        """
    )
    assert guard not in out
    assert "    model = Net().cuda()\n    if distributed:" in out


def test_guard_keeps_what_else_it_does() -> None:
    out = _convert(
        """
        import torch
        import torch.backends.cudnn as cudnn
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net()
        if args.cuda:
            model = nn.DataParallel(model)
            cudnn.benchmark = True
        model = model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        """
    )
    assert "    if args.cuda:\n        cudnn.benchmark = True\n    if distributed:" in out


def test_one_line_guard_and_conditional_expression() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        n_gpu = torch.cuda.device_count()
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        encoder = Encoder().cuda()
        if n_gpu > 1: encoder = nn.DataParallel(encoder)
        decoder = nn.DataParallel(Decoder()).cuda() if n_gpu > 1 else Decoder().cuda()
        params = list(encoder.parameters()) + list(decoder.parameters())
        optimizer = torch.optim.Adam(params)
        for x, y in loader:
            nn.functional.mse_loss(decoder(encoder(x)), y).backward()
            optimizer.step()
        """
    )
    assert "if n_gpu > 1" not in out
    assert "    decoder = Decoder().cuda()\n" in out
    assert out.count("DistributedDataParallel(\n") == 2


def test_several_models_each_become_ddp_under_one_process_group() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        import torch.optim as optim
        from torch.utils.data import DataLoader

        loader = DataLoader(images, batch_size=128, shuffle=True)
        netG = Generator().to(device)
        netD = Discriminator().to(device)
        optimizerD = optim.Adam(netD.parameters(), lr=2e-4)
        if torch.cuda.device_count() > 1:
            netG = nn.DataParallel(netG)
            netD = nn.DataParallel(netD)
        optimizerG = optim.Adam(netG.parameters(), lr=2e-4)
        for epoch in range(5):
            for real in loader:
                netD.zero_grad()
                netD(real).mean().backward()
                optimizerD.step()
                netG.zero_grad()
                netD(netG(noise)).mean().backward()
                optimizerG.step()
            torch.save(netG.state_dict(), "netG.pth")
        """
    )
    assert out.count("dist.init_process_group(") == 1
    assert "        netG = DistributedDataParallel(netG)\n" in out
    assert "        netD = DistributedDataParallel(netD)\n" in out
    # The discriminator's optimizer, built before its wrap, moves after it.
    assert out.index("netD = DistributedDataParallel(netD)") < out.index("optimizerD = ")
    assert "(netG.module if distributed else netG).state_dict()" in out


def test_a_frozen_teacher_is_unwrapped_not_distributed() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        teacher = nn.DataParallel(Teacher()).cuda()
        student = nn.DataParallel(Student()).cuda()
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
        for x, y in loader:
            with torch.no_grad():
                target = teacher(x)
            nn.functional.mse_loss(student(x), target).backward()
            optimizer.step()
        print(teacher.module.temperature)
        """
    )
    assert "    teacher = Teacher().cuda()\n    student = Student().cuda()\n" in out
    assert "DistributedDataParallel(teacher" not in out
    assert "        student = DistributedDataParallel(student)\n" in out
    assert "print(teacher.temperature)" in out


def test_isinstance_of_data_parallel_asks_about_ddp() -> None:
    out = _convert(
        FLAT.replace(
            'torch.save(model.state_dict(), "model.pt")\n',
            "if isinstance(model, nn.DataParallel):\n"
            '    torch.save(model.module.state_dict(), "model.pt")\n',
        )
    )
    assert "if isinstance(model, DistributedDataParallel):" in out


def test_early_return_gets_the_teardown_after_the_entry_call() -> None:
    out = _convert(
        """
        import torch
        from torch.utils.data import DataLoader

        def main(args):
            loader = DataLoader(ds, batch_size=4)
            model = torch.nn.DataParallel(Net())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            if args.eval_only:
                return evaluate(model)
            for x in loader:
                model(x).sum().backward()
                opt.step()

        if __name__ == "__main__":
            main(parse_args())
        """
    )
    assert out.endswith(
        "    main(parse_args())\n"
        "    if dist.is_initialized():\n"
        "        dist.barrier()\n"
        "        dist.destroy_process_group()\n"
    )


def test_imports_join_the_files_groups() -> None:
    out = _convert(FLAT.replace("import torch\n", "import sys\n\nimport torch\n", 1))
    assert out.startswith(
        "\n# devfix DF401: launch with\n"
        "# `torchrun --standalone --nproc_per_node=<GPUs> train.py` (`python train.py`\n"
        "# runs one process)\n"
        "import os\n"
        "import sys\n"
        "\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "import torch.nn as nn\n"
        "from torch.nn.parallel import DistributedDataParallel\n"
        "from torch.utils.data import DataLoader\n"
        "from torch.utils.data.distributed import DistributedSampler\n"
    )


def test_a_first_standard_library_import_opens_the_imports_after_docstring_and_future() -> None:
    out = _convert('"""Training."""\nfrom __future__ import annotations\n' + FLAT)
    assert out.startswith(
        "# devfix DF401: launch with\n"
        "# `torchrun --standalone --nproc_per_node=<GPUs> train.py` (`python train.py`\n"
        "# runs one process)\n"
        '"""Training."""\n'
        "from __future__ import annotations\n"
        "\n"
        "import os\n"
        "\n"
        "import torch\n"
        "import torch.distributed as dist\n"
    )


def test_no_wrapping_in_a_file_with_long_lines() -> None:
    source = FLAT.replace(
        "device = torch.device(",
        "# " + "x" * 10 + "\nDATA = '" + "y" * 150 + "'\ndevice = torch.device(",
    )
    out = _convert(source)
    assert (
        "            model = DistributedDataParallel(model, device_ids=[local_rank], "
        "output_device=local_rank)\n"
    ) in out


def test_conversion_shares_a_round_with_other_fixes() -> None:
    # DF103 (a plain tensor attribute) fixes a statement inside the converted script in the
    # same round: the conversion's edits are per statement, not one whole-file replacement.
    source = FLAT.replace(
        "        self.fc = nn.Linear(4, 2)\n",
        "        self.fc = nn.Linear(4, 2)\n        self.scale = torch.ones(2).to(device)\n",
    ).replace("return self.fc(x)", "return self.fc(x) * self.scale")
    options = Options(select=(RULE, "DF103"), unsafe_fixes=True)
    module = cst.parse_module(textwrap.dedent(source))
    from devfix.context import FileContext
    from devfix.engine import apply_findings
    from devfix.registry import select_passes

    context = FileContext(module, "train.py")
    findings = []
    for pass_class in select_passes(options.select):
        checker = pass_class(context)
        module.visit(checker)
        findings += checker.findings
    assert {f.code for f in findings} == {RULE, "DF103"}
    rewritten, applied = apply_findings(module, findings)
    assert {f.code for f in applied} == {RULE, "DF103"}
    assert "register_buffer" in rewritten.code and "DistributedDataParallel" in rewritten.code
    dp = next(f for f in findings if f.code == RULE)
    assert len(dp.edits) > 5  # statement-level edits
    assert all(not isinstance(edit.target, cst.Module) for edit in dp.edits)


def test_a_converted_script_explains_itself_once_and_keeps_no_print_only_branch() -> None:
    out = _convert(
        """
        import logging

        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        log = logging.getLogger(__name__)
        loader = DataLoader(train_set, batch_size=64, shuffle=True)
        model = Net().cuda()
        if torch.cuda.device_count() > 1:
            log.info("training on %d GPUs", torch.cuda.device_count())
            print("Let's use", torch.cuda.device_count(), "GPUs!")
            model = nn.DataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(3):
            for x, y in loader:
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
        torch.save(model.state_dict(), "model.pt")
        """
    )
    # The branch held the wrap and output about it: with the wrap gone it is dead.
    assert "device_count()" not in out and "GPUs!" not in out
    # One block says how to launch; the rest of the code reads as written by hand.
    assert out.count("devfix DF401") == 1
    assert "sampler.set_epoch(epoch)\n" in out


def test_a_flat_script_sets_up_the_process_group_after_parsing_its_command_line() -> None:
    out = _convert(
        """
        import argparse

        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=2)
        args = parser.parse_args()
        loader = DataLoader(train_set, batch_size=16, shuffle=True)
        model = nn.DataParallel(Net().cuda())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(args.epochs):
            for x, y in loader:
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
        """
    )
    # `torchrun train.py --help` prints the help and starts no process group.
    assert out.index("args = parser.parse_args()") < out.index("dist.init_process_group(")


def test_functional_data_parallel_is_reported_without_a_fix() -> None:
    finding = assert_declined(
        RULE,
        """
        import torch
        from torch import nn
        from torch.nn.parallel import data_parallel as replicate_over

        class Trunk(nn.Module):
            def __init__(self, stem, n_gpu):
                super().__init__()
                self.stem = stem
                self.n_gpu = n_gpu

            def forward(self, images):
                if images.is_cuda and self.n_gpu > 1:
                    return replicate_over(self.stem, images, list(range(self.n_gpu)))
                return self.stem(images)
        """,
        reason="`data_parallel` replicates `self.stem` over the GPUs on every call",
    )
    assert "by hand" in finding.message


def test_loaders_a_factory_returns_as_calls_get_their_sampler_before_the_return() -> None:
    out = _convert(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        def make_loaders(n, batch):
            train = TensorDataset(torch.randn(n, 3), torch.randn(n, 1))
            held_out = TensorDataset(torch.randn(16, 3), torch.randn(16, 1))
            return DataLoader(train, batch_size=batch, shuffle=True), DataLoader(held_out)

        def fit(net, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(net(x.cuda()), y.cuda()).backward()
                opt.step()

        def main():
            fit_loader, eval_loader = make_loaders(128, 32)
            net = nn.DataParallel(nn.Linear(3, 1)).cuda()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for epoch in range(2):
                fit(net, fit_loader, opt)

        if __name__ == "__main__":
            main()
        """
    )
    factory = out[out.index("def make_loaders") : out.index("def fit")]
    assert (
        "    fit_sampler = DistributedSampler(\n"
        "        train, num_replicas=world_size, rank=rank, shuffle=True, seed=0\n"
        "    )\n"
        "    return DataLoader(train, batch_size=batch // world_size, sampler=fit_sampler)"
    ) in factory, factory
    assert "DataLoader(held_out)" in factory
    assert "        fit_loader.sampler.set_epoch(epoch)\n        fit(net, fit_loader, opt)" in out
