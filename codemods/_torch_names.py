"""Qualified names of the PyTorch (and neighbouring library) objects the passes look for."""

from __future__ import annotations

TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "arange", "zeros", "ones", "full", "empty", "eye", "linspace", "logspace",
        "rand", "randn", "randint", "randperm", "tensor", "as_tensor",
    )
)
#: Factories whose first argument is data, where a non-container argument is a 0-dim scalar.
DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor"})

#: Legacy typed constructors: CPU-only, they take no `device=`; the fix appends `.to(device)`.
LEGACY_CONSTRUCTORS = frozenset(
    f"torch.{name}"
    for name in (
        "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor",
        "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "BoolTensor",
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
            "Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d", "Conv3d",
            "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "PReLU",
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
        "shape", "size", "device", "dtype", "dim", "ndim", "ndimension", "numel", "unsqueeze",
        "squeeze", "view", "reshape", "transpose", "permute", "contiguous", "float", "long",
        "half", "masked_fill", "masked_fill_", "matmul", "softmax", "sum", "mean", "new_zeros",
        "new_ones", "new_full", "new_empty", "new_tensor", "expand", "expand_as", "type_as",
        "is_cuda", "get_device", "flatten", "chunk", "split", "repeat", "narrow", "bmm", "t",
    }
)
#: Methods that return a tensor on the receiver's device: the value flows through them.
SAME_DEVICE_METHODS = frozenset(
    {
        "unsqueeze", "squeeze", "view", "reshape", "transpose", "permute", "contiguous",
        "float", "double", "half", "bfloat16", "long", "int", "bool", "byte", "repeat",
        "expand", "expand_as", "flatten", "clone", "detach", "t", "T", "mT", "triu", "tril",
        "fill_", "masked_fill", "masked_fill_", "type", "type_as", "unsqueeze_", "view_as",
        "reshape_as", "abs", "neg", "exp", "log", "sqrt", "pow", "sin", "cos", "logical_not",
        "cumsum", "requires_grad_", "index_select", "gather", "where",
    }
)
#: torch functions that return a tensor on their first argument's device.
SAME_DEVICE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "triu", "tril", "exp", "log", "sin", "cos", "sqrt", "abs", "flip", "roll", "cumsum",
        "outer", "unsqueeze", "squeeze", "transpose", "logical_not", "pow",
    )
)
#: Methods whose result leaves the device world: a factory feeding them needs no device.
LEAVES_DEVICE_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
#: Calls that state a device explicitly; a factory already moved by them is not DF101's business.
MOVE_METHODS = frozenset({"to", "cuda", "cpu", "type_as"})
#: Tensor members whose value is not a tensor (sizes, metadata, Python numbers).
NON_TENSOR_MEMBERS = frozenset(
    {
        "shape", "size", "device", "dtype", "dim", "ndim", "ndimension", "numel", "item",
        "tolist", "is_cuda", "get_device", "data_ptr", "stride", "requires_grad", "layout",
        "element_size", "nelement",
    }
)
#: Methods whose arguments are sizes, dims or dtypes, never tensors the value meets.
SHAPE_ARGUMENT_METHODS = frozenset(
    {
        "unsqueeze", "squeeze", "view", "reshape", "transpose", "permute", "repeat", "expand",
        "flatten", "narrow", "chunk", "split", "float", "double", "half", "long", "int", "bool",
        "byte", "type", "contiguous", "triu", "tril", "cumsum", "sum", "mean", "softmax",
        "log_softmax", "argmax", "max", "min", "roll", "flip", "unfold", "requires_grad_", "fill_",
        "clone", "detach", "pow",
    }
)
