"""DF303: class weights of a loss (`weight=`, `pos_weight=`) left on the CPU."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_call, move_to
from devfix.codemods.analysis.modules import names_a_loss
from devfix.codemods.analysis.names import (
    call_tail,
    code_of,
    dotted_name,
    is_constant,
    keyword_argument,
    root_name,
)
from devfix.codemods.analysis.torch_names import (
    SAME_DEVICE_METHODS,
    WEIGHTED_FUNCTIONAL_LOSSES,
    WEIGHTED_LOSSES,
    tails,
)
from devfix.types import Applicability, Edit

_CANDIDATE_TAILS = tails(WEIGHTED_LOSSES, WEIGHTED_FUNCTIONAL_LOSSES)
_FACTORY_WEIGHT_KEYWORDS = frozenset({"weight", "pos_weight", "class_weight", "class_weights"})


def _names_a_loss_factory(tail: str) -> bool:
    """`get_loss`, `build_criterion`, `make_loss_fn`: a function (not a class) named for the
    criterion it returns."""
    return not tail[:1].isupper() and names_a_loss(tail)


class LossWeightOnCpu(DevicePass):
    """Loss built with class weights that stay on the CPU.

    ## What it does
    Finds `nn.CrossEntropyLoss(weight=w)`, `nn.NLLLoss(weight=w)`, `nn.BCELoss(weight=w)`,
    `nn.BCEWithLogitsLoss(weight=w, pos_weight=p)`, `nn.MultiLabelSoftMarginLoss(weight=w)` and
    `nn.MultiMarginLoss(weight=w)` whose weights are CPU tensors (`torch.tensor([...])`,
    `torch.Tensor([3])`, `torch.from_numpy(...)`, or a name bound to one) in a script that moves
    its work to a device, and moves the criterion there: `nn.CrossEntropyLoss(weight=w).to(device)`.
    Functional losses (`F.cross_entropy(logits, y, weight=w)`) get `weight=w.to(logits.device)`.

    ## Why is this bad?
    The weighted losses keep `weight` / `pos_weight` as registered buffers, so they stay where
    they were made. When the logits are on the GPU the loss fails with `RuntimeError: Expected
    all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!`.

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3]))
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.Tensor([3])).to(device)
    ```
    The criterion is moved the way the script moves its other work (`.to(device)`, or `.cuda()`
    when the model is moved with `.cuda()`). A criterion stored as an attribute of a model
    (`self.criterion = ...` in an `nn.Module` or `LightningModule`) is a submodule: it moves with
    the model and is left alone. A criterion that is already moved is left alone. A criterion
    built in a function and called there on an input bound before it (`loss_fct =
    nn.CrossEntropyLoss(weight=self.weights)` ... `loss_fct(logits.view(-1, n), labels)`, as
    Hugging Face `Trainer.compute_loss` overrides write it) gets its weights moved to that
    input's device (`weight=self.weights.to(logits.device)`), in a script that moves its work
    to a device or in a `Trainer` subclass (the Trainer places the model).

    A criterion made by a project's own factory (`get_loss(..., weight=class_weights)`, from
    another file) may be a module or a function, and its weights may be `None`: there the
    weights are moved where a call computes them (`class_weights =
    manager.compute_class_weights().to(device)`, on each branch that computes them; `= None`
    stays), when the device is bound by then. Weights given as a list literal, or assigned
    otherwise, are reported only.

    ## Fix safety
    Safe: moving the criterion moves only its weight buffers, which must meet the logits anyway.
    Unsafe for a factory's weights: moving them where they are computed is a judgement that the
    call returns a tensor (its name and the `weight=` it feeds say so; a list or an array
    fails loudly at `.to`).
    When the script moves its work to several different devices, or its device is bound only
    after the criterion is built, the finding is reported without a fix. A functional loss whose
    input is computed inline (`F.cross_entropy(model(x), y, weight=w)`) is reported without a
    fix, since repeating the expression would run it twice.

    ## References
    - PyTorch source: `_WeightedLoss` registers `weight`; `BCEWithLogitsLoss` registers
      `pos_weight` (`torch/nn/modules/loss.py`).
    """

    CODE = "DF303"
    NAME = "loss-weight-on-cpu"
    MESSAGE = "loss weights are a CPU tensor"
    FIX_TITLE = "Move the criterion to the device"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail not in _CANDIDATE_TAILS:
            if tail is not None and _names_a_loss_factory(tail):
                self._check_factory(node, tail)
            return
        qualified = self.qualified_name(node.func)
        if qualified in WEIGHTED_LOSSES:
            self._check_class(node, qualified)
        elif qualified in WEIGHTED_FUNCTIONAL_LOSSES:
            self._check_functional(node, qualified)

    # -- get_loss(..., weight=w): a project's own criterion factory ------------------------------

    def _check_factory(self, node: cst.Call, tail: str) -> None:
        """`criterion = get_loss(..., weight=class_weights)` in a script that runs on a device:
        the factory (defined elsewhere) builds the criterion with weights nothing here moves.
        Whether the factory returns a module (with `.to`) or a function, and whether the
        weights can be `None`, cannot be seen from here: the weights are moved where a call
        computes them (`class_weights = manager.weights().to(device)`, an `= None` branch
        left alone), else the finding is reported only."""
        if self.qualified_name(node.func) in WEIGHTED_LOSSES:
            return
        if self.facts.modules.in_model_method(node):
            return  # built inside a model: moves with it
        weights = [
            arg
            for arg in node.args
            if arg.keyword is not None
            and arg.keyword.value in _FACTORY_WEIGHT_KEYWORDS
            and not is_constant(arg.value)
            and dotted_name(arg.value) is not None
            and self.facts.devices.placed(arg.value, node) is None
        ]
        if not weights:
            return
        parent = self.context.parent(node)
        holder = self._holder(parent)
        if holder is None or self._moved_later(holder, node):
            return
        if isinstance(parent, cst.Attribute):
            return  # `get_loss(...).to(device)`
        device = self._device_in_scope(node)
        if device is None:
            return
        listed = ", ".join(
            f"`{arg.keyword.value}={code_of(arg.value)}`" for arg in weights if arg.keyword
        )
        problem = (
            f"`{tail}` builds the criterion with {listed}, which nothing here puts on "
            f"`{device}`, the device this code runs on; a weighted loss keeps its weights "
            "where they were made"
        )
        made = self._made_here(weights, node, device)
        if made:
            self.report(
                node,
                message=f"{problem}: move them to `{device}` where they are computed",
                fix_title=f"Move the weights to `{device}` where they are computed",
                edits=[Edit(value, move_to(value, cst.Name(device))) for value in made],
                applicability=Applicability.UNSAFE,
            )
            return
        self.report(
            node,
            message=(
                f"{problem}: move the criterion (`{holder} = {holder}.to({device})` when it is "
                "a module) or the weights"
            ),
        )

    def _made_here(self, weights: list[cst.Arg], node: cst.Call, device: str) -> list[cst.Call]:
        """The calls that compute the weights, when each weight is a name that only calls
        (and constants such as `None`) assign before `node`, where `device` is bound."""
        made: list[cst.Call] = []
        for arg in weights:
            name = arg.value.value if isinstance(arg.value, cst.Name) else None
            calls = self.facts.scopes.computing_calls(name, node) if name else []
            if not calls or not all(
                self.facts.scopes.visible_name(device, call)
                and self.facts.devices.placed(call, call) is None
                for call in calls
            ):
                return []
            made += calls
        return made

    def _device_in_scope(self, node: cst.CSTNode) -> str | None:
        """A device variable the code around `node` binds (`device = ...`), if any."""
        names = self.facts.moves.device_names(node)
        if names:
            return names[0]
        function = self.facts.scopes.enclosing_function(node)
        for name in ("device", "dev"):
            if self.facts.scopes.bound_in(name, function):
                return name
        return None

    # -- nn.<Loss>(weight=...) -------------------------------------------------------------------

    def _check_class(self, node: cst.Call, qualified: str) -> None:
        weights = self._cpu_weights(node, WEIGHTED_LOSSES[qualified])
        if not weights:
            return
        short = qualified.rsplit(".", 1)[1]
        listed = ", ".join(f"`{keyword}`" for keyword, _ in weights)
        parent = self.context.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            # `nn.CrossEntropyLoss(weight=w)(logits, y)`: built and used at once.
            self._fix_weights_for_input(node, parent, weights, f"`{short}`")
            return
        if self.facts.modules.in_model_method(node):
            return  # `self.criterion = ...` moves with the model; other forms are DF101/DF102's
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # `nn.CrossEntropyLoss(weight=w).to(device)` / `.cuda()`
        holder = self._holder(parent)
        if holder is None:
            self.report(
                node,
                message=(
                    f"`{short}` keeps {listed} on the CPU; the criterion is not bound to a name, "
                    "so devfix cannot tell whether it is moved later"
                ),
            )
            return
        if self._moved_later(holder, node):
            return
        devices = self.facts.moves.moved_devices(node)
        use = self._local_use(holder, node)
        if use is not None and (devices or self.facts.modules.in_trainer_subclass(node)):
            # Built where it is used: the weights follow the input it is called on, which is
            # where the model's outputs are (in a Trainer subclass, on the Trainer's device).
            self._fix_weights_for_input(node, use, weights, f"`{short}`")
            return
        if not devices:
            return  # the script never leaves the CPU: nothing to meet
        if len(devices) > 1:
            self.report(
                node,
                message=(
                    f"`{short}` keeps {listed} on the CPU; the script moves work to several "
                    f"devices ({', '.join(devices)}), so move the criterion by hand"
                ),
            )
            return
        device = devices[0]
        if device.startswith("."):
            template = cst.parse_expression(f"_{device}")  # `_.cuda(...)`
            assert isinstance(template, cst.Call) and isinstance(template.func, cst.Attribute)
            replacement: cst.BaseExpression = template.with_changes(
                func=template.func.with_changes(value=node)
            )
            fix = f"`{device}`"
        else:
            device_root = root_name(cst.parse_expression(device))
            if device_root is not None and not self.facts.scopes.visible_name(device_root, node):
                self.report(
                    node,
                    message=(
                        f"`{short}` keeps {listed} on the CPU; the device `{device}` is only "
                        "bound after the criterion is built"
                    ),
                )
                return
            replacement = method_call(node, "to", cst.parse_expression(device))
            fix = f"`.to({device})`"
        self.report(
            node,
            message=(
                f"`{short}` keeps {listed} on the CPU (registered buffers) while the script "
                f"runs on `{device.lstrip('.')}`; move the criterion with {fix}"
            ),
            fix_title=f"Move the criterion with {fix}",
            edits=[Edit(node, replacement)],
        )

    def _holder(self, parent: cst.CSTNode | None) -> str | None:
        """`criterion = nn.X(...)` -> "criterion"; `self.loss_fn = ...` -> "self.loss_fn"."""
        if isinstance(parent, (cst.Assign, cst.AnnAssign)):
            targets = (
                [t.target for t in parent.targets]
                if isinstance(parent, cst.Assign)
                else [parent.target]
            )
            if len(targets) == 1:
                return (
                    self.context.module.code_for_node(targets[0])
                    if isinstance(targets[0], (cst.Name, cst.Attribute))
                    else None
                )
        return None

    def _local_use(self, holder: str, node: cst.Call) -> cst.Call | None:
        """`loss_fct(logits, labels)`: the call of a criterion that the function building it
        holds in a local, when its input is bound where the criterion is built."""
        function = self.facts.scopes.enclosing_function(node)
        if function is None or not holder.isidentifier():
            return None
        for call in self.facts.scopes.find(function, cst.Call):
            if not (isinstance(call.func, cst.Name) and call.func.value == holder):
                continue
            first = _input_of(call)
            root = root_name(first) if first is not None else None
            if root is not None and self.facts.scopes.visible_name(root, node):
                return call
            return None
        return None

    def _moved_later(self, holder: str, node: cst.Call) -> bool:
        """`criterion.to(device)` / `criterion.cuda()` anywhere in the file."""
        module = self.context.module
        for candidate in self.facts.scopes.find(module, cst.Call):
            func = candidate.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("to", "cuda")
                and module.code_for_node(func.value) == holder
                and candidate is not node
            ):
                return True
        return False

    # -- F.<loss>(input, target, weight=...) ------------------------------------------------------

    def _check_functional(self, node: cst.Call, qualified: str) -> None:
        weights = self._cpu_weights(node, WEIGHTED_FUNCTIONAL_LOSSES[qualified])
        if not weights:
            return
        self._fix_weights_for_input(node, node, weights, f"`{qualified.rsplit('.', 1)[1]}`")

    def _fix_weights_for_input(
        self,
        node: cst.Call,
        loss_call: cst.Call,
        weights: list[tuple[str, cst.Arg]],
        short: str,
    ) -> None:
        listed = ", ".join(f"`{keyword}`" for keyword, _ in weights)
        first = _input_of(loss_call)
        if first is None or not _repeatable(first):
            self.report(
                node,
                message=(
                    f"{short} gets {listed} on the CPU; its input is not a plain name, so "
                    "bind the input first and move the weights to its device"
                ),
            )
            return
        source = self.context.module.code_for_node(first)
        device = cst.parse_expression(f"{source}.device")
        edits = []
        for _, arg in weights:
            value = arg.value
            if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)) and not (
                value.lpar
            ):
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            edits.append(Edit(arg, arg.with_changes(value=method_call(value, "to", device))))
        self.report(
            node,
            message=(
                f"{short} gets {listed} on the CPU while its input may be on a GPU; move them "
                f"with `.to({source}.device)`"
            ),
            fix_title=f"Use `.to({source}.device)`",
            edits=edits,
        )

    # -- which weights are on the CPU -------------------------------------------------------------

    def _cpu_weights(
        self, node: cst.Call, slots: tuple[tuple[str, int], ...]
    ) -> list[tuple[str, cst.Arg]]:
        positional = [arg for arg in node.args if arg.keyword is None]
        if any(arg.star for arg in node.args):
            return []
        found = []
        for keyword, index in slots:
            arg = keyword_argument(node, keyword)
            if arg is None and index < len(positional):
                arg = positional[index]
            if arg is not None and self.facts.devices.on_cpu(arg.value, node):
                found.append((keyword, arg))
        return found


def _input_of(loss_call: cst.Call) -> cst.BaseExpression | None:
    """The loss's input with the reshapes that keep its device taken off
    (`logits.view(-1, n)` -> `logits`), or None."""
    positional = [arg for arg in loss_call.args if arg.keyword is None]
    first = keyword_argument(loss_call, "input")
    if first is None and positional and not positional[0].star:
        first = positional[0]
    if first is None:
        return None
    value = first.value
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in SAME_DEVICE_METHODS
    ):
        value = value.func.value
    return value


def _repeatable(node: cst.BaseExpression) -> bool:
    """A name, attribute chain or constant subscript: evaluating it twice is harmless."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Attribute):
        return _repeatable(node.value)
    if isinstance(node, cst.Subscript):
        return _repeatable(node.value) and all(
            isinstance(element.slice, cst.Index)
            and isinstance(element.slice.value, (cst.Integer, cst.SimpleString, cst.Name))
            for element in node.slice
        )
    return False
