"""The Python ``torch.cuda`` API over the virtual GPUs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch

from devfix.vgpu import _shim

_N = 0


def _lib() -> Any:
    return _shim.load_shim()


def device_count() -> int:
    return _N


def is_available() -> bool:
    return _N > 0


def current_device() -> int:
    return int(_lib().devfix_vgpu_current_device())


def _index(device: Any, optional: bool = True) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        idx = device
    elif isinstance(device, str):
        device = torch.device(device)
        idx = device.index if device.index is not None else current_device()
    elif isinstance(device, torch.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        idx = device.index if device.index is not None else current_device()
    else:
        idx = int(device)
    return idx


def _check(idx: int) -> int:
    from devfix.vgpu._core import vdevice

    if idx >= 0:
        vdevice(idx)
    return idx


def set_device(device: Any) -> None:
    idx = _index(device)
    if idx >= 0:
        _check(idx)
        _lib().devfix_vgpu_set_current_device(idx)


def _exchange_device(idx: int) -> int:
    old = current_device()
    if idx >= 0 and idx != old:
        set_device(idx)
    return old


class device:
    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, *exc: Any) -> None:
        if self.idx >= 0:
            _lib().devfix_vgpu_set_current_device(self.prev_idx)


class device_of(device):
    def __init__(self, obj: Any) -> None:
        super().__init__(obj.get_device() if obj.is_cuda else -1)


class _Props:
    def __init__(self, idx: int) -> None:
        self.name = "devfix virtual GPU"
        self.major = 8
        self.minor = 0
        self.total_memory = 80 * 1024**3
        self.multi_processor_count = 108
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.L2_cache_size = 40 * 1024**2
        self.warp_size = 32
        self.uuid = f"devfix-vgpu-{idx}"
        self.gcnArchName = "NVIDIA"

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 1024**2}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_properties(device: Any = None) -> _Props:
    return _Props(_check(_index(device)))


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.major, p.minor)


class Stream:
    """A stream on a virtual GPU: work is synchronous, so every query is complete."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.device = torch.device("cuda", _check(_index(device)))
        self.priority = priority
        self.cuda_stream = 0

    def wait_event(self, event: Any) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def record_event(self, event: Event | None = None) -> Event:
        ev = event if event is not None else Event()
        ev.record(self)
        return ev

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self) -> int:
        return hash(self.device)

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream device={self.device} cuda_stream=0x0>"

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


ExternalStream = Stream


class Event:
    def __init__(
        self,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        **kwargs: Any,
    ) -> None:
        self.enable_timing = enable_timing
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: Event) -> float:
        if self.t is None or end_event.t is None:
            raise RuntimeError("CUDA error: device not ready")
        return (end_event.t - self.t) * 1000.0


def current_stream(device: Any = None) -> Stream:
    return Stream(device)


def default_stream(device: Any = None) -> Stream:
    return Stream(device)


def set_stream(stream: Any) -> None:
    pass


def _maybe_exchange_device(idx: int) -> int:
    return _exchange_device(idx)


@contextlib.contextmanager
def stream(s: Any) -> Iterator[None]:
    if s is None:
        yield
        return
    with device(s.device):
        yield


def synchronize(device: Any = None) -> None:
    if device is not None:
        _check(_index(device))


def _mk_noop() -> Any:
    # a distinct function per patched name: dynamo's rule map refuses one object in two places
    def noop(*args: Any, **kwargs: Any) -> None:
        return None

    return noop


def _mk_zero() -> Any:
    def zero(*args: Any, **kwargs: Any) -> int:
        return 0

    return zero


def memory_stats(device: Any = None) -> dict[str, Any]:
    return {}


def mem_get_info(device: Any = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.total_memory, p.total_memory)


def get_rng_state(device: Any = "cuda") -> torch.Tensor:
    return torch.get_rng_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [torch.get_rng_state() for _ in range(_N)]


def initial_seed() -> int:
    return torch.initial_seed()


class _CUDAGraphUnsupported:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from devfix.vgpu.errors import VGPUUnsupported

        raise VGPUUnsupported("CUDA graphs (torch.cuda.CUDAGraph / torch.cuda.graph)")


def _unsupported(what: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        from devfix.vgpu.errors import VGPUUnsupported

        raise VGPUUnsupported(what)

    return f


def install(n: int) -> None:
    global _N
    _N = n
    cuda = torch.cuda
    cuda._initialized = True
    cuda._lazy_init = _mk_noop()
    cuda.init = _mk_noop()
    cuda.is_initialized = lambda: True
    cuda.is_available = is_available
    cuda.device_count = device_count
    cuda.current_device = current_device
    cuda.set_device = set_device
    cuda._exchange_device = _exchange_device  # type: ignore[assignment]
    cuda._maybe_exchange_device = _maybe_exchange_device  # type: ignore[assignment]
    cuda.device = device  # type: ignore[misc,assignment]
    cuda.device_of = device_of  # type: ignore[misc,assignment]
    cuda.get_device_properties = get_device_properties  # type: ignore[assignment]
    cuda.get_device_name = get_device_name
    cuda.get_device_capability = get_device_capability
    cuda.is_bf16_supported = lambda *a, **k: True
    cuda.synchronize = synchronize
    cuda.empty_cache = _mk_noop()
    cuda.ipc_collect = _mk_noop()
    cuda.reset_peak_memory_stats = _mk_noop()
    cuda.reset_max_memory_allocated = _mk_noop()
    cuda.reset_max_memory_cached = _mk_noop()
    cuda.reset_accumulated_memory_stats = _mk_noop()
    for name in (
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_cached",
        "max_memory_cached",
        "utilization",
    ):
        setattr(cuda, name, _mk_zero())
    cuda.memory_stats = memory_stats
    cuda.memory_summary = lambda *a, **k: "devfix virtual GPU: memory is not tracked"
    cuda.mem_get_info = mem_get_info
    cuda.manual_seed = _mk_noop()
    cuda.manual_seed_all = _mk_noop()
    cuda.seed = _mk_noop()
    cuda.seed_all = _mk_noop()
    cuda.initial_seed = initial_seed
    cuda.get_rng_state = get_rng_state
    cuda.get_rng_state_all = get_rng_state_all
    cuda.set_rng_state = _mk_noop()
    cuda.set_rng_state_all = _mk_noop()
    cuda.Stream = Stream  # type: ignore[misc,assignment]
    cuda.ExternalStream = ExternalStream  # type: ignore[misc,assignment]
    cuda.Event = Event  # type: ignore[misc,assignment]
    cuda.current_stream = current_stream  # type: ignore[assignment]
    cuda.default_stream = default_stream  # type: ignore[assignment]
    cuda.set_stream = set_stream
    cuda.stream = stream  # type: ignore[assignment]
    cuda.CUDAGraph = _CUDAGraphUnsupported  # type: ignore[misc,assignment]
    cuda.graph = _CUDAGraphUnsupported  # type: ignore[misc,assignment]
    cuda.make_graphed_callables = _unsupported("CUDA graphs (make_graphed_callables)")
    import torch.cuda.memory as mem

    for name in (
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
    ):
        setattr(mem, name, _mk_zero())
    mem.empty_cache = _mk_noop()
    import torch.cuda.random as rnd

    rnd.manual_seed = _mk_noop()
    rnd.manual_seed_all = _mk_noop()
