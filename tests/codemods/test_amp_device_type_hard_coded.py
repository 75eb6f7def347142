"""DF308 amp-device-type-hard-coded."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF308"


def test_cuda_amp_objects_in_a_script_with_a_cpu_fallback() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            with torch.cuda.amp.autocast():  # mixed precision
                loss = criterion(model(x.to(device)), y.to(device))
            scaler.scale(loss).backward()
        """,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
        for x, y in loader:
            with torch.autocast(device_type=device.type):  # mixed precision
                loss = criterion(model(x.to(device)), y.to(device))
            scaler.scale(loss).backward()
        """,
        unsafe=True,
    )
    levels = {f.message.split("`")[1]: f.applicability for f in findings}
    assert levels["torch.cuda.amp.GradScaler()"] is Applicability.SAFE
    assert levels["torch.cuda.amp.autocast()"] is Applicability.UNSAFE


def test_generic_spellings_hard_coded_to_cuda_with_a_string_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch.amp import GradScaler

        def train(model, loader, device, use_amp=True):
            scaler = GradScaler("cuda", enabled=use_amp)
            for batch in loader:
                with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                    loss = model(batch.to(device)).mean()

        if __name__ == "__main__":
            device = "cuda" if torch.cuda.is_available() else "mps"
            net = Net().to(device)
            train(net, make_loader(), device)
        """,
        """
        import torch
        from torch.amp import GradScaler

        def train(model, loader, device, use_amp=True):
            scaler = GradScaler(torch.device(device).type, enabled=use_amp and torch.device(device).type == "cuda")
            for batch in loader:
                with torch.autocast(torch.device(device).type, dtype=torch.float16, enabled=use_amp):
                    loss = model(batch.to(device)).mean()

        if __name__ == "__main__":
            device = "cuda" if torch.cuda.is_available() else "mps"
            net = Net().to(device)
            train(net, make_loader(), device)
        """,
        unsafe=True,
    )


def test_hand_made_device_type_and_the_scaler_that_uses_it() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from contextlib import nullcontext

        device = "cuda"  # or "cpu", "mps" from the command line
        exec(open("configurator.py").read())
        device_type = "cuda" if "cuda" in device else "cpu"
        ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type)
        model.to(device)
        scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
        """,
        """
        import torch
        from contextlib import nullcontext

        device = "cuda"  # or "cpu", "mps" from the command line
        exec(open("configurator.py").read())
        device_type = torch.device(device).type
        ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type)
        model.to(device)
        scaler = torch.amp.GradScaler(device_type, enabled=(dtype == "float16") and device_type == "cuda")
        """,
        unsafe=True,
    )


def test_device_type_from_a_torch_device_comparison() -> None:
    assert_fix(
        RULE,
        """
        import torch as t

        dev = t.device(args.device)
        model.to(dev)
        amp_type = "cuda" if dev.type == "cuda" else "cpu"
        with t.autocast(amp_type, dtype=t.bfloat16):
            out = model(x.to(dev))
        """,
        """
        import torch as t

        dev = t.device(args.device)
        model.to(dev)
        amp_type = dev.type
        with t.autocast(amp_type, dtype=t.bfloat16):
            out = model(x.to(dev))
        """,
        unsafe=True,
    )


def test_deprecated_spellings_in_a_cuda_only_script_are_left_alone() -> None:
    # Right on the one device type the script runs on: a deprecation is not a device bug.
    assert_noop(
        RULE,
        """
        import torch
        from torch.cuda.amp import GradScaler, autocast

        model = Net().cuda()
        scaler = GradScaler(init_scale=2.0**14)
        with autocast(True, torch.float16):
            out = model(images.cuda())
        """,
    )


def test_a_device_parameter_every_caller_gives_cuda_is_cuda_only() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.cuda.amp import autocast

        def train(model, loader, device):
            for images in loader:
                with autocast(enabled=True):
                    loss = model(images.to(device)).sum()

        def main(local_rank):
            device = torch.device(f"cuda:{local_rank}")
            model = Net().to(device)
            train(model, make_loader(), device)
        """,
        unsafe=True,
    )


def test_the_same_parameter_given_a_chosen_device_gets_its_type() -> None:
    source = """
        import torch
        from torch.cuda.amp import autocast

        def train(model, loader, device):
            for images in loader:
                with autocast(enabled=True):
                    loss = model(images.to(device)).sum()

        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "mps")
            model = Net().to(device)
            train(model, make_loader(), device)
        """
    assert_fix(
        RULE,
        source,
        source.replace(
            "with autocast(enabled=True):",
            "with torch.autocast(device_type=torch.device(device).type, enabled=True):",
        ),
        unsafe=True,
    )


def test_deprecated_spelling_needs_torch_imported() -> None:
    assert_fix(
        RULE,
        """
        from torch.cuda.amp import GradScaler

        device = args.device
        model = Net().to(device)
        scaler = GradScaler()
        """,
        """
        import torch
        from torch.cuda.amp import GradScaler

        device = args.device
        model = Net().to(device)
        scaler = torch.amp.GradScaler(torch.device(device).type, enabled=torch.device(device).type == "cuda")
        """,
    )


def test_objects_already_enabled_only_on_cuda_keep_their_device_type() -> None:
    assert_noop(
        RULE,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda")
        if torch.cuda.is_available():
            ctx = torch.autocast("cuda", dtype=torch.float16)
        with torch.autocast(device_type=device.type):
            out = model(x.to(device))
        """,
    )


def test_model_code_and_cpu_autocast_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        class Attention(nn.Module):
            def forward(self, q, k):
                with torch.cuda.amp.autocast(enabled=False):
                    return q.float() @ k.float().transpose(-1, -2)

        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = Attention().to(device)(x.to(device), x.to(device))
        """,
    )


def test_script_without_a_device_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        def make_scaler():
            return torch.cuda.amp.GradScaler()
        """,
    )


def test_enabled_by_position_is_declined() -> None:
    assert_declined(
        RULE,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)
        scaler = torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, use_amp)
        """,
        reason="gets `enabled` by position",
    )


def test_hand_made_device_type_that_gates_a_cuda_only_autocast_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from contextlib import nullcontext

        device = "cuda" if torch.cuda.is_available() else "mps"
        device_type = "cuda" if "cuda" in device else "cpu"
        ctx = torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16) if device_type == "cuda" else nullcontext()
        model.to(device)
        """,
    )


def test_hand_made_device_type_used_behind_a_negated_cuda_test_is_fixed() -> None:
    # `!= "cuda"` runs the autocast everywhere but CUDA: the type it gets matters there
    assert_fix(
        RULE,
        """
        import torch

        device = "cuda" if torch.cuda.is_available() else "mps"
        device_type = "cuda" if "cuda" in device else "cpu"
        model.to(device)
        if device_type != "cuda":
            ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        """,
        """
        import torch

        device = "cuda" if torch.cuda.is_available() else "mps"
        device_type = torch.device(device).type
        model.to(device)
        if device_type != "cuda":
            ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        """,
        unsafe=True,
    )


def test_autocast_with_its_device_type_in_star_args_is_left_alone() -> None:
    # `torch.autocast` has no default device type: one passed through `*args` is not CUDA's
    assert_noop(
        RULE,
        """
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)

        def run(settings, step):
            with torch.autocast(*settings):
                return step()
        """,
    )


def test_hand_made_type_of_a_device_that_is_cuda_or_the_cpu_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        gpu = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
        model.to(gpu)
        kind = "cuda" if gpu.type == "cuda" else "cpu"
        with torch.autocast(kind, dtype=torch.bfloat16):
            out = model(x.to(gpu))
        """,
    )


def test_hand_made_type_after_a_configurator_is_still_fixed() -> None:
    # `exec(...)` may rebind any global: the device may be `mps` after all.
    before = """
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        exec(open("overrides.py").read())
        model.to(device)
        with torch.autocast(device_type="cuda" if "cuda" in device else "cpu"):
            out = model(x.to(device))
        """
    assert_fix(
        RULE,
        before,
        before.replace('"cuda" if "cuda" in device else "cpu"', "torch.device(device).type"),
        unsafe=True,
    )


def test_amp_in_a_worker_whose_device_is_a_gpu_index_stays_cuda() -> None:
    """`.cuda(gpu)` and `set_device(gpu)`: the worker's device is a GPU index, so CUDA-only AMP
    objects are right there (an `mp.spawn` worker has no caller in the file to ask)."""
    assert_noop(
        RULE,
        """
        import torch
        import torch.multiprocessing as mp
        from torch.cuda.amp import GradScaler, autocast


        def worker(gpu, cfg):
            torch.cuda.set_device(gpu)
            net = build(cfg).cuda(gpu)
            scaler = GradScaler(enabled=cfg.fp16)
            for x, y in loader:
                x, y = x.cuda(gpu, non_blocking=True), y.cuda(gpu, non_blocking=True)
                with autocast(enabled=cfg.fp16):
                    loss = net(x, y)
                scaler.scale(loss).backward()


        if __name__ == "__main__":
            mp.spawn(worker, args=(cfg,), nprocs=torch.cuda.device_count())
        """,
    )


def test_a_spawned_worker_s_gpu_index_is_not_a_device_to_take_the_type_of() -> None:
    # `torch.device(local_gpu)` fails where the worker runs once without a GPU index (None).
    assert_noop(
        RULE,
        """
        import torch
        import torch.multiprocessing as mp

        def run(local_gpu, n_gpus, cfg):
            cfg.gpu = local_gpu
            model = build(cfg)
            if cfg.gpu is not None:
                torch.cuda.set_device(cfg.gpu)
                model = model.cuda(cfg.gpu)
            else:
                model = torch.nn.DataParallel(model).cuda()
            scaler = torch.cuda.amp.GradScaler()
            for images in loader(cfg):
                with torch.cuda.amp.autocast():
                    loss = model(images).mean()
                scaler.scale(loss).backward()

        def main(cfg):
            n_gpus = torch.cuda.device_count()
            if cfg.spawn:
                mp.spawn(run, nprocs=n_gpus, args=(n_gpus, cfg))
            else:
                run(cfg.gpu, n_gpus, cfg)
        """,
    )


def test_the_spelling_a_torch_version_branch_chooses_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from packaging.version import Version

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        if Version(torch.__version__) >= Version("2.3"):
            scaler = torch.amp.GradScaler(device.type, enabled=use_amp)
        else:
            scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
        for x in batches():
            loss = model(x.to(device)).mean()
            scaler.scale(loss).backward()
        """,
    )


def test_a_decorator_never_reads_the_parameters_of_the_function_it_decorates() -> None:
    # The decorator runs at import, before `fp32_loss` is called: its parameter `device` does
    # not exist there, and the script's own device is chosen later, in `main`.
    assert_noop(
        RULE,
        """
        import argparse
        import torch
        import torch.nn.functional as F

        @torch.autocast("cuda", enabled=False)
        def fp32_loss(logits, target, device):
            return F.cross_entropy(logits.float().to(device), target.to(device))

        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            args = parser.parse_args()
            model = torch.nn.Linear(4, 2).to(args.device)
            x = torch.randn(8, 4, device=args.device)
            return fp32_loss(model(x), torch.zeros(8, dtype=torch.long), args.device)
        """,
    )


def test_an_enabled_flag_that_every_caller_sets_from_a_cuda_test_keeps_the_cuda_autocast() -> None:
    source = """
        import torch

        def score(model, batches, device, mixed):
            for batch in batches:
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mixed):
                    yield model(batch.to(device))

        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "mps")
            mixed = torch.cuda.is_available()
            model = Net().to(device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mixed):
                model(warmup.to(device))
            return list(score(model, batches, device, mixed))
        """
    # Off wherever CUDA is missing: no warning, and no CPU/MPS autocast switched on instead.
    assert_noop(RULE, source)
    # A flag the user sets is no such test: on the Apple GPU it warns and trains in float32.
    flagged = source.replace("mixed = torch.cuda.is_available()", "mixed = args.amp")
    findings = assert_fix(
        RULE,
        flagged,
        flagged.replace(
            'torch.autocast("cuda",', "torch.autocast(torch.device(device).type,", 1
        ).replace('torch.autocast("cuda",', "torch.autocast(device.type,"),
        unsafe=True,
    )
    assert len(findings) == 2
