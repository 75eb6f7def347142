"""The Python ``torch.cuda`` API over the virtual GPUs."""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from devfix.vgpu import _shim
from devfix.vgpu.sizes import MEMORY_ENV, parse_memory

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


def _total_memory() -> int:
    text = os.environ.get(MEMORY_ENV)
    return 80 * 1024**3 if not text else parse_memory(text)


class _Props:
    def __init__(self, idx: int) -> None:
        self.name = "devfix virtual GPU"
        self.major = 8
        self.minor = 0
        self.total_memory = _total_memory()
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
        # c10/cuda/CUDAEvent.h CUDAEvent::elapsed_time (TORCH_CHECK_VALUE: a ValueError)
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.t is None or end_event.t is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
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


# --- memory statistics: the shim counts the CPU allocations made for each virtual GPU ---------

_ALLOCATED, _PEAK, _ALLOC_COUNT, _FREE_COUNT = 0, 1, 2, 3
_SEGMENT = 2 * 1024**2  # the caching allocator reserves large segments in 2 MiB steps
_reserved: dict[int, int] = {}
_max_reserved: dict[int, int] = {}


def _stat(device: Any, which: int) -> int:
    return int(_lib().devfix_vgpu_memory(_check(_index(device)), which))


def memory_allocated(device: Any = None) -> int:
    return _stat(device, _ALLOCATED)


def max_memory_allocated(device: Any = None) -> int:
    return _stat(device, _PEAK)


def _update_reserved(idx: int) -> int:
    # Reserved memory is a model, not a measurement: it grows to hold the peak allocation (in
    # 2 MiB segments) and shrinks only on empty_cache(), as the caching allocator's does.
    peak = int(_lib().devfix_vgpu_memory(idx, _PEAK))
    need = -(-peak // _SEGMENT) * _SEGMENT
    _reserved[idx] = max(_reserved.get(idx, 0), need)
    _max_reserved[idx] = max(_max_reserved.get(idx, 0), _reserved[idx])
    return _reserved[idx]


def memory_reserved(device: Any = None) -> int:
    return _update_reserved(_check(_index(device)))


def max_memory_reserved(device: Any = None) -> int:
    idx = _check(_index(device))
    _update_reserved(idx)
    return _max_reserved[idx]


def reset_peak_memory_stats(device: Any = None) -> None:
    idx = _check(_index(device))
    _lib().devfix_vgpu_reset_peak(idx)
    _max_reserved[idx] = _reserved.get(idx, 0)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _lib().devfix_vgpu_reset_counts(_check(_index(device)))


def empty_cache() -> None:
    _lib().devfix_vgpu_release_cached()
    for idx in range(_N):
        allocated = int(_lib().devfix_vgpu_memory(idx, _ALLOCATED))
        _reserved[idx] = -(-allocated // _SEGMENT) * _SEGMENT


def memory_stats(device: Any = None) -> dict[str, Any]:
    """The keys of ``torch.cuda.memory_stats()`` that scripts read, for the ``all`` pool."""
    idx = _check(_index(device))
    reserved = _update_reserved(idx)
    stats: dict[str, Any] = {
        "allocated_bytes.all.current": memory_allocated(idx),
        "allocated_bytes.all.peak": max_memory_allocated(idx),
        "allocation.all.allocated": _stat(idx, _ALLOC_COUNT),
        "allocation.all.freed": _stat(idx, _FREE_COUNT),
        "allocation.all.current": _stat(idx, _ALLOC_COUNT) - _stat(idx, _FREE_COUNT),
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": _max_reserved[idx],
        "num_alloc_retries": 0,
        "num_ooms": 0,
    }
    stats["active_bytes.all.current"] = stats["allocated_bytes.all.current"]
    stats["active_bytes.all.peak"] = stats["allocated_bytes.all.peak"]
    return dict(sorted(stats.items()))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    idx = _check(_index(device))
    mib = 1024**2
    return (
        f"devfix virtual GPU cuda:{idx}: allocated {memory_allocated(idx) / mib:.1f} MiB "
        f"(peak {max_memory_allocated(idx) / mib:.1f} MiB), reserved "
        f"{memory_reserved(idx) / mib:.1f} MiB (a model of the caching allocator)"
    )


def mem_get_info(device: Any = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.total_memory - memory_reserved(device), p.total_memory)


# --- random numbers: one generator per virtual GPU (torch/cuda/random.py's API over them) -----


def _generator(device: Any = "cuda") -> Any:
    from devfix.vgpu._core import DEFAULT_GENERATORS

    return DEFAULT_GENERATORS[_check(_index(device))]


def get_rng_state(device: Any = "cuda") -> torch.Tensor:
    return _generator(device).get_state()  # type: ignore[no-any-return]


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_N)]


def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
    _generator(device).set_state(new_state.clone())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    _generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    from devfix.vgpu._core import DEFAULT_GENERATORS

    for g in DEFAULT_GENERATORS:
        g.manual_seed(int(seed))


def seed() -> None:
    _generator(current_device()).seed()


def seed_all() -> None:
    from devfix.vgpu._core import DEFAULT_GENERATORS

    first = DEFAULT_GENERATORS[0].seed()
    for g in DEFAULT_GENERATORS[1:]:
        g.manual_seed(first)


def initial_seed() -> int:
    return int(_generator(current_device()).initial_seed())


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
    cuda.empty_cache = empty_cache
    cuda.ipc_collect = _mk_noop()
    cuda.reset_peak_memory_stats = reset_peak_memory_stats
    cuda.reset_max_memory_allocated = reset_peak_memory_stats
    cuda.reset_max_memory_cached = reset_peak_memory_stats
    cuda.reset_accumulated_memory_stats = reset_accumulated_memory_stats
    cuda.memory_allocated = memory_allocated
    cuda.max_memory_allocated = max_memory_allocated
    cuda.memory_reserved = memory_reserved
    cuda.max_memory_reserved = max_memory_reserved
    cuda.memory_cached = memory_reserved
    cuda.max_memory_cached = max_memory_reserved
    cuda.utilization = _mk_zero()
    cuda.memory_stats = memory_stats
    cuda.memory_summary = memory_summary
    cuda.mem_get_info = mem_get_info
    from devfix.vgpu._core import DEFAULT_GENERATORS

    DEFAULT_GENERATORS[:] = [torch.Generator(device=f"cuda:{i}") for i in range(n)]
    for g in DEFAULT_GENERATORS:
        g.manual_seed(torch.initial_seed())
    cuda.default_generators = tuple(DEFAULT_GENERATORS)
    cuda.manual_seed = manual_seed
    cuda.manual_seed_all = manual_seed_all
    cuda.seed = seed
    cuda.seed_all = seed_all
    cuda.initial_seed = initial_seed
    cuda.get_rng_state = get_rng_state
    cuda.get_rng_state_all = get_rng_state_all
    cuda.set_rng_state = set_rng_state
    cuda.set_rng_state_all = set_rng_state_all
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
        "memory_stats",
        "memory_summary",
        "reset_peak_memory_stats",
        "reset_accumulated_memory_stats",
        "empty_cache",
    ):
        setattr(mem, name, getattr(cuda, name))
    lib = _lib()
    lib.devfix_vgpu_install_allocator()
    lib.devfix_vgpu_memory.restype = ctypes.c_int64
    from devfix.vgpu import _core

    _core.set_alloc_device = _shim.fast_set_alloc_device()
    import torch.cuda.random as rnd

    for name in (
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "initial_seed",
        "get_rng_state",
        "get_rng_state_all",
        "set_rng_state",
        "set_rng_state_all",
    ):
        setattr(rnd, name, getattr(cuda, name))
