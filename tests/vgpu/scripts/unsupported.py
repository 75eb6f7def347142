"""Every unsupported corner fails with `devfix verify: not supported under virtual GPUs: …`."""

import torch

from devfix.vgpu.errors import UNSUPPORTED_PREFIX


def expect_unsupported(name, fn):
    try:
        fn()
    except RuntimeError as e:
        assert str(e).startswith(UNSUPPORTED_PREFIX), (name, e)
        print("OK", name)
        return
    raise AssertionError(f"{name}: no error")


def grow_out():
    out = torch.empty(2, device="cuda:0")
    torch.add(torch.ones(4, device="cuda:0"), 1, out=out)


def compile_():
    torch.compile(lambda x: x + 1)(torch.ones(2, device="cuda:0"))


def nccl():
    import torch.distributed as dist

    dist.init_process_group("nccl", rank=0, world_size=1, init_method="tcp://127.0.0.1:1")


def graph():
    torch.cuda.CUDAGraph()


def graph_ctx():
    with torch.cuda.graph(None):
        pass


def spawn():
    import torch.multiprocessing as mp

    mp.spawn(print, nprocs=1)


def spawn_loader():
    from torch.utils.data import DataLoader

    list(DataLoader(list(range(4)), num_workers=1, multiprocessing_context="spawn"))


for name, fn in [
    ("grow-out", grow_out),
    ("compile", compile_),
    ("nccl", nccl),
    ("cuda-graph", graph),
    ("cuda-graph-ctx", graph_ctx),
    ("spawn", spawn),
    ("spawn-dataloader", spawn_loader),
]:
    expect_unsupported(name, fn)

# an out= tensor of the right size is fine
out = torch.empty(4, device="cuda:0")
torch.add(torch.ones(4, device="cuda:0"), 1, out=out)
assert out.tolist() == [2.0] * 4
print("OK out-same-size")
torch.compile(lambda x: x)  # the script dies here, with the message as its last line
