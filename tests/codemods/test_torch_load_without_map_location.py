"""DF302 torch-load-without-map-location."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_fix, assert_noop

RULE = "DF302"


def test_resume_checkpoint_gets_cpu() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        checkpoint = torch.load("checkpoint.pth")
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint.get("optimizer"))
        start_epoch = checkpoint["epoch"] + 1
        """,
        """
        import torch
        checkpoint = torch.load("checkpoint.pth", map_location="cpu")
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint.get("optimizer"))
        start_epoch = checkpoint["epoch"] + 1
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_direct_argument_is_safe_and_weights_only_kept() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        model.load_state_dict(torch.load(path, weights_only=True))
        """,
        """
        import torch
        model.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_tensor_used_directly_is_unsafe() -> None:
    source_before = """
        import torch
        stats = torch.load("stats.pt")
        x = (x - stats["mean"]) / stats["std"]
        """
    findings = assert_fix(
        RULE,
        source_before,
        """
        import torch
        stats = torch.load("stats.pt", map_location="cpu")
        x = (x - stats["mean"]) / stats["std"]
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "need `.to(device)`" in findings[0].message
    # Without --unsafe-fixes the file is left alone.
    assert_noop_unsafe_off(source_before)


def assert_noop_unsafe_off(source: str) -> None:
    import textwrap

    from devfix.engine import fix_source
    from devfix.types import Options

    text = textwrap.dedent(source)
    assert fix_source(text, Options(select=(RULE,))).output == text


def test_distributed_script_uses_process_device() -> None:
    assert_fix(
        RULE,
        """
        import os
        import torch
        import torch.distributed as dist
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")

        def resume(path):
            ckpt = torch.load(path)  # resume
            return ckpt["weights"]
        """,
        """
        import os
        import torch
        import torch.distributed as dist
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl")

        def resume(path):
            ckpt = torch.load(path, map_location=device)  # resume
            return ckpt["weights"]
        """,
    )


def test_distributed_without_device_variable_uses_cpu() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        model.load_state_dict(torch.load(p))
        model = DDP(model)
        """,
        """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        model.load_state_dict(torch.load(p, map_location="cpu"))
        model = DDP(model)
        """,
    )


def test_aliases_and_layout_kept() -> None:
    assert_fix(
        RULE,
        """
        import torch as t
        from torch import load
        a = t.load(
            "a.pt",
            weights_only=False,  # trusted file
        )
        model.load_state_dict(load("b.pt"))
        """,
        """
        import torch as t
        from torch import load
        a = t.load(
            "a.pt",
            weights_only=False,  # trusted file
            map_location="cpu",
        )
        model.load_state_dict(load("b.pt", map_location="cpu"))
        """,
        unsafe=True,
    )


def test_noops() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import pickle
        a = torch.load("a.pt", map_location="cpu")
        b = torch.load("b.pt", "cpu")
        c = torch.load("c.pt", **kwargs)
        d = torch.load(*args)
        e = pickle.load(f)
        f = torch.jit.load("m.pt")

        def load(path):
            return path
        g = load("x")
        """,
    )


def test_message_names_the_target() -> None:
    # DF302 never declines: "cpu" is always a correct target for `load_state_dict`.
    finding = assert_fix(
        RULE,
        "import torch\nsd = torch.load(p)\nnet.load_state_dict(sd)\n",
        'import torch\nsd = torch.load(p, map_location="cpu")\nnet.load_state_dict(sd)\n',
    )[0]
    assert "load_state_dict` places the values" in finding.message


def test_direct_use_with_device_variable_loads_to_it() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.load("model.pt", weights_only=False)
        out = model(x.to(device))
        """,
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.load("model.pt", weights_only=False, map_location=device)
        out = model(x.to(device))
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_single_process_program_reading_back_its_own_save_is_left_alone() -> None:
    # The tutorial shape: keep the best epoch's weights, reload them for the test set.
    assert_noop(
        RULE,
        """
        import torch
        SAVE = "best-model.pt"
        best = float("inf")
        for epoch in range(10):
            valid_loss = train_and_evaluate(model)
            if valid_loss < best:
                best = valid_loss
                torch.save(model.state_dict(), "tut-model.pt")
                torch.save(obj=model.state_dict(), f=SAVE)
        model.load_state_dict(torch.load("tut-model.pt"))
        model.load_state_dict(torch.load(SAVE))
        """,
    )


def test_a_program_whose_runs_pick_their_gpu_does_not_read_back_its_own_device() -> None:
    # `--device 1` wrote the file; a run with `--device 0`, or on a one-GPU machine, reads it
    # back onto a GPU it may not have. Through a name and through `torch.device` alike.
    before = """
        import argparse
        import torch

        cli = argparse.ArgumentParser()
        cli.add_argument("--device", type=int, default=0)
        opts, _ = cli.parse_known_args()
        card = torch.device("cuda", opts.device)
        net = build().to(card)
        if resume:
            net.load_state_dict(torch.load(WEIGHTS))
        train(net)
        torch.save(net.state_dict(), WEIGHTS)
        """
    assert_fix(
        RULE,
        before,
        before.replace("torch.load(WEIGHTS)", 'torch.load(WEIGHTS, map_location="cpu")'),
    )
    # Without the command line's pick, the same program keeps its own save as before.
    assert_noop(RULE, before.replace('torch.device("cuda", opts.device)', '"cuda"'))


def test_another_file_or_several_processes_still_get_map_location() -> None:
    # Tensors used straight from its own save come back where they were saved, not where they
    # are used now.
    assert_fix(
        RULE,
        """
        import torch
        torch.save({"w": w}, "w.pt")
        state = torch.load("w.pt")
        y = x @ state["w"]
        """,
        """
        import torch
        torch.save({"w": w}, "w.pt")
        state = torch.load("w.pt", map_location="cpu")
        y = x @ state["w"]
        """,
        unsafe=True,
    )
    assert_fix(
        RULE,
        """
        import torch
        torch.save(model.state_dict(), "last.pt")
        model.load_state_dict(torch.load("pretrained.pt"))
        """,
        """
        import torch
        torch.save(model.state_dict(), "last.pt")
        model.load_state_dict(torch.load("pretrained.pt", map_location="cpu"))
        """,
    )
    # Under torchrun rank 0 saved from cuda:0: every rank would read back onto cuda:0.
    findings = assert_fix(
        RULE,
        """
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl")
        torch.save(model.state_dict(), "best.pt")
        model.load_state_dict(torch.load("best.pt"))
        """,
        """
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl")
        torch.save(model.state_dict(), "best.pt")
        model.load_state_dict(torch.load("best.pt", map_location="cpu"))
        """,
    )
    assert findings


def test_torch_taken_from_a_star_imported_helper_module() -> None:
    # Research scripts often get `torch` only through `from their_utils import *`.
    findings = assert_fix(
        RULE,
        """
        import argparse
        from networks.backbones import *


        class Trainer:
            def __init__(self, args):
                self.teacher = Backbone(depth=101)
                state = torch.load(args.teacher_weights)
                self.teacher.load_state_dict(state["state_dict"])
                if args.cuda:
                    self.teacher = self.teacher.cuda()
        """,
        """
        import argparse
        from networks.backbones import *


        class Trainer:
            def __init__(self, args):
                self.teacher = Backbone(depth=101)
                state = torch.load(args.teacher_weights, map_location="cpu")
                self.teacher.load_state_dict(state["state_dict"])
                if args.cuda:
                    self.teacher = self.teacher.cuda()
        """,
    )
    assert findings[0].applicability is Applicability.SAFE


def test_an_unbound_torch_without_a_star_import_is_not_guessed() -> None:
    assert_noop(
        RULE,
        """
        checkpoint = torch.load("model.pt")
        """,
    )


def test_a_resume_api_whose_save_and_load_take_the_path_from_their_callers_is_fixed() -> None:
    # Same parameter name in `save` and `load`, but each caller names its own file: a resumed
    # run may read a checkpoint another machine wrote.
    assert_fix(
        "DF302",
        """
        import torch

        class Snapshot:
            def __init__(self, net):
                self.net = net

            def write(self, where):
                torch.save({"net": self.net.state_dict()}, where)

            def read(self, where):
                state = torch.load(where)
                self.net.load_state_dict(state["net"])
        """,
        """
        import torch

        class Snapshot:
            def __init__(self, net):
                self.net = net

            def write(self, where):
                torch.save({"net": self.net.state_dict()}, where)

            def read(self, where):
                state = torch.load(where, map_location="cpu")
                self.net.load_state_dict(state["net"])
        """,
    )


def test_a_resume_api_that_builds_the_path_from_its_callers_step_is_fixed() -> None:
    # `save(self, step)` / `restore(self, step)`: the same template, but each caller names the
    # step, and a resumed run may read one another machine wrote; the object's own folder
    # (`self.out`) alone would not make it the caller's file.
    assert_fix(
        "DF302",
        """
        import os
        import torch

        class Runner:
            def save(self, step):
                torch.save({"net": self.net.state_dict()}, os.path.join(self.out, "step-%d.pt" % step))

            def restore(self, step):
                blob = torch.load(os.path.join(self.out, "step-%d.pt" % step))
                self.net.load_state_dict(blob["net"])

            def snapshot(self):
                torch.save(self.net.state_dict(), self.out + "/last.pt")

            def reload(self):
                self.net.load_state_dict(torch.load(self.out + "/last.pt"))
        """,
        """
        import os
        import torch

        class Runner:
            def save(self, step):
                torch.save({"net": self.net.state_dict()}, os.path.join(self.out, "step-%d.pt" % step))

            def restore(self, step):
                blob = torch.load(os.path.join(self.out, "step-%d.pt" % step), map_location="cpu")
                self.net.load_state_dict(blob["net"])

            def snapshot(self):
                torch.save(self.net.state_dict(), self.out + "/last.pt")

            def reload(self):
                self.net.load_state_dict(torch.load(self.out + "/last.pt"))
        """,
    )


def test_the_best_of_the_per_epoch_files_the_run_wrote_is_its_own_save() -> None:
    assert_noop(
        "DF302",
        """
        import torch

        best, best_loss = 0, float("inf")
        for epoch in range(10):
            loss = train_one(model)
            torch.save(model.state_dict(), f"ckpt-{epoch}.pt")
            if loss < best_loss:
                best, best_loss = epoch, loss
        model.load_state_dict(torch.load(f"ckpt-{best}.pt"))
        """,
    )


def test_pretrained_weights_fetched_from_a_url_get_cpu_through_any_spelling() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch.utils.model_zoo as zoo
        from torch.hub import load_state_dict_from_url as fetch_weights


        class Backbone(nn.Module):
            def load_pretrained(self, url):
                self.load_state_dict(fetch_weights(url, progress=True))

            def load_legacy(self, url, cache):
                state = zoo.load_url(url, cache)  # the second argument is the cache folder
                self.load_state_dict(state)
        """,
        """
        import torch.utils.model_zoo as zoo
        from torch.hub import load_state_dict_from_url as fetch_weights


        class Backbone(nn.Module):
            def load_pretrained(self, url):
                self.load_state_dict(fetch_weights(url, progress=True, map_location="cpu"))

            def load_legacy(self, url, cache):
                state = zoo.load_url(url, cache, map_location="cpu")  # the second argument is the cache folder
                self.load_state_dict(state)
        """,
    )
    assert {finding.applicability for finding in findings} == {Applicability.SAFE}


def test_a_url_loader_given_its_map_location_by_position_or_an_unrelated_load_is_left_alone() -> (
    None
):
    assert_noop(
        RULE,
        """
        import torch
        from torch.hub import load_state_dict_from_url

        state = load_state_dict_from_url(URL, None, "cpu")
        weights = torch.hub.load_state_dict_from_url(URL, map_location=device)
        config = yaml.load_url(URL)
        """,
    )


def test_a_bare_load_beside_a_branch_that_maps_its_load_is_the_author_s_choice() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def resume(cfg, net):
            if cfg.local_gpu is None:
                state = torch.load(cfg.resume)
            elif cfg.cpu:
                state = torch.load(cfg.resume, map_location="cpu")
            else:
                state = torch.load(cfg.resume, map_location=f"cuda:{cfg.local_gpu}")
            net.load_state_dict(state["model"])
            return state["epoch"]
        """,
    )


def test_a_file_each_process_writes_and_reads_back_for_itself_is_left_alone() -> None:
    script = """
        import os
        import torch
        import torch.distributed as dist

        def main():
            dist.init_process_group("nccl")
            rank = dist.get_rank()
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            encoder = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8).cuda())
            bank_file = os.path.join("out", "bank-%d.pt" % rank)
            bank = torch.load(bank_file) if os.path.exists(bank_file) else torch.zeros(64, 8).cuda()
            for _ in range(3):
                logits = encoder(torch.randn(4, 8).cuda()) @ bank.t()
                logits.sum().backward()
            torch.save(bank, bank_file)
        """
    # The bank returns to the GPU this rank saved it from; a CPU bank would break `@`.
    assert_noop(RULE, script)
    # A file every rank reads is another matter: rank 0 wrote it from `cuda:0`. It goes to
    # the current GPU, where every bare `.cuda()` of the script puts its work.
    shared = script.replace('"bank-%d.pt" % rank', '"bank.pt"')
    findings = assert_fix(
        RULE,
        shared,
        shared.replace("torch.load(bank_file)", 'torch.load(bank_file, map_location="cuda")'),
    )
    assert findings[0].applicability is Applicability.SAFE


def test_a_helper_passing_its_none_default_on_is_fixed_where_it_is_called_without_one() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        class Quantized:
            @classmethod
            def read_blocks(cls, folder, map_location=None):
                return torch.load(folder + "/blocks.pt", map_location=map_location)

            @classmethod
            def restore(cls, folder, device="cuda"):
                blocks = cls.read_blocks(folder)
                model = cls.build()
                model.load_state_dict(blocks)
                kept = cls.read_blocks(folder, device)
                return model.to(device)
        """,
        """
        import torch

        class Quantized:
            @classmethod
            def read_blocks(cls, folder, map_location=None):
                return torch.load(folder + "/blocks.pt", map_location=map_location)

            @classmethod
            def restore(cls, folder, device="cuda"):
                blocks = cls.read_blocks(folder, map_location="cpu")
                model = cls.build()
                model.load_state_dict(blocks)
                kept = cls.read_blocks(folder, device)
                return model.to(device)
        """,
    )
    assert "(`cls.read_blocks` passes it `map_location=None`)" in findings[0].message


def test_keywords_the_function_builds_get_a_cpu_default_that_theirs_still_override() -> None:
    findings = assert_fix(
        "DF302",
        """
        import torch

        def restore(net, path, **options):
            load_options = {k: v for k, v in options.items() if k != "strict"}
            blob = torch.load(path, **load_options)
            net.load_state_dict(blob, strict=options.get("strict", True))
            return net
        """,
        """
        import torch

        def restore(net, path, **options):
            load_options = {k: v for k, v in options.items() if k != "strict"}
            blob = torch.load(path, **{"map_location": "cpu", **load_options})
            net.load_state_dict(blob, strict=options.get("strict", True))
            return net
        """,
    )
    assert findings[0].applicability is Applicability.SAFE
    assert "a `map_location` in `load_options` still wins" in findings[0].message


def test_keywords_forwarded_from_the_caller_are_theirs() -> None:
    assert_noop(
        "DF302",
        """
        import torch

        def read(path, *args, **kwargs):
            first = torch.load(path, **kwargs)
            return first, torch.load(path, *args)
        """,
    )
