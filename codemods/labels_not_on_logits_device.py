"""DF106: a loss computed from logits and labels without moving the labels to the logits."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import move_to
from devfix.codemods.analysis import FileFacts
from devfix.codemods.analysis.names import call_tail, code_of, dotted_name, keyword_argument
from devfix.codemods.analysis.scopes import Scopes
from devfix.codemods.analysis.torch_names import (
    PLACEMENT_WORDS,
    SAME_DEVICE_METHODS,
)
from devfix.types import Applicability, Edit

_MOVES = frozenset({"to", "cuda", "cpu", "type_as", "numpy", "tolist", "item"})
#: Loss keywords that hold tensors combined with the logits.
_TENSOR_KEYWORDS = ("weight", "pos_weight")
_DERIVED = ("zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like")


class LabelsNotOnLogitsDevice(DevicePass):
    """Loss computed from logits and labels that may sit on different devices.

    ## What it does
    Finds loss calls that take logits and labels in model code (`forward`, `compute_loss`,
    `training_step`, loss modules and helpers that take tensors) of a model placed over several
    devices, and moves the target to the logits' device: `loss_fct(logits,
    labels.to(logits.device))`. Losses are `nn.*Loss` instances (`self.loss_fn =
    nn.BCEWithLogitsLoss()`, `loss_fct = CrossEntropyLoss()`, a module-level `criterion`) and
    `F.*` losses (`F.cross_entropy`, `F.mse_loss`, ...); tensors a functional loss combines with
    the logits (`weight=`, `pos_weight=`) are moved too. A file places a model over several
    devices when it uses `device_map`, `dispatch_model`, `hf_device_map`, `parallelize`,
    `torch.cuda.device_count()`, names a GPU other than `cuda:0` (`"cuda:1"`), or defines a
    Hugging Face `PreTrainedModel` subclass; elsewhere labels and logits share the model's one
    device and the finding would be noise.

    ## Why is this bad?
    Under naive model parallelism (`from_pretrained(device_map="auto")`, `dispatch_model`, or a
    model split by hand over GPUs) the logits come out of the last GPU while the labels stay on
    the first one (or on the CPU), and the loss fails with `Expected all tensors to be on the same
    device, but found at least two devices, cuda:1 and cuda:0!`. Hugging Face applied exactly
    this fix to its model heads (huggingface/transformers#22561).

    ## Example
    ```python
    def forward(self, input_ids, labels=None):
        logits = self.classifier(self.encoder(input_ids))
        if labels is not None:
            loss = self.loss_fn(logits, labels.float())
    ```

    ## Use instead
    ```python
    def forward(self, input_ids, labels=None):
        logits = self.classifier(self.encoder(input_ids))
        if labels is not None:
            loss = self.loss_fn(logits, labels.float().to(logits.device))
    ```
    The logits' device is read from the first argument with same-device methods stripped
    (`shift_logits.view(-1, V)` gives `shift_logits.device`). Labels already moved
    (`labels.to(...)`, `.cuda()`, or a local name last bound with one), targets built from the
    logits (`torch.zeros_like(logits)`) and new tensors (DF101's business) are left alone. When
    the logits are not a named tensor (`F.cross_entropy(self.head(x), y)`), the finding is
    reported without a fix: name them first. CTC and pairwise/triplet losses are not matched
    (CTC lengths may legitimately stay on the CPU).

    ## Fix safety
    Safe: `.to(logits.device)` is a no-op when the devices already match, so a single-device
    program is unchanged; otherwise it removes the error.

    ## References
    - huggingface/transformers#22561 and PR#22591 ("This is a noop when the devices are the
      same"); PR#27746 (masks moved too).
    """

    CODE = "DF106"
    NAME = "labels-not-on-logits-device"
    MESSAGE = "loss target not moved to the logits' device"
    FIX_TITLE = "Move the labels with `.to(logits.device)`"
    APPLICABILITY = Applicability.SAFE

    @classmethod
    def wakes_on(cls, text: str) -> bool:
        # The pass reports only in files that place a model over several devices.
        return super().wakes_on(text) and any(word in text for word in PLACEMENT_WORDS)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.facts.flow.places_over_devices():
            return
        kind = self.facts.modules.loss_kind(node)
        if kind is None:
            return
        function = self.facts.modules.enclosing_function(node)
        if function is None:
            return
        name = function.name
        if not (function.is_model_code or "loss" in name.lower() or name.endswith("_step")):
            return
        if function.owner is not None and function.owner.is_dataset:
            return
        self._check(node, kind, function.node)

    # -- the fix ---------------------------------------------------------------------------

    def _check(self, node: cst.Call, kind: str, function: cst.FunctionDef) -> None:
        if any(arg.star for arg in node.args):
            return
        positional = [arg for arg in node.args if arg.keyword is None]
        logits_arg = positional[0] if positional else keyword_argument(node, "input")
        target_arg = positional[1] if len(positional) > 1 else keyword_argument(node, "target")
        if logits_arg is None or target_arg is None:
            return
        logits = _device_root(self.facts, logits_arg.value)
        if logits is _MOVED:
            return  # the logits were moved explicitly; the user chose the devices
        wanted: list[cst.Arg] = []
        if self._needs_move(target_arg.value, logits, function, node):
            wanted.append(target_arg)
        if kind == "function":
            for keyword in _TENSOR_KEYWORDS:
                arg = keyword_argument(node, keyword)
                if (
                    arg is not None
                    and isinstance(arg.value, cst.Name)
                    and not _may_be_none(self.facts.scopes, arg.value.value, function)
                    and self._needs_move(arg.value, logits, function, node)
                ):
                    wanted.append(arg)
        if not wanted:
            return
        names = ", ".join(f"`{code_of(arg.value)}`" for arg in wanted)
        if not isinstance(logits, cst.BaseExpression):
            self.report(
                node,
                message=(
                    f"{names} may be on another device than the logits "
                    f"`{code_of(logits_arg.value)}`; "
                    "the logits are not a named tensor, so their device cannot be named: assign "
                    "them to a variable and move the labels with `.to(logits.device)`"
                ),
            )
            return
        device = f"{code_of(logits)}.device"
        device_node = cst.parse_expression(device)
        edits = [
            Edit(arg, arg.with_changes(value=move_to(arg.value, device_node))) for arg in wanted
        ]
        self.report(
            node,
            message=(
                f"{names} may be on another device than the logits (naive model parallelism, "
                f"`device_map`); move {'it' if len(wanted) == 1 else 'them'} to `{device}`"
            ),
            fix_title=f"Move {names} to `{device}`",
            edits=edits,
        )

    def _needs_move(
        self,
        value: cst.BaseExpression,
        logits: object,
        function: cst.FunctionDef,
        call: cst.Call,
    ) -> bool:
        """Whether `value` is a named tensor not already moved and not derived from the logits."""
        root = _device_root(self.facts, value)
        if root is _MOVED or not isinstance(root, cst.BaseExpression):
            return False  # moved already, or a new tensor / computed value (not a named label)
        base = _base_name(root)
        if base is None or (isinstance(logits, cst.BaseExpression) and base == _base_name(logits)):
            return False
        return not (isinstance(root, cst.Name) and self._bound_moved(root.value, function, call))

    def _bound_moved(self, name: str, function: cst.FunctionDef, call: cst.Call) -> bool:
        """The last binding of `name` before `call` moves it (`labels = labels.to(dev)`), or
        builds it from another tensor's device (`torch.zeros_like(logits)`)."""
        line = self.context.position(call).start.line
        last: tuple[int, cst.BaseExpression] | None = None
        for node in self.facts.scopes.nodes(function.body):
            if isinstance(node, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets
            ):
                bound_line = self.context.position(node).start.line
                if bound_line < line and (last is None or bound_line > last[0]):
                    last = (bound_line, node.value)
        if last is None:
            return False
        value = last[1]
        if _device_root(self.facts, value) is _MOVED:
            return True
        for sub in self.context.subtree(value):
            if isinstance(sub, cst.Call):
                tail = call_tail(sub.func) or ""
                if tail in _DERIVED or tail.startswith("new_") or tail in ("to", "cuda"):
                    return True
        if isinstance(value, cst.Call) and dotted_name(value.func) is not None:
            # A new tensor (`torch.tensor(...)`, `torch.arange(...)`): DF101's business.
            return (self.qualified_name(value.func) or "").startswith("torch.")
        return False


_MOVED = object()


def _may_be_none(scopes: Scopes, name: str, function: cst.FunctionDef) -> bool:
    """An optional weight: any parameter (a caller may pass None), or a name bound to None."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return True
    for node in scopes.nodes(function.body):
        if isinstance(node, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets
        ):
            if isinstance(node.value, cst.Name) and node.value.value == "None":
                return True
            if isinstance(node.value, cst.IfExp):
                return True
    return False


def _device_root(facts: FileFacts, node: cst.BaseExpression) -> object:
    """The named tensor whose device `node` has: `logits.view(-1, V)` -> `logits`.

    Returns `_MOVED` when the chain moves the tensor (`.to(...)`, `.cuda()`), None when the
    value is not a chain of same-device methods on a name, attribute or subscript.
    """
    current = node
    while isinstance(current, cst.Call):
        func = current.func
        if not isinstance(func, cst.Attribute):
            return None
        if func.attr.value in _MOVES:
            return _MOVED
        if func.attr.value not in SAME_DEVICE_METHODS:
            return None
        if dotted_name(func) is not None and (facts.names.qualified_name(func) or "").startswith(
            "torch"
        ):
            return None  # `torch.log(x)`: a function, not a method of a tensor
        current = func.value
    if not isinstance(current, (cst.Name, cst.Attribute, cst.Subscript)):
        return None
    if any(isinstance(sub, cst.Call) for sub in facts.context.subtree(current)):
        return None
    if isinstance(current, cst.Name) and current.value in ("None", "True", "False"):
        return None
    return current


def _base_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None
