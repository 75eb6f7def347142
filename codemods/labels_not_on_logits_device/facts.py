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
        if model_call is None or not self._handed_in(model_call.func, loss):
            return False
        fed = {
            root
            for arg in model_call.args
            if not arg.star and (root := receiver_root(arg.value)) is not None
        }
        return self._cut_from(positional[1], loss, fed)

    def _handed_in(self, model: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """The model is a parameter of the function (`def ppl(model, ids)`): loaded elsewhere,
        maybe with a `device_map`. One the function loads and moves itself is on one device."""
        function = self.scopes.enclosing_function(at)
        if function is None or not isinstance(model, cst.Name):
            return False
        bound = self.scopes.binding_before(model.value, at)
        return bound is not None and bound[0] == "param"

    def _model_output(
        self, node: cst.BaseExpression, at: cst.CSTNode, depth: int = 0
    ) -> cst.Call | None:
        """The model call whose `.logits` the tensor `node` is cut from, through slices,
        methods and plain names."""
        while not (isinstance(node, cst.Attribute) and node.attr.value == "logits"):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                node = node.func.value
            elif isinstance(node, (cst.Subscript, cst.Attribute)):
                node = node.value
            elif isinstance(node, cst.Name) and depth < _MAX_BINDINGS:
                value = self._assigned(node.value, at)
                return None if value is None else self._model_output(value, at, depth + 1)
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
        root = receiver_root(node)
        if root is None:
            return False
        if root in fed:
            return True
        value = self._assigned(root, at) if depth < _MAX_BINDINGS else None
        return value is not None and self._cut_from(value, at, fed, depth + 1)

    def _assigned(self, name: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        bound = self.scopes.binding_before(name, at)
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
