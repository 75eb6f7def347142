"""The one device a script chooses, and the legacy tensor constructors it may build on it.

A script (or notebook) that moves things only to the one device variable it binds, with nothing
that spreads the work over several devices, runs its model code on that device; a legacy
constructor (`torch.cuda.FloatTensor(...)`) stands for the factory its arguments ask for:
`tensor` for data, `empty` for sizes, `zeros` for sizes followed by `.zero_()`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import FunctionInfo
from devfix.codemods.analysis.names import code_of, dotted_name, name_assignment
from devfix.codemods.analysis.torch_names import LAYER_PARAMETER, MODEL_WRAPPERS
from devfix.context import FileContext

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


class OneDeviceScript(Analysis):
    """Whether the file is a script that runs on the one device it chooses itself."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._one_device: bool | None = None

    def runs_on_one_device(self) -> bool:
        """The file is a script (or notebook) that runs on the one device it chooses itself:
        code outside classes moves things only to one device variable it binds
        (`device = torch.device(...)`; `model.to(device)`), and nothing spreads the work over
        several devices (DataParallel, `data_parallel`, DDP, torchrun, `Trainer`, device maps,
        `device_count()`, a GPU other than `cuda:0`). Model code of such a file that uses a
        device stored at construction uses that same device."""
        if self._one_device is None:
            self._one_device = self._one_device_script()
        return self._one_device

    def _one_device_script(self) -> bool:
        if self.facts.flow.runs_on_several_gpus() or self.facts.flow.places_over_devices():
            return False
        chosen: set[str] = set()
        for node in self.context.subtree(self.context.module):
            if not isinstance(node, cst.Call):
                continue
            wrapper = self.names.qualified_name(node.func)
            if wrapper in MODEL_WRAPPERS and wrapper.endswith("DataParallel"):
                return False
            if self.facts.modules.enclosing_class(node) is not None:
                continue
            function_info = self.facts.modules.enclosing_function(node)
            if function_info is not None and function_info.is_model_code:
                continue  # model code: the moves under judgement, not the script's choice
            move = self.facts.moves.move_of(node)
            if move is None or move.kind is None:
                continue
            if move.method == "cuda" or move.expression is None:
                return False  # the current device, chosen elsewhere
            name = dotted_name(move.expression)
            if name is None or name.endswith(".device"):
                continue  # `x.to(y.device)`: follows a tensor
            function = function_info.node if function_info is not None else None
            root = name.split(".")[0]
            if function is not None and any(
                binding.kind == "param"
                for binding in self.scopes.table(function).bindings.get(root, [])
            ):
                continue  # a helper's parameter: its callers choose
            chosen.add(name)
        return len(chosen) == 1


def legacy_factory(context: FileContext, call: cst.Call) -> tuple[str, cst.Call] | None:
    """The factory that a legacy constructor's plain positional arguments
    (`torch.cuda.FloatTensor(...)`) ask for, and the call it replaces: `tensor` for data (a lone
    list or tuple), `empty` for sizes, `zeros` for sizes zeroed at once (`.zero_()`, whose call
    it replaces); None when they may be either (a lone name is data or a size)."""
    positional = [arg.value for arg in call.args]
    if len(positional) == 1 and isinstance(positional[0], (cst.List, cst.Tuple)):
        return "tensor", call
    if not (
        (len(positional) > 1 and all(_is_size(value) for value in positional))
        or (len(positional) == 1 and _is_single_size(positional[0]))
    ):
        return None
    parent = context.parent(call)
    zero = context.parent(parent) if parent is not None else None
    if (
        isinstance(parent, cst.Attribute)
        and parent.attr.value == "zero_"
        and isinstance(zero, cst.Call)
        and not zero.args
    ):
        return "zeros", zero
    return "empty", call


def _is_size(node: cst.BaseExpression) -> bool:
    """A size argument: a number, `x.size(...)`, `x.shape[...]`, `len(...)`, a plain name, or
    arithmetic of them (data is a list or tuple, passed alone)."""
    if isinstance(node, (cst.Integer, cst.Name)):
        return True
    if isinstance(node, cst.BinaryOperation):
        return _is_size(node.left) and _is_size(node.right)
    if isinstance(node, cst.Subscript):
        return _is_size(node.value) or (
            isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape"
        )
    if isinstance(node, cst.Attribute):
        return node.attr.value == "shape" or _is_size(node.value)
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "numel"):
            return True
        return isinstance(node.func, cst.Name) and node.func.value in ("len", "int")
    return False


def _is_single_size(node: cst.BaseExpression) -> bool:
    """A lone argument that is surely a size (a lone name could be data as well)."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Attribute):
        return node.attr.value == "shape"
    if isinstance(node, cst.Call):
        return (isinstance(node.func, cst.Attribute) and node.func.attr.value == "size") or (
            isinstance(node.func, cst.Name) and node.func.value == "len"
        )
    return False


def layer_called(
    move: cst.Call, function: FunctionInfo, handed: frozenset[str] = frozenset()
) -> str | None:
    """`self.embedding(ids).to(self.device)`, `self.fc(h).cuda()`: the layer of the module
    (one with parameters, or one of the `handed` attributes: a module the constructor is
    given) whose output the move receives, or None. Only a plain move counts: one that also
    casts (`dtype=`, a second argument) changes more than the device."""
    if not isinstance(move.func, cst.Attribute) or len(move.args) > 1:
        return None
    if any(arg.keyword is not None and arg.keyword.value != "device" for arg in move.args):
        return None
    receiver = move.func.value
    owner = function.owner
    params = [*function.node.params.posonly_params, *function.node.params.params]
    if owner is None or not owner.is_module or not params:
        return None
    if not (isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute)):
        return None
    instance = receiver.func.value
    if not (isinstance(instance, cst.Name) and instance.value == params[0].name.value):
        return None
    attribute = receiver.func.attr.value
    if owner.layers.get(attribute) not in LAYER_PARAMETER and attribute not in handed:
        return None
    return f"{instance.value}.{attribute}"


def guarded_by_is_cuda(move: cst.Call, ancestors: Iterable[cst.CSTNode]) -> str | None:
    """`if x.is_cuda: grid = grid.cuda()`: the tensor whose being on a GPU guards the move (its
    code), or None. Only the nearest `if` counts, and only in its body, not its `else`."""
    inside: cst.CSTNode = move
    for ancestor in ancestors:
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(ancestor, cst.If):
            test = ancestor.test
            if (
                inside is ancestor.body
                and isinstance(test, cst.Attribute)
                and test.attr.value == "is_cuda"
            ):
                return code_of(test.value)
            return None
        inside = ancestor
    return None


def lone_is_cuda_branch(move: cst.Call, guard: cst.If | None) -> cst.SimpleStatementLine | None:
    """`if x.is_cuda: grid = grid.cuda()` with no `else`, the one statement of its body
    binding a name to the move: that statement, which a move to `x.device` makes right on
    every device (on the CPU the name was left unbound, or kept what `.to` gives back)."""
    if guard is None or guard.orelse is not None:
        return None
    body = guard.body
    if not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
        return None
    statement = body.body[0]
    assign = name_assignment(statement)
    if assign is None or assign.value is not move:
        return None
    return cst.ensure_type(statement, cst.SimpleStatementLine)
