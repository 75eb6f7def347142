"""DF203: NumPy conversions of tensors that live on a device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_chain
from devfix.codemods.analysis.moves import copies_to_host
from devfix.codemods.analysis.names import call_tail, code_of, is_method_call
from devfix.codemods.analysis.torch_names import NUMPY_ARRAY_FUNCTIONS
from devfix.types import Applicability, Edit

_NUMPY_REDUCTIONS = {"numpy.sum": "sum", "numpy.mean": "mean"}


class NumpyOfDeviceTensor(DevicePass):
    """`.numpy()` (or `np.sum`/`np.mean`) on tensors that are on a GPU.

    ## What it does
    Finds `.numpy()` called on a tensor that comes from a model the script moved to a device
    (its output, a loss computed from it, anything derived with tensor methods and `torch`
    functions) or from an explicit move (`.cuda()`, `.to(device)`, `device=` factories), and
    rewrites it to `.detach().cpu().numpy()`. Finds `np.sum(...)` / `np.mean(...)` over a list
    literal of such tensors, or over a list that is only ever filled with them
    (`losses.append(loss)`), and rewrites it to `torch.stack(...).sum()` / `.mean()`. Finds
    such tensors handed to a scikit-learn metric (`accuracy_score(labels, preds)`,
    `classification_report`, `roc_auc_score`, anything in `sklearn.metrics`), which converts its
    arguments with NumPy, and gives them `.detach().cpu().numpy()`. A latent hazard too: a
    tensor whose device nothing in the file tells, converted with `.detach().numpy()` or
    `.data.numpy()` (torch's own methods, so a torch tensor) in a file that moves work to a GPU
    (`net.to(device)`, `.cuda()`) or hands a device chosen at run time to a helper
    (`to_tensors(self.device, batch)`, `extract(model, loader, device=device)`), gets `.cpu()`
    before `.numpy()`: it is on the GPU as soon as what computed it is, and the copy is a no-op
    on the CPU. So does a field of a model the code moved to a device
    (`self.net.last_attention[h].numpy()`, also where a method stored a local it had moved:
    `net = net.to(self.device); self.net = net`), which `forward` left on the model's device.

    ## Why is this bad?
    NumPy can only read CPU memory: `.numpy()` on a CUDA tensor fails with `TypeError: can't
    convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host
    memory first.`, and on a tensor that requires grad with `RuntimeError: Can't call numpy()
    on Tensor that requires grad`. `np.mean(losses)` converts each tensor the same way and
    fails the same way.

    ## Example
    ```python
    logits = model(x)
    preds = logits.argmax(1).numpy()
    epoch_loss = np.mean(losses)
    ```

    ## Use instead
    ```python
    logits = model(x)
    preds = logits.argmax(1).detach().cpu().numpy()
    epoch_loss = torch.stack(losses).mean()
    ```
    A receiver that already ends in `.detach()` or `.data` only gets `.cpu()`.

    ## Fix safety
    `.detach().cpu().numpy()` is safe: it returns the same array, and on CPU tensors both added
    calls are no-ops. `torch.stack(...).mean()` is unsafe: it returns a 0-dim tensor (on the
    device, still attached to autograd) instead of a NumPy float; formatting and arithmetic
    work the same, but code that needs a Python float should call `.item()`. Other tensors
    whose device is unknown (function arguments, values from unknown calls, without
    `.detach()` or `.data`, or in a file that never leaves the CPU) are left alone, and so are
    the output of a model the scope builds and never moves, a conversion that runs only where
    a CUDA check said no (`preds.numpy() if not train_on_gpu else preds.cpu().numpy()`, the
    `else` of `if torch.cuda.is_available():`), and one in the `else` of a branch that copies
    to the host itself (`if self.use_cuda: a = p.data.cpu().numpy()`).

    ## References
    - PyTorch docs, `torch.Tensor.numpy` ("the tensor must be on the CPU").
    - swz30/MPRNet#91 (`np.sum` over CUDA losses).
    """

    CODE = "DF203"
    NAME = "numpy-of-device-tensor"
    MESSAGE = "NumPy conversion of a tensor on a device"
    FIX_TITLE = "Copy the tensor to the CPU first"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("numpy", "np.", "sklearn")
    REQUIRED_WORDS = ("torch",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and not node.args:
            self._check_numpy(node, func)
        elif isinstance(func, (cst.Attribute, cst.Name)) and (
            f"numpy.{call_tail(func)}" in NUMPY_ARRAY_FUNCTIONS
        ):
            qualified = self.qualified_name(func)
            if qualified in _NUMPY_REDUCTIONS and self._check_reduction(
                node, _NUMPY_REDUCTIONS[qualified]
            ):
                return
            if qualified in NUMPY_ARRAY_FUNCTIONS:
                self._check_array_function(node, qualified.rsplit(".", 1)[1])
        elif isinstance(func, (cst.Attribute, cst.Name)):
            qualified = self.qualified_name(func) or ""
            if qualified.startswith("sklearn.metrics."):
                self._check_metric_arguments(node, qualified.rsplit(".", 1)[1])

    # -- .numpy() --------------------------------------------------------------------------

    def _check_numpy(self, node: cst.Call, func: cst.Attribute) -> None:
        receiver = func.value
        detached = is_method_call(receiver, "detach") or (
            isinstance(receiver, cst.Attribute) and receiver.attr.value == "data"
        )
        if self._other_branch_copies(node):
            return
        origin = self._origin(receiver, node)
        where = f"on a device ({origin})"
        if origin is None and detached:
            latent = self._latent_origin(receiver, node)
            where = f"that may be on a GPU ({latent})"
            origin = latent
        held = (
            self.facts.flow.placed_model_field(receiver, node)
            if origin is None and not self.facts.flow.runs_without_cuda(node)
            else None
        )
        if held is not None:
            origin = f"a latent hazard: it is kept by `{held}`, a model moved to a device"
            where = f"that may be on a GPU ({origin}; on the CPU the copy is a no-op)"
        if origin is None:
            return
        methods = ("cpu",) if detached else ("detach", "cpu")
        added = "".join(f".{method}()" for method in methods)
        moved = method_chain(receiver, *methods)
        self.report(
            node,
            message=f"`.numpy()` of a tensor {where}; it needs `{added}` first",
            fix_title=f"Insert `{added}` before `.numpy()`",
            edits=[Edit(node, node.with_changes(func=func.with_changes(value=moved)))],
        )

    def _latent_origin(self, receiver: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """`loss.detach().numpy()` (`.detach()` and `.data` are torch's) in a file that moves
        its work to a GPU: the tensor is there as soon as what made it is, and `.cpu()` is a
        no-op on the CPU. None when the chain already copies to the host, when the code runs
        only without CUDA, or when the file never leaves the CPU."""
        chain: cst.BaseExpression = receiver
        while isinstance(chain, (cst.Call, cst.Attribute, cst.Subscript)):
            if copies_to_host(chain):
                return None
            if isinstance(chain, cst.Call) and self._model_left_on_the_cpu(chain, at):
                return None
            chain = chain.func if isinstance(chain, cst.Call) else chain.value
        if self.facts.flow.runs_without_cuda(at):
            return None
        move = self.facts.moves.first_gpu_move()
        if move is not None:
            where = f"moves work to a GPU (line {self.facts.scopes.line_of(move)})"
        elif (handoff := self.facts.moves.first_device_handoff()) is not None:
            where = (
                f"hands its work a device chosen at run time (line "
                f"{self.facts.scopes.line_of(handoff)})"
            )
        else:
            return None
        return (
            f"a latent hazard: this file {where}, and a tensor computed there cannot be read "
            "by NumPy; on the CPU the copy is a no-op"
        )

    def _tests_a_gpu_flag(self, test: cst.BaseExpression) -> bool:
        """`use_cuda`, `self.args.gpu`, `x.is_cuda`, `torch.cuda.is_available()`."""
        return any(
            isinstance(inner, cst.Name)
            and any(word in inner.value.lower() for word in ("cuda", "gpu"))
            for inner in self.context.subtree(test)
        )

    def _model_left_on_the_cpu(self, call: cst.Call, at: cst.CSTNode) -> bool:
        """`model(x)` where `model = Net()` is built in this scope and never moved: the file
        itself leaves that model on the CPU."""
        if not isinstance(call.func, cst.Name):
            return False
        built = self.facts.scopes.assigned_before(call.func.value, at)
        return (
            bool(built)
            and all(isinstance(v, cst.Call) for v in built)
            and self.facts.flow.model_device(call.func, call) is None
        )

    def _other_branch_copies(self, at: cst.CSTNode) -> bool:
        """`at` is in the `else` of a branch on a GPU flag that copies to the host (`if
        self.use_cuda: v = x.data.cpu().numpy()`): the author split the conversion by device."""
        return any(
            in_else
            and self._tests_a_gpu_flag(branch.test)
            and any(
                isinstance(inner, cst.Call) and copies_to_host(inner)
                for inner in self.context.subtree(body)
            )
            for branch, in_else, body in self.facts.scopes.other_branches(at)
        )

    def _origin(self, expr: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """Why `expr` is a tensor on a device, or None when that is not known (or when `at`
        runs only where a CUDA check said no: `x.numpy() if not use_cuda else x.cpu().numpy()`)."""
        if self.facts.flow.runs_without_cuda(at):
            return None
        placed = self.facts.devices.placed(expr, at)
        return placed.evidence if placed is not None else None

    # -- np.sum / np.mean ------------------------------------------------------------------

    def _check_array_function(self, node: cst.Call, function: str) -> None:
        """`np.sqrt(mse / n)` with `mse` on a device: NumPy converts its argument, which needs
        the tensor on the CPU first."""
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return
        argument = node.args[0]
        value = argument.value
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
            return
        origin = self._origin(value, node)
        if origin is None:
            return
        added, moved = _as_array(value)
        self.report(
            node,
            message=(
                f"`np.{function}` of a tensor on a device ({origin}): NumPy reads CPU memory "
                f"only; it needs `{added}` first"
            ),
            fix_title=f"Pass `{code_of(moved)}`",
            edits=[Edit(argument, argument.with_changes(value=moved))],
        )

    def _check_metric_arguments(self, node: cst.Call, function: str) -> None:
        """`accuracy_score(labels, preds)` with `labels` on a device: scikit-learn converts
        each argument with NumPy, which reads CPU memory only."""
        for argument in node.args:
            if argument.star or (
                argument.keyword is not None
                and argument.keyword.value not in ("y_true", "y_pred", "y_score", "y_prob")
            ):
                continue
            value = argument.value
            if is_method_call(value, "numpy") or is_method_call(value, "cpu"):
                continue
            origin = self._origin(value, node)
            if origin is None:
                continue
            added, moved = _as_array(value)
            self.report(
                argument,
                message=(
                    f"`{function}` is given `{code_of(value)}`, a tensor on a device ({origin}): "
                    f"scikit-learn converts it with NumPy, which reads CPU memory only; it needs "
                    f"`{added}` first"
                ),
                fix_title=f"Pass `{code_of(moved)}`",
                edits=[Edit(argument, argument.with_changes(value=moved))],
            )

    def _check_reduction(self, node: cst.Call, method: str) -> bool:
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return False
        values = node.args[0].value
        origin: str | None
        if isinstance(values, cst.List) and values.elements:
            origins = [
                self._origin(e.value, node) if not isinstance(e, cst.StarredElement) else None
                for e in values.elements
            ]
            origin = origins[0] if all(origins) else None
        elif isinstance(values, cst.Name):
            filled = self.facts.devices.list_of_placed(values.value, node)
            origin = filled.evidence if filled is not None else None
        else:
            return False
        if origin is None:
            return False
        torch_name, imports = self.facts.names.torch_spelling()
        stacked = cst.Call(
            func=cst.Attribute(value=cst.parse_expression(torch_name), attr=cst.Name("stack")),
            args=[cst.Arg(values)],
        )
        replacement = method_chain(stacked, method)
        shown = code_of(replacement)
        self.report(
            node,
            message=(
                f"`np.{method}` over tensors on a device ({origin}) converts each to NumPy; "
                f"use `{shown}`"
            ),
            fix_title=f"Use `{shown}`",
            edits=[Edit(node, replacement.with_changes(lpar=node.lpar, rpar=node.rpar))],
            applicability=Applicability.UNSAFE,
            imports=imports,
        )
        return True


def _as_array(value: cst.BaseExpression) -> tuple[str, cst.BaseExpression]:
    """The calls that give NumPy a CPU copy of `value` (`.detach().cpu().numpy()`, no second
    `.detach()`), and `value` with them."""
    detached = is_method_call(value, "detach")
    methods = ("cpu", "numpy") if detached else ("detach", "cpu", "numpy")
    return "".join(f".{method}()" for method in methods), method_chain(value, *methods)
