"""DF102: model code that moves tensors to a device fixed outside the call."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.devices import Unknown
from devfix.codemods.analysis.modules import FunctionInfo
from devfix.codemods.analysis.names import call_tail, keyword_argument
from devfix.codemods.analysis.torch_names import TENSOR_FACTORIES
from devfix.types import Applicability, Edit

_FACTORY_TAILS = frozenset(name.rsplit(".", 1)[1] for name in TENSOR_FACTORIES)


class DeviceFixedAtConstruction(DevicePass):
    """Model code that puts tensors on a device chosen outside the forward pass.

    ## What it does
    Inside the methods of an `nn.Module` (other than `__init__`) and functions that take a
    tensor argument, finds `.to(device)`, `.to(self.device)`, `.cuda()` and `device=` arguments
    whose device is a module-level global, an attribute stored in `__init__`
    (`self.device = device`) or a literal CUDA device (`"cuda:0"`, `torch.device("cuda")`), and
    rewrites them to the device of the tensor the value meets.

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

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail == "to" and isinstance(node.func, cst.Attribute):
            self._check_to(node)
        elif tail == "cuda" and isinstance(node.func, cst.Attribute):
            self._check_cuda(node)
        elif tail in _FACTORY_TAILS:
            self._check_factory(node)

    # -- the three shapes ------------------------------------------------------------------

    def _check_to(self, node: cst.Call) -> None:
        assert isinstance(node.func, cst.Attribute)
        if _is_module_receiver(node.func.value):
            return
        device_arg = keyword_argument(node, "device") or next(
            (arg for arg in node.args if arg.keyword is None), None
        )
        if device_arg is not None:
            self._check_argument(node, device_arg)

    def _check_cuda(self, node: cst.Call) -> None:
        assert isinstance(node.func, cst.Attribute)
        if _is_module_receiver(node.func.value) or any(a.keyword for a in node.args):
            return
        function = self._model_function(node)
        if function is None:
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

    def _check_argument(self, node: cst.Call, device_arg: cst.Arg) -> None:
        """`.to(<device>)` / `device=<device>`: rewritten when the device is fixed outside."""
        function = self._model_function(node)
        if function is None:
            return
        fixed = self.facts.devices.fixed_outside(device_arg.value, function)
        if fixed is None:
            return
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
        if function is None or not function.is_model_code or function.name == "__init__":
            return None
        return function

    def _fix(
        self,
        node: cst.Call,
        function: FunctionInfo,
        fixed: str,
        rebuild: Callable[[cst.BaseExpression], cst.CSTNode],
    ) -> None:
        needed = self.facts.devices.needed_by(node, function)
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
            edits=[Edit(node, replacement)],
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
