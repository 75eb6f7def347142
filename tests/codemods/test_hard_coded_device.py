"""DF304 hard-coded-device."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF304"

HELPER = '''

        def select_device() -> torch.device:
            """CUDA (this process's GPU under torchrun), else Apple MPS, else the CPU."""
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
        x = torch.zeros(3, device="cuda:0")
        y = batch.cuda(0, non_blocking=True)
        """,
        """
        import os
        import torch
        """
        + HELPER
        + """


        device = select_device()  # the GPU
        model = Net().to(device)
        x = torch.zeros(3, device=device)
        y = batch.to(device, non_blocking=True)
        """,
    )


def test_string_device_assignment() -> None:
    assert_fix(
        RULE,
        '''
        """A script."""
        import torch as t

        device = "cuda"
        model.to(device)
        ''',
        '''
        """A script."""
        import os

        import torch as t


        def select_device() -> t.device:
            """CUDA (this process's GPU under torchrun), else Apple MPS, else the CPU."""
            if t.cuda.is_available():
                return t.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if t.backends.mps.is_available():
                return t.device("mps")
            return t.device("cpu")


        device = select_device()
        model.to(device)
        ''',
    )


def test_inline_use_without_variable_calls_helper() -> None:
    result = assert_fix(
        RULE,
        """
        import os
        import torch

        def main():
            model.to("cuda:1")
        """,
        """
        import os
        import torch


        def select_device() -> torch.device:
            \"\"\"CUDA (this process's GPU under torchrun), else Apple MPS, else the CPU.\"\"\"
            if torch.cuda.is_available():
                return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if torch.backends.mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")


        def main():
            model.to(select_device())
        """,
        unsafe=True,
    )
    assert result[0].applicability is Applicability.UNSAFE
    assert "from cuda:1 to GPU 0" in result[0].message


def test_amp_companions() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch.cuda.amp import GradScaler
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        scaler = GradScaler(init_scale=1024, enabled=args.amp)
        with torch.cuda.amp.autocast(dtype=torch.float16):
            pass
        """,
        """
        import torch
        from torch.cuda.amp import GradScaler
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        scaler = torch.amp.GradScaler(device.type, init_scale=1024, enabled=args.amp and device.type == "cuda")
        with torch.autocast(device_type=device.type, dtype=torch.float16):
            pass
        """,
        unsafe=True,
    )
    assert [f.applicability for f in findings] == [Applicability.SAFE, Applicability.UNSAFE]


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
        y = y.cuda()
        z = z.to(torch.device("cuda", local_rank))

        class Net(nn.Module):
            def forward(self, x):
                return x.to("cuda:0")

        def step(x: torch.Tensor):
            return x.cuda(0)
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
        """,
        reason="several GPUs on purpose",
    )


def test_declines_string_comparison() -> None:
    assert_declined(
        RULE,
        """
        import torch
        device = "cuda"
        if device == "cuda":
            torch.backends.cudnn.benchmark = True
        """,
        reason="compared as a string",
    )


def test_declines_companion_without_device() -> None:
    assert_declined(
        RULE,
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()
        """,
        reason="no `torch.device` variable",
    )


def test_helper_goes_after_a_late_torch_import() -> None:
    assert_fix(
        RULE,
        """
        import sys
        sys.path.insert(0, ".")
        import torch

        x = torch.zeros(2, device="cuda:0")
        """,
        """
        import os
        import sys

        sys.path.insert(0, ".")
        import torch


        def select_device() -> torch.device:
            \"\"\"CUDA (this process's GPU under torchrun), else Apple MPS, else the CPU.\"\"\"
            if torch.cuda.is_available():
                return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            if torch.backends.mps.is_available():
                return torch.device("mps")
            return torch.device("cpu")


        x = torch.zeros(2, device=select_device())
        """,
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
        """,
    )
