"""Losses whose target the file moves to the device of their input: the author expects the two
on different devices, as under a model split over GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import argument, call_tail, receiver_root

if TYPE_CHECKING:
    from devfix.codemods.analysis import FileFacts


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
