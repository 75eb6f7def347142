"""The one table of PyTorch (and neighbouring library) names the analyses and passes look for:
factories, dtypes, layers, losses, loaders, optimizers, trainers, and the tensor methods whose
result stays on (or leaves) the receiver's device."""

from __future__ import annotations

from collections.abc import Iterable


def tails(*tables: Iterable[str]) -> frozenset[str]:
    """The last parts of the dotted names in `tables` (`torch.zeros` -> `zeros`): the cheap
    syntactic candidates a pass checks before it resolves a name."""
    return frozenset(name.rsplit(".", 1)[1] for table in tables for name in table)


#: The factories that draw random numbers (`torch.<name>`); RANDOM_FUNCTIONS takes them too.
_RANDOM_FACTORIES = ("rand", "randn", "randint", "randperm")
#: Signal windows (`torch.hann_window(n_fft)`): made on the CPU unless given `device=`, like any
#: factory, and often stored by spectrogram and STFT layers.
_WINDOW_FACTORIES = (
    "hann_window",
    "hamming_window",
    "blackman_window",
    "bartlett_window",
    "kaiser_window",
)
#: `torch.<name>_like` factories: a new tensor shaped (and placed) like their argument.
_LIKE_FACTORIES = (
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand_like",
    "randn_like",
)
#: Tensor methods that reshape their receiver: a view or copy on its device, sized by their
#: arguments.
_RESHAPING_METHODS = ("unsqueeze", "squeeze", "view", "reshape", "transpose", "permute")

TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "arange",
        "zeros",
        "ones",
        "full",
        "empty",
        "eye",
        "linspace",
        "logspace",
        *_RANDOM_FACTORIES,
        "tensor",
        "as_tensor",
        *_WINDOW_FACTORIES,
        "tril_indices",
        "triu_indices",
    )
)
#: Factories whose first argument is data, where a non-container argument is a 0-dim scalar.
DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor"})

#: Legacy typed constructors: CPU-only, they take no `device=`; the fix appends `.to(device)`.
LEGACY_CONSTRUCTORS = frozenset(
    f"torch.{name}"
    for name in (
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "BFloat16Tensor",
        "ByteTensor",
        "CharTensor",
        "ShortTensor",
        "IntTensor",
        "LongTensor",
        "BoolTensor",
    )
)
#: Sparse constructors (`torch.sparse_coo_tensor(indices, values, size)`, the legacy
#: `torch.sparse.FloatTensor(...)`): tensors built where their parts are, so none is a CPU
#: factory to give a device.
SPARSE_CONSTRUCTORS = frozenset(
    {
        "torch.sparse_coo_tensor",
        "torch.sparse_csr_tensor",
        *(f"torch.sparse.{name}" for name in ("FloatTensor", "DoubleTensor", "LongTensor")),
    }
)

#: Legacy typed constructors of `torch.cuda`: they allocate on the current CUDA device.
CUDA_LEGACY_CONSTRUCTORS = frozenset(
    "torch.cuda." + name.rsplit(".", 1)[1] for name in LEGACY_CONSTRUCTORS if name != "torch.Tensor"
)
#: The dtype each typed constructor makes, as a `torch` attribute.
LEGACY_DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}

#: Bases (besides anything under torch.nn) whose subclasses are model code.
MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "transformers.PreTrainedModel",
    }
)
#: Model bases that already provide a correct `self.device` property.
BASES_WITH_DEVICE_PROPERTY = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "transformers.PreTrainedModel",
    }
)
DATASET_BASES = frozenset(
    {
        "torch.utils.data.Dataset",
        "torch.utils.data.IterableDataset",
        "torch.utils.data.dataset.Dataset",
        "torch.utils.data.dataset.IterableDataset",
    }
)

#: torch.nn layers and the attribute of a parameter that always exists on them.
LAYER_PARAMETER = {
    **{
        f"torch.nn.{name}": "weight"
        for name in (
            "Linear",
            "Bilinear",
            "Embedding",
            "EmbeddingBag",
            "Conv1d",
            "Conv2d",
            "Conv3d",
            "ConvTranspose1d",
            "ConvTranspose2d",
            "ConvTranspose3d",
            "PReLU",
        )
    },
    **{f"torch.nn.{name}": "weight_ih_l0" for name in ("LSTM", "GRU", "RNN")},
    **{f"torch.nn.{name}": "weight_ih" for name in ("LSTMCell", "GRUCell", "RNNCell")},
    "torch.nn.MultiheadAttention": "out_proj.weight",
}
#: `torch.nn` layers whose call returns one tensor (not a tuple like `nn.LSTM`, nor what a
#: container's members return).
SINGLE_TENSOR_LAYERS = frozenset(
    f"torch.nn.{name}"
    for name in (
        *("Linear", "Bilinear", "Identity", "Embedding", "EmbeddingBag", "Flatten", "Unflatten"),
        *(
            f"{kind}{n}d"
            for kind in ("Conv", "ConvTranspose", "BatchNorm", "InstanceNorm")
            for n in (1, 2, 3)
        ),
        *(f"{kind}{n}d" for kind in ("AvgPool", "AdaptiveAvgPool") for n in (1, 2, 3)),
        *("LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm", "Upsample", "PixelShuffle"),
        *("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"),
        *("ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish"),
        *("Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "Hardswish", "Hardtanh"),
        *("GRUCell", "RNNCell"),
    )
)
RECURRENT_LAYERS = frozenset(
    f"torch.nn.{name}" for name in ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell")
)

#: Tensor attributes and methods that read metadata (sizes, device, dtype), not values.
_TENSOR_METADATA = frozenset(
    {
        "device",
        "dim",
        "dtype",
        "get_device",
        "is_cuda",
        "ndim",
        "ndimension",
        "numel",
        "shape",
        "size",
    }
)
#: Tensor attributes read without a call (`x.shape`): a name read this way is a tensor.
TENSOR_PROPERTIES = frozenset({"shape", "dtype", "ndim", "is_cuda", "T", "mT"})
#: Tensor attributes and methods whose use marks a name as a tensor.
TENSOR_MEMBERS = _TENSOR_METADATA | frozenset(
    {
        "bmm",
        "chunk",
        "contiguous",
        "expand",
        "expand_as",
        "flatten",
        "float",
        "half",
        "long",
        "masked_fill",
        "masked_fill_",
        "matmul",
        "mean",
        "narrow",
        "new_empty",
        "new_full",
        "new_ones",
        "new_tensor",
        "new_zeros",
        "permute",
        "repeat",
        "reshape",
        "softmax",
        "split",
        "squeeze",
        "sum",
        "t",
        "transpose",
        "type_as",
        "unsqueeze",
        "view",
    }
)
#: Methods that return a tensor on the receiver's device: the value flows through them.
SAME_DEVICE_METHODS = frozenset(
    {
        *_RESHAPING_METHODS,
        "contiguous",
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "bool",
        "byte",
        "repeat",
        "expand",
        "expand_as",
        "flatten",
        "clone",
        "detach",
        "t",
        "T",
        "mT",
        "triu",
        "tril",
        "fill_",
        "masked_fill",
        "masked_fill_",
        "type",
        "type_as",
        "unsqueeze_",
        "view_as",
        "reshape_as",
        "abs",
        "neg",
        "exp",
        "log",
        "sqrt",
        "pow",
        "sin",
        "cos",
        "logical_not",
        "cumsum",
        "requires_grad_",
        "index_select",
        "gather",
        "where",
        "log_softmax",
        "softmax",
        "sigmoid",
        "clamp",
        "squeeze_",
        "narrow",
        "select",
        "masked_select",
        "mean",
        "sum",
        "argmax",
    }
)
#: torch functions that return a tensor on their first argument's device.
SAME_DEVICE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "triu",
        "tril",
        "exp",
        "log",
        "sin",
        "cos",
        "sqrt",
        "abs",
        "flip",
        "roll",
        "cumsum",
        "outer",
        "unsqueeze",
        "squeeze",
        "transpose",
        "logical_not",
        "pow",
    )
)
#: Methods whose result leaves the device world: a factory feeding them needs no device.
LEAVES_DEVICE_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
#: Calls that state a device explicitly; a factory already moved by them is not DF101's business.
MOVE_METHODS = frozenset({"to", "cuda", "cpu", "type_as"})
#: Tensor methods whose result is on the tensor's device, whatever their arguments (not
#: `.type(...)`, which may name a CUDA or a CPU type).
DEVICE_KEEPING_METHODS = SAME_DEVICE_METHODS - MOVE_METHODS - {"type"}
#: Fields of the outputs of Hugging Face models (`ModelOutput`): read from what a model returned.
MODEL_OUTPUT_FIELDS = frozenset(
    {"logits", "loss", "last_hidden_state", "past_key_values", "hidden_states", "attentions"}
)
#: Members of a model that neither move it nor hand it elsewhere.
MODEL_MEMBERS_KEEPING_PLACE = frozenset(
    {"eval", "train", "parameters", "named_parameters", "state_dict", "load_state_dict",
     "requires_grad_", "zero_grad", "modules", "children", "config", "half", "float"}
)  # fmt: skip
#: Library functions that return their first argument on the device of the second:
#: detectron2's trace-friendly `move_device_like(src, dst)`, accelerate's
#: `send_to_device(tensor, device)`.
LIBRARY_MOVE_HELPERS = frozenset(
    {
        "detectron2.layers.wrappers.move_device_like",
        "detectron2.layers.move_device_like",
        "accelerate.utils.send_to_device",
        "accelerate.utils.operations.send_to_device",
    }
)
#: Tensor members whose value is not a tensor (sizes, metadata, Python numbers).
NON_TENSOR_MEMBERS = _TENSOR_METADATA | frozenset(
    {
        "data_ptr",
        "element_size",
        "item",
        "layout",
        "nelement",
        "requires_grad",
        "stride",
        "tolist",
    }
)
#: Methods whose arguments are sizes, dims or dtypes, never tensors the value meets.
SHAPE_ARGUMENT_METHODS = frozenset(
    {
        *_RESHAPING_METHODS,
        "repeat",
        "expand",
        "flatten",
        "narrow",
        "chunk",
        "split",
        "float",
        "double",
        "half",
        "long",
        "int",
        "bool",
        "byte",
        "type",
        "contiguous",
        "triu",
        "tril",
        "cumsum",
        "sum",
        "mean",
        "softmax",
        "log_softmax",
        "argmax",
        "max",
        "min",
        "roll",
        "flip",
        "unfold",
        "requires_grad_",
        "fill_",
        "clone",
        "detach",
        "pow",
    }
)
#: Methods that give one tensor on the receiver's device and meet no other tensor: a value
#: passed through them is still to be placed by whatever move follows.
KEEPING_AND_MEETING_NONE = SHAPE_ARGUMENT_METHODS - {"chunk", "split", "max", "min", "type"}
#: torch functions whose positional arguments are tensors.
TENSOR_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "matmul",
        "mm",
        "bmm",
        "mul",
        "add",
        "sub",
        "div",
        "sigmoid",
        "tanh",
        "relu",
        "softmax",
        "log_softmax",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "abs",
        "sum",
        "mean",
        "max",
        "min",
        "where",
        "triu",
        "tril",
        "clamp",
        "masked_fill",
        "gather",
        "index_select",
        "cumsum",
        "flatten",
        "transpose",
        "squeeze",
        "unsqueeze",
        "sin",
        "cos",
        "pow",
        "norm",
        "topk",
        "argmax",
        "argsort",
        "sort",
        "cumprod",
        "logsumexp",
        "maximum",
        "minimum",
        "dot",
        "cdist",
        "diag",
        "addmm",
        "baddbmm",
        "bucketize",
        "searchsorted",
        "stft",
        "istft",
        # Every positional argument a tensor (no sizes, dims or scalars among them).
        "isin",
        "masked_select",
        "outer",
        "kron",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
        "isnan",
        "isinf",
        "isfinite",
        "nonzero",
        "sign",
        "floor",
        "ceil",
        "neg",
        "reciprocal",
        "square",
        "log1p",
        "expm1",
        "erf",
        "mv",
        *_LIKE_FACTORIES,
    )
)

# -- script-level passes (DF301-DF305) -------------------------------------------------------------

#: Qualified names whose presence means the script runs as one process of several.
DISTRIBUTED_MARKERS = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.init_process_group",
        "torch.distributed.get_rank",
        "torch.distributed.barrier",
        "torch.distributed.launch",
        "torch.distributed.run",
        "torch.multiprocessing.spawn",
        "accelerate.Accelerator",
        "accelerate.PartialState",
        "accelerate.notebook_launcher",
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        # TRL's trainers run on accelerate: one process per GPU under `accelerate launch`.
        "trl.PPOTrainer",
        "trl.SFTTrainer",
        "trl.DPOTrainer",
        "trl.RewardTrainer",
        "trl.GRPOTrainer",
    }
)
#: `torch.<dtype>` names: `.to(torch.float16)` changes the dtype, not the device.
TORCH_DTYPES = frozenset(
    f"torch.{name}"
    for name in (
        "float",
        "float16",
        "float32",
        "float64",
        "half",
        "double",
        "bfloat16",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "long",
        "short",
        "uint8",
        "bool",
        "complex64",
        "complex128",
        "cfloat",
        "cdouble",
        "float8_e4m3fn",
        "float8_e5m2",
    )
)
#: Optimizers whose constructor creates per-parameter state on the parameter's current device.
EAGER_STATE_OPTIMIZERS = frozenset({"torch.optim.Adagrad", "torch.optim.adagrad.Adagrad"})
#: Learning-rate schedulers and AMP grad scalers: state that is restored next to the optimizer's.
GRAD_SCALERS = frozenset(
    {
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.GradScaler",
    }
)
#: Loss classes holding class weights as buffers: class -> (keyword, positional index) pairs.
WEIGHTED_LOSSES = {
    "torch.nn.CrossEntropyLoss": (("weight", 0),),
    "torch.nn.NLLLoss": (("weight", 0),),
    "torch.nn.BCELoss": (("weight", 0),),
    "torch.nn.BCEWithLogitsLoss": (("weight", 0), ("pos_weight", 4)),
    "torch.nn.MultiLabelSoftMarginLoss": (("weight", 0),),
    "torch.nn.MultiMarginLoss": (("weight", 2),),
}
#: Functional losses: function -> (keyword, positional index) pairs of their weight tensors.
WEIGHTED_FUNCTIONAL_LOSSES = {
    "torch.nn.functional.cross_entropy": (("weight", 2),),
    "torch.nn.functional.nll_loss": (("weight", 2),),
    "torch.nn.functional.binary_cross_entropy": (("weight", 2),),
    "torch.nn.functional.binary_cross_entropy_with_logits": (("weight", 2), ("pos_weight", 6)),
    "torch.nn.functional.multilabel_soft_margin_loss": (("weight", 2),),
    "torch.nn.functional.multi_margin_loss": (("weight", 4),),
}

#: Tensor-producing torch functions beyond the factories (their result is a new tensor).
TENSOR_PRODUCING_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "from_numpy",
        *_LIKE_FACTORIES,
        "randint_like",
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "log2",
        "log10",
        "sqrt",
        "rsqrt",
        "pow",
        "outer",
        "ger",
        "cat",
        "concat",
        "concatenate",
        "stack",
        "hstack",
        "vstack",
        "triu",
        "tril",
        "matmul",
        "mm",
        "bmm",
        "einsum",
        "where",
        "meshgrid",
        "cartesian_prod",
        "cumsum",
        "cumprod",
        "flip",
        "roll",
        "abs",
        "neg",
        "reciprocal",
        "sigmoid",
        "tanh",
        "softmax",
        "log_softmax",
        "clamp",
        "clip",
        "floor",
        "ceil",
        "round",
        "diag",
        "diag_embed",
        "block_diag",
        "kron",
        "repeat_interleave",
        "tile",
        "polar",
        "complex",
        "view_as_real",
        "view_as_complex",
        "fft.fft",
        "fft.rfft",
        "unsqueeze",
        "squeeze",
        "transpose",
        "reshape",
        "flatten",
        "t",
        "mul",
        "add",
        "sub",
        "div",
        "true_divide",
        "maximum",
        "minimum",
        "logical_not",
        "bernoulli",
        "multinomial",
        "normal",
        "tensor_split",
        "erf",
        "sign",
        "atan2",
        "arccos",
        "acos",
        "asin",
        "atan",
        # Linear algebra that returns one tensor (not `eigh`'s or `qr`'s pairs).
        "inverse",
        "pinverse",
        "det",
        "logdet",
        "trace",
        "cholesky",
        "cholesky_solve",
        "cholesky_inverse",
        "matrix_exp",
        "linalg.inv",
        "linalg.pinv",
        "linalg.det",
        "linalg.cholesky",
        "linalg.solve",
        "linalg.matrix_power",
        "linalg.matrix_exp",
        # Reductions that return one tensor (not `torch.max(x, dim)`'s values and indices).
        "mean",
        "sum",
        "prod",
        "std",
        "var",
        "norm",
        "logsumexp",
        "amax",
        "amin",
        "argmax",
        "argmin",
        "relu",
        "square",
        "log1p",
        "expm1",
        "clone",
    )
)
#: `torch.max(a, b)` of two tensors is their element-wise maximum; with a dimension it is a
#: (values, indices) pair.
PAIRWISE_OR_REDUCING = frozenset({"torch.max", "torch.min"})
#: Tensor methods whose result is not a tensor.
NON_TENSOR_METHODS = NON_TENSOR_MEMBERS | frozenset(
    {
        "numpy",
        "tolist",
        "item",
        "data_ptr",
        "storage",
        "untyped_storage",
        "is_contiguous",
        "is_floating_point",
        "equal",
        "allclose",
        "any_",
        "__len__",
        "chunk",
        "split",
        "unbind",
    }
)
#: Factories whose result is on the CPU unless `device=` says otherwise.
CPU_SOURCES = TENSOR_FACTORIES | LEGACY_CONSTRUCTORS | {"torch.from_numpy"}
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
#: torch functions whose list argument puts every element side by side on one device.
CONCATENATIONS = frozenset(
    f"torch.{name}"
    for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack")
)

# -- modules -------------------------------------------------------------------------------------

#: Methods of nn.Module that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "train",
        "eval",
        "requires_grad_",
        "type",
        "apply",
        "xpu",
        "mps",
        "to_empty",
    }
)
#: Methods only an `nn.Module` has: an object they are called on is a model.
MODULE_ONLY_METHODS = frozenset(
    {"load_state_dict", "state_dict", "parameters", "named_parameters", "zero_grad"}
)
#: NumPy functions that read their first argument as an array (a CUDA tensor fails there).
NUMPY_ARRAY_FUNCTIONS = frozenset(
    f"numpy.{name}"
    for name in (
        "sqrt",
        "exp",
        "log",
        "log2",
        "log10",
        "abs",
        "absolute",
        "square",
        "array",
        "asarray",
        "sum",
        "mean",
        "std",
        "var",
        "median",
        "max",
        "min",
        "argmax",
        "argmin",
        "round",
        "clip",
        "squeeze",
        "transpose",
        "ravel",
        "isnan",
        "isinf",
    )
)
#: Functions that take a module and return it (changed in place or wrapped).
MODULE_RETURNING_WRAPPERS = frozenset(
    {
        "torch.nn.utils.weight_norm",
        "torch.nn.utils.spectral_norm",
        "torch.nn.utils.parametrizations.weight_norm",
        "torch.nn.utils.parametrizations.spectral_norm",
        "torch.nn.utils.parametrizations.orthogonal",
        "torch.nn.utils.parametrize.register_parametrization",
    }
)
#: torch.nn classes that are not modules (or hold no device state worth a container).
NON_MODULE_CLASSES = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.parameter.Parameter",
        "torch.nn.UninitializedParameter",
        "torch.nn.UninitializedBuffer",
        "torch.nn.Buffer",
        "torch.nn.parameter.Buffer",
        "torch.nn.ParameterList",
        "torch.nn.ParameterDict",
    }
)
#: torch.nn layers with state (parameters or buffers) besides those in LAYER_PARAMETER.
STATEFUL_LAYERS = frozenset(LAYER_PARAMETER) | frozenset(
    f"torch.nn.{name}"
    for name in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "SyncBatchNorm",
        "LayerNorm",
        "GroupNorm",
        "RMSNorm",
        "LazyLinear",
        "LazyConv1d",
        "LazyConv2d",
        "LazyConv3d",
        "Transformer",
        "TransformerEncoder",
        "TransformerDecoder",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
        "Sequential",
        "ModuleList",
        "ModuleDict",
    )
)

#: The attribute name an engineer gives a layer of each class (`self.bn1`, `self.fc`); other
#: classes get their name in snake case.
LAYER_ATTRIBUTE_STEMS: dict[str, str] = {
    **{f"torch.nn.{name}": "bn" for name in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")},
    "torch.nn.SyncBatchNorm": "bn",
    "torch.nn.LayerNorm": "ln",
    "torch.nn.GroupNorm": "gn",
    "torch.nn.RMSNorm": "norm",
    **{f"torch.nn.InstanceNorm{d}d": "norm" for d in (1, 2, 3)},
    "torch.nn.Linear": "fc",
    "torch.nn.LazyLinear": "fc",
    **{f"torch.nn.{kind}Conv{d}d": "conv" for kind in ("", "Lazy") for d in (1, 2, 3)},
    **{f"torch.nn.ConvTranspose{d}d": "deconv" for d in (1, 2, 3)},
    "torch.nn.Embedding": "embedding",
    "torch.nn.LSTM": "lstm",
    "torch.nn.GRU": "gru",
}

# -- losses --------------------------------------------------------------------------------------

#: `nn.*Loss` classes called as `loss(input, target)`; CTC and the pairwise losses are left out.
INPUT_TARGET_LOSS_CLASSES = frozenset(
    f"torch.nn.{name}"
    for name in (
        "L1Loss",
        "MSELoss",
        "CrossEntropyLoss",
        "NLLLoss",
        "NLLLoss2d",
        "PoissonNLLLoss",
        "KLDivLoss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "HuberLoss",
        "SmoothL1Loss",
        "SoftMarginLoss",
        "MultiLabelSoftMarginLoss",
        "MultiLabelMarginLoss",
        "MultiMarginLoss",
        "HingeEmbeddingLoss",
    )
)
#: `torch.gather(input, dim, index)`: picks the logits of the labels (`get_batch_logps`); the
#: index must be on the input's device.
GATHER_FUNCTION = "torch.gather"
#: `F.*` losses called as `loss(input, target, ...)`.
INPUT_TARGET_LOSS_FUNCTIONS = frozenset(
    f"torch.nn.functional.{name}"
    for name in (
        "l1_loss",
        "mse_loss",
        "cross_entropy",
        "nll_loss",
        "poisson_nll_loss",
        "kl_div",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "huber_loss",
        "smooth_l1_loss",
        "soft_margin_loss",
        "multilabel_soft_margin_loss",
        "multilabel_margin_loss",
        "multi_margin_loss",
        "hinge_embedding_loss",
    )
)

# -- data, models and training scripts -----------------------------------------------------------

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: Datasets that serve slices of the tensors they are given, on those tensors' device.
TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)
#: Calls that make a batch's tensors on the CPU (without `device=`): an iterator class built
#: on them serves CPU batches.
CPU_BATCH_MAKERS = frozenset(
    {"torch.tensor", "torch.from_numpy", "torch.LongTensor", "torch.FloatTensor", "torch.Tensor"}
    | {"torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.arange"}
)
#: Calls that wrap a model and keep it on the device it was moved to.
MODEL_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.compile",
    }
)
#: Calls that pass an iterable through: `enumerate(loader)`, `tqdm(loader)`.
ITERATION_WRAPPERS = frozenset(
    {
        "enumerate",
        "builtins.enumerate",
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.notebook.tqdm",
        "tqdm.std.tqdm",
        "tqdm",
    }
)
#: Trainers that move every batch to the model's device themselves.
SELF_MOVING_TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "trl.SFTTrainer",
        "trl.DPOTrainer",
        "trl.RewardTrainer",
        "pytorch_lightning.Trainer",
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
    }
)
#: Trainers whose subclasses' methods (`compute_loss`, `prediction_step`) get the model the
#: Trainer placed on its device (`args.device`, one GPU per process under torchrun).
MODEL_PLACING_TRAINERS = frozenset(
    name for name in SELF_MOVING_TRAINERS if name.startswith(("transformers.", "trl."))
)
#: Optimizers outside torch.optim that the script-order analysis knows.
OTHER_OPTIMIZERS = frozenset({"transformers.AdamW", "transformers.optimization.AdamW"})
#: `torch.cuda.amp` names that DF304 rewrites to their device-generic `torch.amp` forms.
CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
CUDA_GRAD_SCALERS = frozenset(
    {"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"}
)
#: Hugging Face base classes of models that may be loaded over several devices (`device_map`).
SPLIT_MODEL_BASES = frozenset(
    {"transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel"}
)
#: Hugging Face model classes a parameter annotation may name: a model of one of these has a
#: `.device` (the device of its first parameters), wherever the caller put it.
DEVICE_CARRYING_MODEL_TYPES = frozenset(
    {
        "transformers.PreTrainedModel",
        "transformers.modeling_utils.PreTrainedModel",
        "transformers.AutoModel",
        "transformers.AutoModelForCausalLM",
        "transformers.AutoModelForSeq2SeqLM",
        "transformers.GenerationMixin",
        "peft.PeftModel",
        "peft.PeftModelForCausalLM",
    }
)
#: Tokenizer methods that return token ids as Python lists (`tokenizer.encode(text)`,
#: tiktoken's `enc.encode(text)`, SentencePiece's `sp.encode_as_ids(text)`).
TOKEN_ID_METHODS = frozenset(
    {"encode", "encode_ordinary", "encode_as_ids", "EncodeAsIds", "convert_tokens_to_ids"}
)
#: Device types a string or `torch.device` may name.
DEVICE_TYPES = ("cuda", "cpu", "mps", "xpu", "meta")
#: Device types that are accelerators (a device string starting with one is not the CPU).
ACCELERATORS = ("cuda", "mps", "xpu", "npu", "hpu", "xla", "gpu")

# -- data pipelines and model placement ---------------------------------------------------

#: `ds.map(f)` and friends (Hugging Face `datasets`, torchdata): `f` prepares data.
MAPPING_METHODS = frozenset({"map", "with_transform", "set_transform", "filter"})
#: Keywords whose value is data-preparation code.
DATA_KEYWORDS = frozenset({"collate_fn", "data_collator", "transform", "target_transform"})
#: Names whose presence shows a model placed over several devices.
PLACEMENT_NAMES = frozenset(
    {
        "device_map",
        "hf_device_map",
        "dispatch_model",
        "infer_auto_device_map",
        "load_checkpoint_and_dispatch",
        "parallelize",
        "device_count",
        "model_parallel",
    }
)
#: Text that any placement evidence contains; a file without all of them is not walked.
PLACEMENT_WORDS = (*PLACEMENT_NAMES, "cuda:", "PreTrainedModel")
#: Methods of a Dataset that run per sample or per batch (in DataLoader workers).
PER_ITEM_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__", "__call__"})

# -- what a moved name holds (DF206) --------------------------------------------------------------

#: Tensor members that `nn.Module`, Hugging Face `BatchEncoding` and PyG `Data` (whose `.to` works
#: in place) do not have: their use on a name shows that it holds a tensor.
TENSOR_ONLY_MEMBERS = frozenset(
    {
        "shape",
        "ndim",
        "dim",
        "numel",
        "is_cuda",
        "get_device",
        "item",
        "numpy",
        "tolist",
        "detach",
        "detach_",
        "clone",
        "contiguous",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "unsqueeze",
        "squeeze",
        "flatten",
        "narrow",
        "repeat",
        "masked_fill",
        "masked_fill_",
        "matmul",
        "bmm",
        "mm",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "clamp",
        "clamp_",
        "long",
        "int",
        "bool",
        "byte",
        "fill_",
        "zero_",
        "copy_",
        "requires_grad",
        "grad",
        "backward",
    }
)
#: Methods whose (first) argument must be a tensor: `y.expand_as(x)` shows that `x` is one.
TENSOR_ARGUMENT_METHODS = frozenset(
    {"expand_as", "view_as", "reshape_as", "type_as", "copy_", "masked_fill", "masked_fill_"}
)
#: Members a tensor does not have (modules, optimizers, trainers): a name using one is not a
#: tensor, whatever else it does.
NOT_TENSOR_MEMBERS = frozenset(
    {
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "state_dict",
        "load_state_dict",
        "eval",
        "train",
        "zero_grad",
        "apply",
        "register_buffer",
        "register_parameter",
        "add_module",
        "module",
        "forward",
        "generate",
        "keys",
        "items",
        "values",
        "edge_index",
        "input_ids",
        "attention_mask",
        "pixel_values",
    }
)
#: `from_pretrained` keywords under which the model is placed as it loads (a device map, 4 or 8
#: bits: such a model refuses `.to()`).
PLACED_AS_LOADED = ("device_map", "load_in_8bit", "load_in_4bit", "quantization_config")
#: Fields of a tokenizer's or processor's output that go to the model with its `input_ids`.
ENCODING_FIELDS = frozenset(
    {
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "position_ids",
        "decoder_input_ids",
        "decoder_attention_mask",
        "pixel_values",
    }
)
# -- objects that live beside the model (metrics, EMA copies, generators, AMP) -------------

#: The package whose classes are metric modules (`torchmetrics.Accuracy`, `MetricCollection`).
METRICS_PACKAGE = "torchmetrics"
#: Metric methods that take the predictions and targets (a metric is also called directly).
METRIC_UPDATE_METHODS = frozenset({"update", "forward"})
#: LightningModule hooks that run once per batch (or per epoch end), and `forward`.
LIGHTNING_STEP_HOOKS = frozenset(
    {"training_step", "validation_step", "test_step", "predict_step", "forward"}
)
#: Lightning's module classes: the trainer moves the batches of its own loops to them.
LIGHTNING_MODULES = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
    }
)
#: `torch.Generator`: created on the CPU unless `device=` says otherwise.
GENERATORS = frozenset({"torch.Generator", "torch._C.Generator"})
#: Random factories and functions that take `generator=`; their device is `device=` (or the
#: default device), not the generator's.
RANDOM_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        *_RANDOM_FACTORIES,
        "normal",
        "bernoulli",
        "multinomial",
        "poisson",
    )
)
#: Tensor methods that draw in place with `generator=`, on the receiver's device.
RANDOM_METHODS = frozenset(
    {
        "normal_",
        "uniform_",
        "random_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "cauchy_",
    }
)
#: Data utilities that draw a permutation with `generator=` on the default device: the CPU,
#: unless `torch.set_default_device` moved it. Value: the arguments that make them draw.
SAMPLING_CALLS = {
    "torch.utils.data.DataLoader": ("shuffle",),
    "torch.utils.data.dataloader.DataLoader": ("shuffle",),
    "torch.utils.data.random_split": (),
    "torch.utils.data.dataset.random_split": (),
    "torch.utils.data.RandomSampler": (),
    "torch.utils.data.sampler.RandomSampler": (),
    "torch.utils.data.SubsetRandomSampler": (),
    "torch.utils.data.sampler.SubsetRandomSampler": (),
}
#: Samplers that draw with a CPU generator of their own and take none from the caller.
OWN_GENERATOR_SAMPLERS = frozenset(
    {
        "torch.utils.data.DistributedSampler",
        "torch.utils.data.distributed.DistributedSampler",
    }
)
#: Calls that change the device new tensors (and the data utilities' permutations) go to.
DEFAULT_DEVICE_SETTERS = frozenset({"torch.set_default_device", "torch.set_default_tensor_type"})
#: `torch.cuda` seeding calls that act on one GPU only.
CUDA_SEEDING = frozenset(
    {"torch.cuda.manual_seed", "torch.cuda.get_rng_state", "torch.cuda.set_rng_state"}
)
#: `copy.deepcopy`: an auxiliary model (EMA, teacher) copied from the model.
DEEP_COPY = frozenset({"copy.deepcopy"})
#: EMA helpers that copy the model and take `device=` for the copy.
EMA_HELPERS = frozenset(
    {
        "timm.utils.ModelEma",
        "timm.utils.ModelEmaV2",
        "timm.utils.ModelEmaV3",
        "timm.utils.model_ema.ModelEma",
        "timm.utils.model_ema.ModelEmaV2",
        "timm.utils.model_ema.ModelEmaV3",
        "torch.optim.swa_utils.AveragedModel",
    }
)
#: EMA helpers whose `load_state_dict` adopts the loaded tensors (where they are) instead of
#: copying them into the tensors it holds: a restore undoes an earlier `ema.to(device)`.
ADOPTING_LOAD_EMAS = frozenset({"diffusers.training_utils.EMAModel", "diffusers.EMAModel"})
#: In-place tensor updates an EMA applies to its copy from the model's tensors (`copy_` is not
#: here: it copies across devices).
IN_PLACE_UPDATES = frozenset(
    {"lerp_", "add_", "sub_", "mul_", "addcmul_", "addcdiv_", "div_", "lerp", "mul", "add"}
)
#: `torch._foreach_*` updates over two lists of tensors (one list per device is required).
FOREACH_UPDATES = frozenset(
    f"torch._foreach_{name}" for name in ("lerp_", "add_", "sub_", "mul_", "addcmul_", "copy_")
)
#: Module methods that give the tensors a model holds.
MODULE_TENSOR_METHODS = frozenset(
    {"parameters", "named_parameters", "buffers", "named_buffers", "state_dict"}
)
#: AMP: every spelling of autocast, and the device type each spelling implies when none is given.
AUTOCASTS = {
    "torch.autocast": None,
    "torch.amp.autocast": None,
    "torch.amp.autocast_mode.autocast": None,
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
}
#: Every spelling of GradScaler and the device type it implies when none is given
#: (`torch.amp.GradScaler()` defaults to "cuda").
GRAD_SCALER_DEFAULTS = {
    "torch.amp.GradScaler": "cuda",
    "torch.amp.grad_scaler.GradScaler": "cuda",
    "torch.GradScaler": "cuda",
    "torch.cuda.amp.GradScaler": "cuda",
    "torch.cuda.amp.grad_scaler.GradScaler": "cuda",
}
#: Deprecated CUDA-only AMP spellings (`torch.cuda.amp.*`).
DEPRECATED_CUDA_AMP = frozenset(
    {
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
    }
)

# -- data-parallel training scripts (DF401) -------------------------------------------------

#: `nn.DataParallel` under each of its names.
DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
#: The functional form, `nn.parallel.data_parallel(module, inputs, device_ids)`: one
#: replication of the module over the GPUs per call.
FUNCTIONAL_DATA_PARALLEL = frozenset(
    {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
)
#: `DistributedDataParallel` under each of its names.
DISTRIBUTED_DATA_PARALLEL = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)
#: Calls that start a script's worker processes themselves.
PROCESS_SPAWNERS = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "torch.multiprocessing.spawn.spawn",
    }
)
#: Calls that write files: in a multi-process run, one process writes and the others would race.
FILE_WRITES = frozenset(
    {
        "torch.save",
        "os.mkdir",
        "os.makedirs",
        "shutil.copyfile",
        "shutil.copy",
        "shutil.copy2",
        "torchvision.utils.save_image",
        "numpy.save",
        "numpy.savez",
        "matplotlib.pyplot.savefig",
    }
)
#: Names scripts give the number of GPUs (`if n_gpu > 1:`, `args.n_gpu`).
GPU_COUNT_NAMES = frozenset({"n_gpu", "n_gpus", "ngpu", "ngpus", "num_gpus", "gpu_count"})
#: Optimizer classes by their last name, from torch.optim and beyond (apex, timm, DeepSpeed).
OPTIMIZER_CLASS_NAMES = frozenset(
    {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "LBFGS", "NAdam",
     "RAdam", "SparseAdam", "Rprop", "ASGD", "Adafactor", "FusedAdam", "FusedLAMB", "Lamb"}
)  # fmt: skip
#: Methods of `logging` and of its loggers that write a record.
LOGGING_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)

#: Loaders of a state dict from a URL, which call `torch.load` with the `map_location` they are
#: given: its position among their arguments (`load_state_dict_from_url(url, model_dir,
#: map_location, ...)`; torchvision re-exports torch.hub's under older paths).
URL_STATE_LOADERS = {
    "torch.hub.load_state_dict_from_url": 2,
    "torch.utils.model_zoo.load_url": 2,
    "torchvision.models.utils.load_state_dict_from_url": 2,
    "torchvision._internally_replaced_utils.load_state_dict_from_url": 2,
}

#: accelerate's `Accelerator`: what its `prepare(...)` returns for a model is on its `.device`.
ACCELERATOR_CLASSES = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
#: CLIP loaders that put the model they return first on their `device=` argument.
CLIP_LOADERS = frozenset(
    {
        "clip.load",
        "clip.clip.load",
        "open_clip.create_model_and_transforms",
        "open_clip.create_model",
    }
)
#: CLIP tokenizers: a CPU tensor of token ids.
CLIP_TOKENIZERS = frozenset({"clip.tokenize", "clip.clip.tokenize", "open_clip.tokenize"})
#: Methods of a CLIP model that run it on what they are given (OpenAI's and open_clip's
#: `encode_*`, Hugging Face's `get_*_features` of CLIP, SigLIP, CLAP and their kin).
CLIP_ENCODERS = frozenset(
    {"encode_text", "encode_image", "get_text_features", "get_image_features"}
    | {"get_audio_features"}
)
#: `torch.distributed` collectives -> the (position, keyword) of each tensor they communicate
#: in place: NCCL takes only CUDA tensors there.
COLLECTIVE_TENSORS: dict[str, tuple[tuple[int, str], ...]] = {
    "torch.distributed.all_reduce": ((0, "tensor"),),
    "torch.distributed.reduce": ((0, "tensor"),),
    "torch.distributed.broadcast": ((0, "tensor"),),
    "torch.distributed.all_gather": ((0, "tensor_list"), (1, "tensor")),
    "torch.distributed.all_gather_into_tensor": ((0, "output_tensor"), (1, "input_tensor")),
    "torch.distributed.reduce_scatter_tensor": ((0, "output"), (1, "input")),
    "torch.distributed.all_to_all_single": ((0, "output"), (1, "input")),
}
