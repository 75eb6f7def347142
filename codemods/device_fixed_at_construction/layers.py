"""Layers a module's `__init__` builds straight onto a literal GPU.

`self.head = Head(dims).to("cuda")` (or `.cuda()`) in `__init__` pins one layer to the current
CUDA device while the module is built: building it fails on a machine without a GPU, and the
module's layers are on different devices until its caller moves the whole model. A layer is
an attribute built by a call that either constructs a known module or is called as a function
in one of the class's methods (`self.head(x)`: a tensor is not callable), so layers whose
class comes from a star import count too. `__init__` moves that name several GPUs are model
parallelism by hand, and stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.modules import self_attribute
from devfix.codemods.analysis.moves import gpu_index, literal_gpu_move

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


@dataclass(frozen=True)
class LayerOnAGpu:
    #: `Head(dims).to("cuda")`: the move whose receiver builds the layer.
    move: cst.Call
    #: `Head(dims)`: the layer as built.
    built: cst.Call
    attribute: str
    #: The GPU as a message shows it: `"cuda"`, `` `.cuda()` ``.
    gpu: str


class LayersBuiltOnAGpu(Analysis):
    """The layers of a module's `__init__` built onto one literal GPU."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        #: id of an `__init__` -> the GPUs it builds layers on (None: the current one)
        self._gpus: dict[int, set[int | None]] = {}

    def placed(self, move: cst.Call) -> LayerOnAGpu | None:
        """`move` when it is `self.<layer> = <built>.to("cuda")` in a module's `__init__`,
        and every layer `__init__` places goes to that same GPU."""
        found = self._layer_move(move)
        if found is None:
            return None
        init = self.scopes.enclosing_function(move)
        assert init is not None
        gpus = self._gpus.get(id(init))
        if gpus is None:
            gpus = self._gpus[id(init)] = {
                _index(other.move)
                for call in self.context.of_type(init.body, cst.Call)
                if (other := self._layer_move(call)) is not None
            }
        return found if len(gpus) == 1 else None

    def _layer_move(self, move: cst.Call) -> LayerOnAGpu | None:
        gpu = literal_gpu_move(move)
        func = move.func
        if gpu is None or not isinstance(func, cst.Attribute):
            return None
        built = func.value
        assign = self.context.parent(move)
        if (
            not isinstance(built, cst.Call)
            or not isinstance(assign, cst.Assign)
            or assign.value is not move
            or len(assign.targets) != 1
        ):
            return None
        attribute = self_attribute(assign.targets[0].target)
        function = self.facts.modules.enclosing_function(move)
        if (
            attribute is None
            or function is None
            or function.name != "__init__"
            or function.owner is None
            or not function.owner.is_module
        ):
            return None
        called = self.facts.modules.called_attributes(function.owner.node)
        if self.facts.modules.constructed_module(built) is None and attribute not in called:
            return None
        return LayerOnAGpu(move=move, built=built, attribute=attribute, gpu=gpu)


def _index(move: cst.Call) -> int | None:
    """The GPU `.cuda(1)` / `.to("cuda:1")` names; None for the current one."""
    return gpu_index(move.args[0].value) if move.args else None
