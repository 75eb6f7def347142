"""Losses whose target the file moves to the device of their input (the author expects the two
on different devices, as under a model split over GPUs), and language models scored on their own
inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import argument, call_tail, receiver_root

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


#: plain-name assignments followed back from a loss argument
_MAX_BINDINGS = 4


class AlignedTargets(Analysis):
    """Whether a loss of the file gets its target moved to its input's device."""

    def __init__(self, facts: FileFacts) -> None:
        super().__init__(facts)
        self._aligns_targets: bool | None = None

    def aligns_targets_with_inputs(self) -> bool:
        """Whether a loss of the file gets its target moved to the device of its input
        (`labels = labels.to(logits.device)` before `loss_fct(logits, labels)`, or the move in
        the call): the author expects the two on different devices, as under a model split
        over GPUs (the placement itself may be chosen in another file)."""
        if self._aligns_targets is None:
            self._aligns_targets = ".device" in self.context.text and any(
                self._target_moved_to_input(node)
                for node in self.context.of_type(self.context.module, cst.Call)
            )
        return self._aligns_targets

    def scores_model_inputs(self, loss: cst.Call) -> bool:
        """`loss_fct(shift_logits..., shift_labels...)` where the logits are cut from the
        `.logits` of a model the function is given (`lm_logits = model(inputs).logits`) and the
        labels from a tensor that call was given (`shift_labels = inputs[:, 1:]`): a language
        model scored on its own inputs, as perplexity and scoring helpers do. A model loaded
        with a `device_map` returns the logits on its last GPU while the inputs stay where they
        were moved."""
        positional = [arg.value for arg in loss.args if arg.keyword is None and not arg.star]
        if len(positional) < 2:
            return False
        model_call = self._model_output(positional[0], loss)
        if model_call is None:
            return False
        fed = {root for arg in model_call.args if (root := _fed_root(arg)) is not None}
        if self._handed_in(model_call.func, loss):
            return self._cut_from(positional[1], loss, fed)
        return self._left_behind(loss, model_call, fed) is not None

    def labels_left_behind(self, loss: cst.Call) -> str | None:
        """The encoding the labels of `loss` are cut from while the model it scores is fed a
        moved copy of it (`ids = enc.input_ids.to(device)`, `target = enc["input_ids"].clone()`):
        the labels stay on the CPU whatever the placement. None otherwise."""
        positional = [arg.value for arg in loss.args if arg.keyword is None and not arg.star]
        model_call = self._model_output(positional[0], loss) if len(positional) > 1 else None
        if model_call is None:
            return None
        fed = {root for arg in model_call.args if (root := _fed_root(arg)) is not None}
        return self._left_behind(loss, model_call, fed)

    def _left_behind(self, loss: cst.Call, model_call: cst.Call, fed: set[str]) -> str | None:
        if self.facts.flow.model_device(model_call.func, model_call) is None:
            return None
        sources: set[str] = set()
        for name in fed:
            value = self._assigned(name, model_call)
            if isinstance(value, cst.Call) and self.facts.moves.move_of(value) is not None:
                assert isinstance(value.func, cst.Attribute)
                root = receiver_root(value.func.value)
                if root is not None and root != name:
                    sources.add(root)
        labels = [arg.value for arg in loss.args if arg.keyword is None and not arg.star][1]
        chain = self._bindings_of(labels, loss)
        moved_on_the_way = any(
            isinstance(call, cst.Call) and self.facts.moves.move_of(call) is not None
            for _name, value in chain
            for call in self.context.of_type(value, cst.Call)
        )
        if moved_on_the_way:
            return None
        return next(
            (source for source in sorted(sources) if self._cut_from(labels, loss, {source})), None
        )

    def source_move(self, loss: cst.Call) -> tuple[cst.BaseExpression, str] | None:
        """Where a language model's labels are better moved than in the loss call: when the
        labels' variable is read elsewhere too (`valid = (shift_labels != pad).sum(-1)`, later
        divided into the loss), the earliest binding on their way from the model's inputs
        that a logits variable is bound before (`label = inputs["input_ids"]` after `logits =
        out["logits"]`), and that variable: moving there makes every tensor computed from the
        labels follow. None where the loss call is the one use."""
        positional = [arg.value for arg in loss.args if arg.keyword is None and not arg.star]
        if len(positional) < 2:
            return None
        chain = self._bindings_of(positional[1], loss)
        logits = self._bindings_of(positional[0], loss)
        function = self.scopes.enclosing_function(loss)
        if not chain or function is None:
            return None
        reads = [
            use
            for use in self.scopes.names_in(function, chain[0][0])
            if not isinstance(self.context.parent(use), cst.AssignTarget)
        ]
        if len(reads) < 2:
            return None
        for _name, value in reversed(chain):  # earliest first
            start = self.context.order(value)[0]
            bound_before = [
                logit for logit, logit_value in logits if self.context.order(logit_value)[1] < start
            ]
            if bound_before:
                return value, bound_before[0]
        return None

    def moved_to_logits_on_the_way(
        self, node: cst.BaseExpression, logits: cst.BaseExpression, at: cst.CSTNode
    ) -> bool:
        """A binding on the way to `node` moves it to the device of the logits or of a tensor
        they are cut from (`label = ids.to(logit.device)`, then `shift = label[:, 1:]`)."""
        sources = {name for name, _value in self._bindings_of(logits, at)}
        sources.add(receiver_root(logits) or "")
        return any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "to"
            and isinstance(device := argument(call, "device"), cst.Attribute)
            and device.attr.value == "device"
            and receiver_root(device.value) in sources
            for _name, value in self._bindings_of(node, at)
            for call in self.context.of_type(value, cst.Call)
        )

    def _bindings_of(
        self, node: cst.BaseExpression, at: cst.CSTNode
    ) -> list[tuple[str, cst.BaseExpression]]:
        """The plain names a tensor is cut from, latest first, with the values bound to them
        (`shift_labels.view(-1)` -> shift_labels = labels[:, 1:], labels = inputs["ids"])."""
        found: list[tuple[str, cst.BaseExpression]] = []
        while len(found) <= _MAX_BINDINGS:
            if isinstance(node, cst.IfExp):
                node = node.body
            root = receiver_root(node)
            value = self._assigned(root, at) if root is not None else None
            if root is None or value is None:
                break
            found.append((root, value))
            node, at = value, value
        return found

    def _handed_in(self, model: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """The model is a parameter of the function (`def ppl(model, ids)`) or an attribute of
        its object (`self.model`): loaded elsewhere, maybe with a `device_map`, and fed copies
        of the inputs it was moved with. One the function loads and moves itself is on one
        device."""
        function = self.scopes.enclosing_function(at)
        if function is None:
            return False
        if isinstance(model, cst.Attribute):
            return isinstance(model.value, cst.Name) and model.value.value == "self"
        if not isinstance(model, cst.Name):
            return False
        bound = self.scopes.binding_before(model.value, at)
        return bound is not None and bound[0] == "param"

    def _model_output(
        self, node: cst.BaseExpression, at: cst.CSTNode, depth: int = 0
    ) -> cst.Call | None:
        """The model call whose `.logits` the tensor `node` is cut from, through slices,
        methods and plain names."""
        while not (isinstance(node, cst.Attribute) and node.attr.value == "logits"):
            if _logits_field(node):
                assert isinstance(node, cst.Subscript)
                node = cst.Attribute(value=node.value, attr=cst.Name("logits"))
                break
            if isinstance(node, cst.IfExp):  # `out["logits"] if isinstance(out, dict) else ...`
                node = node.body
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                node = node.func.value
            elif isinstance(node, (cst.Subscript, cst.Attribute)):
                node = node.value
            elif isinstance(node, cst.Name) and depth < _MAX_BINDINGS:
                # The binding before `at`; one it reads itself from (`logit = logit[:, :-1]`)
                # is followed from its own position.
                value = self._assigned(node.value, at)
                return None if value is None else self._model_output(value, value, depth + 1)
            else:
                return None
        owner = node.value
        if isinstance(owner, cst.Name):
            owner = self._assigned(owner.value, at) or owner
        return owner if isinstance(owner, cst.Call) else None

    def _cut_from(
        self, node: cst.BaseExpression, at: cst.CSTNode, fed: set[str], depth: int = 0
    ) -> bool:
        """`node` is a tensor cut (slices, methods, plain names) from one of the names `fed`."""
        if isinstance(node, cst.Call) and (self.names.qualified_name(node.func) or "").startswith(
            "torch."
        ):
            # `torch.where(mask, input_ids, ignore_index)`: cut from what it is given.
            return any(self._cut_from(arg.value, at, fed, depth + 1) for arg in node.args)
        root = receiver_root(node)
        if root is None:
            return False
        if root in fed:
            return True
        value = self._assigned(root, at) if depth < _MAX_BINDINGS else None
        return value is not None and self._cut_from(value, value, fed, depth + 1)

    def _assigned(self, name: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of the binding of `name` that `at` reads: one before the statement that
        holds `at` (`logit = logit[:, :-1]` reads the earlier `logit`)."""
        bound = self.scopes.binding_before(name, at, statement=True)
        return bound[1] if bound is not None and bound[0] == "assign" else None

    def _target_moved_to_input(self, call: cst.Call) -> bool:
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if len(positional) < 2 or self.facts.modules.loss_kind(call) is None:
            return False
        source = receiver_root(positional[0])
        target = positional[1]
        if isinstance(target, cst.Name):
            bound = self.scopes.binding_before(target.value, call)
            target = bound[1] if bound is not None and bound[1] is not None else target
        return source is not None and any(
            isinstance(node, cst.Call)
            and call_tail(node.func) == "to"
            and isinstance(device := argument(node, "device"), cst.Attribute)
            and device.attr.value == "device"
            and receiver_root(device.value) == source
            for node in self.context.subtree(target)
        )


def _fed_root(arg: cst.Arg) -> str | None:
    """The name a model call's argument hands it: `ids[:, :-1]` -> "ids"; for
    `**{k: v.to(device) for k, v in inputs.items()}`, the moved copies' source, "inputs"
    (labels taken from it stay where it is). A plain `**inputs` hands no one tensor."""
    value = arg.value
    if arg.star == "**" and isinstance(value, cst.DictComp):
        iterable = value.for_in.iter
        return receiver_root(iterable)
    return None if arg.star else receiver_root(value)


def _logits_field(node: cst.BaseExpression) -> bool:
    """`outputs["logits"]`."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.SimpleString)
        and index.value.evaluated_value == "logits"
    )
