"""DF307's facts: the random-number generators of a file. The `torch.Generator(...)` an
expression is, the kind of device it draws on, and the calls it is handed to.

A generator draws on the device it was made for (`torch.Generator()`: the CPU), whatever
device the call it is given to draws its numbers on.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.base import Analysis
from devfix.codemods.analysis.names import argument, dotted_name
from devfix.codemods.analysis.torch_names import GENERATORS


class Generators(Analysis):
    """The `torch.Generator` objects of one file: where each is made, on what kind of device,
    and which calls it is given to."""

    def generator_call(self, expr: cst.BaseExpression, at: cst.CSTNode) -> cst.Call | None:
        """The `torch.Generator(...)` call `expr` is (also seeded in place:
        `torch.Generator().manual_seed(0)`), or a plain name was last bound to."""
        while (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "manual_seed"
        ):
            expr = expr.func.value
        if isinstance(expr, cst.Call):
            if dotted_name(expr.func) is not None and (
                self.names.qualified_name(expr.func) in GENERATORS
            ):
                return expr
            return None
        if isinstance(expr, cst.Name):
            value = self.scopes.latest_binding(expr.value, at)
            if isinstance(value, cst.Call):
                return self.generator_call(value, value)
        return None

    def generator_kind(self, generator: cst.Call) -> str | None:
        """ "cpu", "accelerator", "device" (chosen at run time) or None, for a
        `torch.Generator(...)` call."""
        device = argument(generator, "device")
        if device is None:
            return "cpu"
        return self.facts.moves.device_kind(device, self.scopes.enclosing_function(generator))

    def generator_uses(self, generator: cst.Call) -> list[cst.Call] | None:
        """The calls that receive the generator bound by `g = torch.Generator(...)` (as
        `generator=g` or a positional argument); None when it escapes elsewhere or is not
        bound to a plain name."""
        outer: cst.CSTNode = generator
        while True:  # `torch.Generator().manual_seed(0)` is the generator too
            parent = self.context.parent(outer)
            grand = self.context.parent(parent) if parent is not None else None
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value == "manual_seed"
                and isinstance(grand, cst.Call)
            ):
                outer = grand
            else:
                break
        name = self.scopes.assigned_name(outer)
        if name is None:
            parent = self.context.parent(outer)
            call = self.context.parent(parent) if isinstance(parent, cst.Arg) else None
            return [call] if isinstance(call, cst.Call) else None
        scope = self.scopes.enclosing_scope(generator)
        uses: list[cst.Call] = []
        for node in self.scopes.names_after(scope, name, outer):
            parent = self.context.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                continue  # `g.manual_seed(0)`, `g.device`
            if isinstance(parent, cst.AssignTarget):
                return None  # rebound: another generator from here on
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call):
                    uses.append(call)
                    continue
            return None
        return uses
