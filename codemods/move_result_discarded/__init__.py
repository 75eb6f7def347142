"""DF206: `x.to(device)` on a tensor as a statement: the moved copy is thrown away."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.analysis.names import dotted_name
from devfix.codemods.analysis.scopes import target_names
from devfix.codemods.move_result_discarded.facts import HeldValues
from devfix.types import Applicability, Edit

_MOVES = ("to", "cuda")


class MoveResultDiscarded(DevicePass):
    """Tensor moved with `x.to(device)` as a statement, its result thrown away.

    ## What it does
    Finds `x.to(device)` and `x.cuda()` written as statements of their own, where `x` is a
    plain name that holds a tensor, and assigns the result back: `x = x.to(device)`. Arguments
    (`non_blocking=True`) and comments stay as written. A name counts as a tensor when torch
    builds it (`torch.zeros(...)`, `torch.from_numpy(a)`, torch math, tensor methods of one)
    or when the code uses it as one (`x.shape`, `x.unsqueeze(0)`, `x * 2`, `y.expand_as(x)`,
    `x[:, 0]`, `torch.cat([x, y])`), or when it comes from the same function as such a name.
    Declined, with no finding: names that may hold a module or another object whose `.to()`
    works in place (bound to `nn.*` layers, `nn.Module` classes of the file, `DataParallel`,
    `from_pretrained` results and what a tokenizer returns, names that are called or use
    `.parameters()`, `.eval()`, `.keys()`, ...), names the code says nothing about, and
    tensors that a module's method computes from the module's own buffers (already on its
    device).
    A moved copy kept in a name that the code rebinds from the original before reading it
    (`w = self.w.to(x.device)`, then `w = self.w[y]`) is dropped as surely: the rebinding reads
    the moved copy instead (`w = w[y]`).
    Reported without a fix: a loop variable that the loop does not read after the move
    (rebinding it moves nothing in the sequence) and a module-level name moved inside a
    function (assigning it there would make it local).

    ## Why is this bad?
    `nn.Module.to()` moves the module in place, but `Tensor.to()` and `Tensor.cuda()` return a
    moved copy and leave the tensor where it was. The statement does nothing; the tensor stays
    on the CPU and meets the model's weights on the GPU: `RuntimeError: Expected all tensors to
    be on the same device, but found at least two devices, cuda:0 and cpu!` (or "Input type
    (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same").

    ## Example
    ```python
    images = torch.from_numpy(array).float()
    images.to(device)
    output = model(images)
    ```

    ## Use instead
    ```python
    images = torch.from_numpy(array).float()
    images = images.to(device)
    output = model(images)
    ```

    ## Fix safety
    Safe when the name's binding makes it a tensor (a torch factory or torch math): the
    statement meant to move it, and now it does. Unsafe when only the name's uses say it is a
    tensor: a name that holds an object with a `.to()` of its own might not return it.
    Either way, later code now sees the tensor on the device, as the statement intended.
    """

    CODE = "DF206"
    NAME = "move-result-discarded"
    MESSAGE = "the tensor's `.to()` result is thrown away: the tensor stays where it was"
    FIX_TITLE = "Assign the moved tensor back"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = (".to", ".cuda")

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _MOVES
            and isinstance(call.func.value, cst.Name)
        ):
            return
        if self.facts.moves.move_of(call) is None:
            return  # a dtype cast, a move to the CPU
        name = call.func.value.value
        values = self.facts.own(HeldValues)
        held = values.held(name, call)
        if held.kind != "tensor" or values.from_module_state(name, call):
            return
        code = self.context.module.code_for_node(call)
        method = call.func.attr.value
        message = (
            f"`{code}` returns a moved copy that is thrown away (a tensor's `.{method}()` is "
            f"not in place; {held.evidence}): `{name}` stays where it was"
        )
        loop = self._loop_over(name, node)
        if loop is not None and not self._read_later_in(loop, name, node):
            self.report(
                node,
                message=f"{message}; `{name}` is the loop variable, so assigning it back moves "
                f"nothing in `{self.context.module.code_for_node(loop.iter)}`: move the items "
                "where the sequence is built",
            )
            return
        if not self._bound_here(name, node):
            self.report(
                node,
                message=f"{message}; `{name}` is a module-level name, so `{name} = ...` here "
                "would make it local to the function: move it where it is defined",
            )
            return
        replacement = cst.Assign(
            targets=[cst.AssignTarget(target=cst.Name(name))], value=call, semicolon=node.semicolon
        )
        self.report(
            node,
            message=f"{message}; assign it back: `{name} = {code}`",
            fix_title=f"Assign it back: `{name} = {code}`",
            edits=[Edit(node, replacement)],
            applicability=Applicability.SAFE if held.proven else Applicability.UNSAFE,
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        """`alpha = self.alpha.to(x.device)`, then `alpha = self.alpha.gather(0, y)` before
        `alpha` is read: the moved copy is dropped and the original read in its place."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        call = node.value
        if not (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _MOVES
            and self.facts.moves.move_of(call) is not None
        ):
            return
        name, original = node.targets[0].target.value, dotted_name(call.func.value)
        scope = self.facts.scopes.enclosing_scope(node)
        later = self.facts.scopes.names_after(scope, name, node)
        first = next((n for n in later if not self.facts.scopes.within(n, node)), None)
        target = self.context.parent(first) if first is not None else None
        rebinding = self.context.parent(target) if isinstance(target, cst.AssignTarget) else None
        if original is None or original == name or not isinstance(rebinding, cst.Assign):
            return
        reads = [
            read
            for read in self.context.of_type(rebinding.value, (cst.Name, cst.Attribute))
            if dotted_name(read) == original
        ]
        rebound_in, moved_in = (self.facts.scopes.placements(n)[0].owner for n in (rebinding, node))
        if not reads or rebound_in is not moved_in:
            return  # rebound on some paths only: the copy may be read on the others
        line = self.facts.scopes.line_of(rebinding)
        self.report(
            node,
            message=f"`{name}` holds `{original}` moved by `.{call.func.attr.value}()`, but "
            f"line {line} rebinds it from `{original}` itself, which stayed where it was: the "
            f"moved copy is never read; read `{name}` there",
            fix_title=f"Read the moved `{name}` on line {line}",
            edits=[Edit(read, cst.Name(name)) for read in reads],
        )

    def _loop_over(self, name: str, node: cst.CSTNode) -> cst.For | None:
        """The `for` loop in the same scope whose target binds `name`, around `node`."""
        for ancestor in self.context.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(ancestor, cst.For) and any(
                bound.value == name for bound in target_names(ancestor.target)
            ):
                return ancestor
        return None

    def _read_later_in(self, loop: cst.For, name: str, node: cst.CSTNode) -> bool:
        """The loop body reads `name` after `node`: the move is meant for this iteration."""
        after = self.context.order(node)[1]
        return any(
            self.context.order(use)[0] > after
            for use in self.facts.scopes.names_in(loop.body, name)
        )

    def _bound_here(self, name: str, node: cst.CSTNode) -> bool:
        """`name` is a local of `node`'s function (or `node` is at module level)."""
        function = self.facts.scopes.enclosing_function(node)
        return function is None or self.facts.scopes.bound_in(name, function)
