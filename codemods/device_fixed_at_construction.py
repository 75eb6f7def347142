"""DF102: model code that moves tensors to a device fixed outside the call."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import call_tail, keyword_argument
from devfix.codemods._model_code import AS_INDEX, ClassInfo, FunctionInfo, ModelCode
from devfix.codemods._torch_names import TENSOR_FACTORIES
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
        if device_arg is None:
            return
        function = self._model_function(node)
        if function is None:
            return
        fixed = self._fixed_device(device_arg.value, function)
        if fixed is None:
            return
        self._fix(
            node,
            function,
            fixed,
            lambda device: node.with_changes(
                args=[
                    arg.with_changes(value=device) if arg is device_arg else arg
                    for arg in node.args
                ]
            ),
        )

    def _check_cuda(self, node: cst.Call) -> None:
        assert isinstance(node.func, cst.Attribute)
        if _is_module_receiver(node.func.value) or any(a.keyword for a in node.args):
            return
        function = self._model_function(node)
        if function is None:
            return
        fixed = "`.cuda()` (the current CUDA device)"
        assert isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        self._fix(
            node,
            function,
            fixed,
            lambda device: cst.Call(
                func=cst.Attribute(value=receiver, attr=cst.Name("to")), args=[cst.Arg(device)]
            ),
        )

    def _check_factory(self, node: cst.Call) -> None:
        device_arg = keyword_argument(node, "device")
        if device_arg is None or self.qualified_name(node.func) not in TENSOR_FACTORIES:
            return
        function = self._model_function(node)
        if function is None:
            return
        fixed = self._fixed_device(device_arg.value, function)
        if fixed is None:
            return
        self._fix(
            node,
            function,
            fixed,
            lambda device: node.with_changes(
                args=[
                    arg.with_changes(value=device) if arg is device_arg else arg
                    for arg in node.args
                ]
            ),
        )

    # -- deciding --------------------------------------------------------------------------

    def _model_function(self, node: cst.Call) -> FunctionInfo | None:
        function = ModelCode.of(self).enclosing_function(node)
        if function is None or not function.is_model_code or function.name == "__init__":
            return None
        return function

    def _fixed_device(self, value: cst.BaseExpression, function: FunctionInfo) -> str | None:
        """Describe why `value` is a device fixed outside the call, or None if it is not."""
        if isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if isinstance(text, str) and text.startswith("cuda"):
                return f"the literal {value.value}"
            return None
        if isinstance(value, cst.Call) and self.qualified_name(value.func) == "torch.device":
            first = value.args[0].value if value.args else None
            if isinstance(first, cst.SimpleString) and str(first.evaluated_value).startswith(
                "cuda"
            ):
                return f"`{cst.Module(body=[]).code_for_node(value)}`"
            return None
        if isinstance(value, cst.Attribute):
            return self._stored_attribute(value, function.owner)
        if isinstance(value, cst.Name):
            return self._global_device(value, function)
        return None

    def _stored_attribute(self, value: cst.Attribute, owner: ClassInfo | None) -> str | None:
        if not (isinstance(value.value, cst.Name) and value.value.value == "self"):
            return None
        if owner is None or owner.has_device_property:
            return None
        if value.attr.value in owner.device_attrs:
            return f"`self.{value.attr.value}`, stored in `__init__`"
        return None

    def _global_device(self, value: cst.Name, function: FunctionInfo) -> str | None:
        if value.value in function.params or value.value in function.bindings:
            return None
        bindings = _module_bindings(self).get(value.value)
        if not bindings:
            return None
        if "dev" in value.value.lower() or any(_assigns_device(node) for node in bindings):
            return f"the global `{value.value}`"
        return None

    def _fix(
        self,
        node: cst.Call,
        function: FunctionInfo,
        fixed: str,
        rebuild: object,
    ) -> None:
        source = ModelCode.of(self).resolve_device(node, function)
        if source is AS_INDEX:
            source = None
        if source is None:
            self.report(
                node,
                message=(
                    f"`{function.name}` moves a tensor to {fixed}; no tensor or layer in scope "
                    "tells which device it should follow"
                ),
            )
            return
        assert callable(rebuild)
        replacement = rebuild(cst.parse_expression(source.expression))
        self.report(
            node,
            message=(
                f"`{function.name}` moves a tensor to {fixed}; use `{source.expression}` "
                f"({source.reason})"
            ),
            fix_title=f"Use `{source.expression}`",
            edits=[Edit(node, replacement)],
            applicability=Applicability.SAFE if source.certain else Applicability.UNSAFE,
        )


def _module_bindings(checker: DevicePass) -> dict[str, list[cst.CSTNode]]:
    """Names bound at module level (also under module-level `if`/`try`/`with`), with the
    statements that bind them: the globals a function body can see."""
    cached = checker.context.shared.get("module_bindings")
    if isinstance(cached, dict):
        return cached
    table: dict[str, list[cst.CSTNode]] = {}
    pending: list[cst.CSTNode] = list(checker.context.module.body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                for name in _bound_names(small):
                    table.setdefault(name, []).append(small)
        elif isinstance(
            statement, (cst.If, cst.Try, cst.With, cst.Else, cst.ExceptHandler, cst.Finally)
        ):
            pending.extend(
                child
                for child in checker.context.children(statement)
                if isinstance(
                    child, (cst.IndentedBlock, cst.Else, cst.ExceptHandler, cst.If, cst.Finally)
                )
            )
        elif isinstance(statement, (cst.IndentedBlock,)):
            pending.extend(statement.body)
    checker.context.shared["module_bindings"] = table
    return table


def _bound_names(statement: cst.BaseSmallStatement) -> list[str]:
    if isinstance(statement, cst.Assign):
        return [t.target.value for t in statement.targets if isinstance(t.target, cst.Name)]
    if isinstance(statement, (cst.AnnAssign, cst.AugAssign)) and isinstance(
        statement.target, cst.Name
    ):
        return [statement.target.value]
    if isinstance(statement, (cst.Import, cst.ImportFrom)) and not isinstance(
        statement.names, cst.ImportStar
    ):
        names: list[str] = []
        for alias in statement.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name):
                names.append(bound.value)
        return names
    return []


def _is_module_receiver(receiver: cst.BaseExpression) -> bool:
    """`self.to(...)`, `self.head.to(...)`: moving modules is DF105's business, not this pass's."""
    if isinstance(receiver, cst.Name):
        return receiver.value == "self"
    return (
        isinstance(receiver, cst.Attribute)
        and isinstance(receiver.value, cst.Name)
        and receiver.value.value == "self"
    )


def _assigns_device(node: cst.CSTNode) -> bool:
    code = cst.Module(body=[]).code_for_node(node).lower()
    return "torch.device" in code or "cuda" in code
