"""Qualified names of the PyTorch (and neighbouring library) objects the passes look for."""

from __future__ import annotations

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
        "rand",
        "randn",
        "randint",
        "randperm",
        "tensor",
        "as_tensor",
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
RECURRENT_LAYERS = frozenset(
    f"torch.nn.{name}" for name in ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell")
)

#: Tensor attributes and methods whose use marks a name as a tensor.
TENSOR_MEMBERS = frozenset(
    {
        "shape",
        "size",
        "device",
        "dtype",
        "dim",
        "ndim",
        "ndimension",
        "numel",
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "transpose",
        "permute",
        "contiguous",
        "float",
        "long",
        "half",
        "masked_fill",
        "masked_fill_",
        "matmul",
        "softmax",
        "sum",
        "mean",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "expand",
        "expand_as",
        "type_as",
        "is_cuda",
        "get_device",
        "flatten",
        "chunk",
        "split",
        "repeat",
        "narrow",
        "bmm",
        "t",
    }
)
#: Methods that return a tensor on the receiver's device: the value flows through them.
SAME_DEVICE_METHODS = frozenset(
    {
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "transpose",
        "permute",
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
#: Tensor members whose value is not a tensor (sizes, metadata, Python numbers).
NON_TENSOR_MEMBERS = frozenset(
    {
        "shape",
        "size",
        "device",
        "dtype",
        "dim",
        "ndim",
        "ndimension",
        "numel",
        "item",
        "tolist",
        "is_cuda",
        "get_device",
        "data_ptr",
        "stride",
        "requires_grad",
        "layout",
        "element_size",
        "nelement",
    }
)
#: Methods whose arguments are sizes, dims or dtypes, never tensors the value meets.
SHAPE_ARGUMENT_METHODS = frozenset(
    {
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "transpose",
        "permute",
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
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_like",
        "rand_like",
        "randn_like",
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
