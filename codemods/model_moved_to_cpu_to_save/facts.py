"""Whether a model moved to the CPU while its state is saved is still trained afterwards.

`nn.Module.cpu()` moves the module itself. `torch.save(model.cpu().state_dict(), path)` in
the middle of a training loop therefore leaves the model on the CPU for every later step,
while the loop keeps moving its batches to the GPU.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import call_tail, dotted_name

#: Calls on a model that run it.
_RUNS = frozenset({"forward", "generate"})
#: Calls that move a module back where it trains.
_MOVES_BACK = frozenset({"to", "cuda"})


class SavedOnTheCpu(Analysis):
    """The loop a `.cpu()` for a checkpoint runs in, and what the loop does after it."""

    def training_loop(self, move: cst.Call, model: str) -> cst.For | cst.While | None:
        """The innermost loop of the function around `move` whose body runs `model` or trains
        (`model(x)`, `model.forward(x)`, `loss.backward()`, `optimizer.step()`), and does not
        move `model` back after `move` (`model.to(device)`, `model.cuda()`); None when there
        is none: the save after the last step, or one the loop undoes."""
        for ancestor in self.context.ancestors(move):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return None
            if not isinstance(ancestor, (cst.For, cst.While)):
                continue
            if self._moves_back(ancestor.body, model, move):
                return None
            if self._trains(ancestor.body, model, move):
                return ancestor
        return None

    def _trains(self, body: cst.CSTNode, model: str, move: cst.Call) -> bool:
        for call in self.context.of_type(body, cst.Call):
            if call is move:
                continue
            func = call.func
            if dotted_name(func) == model:
                return True
            tail = call_tail(func)
            if isinstance(func, cst.Attribute) and (
                (tail in _RUNS and dotted_name(func.value) == model)
                or (tail == "backward" and not call.args)
                or (tail == "step" and "optim" in (dotted_name(func.value) or "").lower())
            ):
                return True
        return False

    def _moves_back(self, body: cst.CSTNode, model: str, move: cst.Call) -> bool:
        after = self.context.order(move)[1]
        return any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _MOVES_BACK
            and dotted_name(call.func.value) == model
            and self.context.order(call)[0] > after
            for call in self.context.of_type(body, cst.Call)
        )
