"""A differential battery: probes of device behaviour, each with the outcome CUDA gives.

Every probe is a snippet run with ``torch``, ``nn``, ``F``, ``io`` and ``d0``/``d1``
(``"cuda:0"``/``"cuda:1"``) in scope. It either raises (``expect`` is the exception's first
line, compared exactly, after ``{ngpus}`` is replaced by ``torch.cuda.device_count()``; ``exc``
its type) or runs and evaluates ``check`` to True. ``source`` names the PyTorch file and
function the expected outcome comes from (read in PyTorch's sources; texts present in the
2.13 wheel's ``libtorch_cpu.so`` or its Python files).

The same battery runs under the virtual GPUs (``tests/vgpu/test_battery.py``) and on a real
GPU (``bench/gpu_crosscheck.py``), which prints every probe whose outcome differs.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

_TI = "Expected all tensors to be on the same device, but found at least two devices, "
_CG = "Expected all tensors to be on the same device, but got "

# Where each expected outcome comes from.
TI = "aten/src/ATen/TensorIterator.cpp: TensorIteratorBase::compute_types"
CG = (
    "aten/src/ATen/core/adaption.cpp: common_device_check_failure "
    "(torchgen's wrapper_CUDA_* device check, device_check: ExactSame in native_functions.yaml)"
)
ADDCMUL = "aten/src/ATen/native/PointwiseOps.cpp: TORCH_META_FUNC(addcmul) (allow_cpu_scalars)"
WHERE = "aten/src/ATen/native/TensorCompare.cpp: where_self_out (0-dim CPU operands moved)"
COPY = "aten/src/ATen/native/Copy.cpp: copy_ (cross-device copies)"
INDEX = "aten/src/ATen/native/TensorAdvancedIndexing.cpp: index (indices device check)"
MASKED = "aten/src/ATen/native/cuda/Indexing.cu: masked_fill__cuda"
EMBED = "aten/src/ATen/native/Embedding.cpp: embedding -> index_select (CUDA kernel)"
GEN = "aten/src/ATen/core/Generator.h: check_generator"
GEN_NEW = "torch/csrc/Generator.cpp: THPGenerator_pynew (CUDAHooks getNewGenerator)"
FACTORY = "aten/src/ATen/native/TensorFactories.cpp: full, arange, eye, linspace (device=)"
ORDINAL = "c10/cuda/CUDAException.h: C10_CUDA_CHECK (cudaErrorInvalidDevice)"
DEFAULT_DEVICE = "torch/utils/_device.py: DeviceContext (set_default_device)"
RANDOM = "torch/random.py: manual_seed (seeds every CUDA device's default generator)"
CUDA_RANDOM = "torch/cuda/random.py: manual_seed / get_rng_state / set_rng_state"
DROPOUT = "aten/src/ATen/native/cuda/Dropout.cu: fused_dropout (CUDA default generator)"
AUTOCAST = (
    "aten/src/ATen/autocast_mode.cpp: CUDA lists (lower_precision_fp, fp32, fp32_set_opt_dtype)"
)
SOFTMAX = "aten/src/ATen/native/cuda/SoftMax.cu: host_softmax (half_to_float)"
MHA = "torch/nn/functional.py: multi_head_attention_forward (softmax under autocast)"
SCALER = "torch/amp/grad_scaler.py: GradScaler.step / update"
SERIAL = "torch/serialization.py: _validate_device"
SERIAL_TAG = "torch/serialization.py: _backend_tag / default_restore_location"
OPTIM = "torch/optim/optimizer.py: Optimizer._process_value_according_to_param_policy"
PIN = "aten/src/ATen/native/Memory.cpp: pin_memory / _pin_memory"
SAMPLER = "torch/utils/data/sampler.py: RandomSampler.__iter__ (randperm with its generator)"
DATALOADER = "torch/utils/data/_utils/pin_memory.py: pin_memory"
DP = "torch/nn/parallel/data_parallel.py: DataParallel.forward"
DP_APPLY = "torch/nn/parallel/parallel_apply.py: parallel_apply (ExceptionWrapper.reraise)"
DP_GATHER = "torch/nn/parallel/scatter_gather.py: gather (to output_device)"
EVENT = "c10/cuda/CUDAEvent.h: CUDAEvent::elapsed_time"
STREAM = "torch/cuda/streams.py: Stream; torch/cuda/__init__.py: current_stream, stream"
MEM = (
    "c10/cuda/CUDACachingAllocator.cpp: round_size (kMinBlockSize 512), DeviceStats; "
    "torch/cuda/memory.py: memory_allocated / max_memory_allocated / reset_peak_memory_stats"
)
RNN = "aten/src/ATen/native/RNN.cpp: check_attributes"
CONV = "aten/src/ATen/native/Convolution.cpp: check_input_same_type_as_parameters"
NUMPY = "torch/csrc/utils/tensor_numpy.cpp: tensor_to_numpy"
PACK = "torch/nn/utils/rnn.py: pack_padded_sequence (batch_sizes stay on the CPU)"


def _cg(arg: str, dev: str, common: str, method: str) -> str:
    return (
        f"{_CG}{arg} is on {dev}, different from other tensors on {common} "
        f"(when checking argument in method {method})"
    )


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    source: str
    code: str
    expect: str | None = None  # the exception's first line, or None: must not raise
    exc: str = "RuntimeError"
    check: str | None = None  # an expression that must be True after `code`
    gpus: int = 1


G_SCALAR = "scalar exemption rules"
G_OUT = "in-place and out= outputs"
G_INDEX = "indexing"
G_FACTORY = "factories and generators"
G_RNG = "RNG"
G_AMP = "autocast/GradScaler"
G_SERIAL = "serialization"
G_DATA = "DataLoader/pin_memory"
G_DP = "DataParallel"
G_STREAM = "streams/events"
G_MEM = "memory statistics"
G_OPS = "op-specific checks"

GROUPS = (
    G_SCALAR,
    G_OUT,
    G_INDEX,
    G_FACTORY,
    G_RNG,
    G_AMP,
    G_SERIAL,
    G_DATA,
    G_DP,
    G_STREAM,
    G_MEM,
    G_OPS,
)

_DP_NET = (
    "class Net(nn.Module):\n"
    "    def __init__(self, dev):\n"
    "        super().__init__(); self.fc = nn.Linear(4, 2); self.dev = dev; self.seen = set()\n"
    "    def forward(self, x):\n"
    "        self.seen.add(str(x.device))\n"
    "        return self.fc(x) + torch.zeros(2, device=self.dev or x.device)\n"
)

CASES: list[Case] = [
    # --- scalar exemption rules -------------------------------------------------------------
    Case(
        "ti_cpu_second",
        G_SCALAR,
        TI,
        "torch.ones(2, device=d0) + torch.ones(2)",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "ti_cpu_first",
        G_SCALAR,
        TI,
        "torch.ones(2) + torch.ones(2, device=d0)",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "ti_cpu_scalar_ok",
        G_SCALAR,
        TI,
        "r = torch.ones(2, device=d0) * torch.tensor(2.)",
        check="r.device == torch.device(d0) and r.tolist() == [2.0, 2.0]",
    ),
    Case(
        "ti_cpu_scalar_first_ok",
        G_SCALAR,
        TI,
        "r = torch.tensor(3.) - torch.ones(2, device=d0)",
        check="r.device == torch.device(d0) and r.tolist() == [2.0, 2.0]",
    ),
    Case(
        "ti_cpu_scalar_and_gpu_scalar_ok",
        G_SCALAR,
        TI,
        "r = torch.tensor(2.) * torch.tensor(3., device=d0)",
        check="r.device == torch.device(d0) and r.item() == 6.0",
    ),
    Case(
        "ti_comparison_cpu_scalar_ok",
        G_SCALAR,
        TI,
        "r = torch.arange(3., device=d0) > torch.tensor(0.)",
        check="r.is_cuda and r.tolist() == [False, True, True]",
    ),
    Case(
        "ti_two_gpus",
        G_SCALAR,
        TI,
        "torch.ones(2, device=d1) + torch.ones(2, device=d0)",
        _TI + "cuda:1 and cuda:0!",
        gpus=2,
    ),
    Case(
        "ti_other_gpu_scalar_is_not_exempt",
        G_SCALAR,
        TI,
        "torch.ones(2, device=d1) + torch.tensor(1., device=d0)",
        _TI + "cuda:1 and cuda:0!",
        gpus=2,
    ),
    Case(
        "ti_1dim_cpu_is_not_exempt",
        G_SCALAR,
        TI,
        "torch.ones(3, device=d0) * torch.ones(1)",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "addcmul_one_cpu_scalar_ok",
        G_SCALAR,
        ADDCMUL,
        "r = torch.addcmul(torch.ones(2, device=d0), torch.tensor(2.), torch.ones(2, device=d0))",
        check="r.is_cuda and r.tolist() == [3.0, 3.0]",
    ),
    Case(
        "addcmul_two_cpu_scalars",
        G_SCALAR,
        f"{ADDCMUL}; {TI}",
        "torch.addcmul(torch.ones(2, device=d0), torch.tensor(2.), torch.tensor(3.))",
        "Trying to pass too many CPU scalars to non-CPU kernel!",
    ),
    Case(
        "addcdiv_two_cpu_scalars",
        G_SCALAR,
        f"aten/src/ATen/native/PointwiseOps.cpp: TORCH_META_FUNC(addcdiv); {TI}",
        "torch.addcdiv(torch.ones(2, device=d0), torch.tensor(2.), torch.tensor(4.))",
        "Trying to pass too many CPU scalars to non-CPU kernel!",
    ),
    Case(
        "where_cpu_scalar_ok",
        G_SCALAR,
        WHERE,
        "x = torch.arange(3., device=d0); r = torch.where(x > 0, x, torch.tensor(0.))",
        check="r.is_cuda and r.tolist() == [0.0, 1.0, 2.0]",
    ),
    Case(
        "where_two_cpu_scalars_ok",
        G_SCALAR,
        WHERE,
        "x = torch.arange(3., device=d0)\n"
        "r = torch.where(x > 0, torch.tensor(1.), torch.tensor(-1.))",
        check="r.is_cuda and r.tolist() == [-1.0, 1.0, 1.0]",
    ),
    Case(
        "mm_0dim_cpu_is_not_exempt",
        G_SCALAR,
        CG,
        "torch.mm(torch.ones(1, 1, device=d0), torch.ones(1, 1))",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm"),
    ),
    # --- in-place and out= outputs ----------------------------------------------------------
    Case(
        "inplace_cpu_self",
        G_OUT,
        TI,
        "torch.zeros(2).add_(torch.ones(2, device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "inplace_cpu_0dim_self",
        G_OUT,
        TI,
        "torch.tensor(1.).add_(torch.tensor(2., device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "inplace_cpu_0dim_self_mul",
        G_OUT,
        TI,
        "s = torch.tensor(0.); s.mul_(torch.ones(3, device=d0).sum())",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "inplace_gpu_self_cpu_scalar_ok",
        G_OUT,
        TI,
        "x = torch.ones(2, device=d0); x.add_(torch.tensor(1.))",
        check="x.is_cuda and x.tolist() == [2.0, 2.0]",
    ),
    Case(
        "inplace_other_gpu",
        G_OUT,
        TI,
        "torch.ones(2, device=d0).mul_(torch.ones(2, device=d1))",
        _TI + "cuda:0 and cuda:1!",
        gpus=2,
    ),
    Case(
        "out_cpu_0dim",
        G_OUT,
        TI,
        "torch.add(torch.tensor(1., device=d0), 1, out=torch.tensor(0.))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "out_cpu_for_gpu_inputs",
        G_OUT,
        TI,
        "torch.add(torch.ones(2, device=d0), 1, out=torch.zeros(2))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "out_gpu_for_cpu_input",
        G_OUT,
        TI,
        "torch.add(torch.ones(2), 1, out=torch.zeros(2, device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "out_gpu_same_size_ok",
        G_OUT,
        TI,
        "o = torch.empty(2, device=d0); r = torch.add(torch.ones(2, device=d0), 1, out=o)",
        check="r is o and o.tolist() == [2.0, 2.0]",
    ),
    Case(
        "copy_across_devices_ok",
        G_OUT,
        COPY,
        "c = torch.zeros(2); c.copy_(torch.ones(2, device=d0)); g = torch.zeros(2, device=d0); "
        "g.copy_(torch.full((2,), 3.))",
        check="c.device.type == 'cpu' and c.tolist() == [1.0, 1.0] and g.tolist() == [3.0, 3.0]",
    ),
    Case(
        "copy_cpu_0dim_from_gpu_ok",
        G_OUT,
        COPY,
        "s = torch.tensor(0.); s.copy_(torch.tensor(5., device=d0))",
        check="s.device.type == 'cpu' and s.item() == 5.0",
    ),
    # --- indexing ---------------------------------------------------------------------------
    Case(
        "index_cpu_indices_ok",
        G_INDEX,
        INDEX,
        "r = torch.arange(4., device=d0)[torch.tensor([1, 3])]",
        check="r.is_cuda and r.tolist() == [1.0, 3.0]",
    ),
    Case(
        "index_cpu_bool_mask_ok",
        G_INDEX,
        INDEX,
        "r = torch.arange(4., device=d0)[torch.tensor([True, False, True, False])]",
        check="r.is_cuda and r.tolist() == [0.0, 2.0]",
    ),
    Case(
        "index_other_gpu_indices",
        G_INDEX,
        INDEX,
        "torch.arange(4., device=d0)[torch.tensor([1, 3], device=d1)]",
        "indices should be either on cpu or on the same device as the indexed tensor (cuda:0)",
        gpus=2,
    ),
    Case(
        "index_cpu_tensor_gpu_indices",
        G_INDEX,
        INDEX,
        "torch.arange(4.)[torch.tensor([1, 3], device=d0)]",
        "indices should be either on cpu or on the same device as the indexed tensor (cpu)",
    ),
    Case(
        "index_put_cpu_indices_0dim_value_ok",
        G_INDEX,
        INDEX,
        "x = torch.zeros(4, device=d0); x[torch.tensor([0, 2])] = torch.tensor(5.)",
        check="x.tolist() == [5.0, 0.0, 5.0, 0.0]",
    ),
    Case(
        "index_select_cpu_index",
        G_INDEX,
        CG,
        "torch.ones(3, device=d0).index_select(0, torch.tensor([0]))",
        _cg("index", "cpu", "cuda:0", "wrapper_CUDA__index_select"),
    ),
    Case(
        "embedding_cpu_ids",
        G_INDEX,
        f"{EMBED}; {CG}",
        "nn.Embedding(10, 4).to(d0)(torch.tensor([1, 2]))",
        _cg("index", "cpu", "cuda:0", "wrapper_CUDA__index_select"),
    ),
    Case(
        "gather_cpu_index",
        G_INDEX,
        CG,
        "torch.gather(torch.ones(3, device=d0), 0, torch.tensor([0]))",
        _cg("index", "cpu", "cuda:0", "wrapper_CUDA_gather"),
    ),
    Case(
        "masked_fill__cpu_mask",
        G_INDEX,
        MASKED,
        "torch.zeros(3, device=d0).masked_fill_(torch.tensor([True, False, True]), 1.0)",
        "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0",
    ),
    Case(
        "masked_fill_functional_cpu_mask",
        G_INDEX,
        MASKED,
        "torch.zeros(3, device=d0).masked_fill(torch.tensor([True, False, True]), 1.0)",
        "expected self and mask to be on the same device, but got mask on cpu and self on cuda:0",
    ),
    Case(
        "masked_fill_0dim_cpu_value_ok",
        G_INDEX,
        MASKED,
        "r = torch.zeros(3, device=d0).masked_fill("
        "torch.tensor([True, False, True], device=d0), torch.tensor(2.))",
        check="r.tolist() == [2.0, 0.0, 2.0] and r.is_cuda",
    ),
    Case(
        "nonzero_stays_on_gpu",
        G_INDEX,
        "aten/src/ATen/native/cuda/Nonzero.cu: nonzero_out_cuda",
        "r = torch.tensor([0., 1., 2.], device=d0).nonzero()",
        check="r.is_cuda and r.flatten().tolist() == [1, 2]",
    ),
    # --- factories and generators -----------------------------------------------------------
    Case(
        "device_out_of_range",
        G_FACTORY,
        ORDINAL,
        "torch.zeros(2, device='cuda:5')",
        "CUDA error: invalid device ordinal",
    ),
    Case(
        "to_out_of_range",
        G_FACTORY,
        ORDINAL,
        "torch.zeros(2).to('cuda:7')",
        "CUDA error: invalid device ordinal",
    ),
    Case(
        "factories_on_device",
        G_FACTORY,
        FACTORY,
        "rs = [torch.arange(3, device=d0), torch.eye(2, device=d0), "
        "torch.full((2,), 1., device=d0), torch.tensor([1, 2], device=d0), "
        "torch.linspace(0, 1, 3, device=d0), "
        "torch.randperm(3, device=d0)]",
        check="all(r.device == torch.device(d0) for r in rs)",
    ),
    Case(
        "like_and_new_keep_device",
        G_FACTORY,
        FACTORY,
        "x = torch.ones(2, device=d0)\n"
        "rs = [torch.zeros_like(x), x.new_ones(3), x.new_tensor([1.]), "
        "torch.empty_like(x), torch.rand_like(x)]",
        check="all(r.device == torch.device(d0) for r in rs)",
    ),
    Case(
        "set_default_device_cuda",
        G_FACTORY,
        DEFAULT_DEVICE,
        "torch.set_default_device('cuda')\n"
        "try:\n    r = torch.zeros(2)\nfinally:\n    torch.set_default_device(None)",
        check="r.device == torch.device('cuda', 0)",
    ),
    Case(
        "generator_cuda_device",
        G_FACTORY,
        GEN_NEW,
        "g0 = torch.Generator(device='cuda'); g1 = torch.Generator(device=d1)",
        check="g0.device == torch.device('cuda', 0) and g1.device == torch.device('cuda', 1)",
        gpus=2,
    ),
    Case(
        "gpu_factory_cpu_generator",
        G_FACTORY,
        GEN,
        "torch.randn(3, device=d0, generator=torch.Generator())",
        "Expected a 'cuda' device type for generator but found 'cpu'",
    ),
    Case(
        "cpu_factory_cuda_generator",
        G_FACTORY,
        GEN,
        "torch.randn(3, generator=torch.Generator(device=d0))",
        "Expected a 'cpu' device type for generator but found 'cuda'",
    ),
    Case(
        "default_device_cuda_cpu_generator",
        G_FACTORY,
        f"{DEFAULT_DEVICE}; {GEN}",
        "torch.set_default_device('cuda')\n"
        "try:\n    torch.randn(3, generator=torch.Generator())\n"
        "finally:\n    torch.set_default_device(None)",
        "Expected a 'cuda' device type for generator but found 'cpu'",
    ),
    Case(
        "gpu_normal__cpu_generator",
        G_FACTORY,
        GEN,
        "torch.empty(3, device=d0).normal_(generator=torch.Generator())",
        "Expected a 'cuda' device type for generator but found 'cpu'",
    ),
    Case(
        "cpu_uniform__cuda_generator",
        G_FACTORY,
        GEN,
        "torch.empty(3).uniform_(generator=torch.Generator(device=d0))",
        "Expected a 'cpu' device type for generator but found 'cuda'",
    ),
    Case(
        "cpu_randperm_cuda_generator",
        G_FACTORY,
        GEN,
        "torch.randperm(4, generator=torch.Generator(device=d0))",
        "Expected a 'cpu' device type for generator but found 'cuda'",
    ),
    Case(
        "gpu_ops_with_cuda_generator",
        G_FACTORY,
        GEN,
        "g = torch.Generator(device=d0).manual_seed(1)\n"
        "rs = [torch.randn(2, device=d0, generator=g), "
        "torch.randint(0, 5, (2,), device=d0, generator=g), "
        "torch.multinomial(torch.ones(4, device=d0), 2, generator=g), "
        "torch.bernoulli(torch.full((2,), .5, device=d0), generator=g)]",
        check="all(r.device == torch.device(d0) for r in rs)",
    ),
    # --- RNG --------------------------------------------------------------------------------
    Case(
        "cuda_generator_reproducible",
        G_RNG,
        GEN_NEW,
        "g = torch.Generator(device=d0)\n"
        "g.manual_seed(5); a = torch.randn(4, device=d0, generator=g)\n"
        "g.manual_seed(5); b = torch.randn(4, device=d0, generator=g)\n"
        "c = torch.randn(4, device=d0, generator=g)",
        check="torch.equal(a, b) and not torch.equal(a, c) and g.initial_seed() == 5",
    ),
    Case(
        "manual_seed_reproducible_on_gpu",
        G_RNG,
        RANDOM,
        "torch.manual_seed(0); a = torch.randn(4, device=d0)\n"
        "torch.manual_seed(0); b = torch.randn(4, device=d0)",
        check="torch.equal(a, b)",
    ),
    Case(
        "cuda_manual_seed_reproducible",
        G_RNG,
        CUDA_RANDOM,
        "torch.cuda.manual_seed(3); a = torch.rand(4, device=d0)\n"
        "torch.cuda.manual_seed(3); b = torch.rand(4, device=d0)",
        check="torch.equal(a, b) and torch.cuda.initial_seed() == 3",
    ),
    Case(
        "cpu_draws_leave_gpu_stream_alone",
        G_RNG,
        RANDOM,
        "torch.manual_seed(0); a = torch.randn(4, device=d0)\n"
        "torch.manual_seed(0); torch.randn(4); b = torch.randn(4, device=d0)",
        check="torch.equal(a, b)",
    ),
    Case(
        "cuda_rng_state_replays",
        G_RNG,
        CUDA_RANDOM,
        "s = torch.cuda.get_rng_state(); a = torch.rand(3, device=d0)\n"
        "torch.cuda.set_rng_state(s); b = torch.rand(3, device=d0)",
        check="torch.equal(a, b) and s.device.type == 'cpu' and s.dtype == torch.uint8",
    ),
    Case(
        "dropout_reproducible_with_cuda_seed",
        G_RNG,
        DROPOUT,
        "x = torch.ones(64, device=d0)\n"
        "torch.cuda.manual_seed(7); a = F.dropout(x, 0.5)\n"
        "torch.cuda.manual_seed(7); b = F.dropout(x, 0.5)",
        check="torch.equal(a, b) and a.is_cuda",
    ),
    Case(
        "manual_seed_all_seeds_every_gpu",
        G_RNG,
        CUDA_RANDOM,
        "torch.cuda.manual_seed_all(9); a = torch.rand(3, device=d1)\n"
        "torch.cuda.manual_seed_all(9); b = torch.rand(3, device=d1)",
        check="torch.equal(a, b) "
        "and len(torch.cuda.get_rng_state_all()) == torch.cuda.device_count()",
        gpus=2,
    ),
    # --- autocast / GradScaler --------------------------------------------------------------
    Case(
        "autocast_linear_fp16",
        G_AMP,
        AUTOCAST,
        "m = nn.Linear(8, 4).to(d0)\n"
        "with torch.autocast('cuda'):\n    y = m(torch.randn(2, 8, device=d0))",
        check="y.dtype == torch.float16 and y.is_cuda",
    ),
    Case(
        "autocast_linear_bf16",
        G_AMP,
        AUTOCAST,
        "m = nn.Linear(8, 4).to(d0)\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "    y = m(torch.randn(2, 8, device=d0))",
        check="y.dtype == torch.bfloat16",
    ),
    Case(
        "autocast_softmax_fp32",
        G_AMP,
        f"{AUTOCAST}; {SOFTMAX}",
        "m = nn.Linear(8, 8).to(d0)\nwith torch.autocast('cuda'):\n"
        "    h = m(torch.randn(2, 8, device=d0)); y = F.softmax(h, -1)",
        check="h.dtype == torch.float16 and y.dtype == torch.float32 "
        "and torch.allclose(y, F.softmax(h.float(), -1), atol=1e-6)",
    ),
    Case(
        "autocast_log_softmax_fp32",
        G_AMP,
        f"{AUTOCAST}; {SOFTMAX}",
        "m = nn.Linear(8, 8).to(d0)\nwith torch.autocast('cuda'):\n"
        "    y = F.log_softmax(m(torch.randn(2, 8, device=d0)), -1)",
        check="y.dtype == torch.float32",
    ),
    Case(
        "softmax_half_to_float",
        G_AMP,
        SOFTMAX,
        "x = torch.randn(3, 5, device=d0).half(); y = F.softmax(x, -1, dtype=torch.float32)",
        check="y.dtype == torch.float32 and torch.allclose(y, F.softmax(x.float(), -1), atol=1e-6)",
    ),
    Case(
        "softmax_half_to_float_backward",
        G_AMP,
        SOFTMAX,
        "x = torch.randn(3, 5, device=d0).half().requires_grad_()\n"
        "F.log_softmax(x, -1, dtype=torch.float32)[:, 0].sum().backward()",
        check="x.grad.dtype == torch.float16 and x.grad.is_cuda",
    ),
    Case(
        "autocast_multihead_attention",
        G_AMP,
        f"{MHA}; {AUTOCAST}",
        "mha = nn.MultiheadAttention(8, 2, batch_first=True).to(d0)\n"
        "q = torch.randn(2, 5, 8, device=d0, requires_grad=True)\n"
        "with torch.autocast('cuda'):\n    o, w = mha(q, q, q)\n"
        "(o.float().sum() + w.sum()).backward()",
        check="o.dtype == torch.float16 and w.dtype == torch.float32 "
        "and q.grad.dtype == torch.float32",
    ),
    Case(
        "autocast_sdpa_fp16",
        G_AMP,
        AUTOCAST,
        "q = torch.randn(2, 2, 5, 8, device=d0)\nwith torch.autocast('cuda'):\n"
        "    o = F.scaled_dot_product_attention(q, q, q, is_causal=True)",
        check="o.dtype == torch.float16 and o.is_cuda",
    ),
    Case(
        "autocast_cross_entropy_fp32",
        G_AMP,
        AUTOCAST,
        "m = nn.Linear(8, 3).to(d0)\nwith torch.autocast('cuda'):\n"
        "    loss = F.cross_entropy(m(torch.randn(4, 8, device=d0)), "
        "torch.tensor([0, 1, 2, 0], device=d0))",
        check="loss.dtype == torch.float32",
    ),
    Case(
        "autocast_layer_norm_fp32",
        G_AMP,
        AUTOCAST,
        "m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)).to(d0)\nwith torch.autocast('cuda'):\n"
        "    y = m(torch.randn(2, 8, device=d0))",
        check="y.dtype == torch.float32",
    ),
    Case(
        "autocast_transformer_layer_trains",
        G_AMP,
        AUTOCAST,
        "enc = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).to(d0)\n"
        "with torch.autocast('cuda'):\n    y = enc(torch.randn(2, 6, 16, device=d0))\n"
        "y.float().sum().backward()",
        check="enc.linear1.weight.grad.dtype == torch.float32 and y.is_cuda",
    ),
    Case(
        "grad_scaler_finite_step",
        G_AMP,
        SCALER,
        "m = nn.Linear(4, 2).to(d0); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "sc = torch.amp.GradScaler('cuda', init_scale=1024.0); w0 = m.weight.detach().clone()\n"
        "with torch.autocast('cuda'):\n    loss = m(torch.randn(3, 4, device=d0)).float().sum()\n"
        "sc.scale(loss).backward(); sc.step(opt); sc.update()",
        check="sc.get_scale() == 1024.0 and not torch.equal(w0, m.weight.detach())",
    ),
    Case(
        "grad_scaler_fp16_overflow_first_step",
        G_AMP,
        SCALER,
        "m = nn.Linear(4, 2).to(d0); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "sc = torch.amp.GradScaler('cuda'); w0 = m.weight.detach().clone()\n"
        "with torch.autocast('cuda'):\n    loss = m(torch.randn(3, 4, device=d0)).float().sum()\n"
        "sc.scale(loss).backward(); sc.step(opt); sc.update()",
        check="sc.get_scale() == 32768.0 and torch.equal(w0, m.weight.detach())",
    ),
    Case(
        "grad_scaler_skips_inf_step",
        G_AMP,
        SCALER,
        "m = nn.Linear(4, 2).to(d0); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "sc = torch.amp.GradScaler('cuda'); w0 = m.weight.detach().clone()\n"
        "loss = (m(torch.randn(3, 4, device=d0)) * float('inf')).sum()\n"
        "sc.scale(loss).backward(); sc.step(opt); sc.update()",
        check="sc.get_scale() == 32768.0 and torch.equal(w0, m.weight.detach())",
    ),
    # --- serialization ----------------------------------------------------------------------
    Case(
        "save_tags_cuda_storage",
        G_SERIAL,
        SERIAL_TAG,
        "buf = io.BytesIO(); torch.save(torch.ones(2, device=d0), buf)",
        check="b'cuda:0' in buf.getvalue()",
    ),
    Case(
        "load_keeps_cuda_device",
        G_SERIAL,
        SERIAL_TAG,
        "buf = io.BytesIO(); torch.save({'w': torch.ones(2, device=d1)}, buf); buf.seek(0)\n"
        "r = torch.load(buf)",
        check="r['w'].device == torch.device(d1) and r['w'].tolist() == [1.0, 1.0]",
        gpus=2,
    ),
    Case(
        "load_map_location_cpu",
        G_SERIAL,
        SERIAL_TAG,
        "buf = io.BytesIO(); torch.save(torch.ones(2, device=d0), buf); buf.seek(0)\n"
        "r = torch.load(buf, map_location='cpu')",
        check="r.device.type == 'cpu'",
    ),
    Case(
        "load_map_location_dict",
        G_SERIAL,
        SERIAL_TAG,
        "buf = io.BytesIO(); torch.save(torch.ones(2, device=d1), buf); buf.seek(0)\n"
        "r = torch.load(buf, map_location={'cuda:1': 'cuda:0'})",
        check="r.device == torch.device(d0)",
        gpus=2,
    ),
    Case(
        "load_weights_only_keeps_device",
        G_SERIAL,
        SERIAL_TAG,
        "buf = io.BytesIO(); torch.save(nn.Linear(2, 2).to(d0).state_dict(), buf); buf.seek(0)\n"
        "r = torch.load(buf, weights_only=True)",
        check="r['weight'].device == torch.device(d0)",
    ),
    Case(
        "load_onto_missing_gpu",
        G_SERIAL,
        SERIAL,
        "buf = io.BytesIO(); torch.save(torch.ones(2, device=d0), buf); buf.seek(0)\n"
        "torch.load(buf, map_location={'cuda:0': 'cuda:9'})",
        "Attempting to deserialize object on CUDA device 9 but torch.cuda.device_count() is "
        "{ngpus}. Please use torch.load with map_location to map your storages to an existing "
        "device.",
    ),
    Case(
        "load_state_dict_copies_into_cpu_module",
        G_SERIAL,
        "torch/nn/modules/module.py: Module._load_from_state_dict (param.copy_)",
        "src = nn.Linear(2, 2).to(d0); dst = nn.Linear(2, 2)\n"
        "dst.load_state_dict(src.state_dict())",
        check="dst.weight.device.type == 'cpu' and torch.equal(dst.weight, src.weight.cpu())",
    ),
    Case(
        "optimizer_state_follows_param_device",
        G_SERIAL,
        OPTIM,
        "m = nn.Linear(2, 2); o = torch.optim.Adam(m.parameters())\n"
        "m(torch.randn(1, 2)).sum().backward(); o.step(); sd = o.state_dict()\n"
        "m.to(d0); o2 = torch.optim.Adam(m.parameters()); o2.load_state_dict(sd)",
        check="o2.state[m.weight]['exp_avg'].device == torch.device(d0) "
        "and o2.state[m.weight]['step'].device.type == 'cpu'",
    ),
    # --- DataLoader / pin_memory ------------------------------------------------------------
    Case(
        "pin_memory_cpu_tensor",
        G_DATA,
        PIN,
        "x = torch.randn(3); p = x.pin_memory()",
        check="p.is_pinned() and not x.is_pinned() and torch.ones(2, pin_memory=True).is_pinned()",
    ),
    Case(
        "pin_memory_gpu_tensor",
        G_DATA,
        PIN,
        "torch.ones(2, device=d0).pin_memory()",
        "cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned",
    ),
    Case(
        "gpu_tensor_is_not_pinned",
        G_DATA,
        PIN,
        "x = torch.ones(2).pin_memory().to(d0, non_blocking=True)",
        check="x.is_cuda and not x.is_pinned()",
    ),
    Case(
        "dataloader_pins_batches",
        G_DATA,
        DATALOADER,
        "ds = torch.utils.data.TensorDataset(torch.randn(8, 2))\n"
        "bs = [b for (b,) in torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True)]",
        check="all(b.is_pinned() and not b.is_cuda for b in bs)",
    ),
    Case(
        "dataloader_workers_feed_gpu",
        G_DATA,
        "torch/utils/data/dataloader.py: _MultiProcessingDataLoaderIter (fork workers)",
        "ds = torch.utils.data.TensorDataset(torch.randn(8, 2))\n"
        "bs = [b.to(d0) for (b,) in torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)]",
        check="len(bs) == 2 and all(b.is_cuda for b in bs)",
    ),
    Case(
        "dataloader_shuffle_cuda_generator",
        G_DATA,
        f"{SAMPLER}; {GEN}",
        "ds = torch.utils.data.TensorDataset(torch.arange(8.))\n"
        "list(torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, "
        "generator=torch.Generator(device='cuda')))",
        "Expected a 'cpu' device type for generator but found 'cuda'",
    ),
    Case(
        "dataloader_pin_gpu_batch",
        G_DATA,
        f"{DATALOADER}; {PIN}",
        "ds = [torch.ones(2, device=d0) for _ in range(2)]\n"
        "list(torch.utils.data.DataLoader(ds, batch_size=2, pin_memory=True))",
        "cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned",
    ),
    # --- DataParallel -----------------------------------------------------------------------
    Case(
        "dataparallel_cpu_module",
        G_DP,
        DP,
        "nn.DataParallel(nn.Linear(2, 2))(torch.randn(4, 2, device=d0))",
        "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but "
        "found one of them on device: cpu",
    ),
    Case(
        "dataparallel_module_on_second_gpu",
        G_DP,
        DP,
        "nn.DataParallel(nn.Linear(2, 2).to(d1))(torch.randn(4, 2, device=d0))",
        "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but "
        "found one of them on device: cuda:1",
        gpus=2,
    ),
    Case(
        "dataparallel_hard_coded_cuda0_in_replica",
        G_DP,
        DP_APPLY,
        _DP_NET + "nn.DataParallel(Net(d0).to(d0))(torch.randn(4, 4, device=d0))",
        "Caught RuntimeError in replica 1 on device 1.",
        gpus=2,
    ),
    Case(
        "dataparallel_replicas_and_gather",
        G_DP,
        f"{DP}; {DP_GATHER}",
        _DP_NET + "net = Net(None).to(d0)\n"
        "out = nn.DataParallel(net)(torch.randn(4, 4, device=d0))\n"
        "out.sum().backward()",
        check="out.device == torch.device(d0) and net.seen == {'cuda:0', 'cuda:1'} "
        "and net.fc.weight.grad.device == torch.device(d0)",
        gpus=2,
    ),
    Case(
        "dataparallel_cpu_input_is_scattered",
        G_DP,
        "torch/nn/parallel/scatter_gather.py: scatter",
        "out = nn.DataParallel(nn.Linear(4, 2).to(d0))(torch.randn(4, 4))",
        check="out.device == torch.device(d0) and out.shape == (4, 2)",
        gpus=2,
    ),
    Case(
        "dataparallel_output_device",
        G_DP,
        DP_GATHER,
        "out = nn.DataParallel(nn.Linear(4, 2).to(d1), device_ids=[1, 0], output_device=1)"
        "(torch.randn(4, 4, device=d1))",
        check="out.device == torch.device(d1)",
        gpus=2,
    ),
    # --- streams / events -------------------------------------------------------------------
    Case(
        "event_without_timing",
        G_STREAM,
        EVENT,
        "a, b = torch.cuda.Event(), torch.cuda.Event(); a.record(); b.record(); a.elapsed_time(b)",
        "Both events must be created with argument 'enable_timing=True'.",
        exc="ValueError",
    ),
    Case(
        "event_not_recorded",
        G_STREAM,
        EVENT,
        "a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)\n"
        "a.elapsed_time(b)",
        "Both events must be recorded before calculating elapsed time.",
        exc="ValueError",
    ),
    Case(
        "event_timing",
        G_STREAM,
        EVENT,
        "a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)\n"
        "a.record(); x = torch.ones(100, device=d0) * 2; b.record(); b.synchronize()\n"
        "ms = a.elapsed_time(b)",
        check="ms >= 0 and b.query()",
    ),
    Case(
        "stream_on_device",
        G_STREAM,
        STREAM,
        "s = torch.cuda.Stream(device=d1); c = torch.cuda.current_stream(1)",
        check="s.device == torch.device(d1) and c.device == torch.device(d1)",
        gpus=2,
    ),
    Case(
        "stream_context_runs_work",
        G_STREAM,
        STREAM,
        "s = torch.cuda.Stream()\n"
        "with torch.cuda.stream(s):\n    y = torch.ones(3, device=d0) * 2\n"
        "torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()",
        check="y.tolist() == [2.0, 2.0, 2.0]",
    ),
    Case(
        "synchronize_out_of_range",
        G_STREAM,
        ORDINAL,
        "torch.cuda.synchronize(9)",
        "CUDA error: invalid device ordinal",
    ),
    # --- memory statistics ------------------------------------------------------------------
    Case(
        "memory_small_block_512",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(); x = torch.ones(1, device=d0)\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 512",
    ),
    Case(
        "memory_rounds_to_512",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(); x = torch.empty(1000, device=d0)\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 4096",
    ),
    Case(
        "memory_freed",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(); x = torch.empty(1000, device=d0); del x\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 0",
    ),
    Case(
        "memory_view_shares_storage",
        G_MEM,
        MEM,
        "x = torch.empty(1000, device=d0); m0 = torch.cuda.memory_allocated()\n"
        "v = x.view(10, 100); s = x[:10]; t = v.t()\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 0",
    ),
    Case(
        "memory_op_output_counted",
        G_MEM,
        MEM,
        "x = torch.empty(1000, device=d0); m0 = torch.cuda.memory_allocated(); y = x * 2\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 4096",
    ),
    Case(
        "memory_copy_to_gpu_counted",
        G_MEM,
        MEM,
        "c = torch.empty(1000); m0 = torch.cuda.memory_allocated(); g = c.to(d0)\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 4096",
    ),
    Case(
        "memory_cpu_tensor_not_counted",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(); c = torch.empty(100000) * 2\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 0",
    ),
    Case(
        "memory_per_device",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(0); m1 = torch.cuda.memory_allocated(1)\n"
        "x = torch.empty(1000, device=d1)\n"
        "d0_ = torch.cuda.memory_allocated(0) - m0; d1_ = torch.cuda.memory_allocated(1) - m1",
        check="d0_ == 0 and d1_ == 4096",
        gpus=2,
    ),
    Case(
        "memory_peak_and_reset",
        G_MEM,
        MEM,
        "torch.cuda.reset_peak_memory_stats(); m0 = torch.cuda.memory_allocated()\n"
        "x = torch.empty(100000, device=d0); del x\n"
        "p = torch.cuda.max_memory_allocated() - m0\n"
        "torch.cuda.reset_peak_memory_stats(); p2 = torch.cuda.max_memory_allocated()",
        check="p >= 400384 and p2 == torch.cuda.memory_allocated()",
    ),
    Case(
        "memory_stats_agree",
        G_MEM,
        MEM,
        "x = torch.empty(1000, device=d0); st = torch.cuda.memory_stats()",
        check="st['allocated_bytes.all.current'] == torch.cuda.memory_allocated() "
        "and st['allocated_bytes.all.peak'] == torch.cuda.max_memory_allocated() "
        "and torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()",
    ),
    Case(
        "memory_model_parameters",
        G_MEM,
        MEM,
        "m0 = torch.cuda.memory_allocated(); m = nn.Linear(256, 256).to(d0)\n"
        "d = torch.cuda.memory_allocated() - m0",
        check="d == 262144 + 1024",
    ),
    # --- op-specific checks -----------------------------------------------------------------
    Case(
        "mm_cpu_second",
        G_OPS,
        CG,
        "torch.ones(2, 2, device=d0) @ torch.ones(2, 2)",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm"),
    ),
    Case(
        "mm_cpu_first",
        G_OPS,
        CG,
        "torch.ones(2, 2) @ torch.ones(2, 2, device=d0)",
        _cg("mat2", "cuda:0", "cpu", "wrapper_CUDA_mm"),
    ),
    Case(
        "bmm",
        G_OPS,
        CG,
        "torch.ones(1, 2, 2, device=d0).bmm(torch.ones(1, 2, 2))",
        _cg("mat2", "cpu", "cuda:0", "wrapper_CUDA_bmm"),
    ),
    Case(
        "linear_cpu_input",
        G_OPS,
        CG,
        "nn.Linear(4, 3).to(d0)(torch.randn(2, 4))",
        _cg("mat1", "cpu", "cuda:0", "wrapper_CUDA_addmm"),
    ),
    Case(
        "cat",
        G_OPS,
        CG,
        "torch.cat([torch.ones(2, device=d0), torch.ones(2)])",
        _cg("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat"),
    ),
    Case(
        "stack",
        G_OPS,
        CG,
        "torch.stack([torch.ones(2, device=d0), torch.ones(2)])",
        _cg("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat"),
    ),
    Case(
        "cross_entropy_cpu_target",
        G_OPS,
        CG,
        "F.cross_entropy(torch.randn(4, 3, device=d0), torch.tensor([0, 1, 2, 0]))",
        _cg("target", "cpu", "cuda:0", "wrapper_CUDA_nll_loss_forward"),
    ),
    Case(
        "mse_loss_cpu_target",
        G_OPS,
        TI,
        "F.mse_loss(torch.randn(4, device=d0), torch.randn(4))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "bce_logits_cpu_labels",
        G_OPS,
        TI,
        "F.binary_cross_entropy_with_logits(torch.randn(4, device=d0), torch.ones(4))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "bce_logits_cpu_pos_weight",
        G_OPS,
        TI,
        "nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.]))(torch.randn(4, 1, device=d0), "
        "torch.ones(4, 1, device=d0))",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "lstm_cpu_h0",
        G_OPS,
        RNN,
        "nn.LSTM(4, 5).to(d0)(torch.randn(3, 2, 4, device=d0), "
        "(torch.zeros(1, 2, 5), torch.zeros(1, 2, 5)))",
        "Input and hidden tensors are not at the same device, found input tensor at cuda:0 "
        "and hidden tensor at cpu",
    ),
    Case(
        "gru_cpu_input",
        G_OPS,
        RNN,
        "nn.GRU(4, 5).to(d0)(torch.randn(3, 2, 4))",
        "Input and parameter tensors are not at the same device, found input tensor at cpu "
        "and parameter tensor at cuda:0",
    ),
    Case(
        "pack_padded_batch_sizes_on_cpu",
        G_OPS,
        PACK,
        "p = nn.utils.rnn.pack_padded_sequence(torch.randn(5, 3, 2, device=d0), "
        "torch.tensor([5, 3, 2]))",
        check="p.batch_sizes.device.type == 'cpu' and p.data.is_cuda",
    ),
    Case(
        "lstm_packed_runs",
        G_OPS,
        PACK,
        "p = nn.utils.rnn.pack_padded_sequence(torch.randn(5, 3, 2, device=d0), [5, 3, 2]); "
        "o, _ = nn.LSTM(2, 4).to(d0)(p); "
        "y, n = nn.utils.rnn.pad_packed_sequence(o)",
        check="y.is_cuda and n.device.type == 'cpu'",
    ),
    Case(
        "conv2d_cpu_input",
        G_OPS,
        CONV,
        "nn.Conv2d(3, 4, 3).to(d0)(torch.randn(2, 3, 8, 8))",
        "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the "
        "same or input should be a MKLDNN tensor and weight is a dense tensor",
    ),
    Case(
        "adam_foreach_cpu_state",
        G_OPS,
        f"{OPTIM}; torch/optim/adam.py: _multi_tensor_adam (_foreach_lerp_); {TI}",
        "m = nn.Linear(2, 2); o = torch.optim.Adam(m.parameters()); "
        "m(torch.randn(1, 2)).sum().backward(); o.step(); sd = o.state_dict(); "
        "o2 = torch.optim.Adam(m.parameters()); o2.load_state_dict(sd); m.to(d0); "
        "m(torch.randn(1, 2, device=d0)).sum().backward(); o2.step()",
        _TI + "cuda:0 and cpu!",
    ),
    Case(
        "numpy_of_cuda_tensor",
        G_OPS,
        NUMPY,
        "torch.ones(2, device=d0).numpy()",
        "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
        "tensor to host memory first.",
        exc="TypeError",
    ),
]


def run_case(case: Case, d0: str = "cuda:0", d1: str = "cuda:1") -> dict[str, Any]:
    """Run one case in this process (torch must already see the GPUs)."""
    import io

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    ns: dict[str, Any] = {"torch": torch, "nn": nn, "F": F, "io": io, "d0": d0, "d1": d1}
    got: str | None = None
    exc: str | None = None
    ok = True
    try:
        exec(compile(case.code, f"<battery {case.name}>", "exec"), ns)
        if case.check is not None:
            ok = bool(eval(case.check, ns))
    except Exception as e:
        got = str(e).split("\n", 1)[0]
        exc = type(e).__name__
        if case.expect is None:
            got += " | " + traceback.format_exc(limit=-3).replace("\n", " / ")
    expect = expected_text(case, torch.cuda.device_count())
    passed = got is None and ok if expect is None else got == expect and exc == case.exc
    return {"case": asdict(case), "expect": expect, "got": got, "exc": exc, "passed": passed}


def expected_text(case: Case, gpus: int) -> str | None:
    return None if case.expect is None else case.expect.replace("{ngpus}", str(gpus))


def run_all(max_gpus: int = 8) -> list[dict[str, Any]]:
    return [run_case(c) for c in CASES if c.gpus <= max_gpus]


def sizes() -> Counter[str]:
    """Probes per group."""
    return Counter(c.group for c in CASES)


if __name__ == "__main__":
    print(json.dumps(run_all()))
