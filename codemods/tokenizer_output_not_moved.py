"""DF202: tokenizer outputs passed to a model on a device without being moved there."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import dotted_name, keyword_argument, method_call
from devfix.codemods.analysis import FileFacts
from devfix.codemods.analysis.flow import ModelDevice, ScriptFlow
from devfix.codemods.analysis.names import code_of
from devfix.types import Applicability, Edit

_MODEL_METHODS = ("generate", "forward")
_MOVES = ("to", "cuda")


class TokenizerOutputNotMoved(DevicePass):
    """Tokenizer output (`return_tensors="pt"`) fed to a model on a device without a move.

    ## What it does
    Finds `tokenizer(..., return_tensors="pt")` (and `.encode`, `.encode_plus`,
    `.apply_chat_template`, processors: any call with `return_tensors="pt"`) whose result
    reaches a model that is on a device, through `model(**inputs)`,
    `model.generate(**inputs)`, `model(inputs["input_ids"])`, `model.generate(inputs.input_ids)`
    or a name bound to one of these, without a `.to(...)` on the way. The fix appends
    `.to(<device>)` to the tokenizer call: the script's device variable when the model was
    moved to it (`model.to(device)`), else `model.device` (a model loaded with `device_map=`).

    ## Why is this bad?
    Tokenizers always return CPU tensors. The embedding layer of a model on the GPU then fails
    with `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:0 and cpu!` (`generate` first warns that "`input_ids` is on cpu, whereas the
    model is on cuda"; Hugging Face decided not to move inputs automatically).

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name).to(device)
    inputs = tokenizer(prompt, return_tensors="pt")
    output = model.generate(**inputs)
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(name).to(device)
    inputs = tokenizer(prompt, return_tensors="pt").to(device)
    output = model.generate(**inputs)
    ```
    `BatchEncoding.to` moves every tensor it holds. With `device_map="auto"` the model's
    `.device` is the device of its first parameters (the embeddings), which is where the
    input ids must go.

    ## Fix safety
    Safe: on a CPU model nothing fires, and the move is a no-op when the tensors are already
    there. When the model was moved to a device that cannot be written at the tokenizer call
    (a local variable of another function) and the model has no `.device`, the finding has no
    fix and says why.

    ## References
    - huggingface/transformers#11165, #16359 (`BatchEncoding.to`); PR#19468 (the `generate`
      warning, and why inputs are not moved automatically).
    """

    CODE = "DF202"
    NAME = "tokenizer-output-not-moved"
    MESSAGE = "tokenizer output reaches a model on a device without being moved"
    FIX_TITLE = "Move the tokenizer output to the model's device"
    APPLICABILITY = Applicability.SAFE
    TRIGGER_WORDS = ("return_tensors",)

    def visit_Call(self, node: cst.Call) -> None:
        argument = keyword_argument(node, "return_tensors")
        if argument is None or not isinstance(argument.value, cst.SimpleString):
            return
        if argument.value.evaluated_value != "pt":
            return
        flow = self.facts.flow
        found = self._model_fed(node, flow)
        if found is None:
            return
        model_call, model = found
        model_name = model.model
        if model.move is not None and (model.move.method == "to" or not model.pretrained):
            device = model.move.as_to_argument()
        elif model.pretrained:
            device = cst.parse_expression(f"{model_name}.device")
        else:
            self.report(
                node,
                message=f"{self.MESSAGE} (`{model_name}`); no fix: {model.reason}",
            )
            return
        shown = code_of(device)
        line = self.context.position(model_call).start.line
        self.report(
            node,
            message=(
                f"tokenizer output reaches `{model_name}` (line {line}) on the CPU; "
                f"it needs `.to({shown})`"
            ),
            fix_title=f"Append `.to({shown})`",
            edits=[Edit(node, method_call(node, "to", device))],
        )

    def _model_fed(self, node: cst.Call, flow: ScriptFlow) -> tuple[cst.Call, ModelDevice] | None:
        """The model call the tokenizer output reaches unmoved, and the model's device."""
        value: cst.BaseExpression = node
        while True:
            parent = self.context.parent(value)
            if isinstance(parent, cst.Attribute) and parent.value is value:
                if parent.attr.value in _MOVES:
                    return None
                grand = self.context.parent(parent)
                if isinstance(grand, cst.Call) and grand.func is parent:
                    return None  # a method call on the output: leave it alone
                value = parent
            elif isinstance(parent, cst.Subscript) and parent.value is value:
                value = parent
            else:
                break
        parent = self.context.parent(value)
        if isinstance(parent, cst.Arg):
            call = self.context.parent(parent)
            if isinstance(call, cst.Call):
                return self._as_model_call(call, flow)
            return None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Name):
                return self._follow(target.value, parent, flow, depth=0)
        return None

    def _follow(
        self, name: str, assign: cst.CSTNode, flow: ScriptFlow, depth: int
    ) -> tuple[cst.Call, ModelDevice] | None:
        scope = flow.scopes.enclosing_function(assign) or self.context.module
        start = self.context.position(assign).end
        result: tuple[cst.Call, ModelDevice] | None = None
        for use in self.facts.scopes.names_in(scope, name):
            position = self.context.position(use).start
            if (position.line, position.column) <= (start.line, start.column):
                continue
            if _moves(self.facts, use):
                return None
            expression: cst.CSTNode = use
            parent = self.context.parent(use)
            while (
                isinstance(parent, (cst.Attribute, cst.Subscript))
                and parent.value is expression
                and not (isinstance(parent, cst.Attribute) and parent.attr.value in _MOVES)
            ):
                expression, parent = parent, self.context.parent(parent)
            if isinstance(parent, cst.Arg):
                call = self.context.parent(parent)
                if isinstance(call, cst.Call) and result is None:
                    result = self._as_model_call(call, flow)
            elif (
                isinstance(parent, cst.Assign)
                and depth == 0
                and expression is not use
                and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)
            ):
                derived = self._follow(parent.targets[0].target.value, parent, flow, depth + 1)
                if derived is None and _any_move_of(
                    self.facts, scope, parent.targets[0].target.value
                ):
                    return None
                result = result or derived
            elif isinstance(parent, cst.Assign):
                return None  # rebound from something else: unknown
        return result

    def _as_model_call(
        self, call: cst.Call, flow: ScriptFlow
    ) -> tuple[cst.Call, ModelDevice] | None:
        callee = call.func
        if isinstance(callee, cst.Attribute) and callee.attr.value in _MODEL_METHODS:
            callee = callee.value
        if dotted_name(callee) is None:
            return None
        model = flow.model_device(callee, call)
        if model is None or (model.move is None and not model.pretrained and not model.reason):
            return None
        return call, model


def _moves(facts: FileFacts, use: cst.Name) -> bool:
    """`inputs.to(d)`, `inputs["x"].to(d)`, `{k: v.to(d) for k, v in inputs.items()}`,
    `to_device(inputs)`: the output is moved somewhere on the way."""
    current: cst.CSTNode = use
    for ancestor in facts.context.ancestors(use):
        if isinstance(ancestor, cst.Attribute) and ancestor.value is current:
            if ancestor.attr.value in _MOVES:
                return True
        elif isinstance(ancestor, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
            return any(
                isinstance(n, cst.Attribute) and n.attr.value in _MOVES
                for n in facts.context.subtree(ancestor)
            )
        elif isinstance(ancestor, cst.Call):
            tail = (dotted_name(ancestor.func) or "").rsplit(".", 1)[-1].lower()
            if "device" in tail or "cuda" in tail or tail.startswith(("to_", "move", "send")):
                return True
        elif isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
        current = ancestor
    return False


def _any_move_of(facts: FileFacts, scope: cst.CSTNode, name: str) -> bool:
    return any(_moves(facts, use) for use in facts.scopes.names_in(scope, name))
