"""DF102: model code that moves tensors to a device fixed outside the call."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import append_keyword, move_to
from devfix.codemods.analysis.devices import Named, Unknown
from devfix.codemods.analysis.modules import FunctionInfo
from devfix.codemods.analysis.moves import gpu_index
from devfix.codemods.analysis.names import call_tail, keyword_argument
from devfix.codemods.analysis.torch_names import (
    CUDA_LEGACY_CONSTRUCTORS,
    LEGACY_DTYPES,
    TENSOR_FACTORIES,
)
from devfix.types import Applicability, Edit

_FACTORY_TAILS = frozenset(name.rsplit(".", 1)[1] for name in TENSOR_FACTORIES)
_CUDA_CONSTRUCTOR_TAILS = frozenset(name.rsplit(".", 1)[1] for name in CUDA_LEGACY_CONSTRUCTORS)


class DeviceFixedAtConstruction(DevicePass):
    """Model code that puts tensors on a device chosen outside the forward pass.

    ## What it does
    Inside the methods of an `nn.Module` (other than `__init__`) and functions that take a
    tensor argument, finds `.to(device)`, `.to(self.device)`, `.cuda()` and `device=` arguments
    whose device is a module-level global, an attribute stored in `__init__`
    (`self.device = device`) or a literal CUDA device (`"cuda:0"`, `torch.device("cuda")`), and
    rewrites them to the device of the tensor the value meets.
    DataParallel-era device ids inside a module or a loss (`.cuda(self.device_ids[0])`,
    `.cuda(0)`, a head that gathers its logits on `self.device_id[0]`): an input a replica
    received (labels scattered into the gathered one-hot) goes to the device of the tensor it
    meets (`label.to(one_hot.device)`); the module's own placement stays. A plain function of a
    training script that offloads its own work to a literal second GPU (`.to("cuda:1")`) is
    DF304's (a deliberate choice, reported without a fix).

    ## Why is this bad?
    The device was fixed when the script started or when the module was built. Under
    `nn.DataParallel` every replica runs the same `forward` on its own GPU, so a tensor sent to
    the global `cuda:0` meets activations on `cuda:1`:
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`. The same code breaks after `model.to("cpu")`, on a machine
    whose only GPU is not `cuda:0`, and on CPU-only machines. A bare `.cuda()` means "the
    current CUDA device", which is `cuda:0` unless `torch.cuda.set_device` was called.

    ## Example
    ```python
    device = torch.device("cuda:0")

    class Decoder(nn.Module):
        def forward(self, x):
            h = torch.zeros(1, x.shape[0], 32).to(device)
            return self.rnn(x, h)
    ```

    ## Use instead
    ```python
    class Decoder(nn.Module):
        def forward(self, x):
            h = torch.zeros(1, x.shape[0], 32).to(x.device)
            return self.rnn(x, h)
    ```

    ## Fix safety
    Safe when the value provably meets the tensor (or the layer) whose device replaces the
    fixed one: on a single device nothing changes, and under DataParallel or after `model.to`
    the error goes away. Unsafe when the only evidence is that the function has a tensor
    argument. When nothing in scope can supply a device, the finding has no fix. A `device`
    property of the class (Lightning's and Hugging Face's `self.device`, or one you define) is
    correct and left alone; so are `.to("cpu")` and `.cpu()`, which are deliberate.

    ## References
    - `torch.nn.DataParallel` docs ("any updates to the running module in forward will be lost").
    - thunlp/OpenPrompt PR#161 (a bare `.cuda()` meant `cuda:0`).
    """

    CODE = "DF102"
    NAME = "device-fixed-at-construction"
    MESSAGE = "model code moves a tensor to a device fixed outside the call"
    FIX_TITLE = "Use the device of the tensor it meets"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("torch",)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A method that spreads its work over the module's own devices (model parallelism):
        its moves stay; an input that meets a value it placed goes to that value's device."""
        function = self.facts.modules.function_info(node)
        if not function.is_model_code:
            return
        owner = self.facts.devices.spread_devices(function)
        if owner is None:
            return
        for value, placed in self.facts.devices.inputs_meeting_placed(function):
            device = f"{placed}.device"
            shown = self.context.module.code_for_node(value)
            self.report(
                value,
                message=(
                    f"`{function.name}` spreads its work over the module's devices (`{owner}`); "
                    f"`{shown}` comes from an input, on the caller's device (under DataParallel, "
                    f"each replica's GPU), and meets `{placed}`, which is on one of them: move it "
                    f"with `.to({device})`"
                ),
                fix_title=f"Use `.to({device})`",
                edits=[Edit(value, move_to(value, cst.parse_expression(device)))],
            )

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail == "to" and isinstance(node.func, cst.Attribute):
            self._check_to(node)
        elif tail == "cuda" and isinstance(node.func, cst.Attribute):
            self._check_cuda(node)
        elif tail in _FACTORY_TAILS:
            self._check_factory(node)
        elif tail in _CUDA_CONSTRUCTOR_TAILS:
            self._check_cuda_constructor(node)

    # -- the three shapes ------------------------------------------------------------------

    def _check_to(self, node: cst.Call) -> None:
        assert isinstance(node.func, cst.Attribute)
        if self._moves_a_module_or_nothing(node):
            return
        device_arg = keyword_argument(node, "device") or next(
            (arg for arg in node.args if arg.keyword is None), None
        )
        if device_arg is None:
            return
        if self.facts.devices.deliberate_offload(node, gpu_index(device_arg.value)):
            return  # a plain function's offload to a second GPU: DF304 reports it
        self._check_argument(node, device_arg)

    def _check_cuda(self, node: cst.Call) -> None:
        assert isinstance(node.func, cst.Attribute)
        if self._moves_a_module_or_nothing(node) or any(a.keyword for a in node.args):
            return
        if node.args and self.facts.devices.deliberate_offload(node, gpu_index(node.args[0].value)):
            return
        function = self._model_function(node)
        if function is None or self._spread_move(node, function):
            return
        receiver = node.func.value
        self._fix(
            node,
            function,
            "`.cuda()` (the current CUDA device)",
            lambda device: cst.Call(
                func=cst.Attribute(value=receiver, attr=cst.Name("to")), args=[cst.Arg(device)]
            ),
        )

    def _check_factory(self, node: cst.Call) -> None:
        device_arg = keyword_argument(node, "device")
        if device_arg is not None and self.qualified_name(node.func) in TENSOR_FACTORIES:
            self._check_argument(node, device_arg)

    def _check_cuda_constructor(self, node: cst.Call) -> None:
        """`torch.cuda.FloatTensor(n, c)` allocates on the current CUDA device: a factory with
        the dtype and the device of the tensor it meets instead."""
        qualified = self.qualified_name(node.func)
        if qualified not in CUDA_LEGACY_CONSTRUCTORS:
            return
        function = self._model_function(node)
        if function is None:
            return
        dtype = LEGACY_DTYPES[qualified.rsplit(".", 1)[1]]
        torch_name, _ = self.facts.names.torch_spelling()
        positional = [arg for arg in node.args if arg.keyword is None]
        if len(positional) != len(node.args) or any(arg.star for arg in node.args):
            return
        target: cst.Call = node
        if len(positional) == 1 and isinstance(positional[0].value, (cst.List, cst.Tuple)):
            factory = "tensor"
        elif (len(positional) > 1 and all(_is_size(arg.value) for arg in positional)) or (
            len(positional) == 1 and _is_single_size(positional[0].value)
        ):
            factory = "empty"
            parent = self.context.parent(node)
            call = self.context.parent(parent) if parent is not None else None
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value == "zero_"
                and isinstance(call, cst.Call)
                and not call.args
            ):
                factory, target = "zeros", call  # `.zero_()` of a new tensor: `torch.zeros`
        else:
            self.report(
                node,
                message=(
                    f"`{qualified}` allocates on the current CUDA device in `{function.name}`; "
                    "its arguments may be sizes or data, so it is left for you to rewrite"
                ),
            )
            return

        def rebuild(device: cst.BaseExpression) -> cst.CSTNode:
            call = node.with_changes(func=cst.parse_expression(f"{torch_name}.{factory}"))
            call = append_keyword(call, "dtype", cst.parse_expression(f"{torch_name}.{dtype}"))
            return append_keyword(call, "device", device)

        self._fix(node, function, f"`{qualified}` (the current CUDA device)", rebuild, target)

    def _check_argument(self, node: cst.Call, device_arg: cst.Arg) -> None:
        """`.to(<device>)` / `device=<device>`: rewritten when the device is fixed outside."""
        function = self._model_function(node)
        if function is None:
            return
        if self._spread_move(node, function):
            return
        fixed = self.facts.devices.fixed_outside(device_arg.value, function)
        if fixed is None:
            return
        if isinstance(fixed, Named) and self.facts.flow.runs_on_one_device():
            return  # the script runs on the one device it stored: right in its configuration
        self._fix(
            node,
            function,
            fixed.evidence,
            lambda device: node.with_changes(
                args=[
                    arg.with_changes(value=device) if arg is device_arg else arg
                    for arg in node.args
                ]
            ),
        )

    # -- deciding --------------------------------------------------------------------------

    def _model_function(self, node: cst.Call) -> FunctionInfo | None:
        function = self.facts.modules.enclosing_function(node)
        if function is None or not function.is_model_code:
            return None
        if self.facts.modules.is_construction(function):
            return None  # runs while the module is built: what it places, `__init__` places
        return function

    def _spread_move(self, node: cst.Call, function: FunctionInfo) -> bool:
        """A move to an element of the device list the method spreads its work over."""
        devices = self.facts.devices
        target = node.args[0].value if node.args else None
        keyword = keyword_argument(node, "device")
        if keyword is not None:
            target = keyword.value
        owner = devices.device_list_element(target, function)
        return owner is not None and owner == devices.spread_devices(function)

    def _moves_a_module_or_nothing(self, node: cst.Call) -> bool:
        """`self.head.to(...)`, `Net(...).cuda()`: moving modules is DF105's business; a move
        whose result is thrown away (`t.cuda()` as a statement) changes nothing."""
        assert isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        if _is_module_receiver(receiver) or self.facts.modules.constructed_module(receiver):
            return True
        return isinstance(self.context.parent(node), cst.Expr)

    def _fix(
        self,
        node: cst.Call,
        function: FunctionInfo,
        fixed: str,
        rebuild: Callable[[cst.BaseExpression], cst.CSTNode],
        target: cst.Call | None = None,
    ) -> None:
        needed = self.facts.devices.needed_by(target or node, function)
        expression = needed.expression()
        if expression is None or isinstance(needed, Unknown):
            self.report(
                node,
                message=(
                    f"`{function.name}` moves a tensor to {fixed}; no tensor or layer in scope "
                    "tells which device it should follow"
                ),
            )
            return
        replacement = rebuild(cst.parse_expression(expression))
        self.report(
            node,
            message=(
                f"`{function.name}` moves a tensor to {fixed}; use `{expression}` "
                f"({needed.evidence})"
            ),
            fix_title=f"Use `{expression}`",
            edits=[Edit(target or node, replacement)],
            applicability=Applicability.SAFE if needed.proof else Applicability.UNSAFE,
        )


def _is_module_receiver(receiver: cst.BaseExpression) -> bool:
    """`self.to(...)`, `self.head.to(...)`: moving modules is DF105's business, not this pass's."""
    if isinstance(receiver, cst.Name):
        return receiver.value == "self"
    return (
        isinstance(receiver, cst.Attribute)
        and isinstance(receiver.value, cst.Name)
        and receiver.value.value == "self"
    )


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
