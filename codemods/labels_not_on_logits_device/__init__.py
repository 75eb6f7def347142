"""DF106: a loss computed from logits and labels without moving the labels to the logits."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import move_to
from devfix.codemods.analysis import FileFacts
from devfix.codemods.analysis.names import (
    argument,
    call_tail,
    code_of,
    dotted_name,
    is_docstring,
    keyword_argument,
)
from devfix.codemods.analysis.scopes import Scopes
from devfix.codemods.analysis.torch_names import (
    GATHER_FUNCTION,
    PLACEMENT_WORDS,
    SAME_DEVICE_METHODS,
)
from devfix.codemods.labels_not_on_logits_device.facts import AlignedTargets
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
    the logits (`weight=`, `pos_weight=`) are moved too; targets computed from the logits
    themselves (`pseudo = logits.detach().argmax(-1)`) are on their device and left alone. A
    helper given the logits and the labels that gathers the logits at the labels
    (`get_batch_logps(logits, labels)`: `torch.gather(logits.log_softmax(-1), 2,
    labels.unsqueeze(2))`) gets `labels = labels.to(logits.device)` before its first use of the
    labels, so that the masks it builds from them (`labels != pad_id`) follow too. A file places
    a model over several devices when it uses `device_map`, `dispatch_model`, `hf_device_map`,
    `parallelize`, `torch.cuda.device_count()`, names a GPU other than `cuda:0` (`"cuda:1"`), or
    defines a Hugging Face model that `device_map="auto"` can split (a subclass of a
    transformers model family, or a class on `PreTrainedModel` itself that declares
    `_no_split_modules`: transformers refuses `device_map="auto"` without it); for a gather
    helper it is enough that the file already moves a loss target to its logits' device
    somewhere (`labels = labels.to(logits.device)`: the placement is chosen in another file).
    Elsewhere labels and logits share the model's one device and the finding would be noise,
    except for a language model scored on its own inputs, in any file: the logits come from a
    model the function is given or its object holds (`model(ids).logits`, `out["logits"]`,
    `self.model(**{k: v.to(self.device) for k, v in enc.items()})`) and the labels are cut
    from what that call was given (`enc["input_ids"]`, `torch.where(mask, ids, -100)`): under
    a `device_map` the logits leave the last GPU, and labels taken from the unmoved encoding
    stay on the CPU. Where the labels' variable is read again (`valid = (labels !=
    pad).sum(-1)`, divided into the loss later), they are moved where they are taken from the
    inputs, after the logits exist (`labels = enc["input_ids"].to(logits.device)`), so that
    everything computed from them follows. Also in any file: labels a tokenizer returned as
    tensors (`tok.encode(text, return_tensors="pt")[:, 1:-1]`, always on the CPU) scored
    against the logits of a model the code placed on a device (its output, or `torch.cat` of a
    list filled with it) are moved to the logits' device.

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
    (CTC lengths may legitimately stay on the CPU). A gather helper is left alone when its
    labels may be None (a default), are rebuilt from something else, or are already moved.

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
        # The pass reports only in files that place a model over several devices, that
        # already move a loss target to its logits' device (`.device`), or that score a
        # language model's logits (`.logits`, `out["logits"]`).
        return super().wakes_on(text) and any(
            word in text
            for word in (*PLACEMENT_WORDS, ".device", ".logits", '"logits"', "'logits'")
        )

    def visit_Call(self, node: cst.Call) -> None:
        kind = self.facts.modules.loss_kind(node)
        if kind is None and call_tail(node.func) == "gather":
            kind = "gather"
        if kind is None:
            return
        flow = self.facts.flow
        aligned = self.facts.own(AlignedTargets)
        function = self.facts.modules.enclosing_function(node)
        if function is None:
            return
        # A language model scored on its own inputs is this bug's shape wherever the model was
        # loaded; elsewhere the file must place a model over devices, or move a loss target to
        # its logits somewhere (that speaks for the helpers of the file; a loss in a loop may
        # instead be a batch left on the CPU: DF204's business).
        tokenized = kind != "gather" and self._tokenized_targets(node)
        if not (kind != "gather" and (aligned.scores_model_inputs(node) or tokenized)):
            if not (
                flow.places_over_devices()
                or (kind == "gather" and aligned.aligns_targets_with_inputs())
            ):
                return
            name = function.name
            if not (function.is_model_code or "loss" in name.lower() or name.endswith("_step")):
                return
        if function.owner is not None and function.owner.is_dataset:
            return
        if kind == "gather":
            self._check_gather(node, function.node)
        else:
            self._check(node, kind, function.node, tokenized=tokenized)

    def _tokenized_targets(self, node: cst.Call) -> bool:
        """The target of loss `node` when it is a tokenizer's output (on the CPU, always) and
        the logits come out of a model on a device: the two cannot meet on one device."""
        positional = [arg.value for arg in node.args if arg.keyword is None and not arg.star]
        logits = positional[0] if positional else None
        target = positional[1] if len(positional) > 1 else None
        return (
            logits is not None
            and target is not None
            and self.facts.flow.tokenized_on_the_host(target, node)
            and self.facts.devices.placed(logits, node) is not None
        )

    # -- labels that index the logits (`torch.gather`) --------------------------------------

    def _gather_plan(
        self, node: cst.Call, function: cst.FunctionDef
    ) -> tuple[str, str, cst.BaseStatement] | None:
        """`torch.gather(logits, dim, index=labels)` (or `logits.gather(dim, labels)`) in a
        helper given both (`get_batch_logps(logits, labels)`): (logits, labels, the first
        statement that reads the labels)."""
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "gather":
            return None
        if self.qualified_name(func) == GATHER_FUNCTION:
            source, index = argument(node, "input"), argument(node, "index", 2)
        else:
            source, index = func.value, argument(node, "index", 1)
        if source is None or index is None:
            return None
        logits, labels = _device_root(self.facts, source), _device_root(self.facts, index)
        if not (isinstance(logits, cst.Name) and isinstance(labels, cst.Name)):
            return None
        names = (logits.value, labels.value)
        if names[0] == names[1] or not all(self._same_device_param(n, function) for n in names):
            return None
        if not isinstance(function.body, cst.IndentedBlock):
            return None  # `def f(logits, labels): return ...` on one line
        for statement in function.body.body:
            if not is_docstring(statement) and self.facts.scopes.mentions(statement, names[1]):
                return names[0], names[1], statement
        return None

    def _gather_moves(self, function: cst.FunctionDef) -> set[str]:
        """The labels parameters `_check_gather` moves in `function`."""
        calls = self.facts.scopes.find(function, cst.Call, own_scope=True)
        plans = (self._gather_plan(call, function) for call in calls)
        return {plan[1] for plan in plans if plan is not None}

    def _check_gather(self, node: cst.Call, function: cst.FunctionDef) -> None:
        """Moves the labels parameter where the helper starts using it, so that the gather
        index and every mask built from the labels (`labels != pad_id`) follow the logits."""
        plan = self._gather_plan(node, function)
        if plan is None:
            return
        logits, labels, anchor = plan
        move = f"{labels} = {labels}.to({logits}.device)"
        self.report(
            node,
            message=(
                f"`{labels}` indexes `{logits}` in `gather` but may be on another device (a "
                f"model split over GPUs), and so may the masks built from it; move it to "
                f"`{logits}.device` first"
            ),
            fix_title=f"Insert `{move}`",
            edits=[Edit(anchor, cst.FlattenSentinel([cst.parse_statement(move), anchor]))],
        )

    def _same_device_param(self, name: str, function: cst.FunctionDef) -> bool:
        """`name` is a required parameter of `function`, rebound only from itself through
        same-device methods and slices (`labels = labels[:, 1:].clone()`)."""
        params = [p for p in function.params.params if p.name.value == name]
        if not params or params[0].default is not None:
            return False
        for binding in self.facts.scopes.table(function).bindings.get(name, []):
            if binding.kind == "param":
                continue
            root = _device_root(self.facts, binding.value) if binding.value is not None else None
            if binding.kind != "assign" or not isinstance(root, cst.BaseExpression):
                return False
            if _base_name(root) != name:
                return False
        return True

    # -- the fix ---------------------------------------------------------------------------

    def _check(
        self, node: cst.Call, kind: str, function: cst.FunctionDef, *, tokenized: bool
    ) -> None:
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
        source = (
            self.facts.own(AlignedTargets).source_move(node)
            if wanted == [target_arg] and self.facts.own(AlignedTargets).scores_model_inputs(node)
            else None
        )
        if source is not None:
            value, logits_name = source
            device = f"{logits_name}.device"
            shown = code_of(value)
            self.report(
                node,
                message=(
                    f"{names} may be on another device than the logits: they are cut from the "
                    f"model's inputs (`{shown}`), and what else is computed from them meets "
                    f"the logits too; move them there to `{device}`"
                ),
                fix_title=f"Move `{shown}` to `{device}`",
                edits=[Edit(value, move_to(value, cst.parse_expression(device)))],
            )
            return
        device = f"{code_of(_sliced_from(logits))}.device"
        device_node = cst.parse_expression(device)
        edits = [
            Edit(arg, arg.with_changes(value=move_to(arg.value, device_node))) for arg in wanted
        ]
        encoding = self.facts.own(AlignedTargets).labels_left_behind(node)
        if encoding is not None and wanted == [target_arg]:
            why = (
                f"is cut from `{encoding}`, which stays on the CPU while the model is given a "
                "moved copy of it"
            )
        elif wanted == [target_arg] and tokenized:
            why = (
                "is a tokenizer's output, which is on the CPU, while the logits come from a "
                "model on a device"
            )
        else:
            why = "may be on another device than the logits (naive model parallelism, `device_map`)"
        self.report(
            node,
            message=f"{names} {why}; move {'it' if len(wanted) == 1 else 'them'} to `{device}`",
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
        if isinstance(root, cst.Name) and root.value in self._gather_moves(function):
            return False  # moved where the function starts (a `gather` over the same labels)
        logits_name = _base_name(logits) if isinstance(logits, cst.BaseExpression) else None
        return not (
            isinstance(root, cst.Name)
            and self._bound_moved(root.value, function, call, logits_name)
        ) and not (
            isinstance(logits, cst.BaseExpression)
            and self.facts.own(AlignedTargets).moved_to_logits_on_the_way(value, logits, call)
        )

    def _bound_moved(
        self, name: str, function: cst.FunctionDef, call: cst.Call, logits: str | None
    ) -> bool:
        """The last binding of `name` before `call` moves it (`labels = labels.to(dev)`), builds
        it from another tensor's device (`torch.zeros_like(logits)`), or computes it from the
        logits themselves (`labels = logits.detach().argmax(-1)`: already on their device)."""
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
        root = _device_root(self.facts, value)
        if root is _MOVED:
            return True
        if isinstance(root, cst.BaseExpression) and logits and _base_name(root) == logits:
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


def _sliced_from(tensor: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor a slice is cut from, which has its device: `logits[0, :-1]` -> `logits`. A
    key (`out["logits"]`) reads a field of a container, which has no device, and is kept."""
    while isinstance(tensor, cst.Subscript) and not any(
        isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.BaseString)
        for element in tensor.slice
    ):
        tensor = tensor.value
    return tensor


def _base_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None
