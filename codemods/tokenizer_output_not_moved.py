"""DF202: tokenizer outputs passed to a model on a device without being moved there."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_call
from devfix.codemods.analysis.modules import method
from devfix.codemods.analysis.names import code_of, keyword_argument
from devfix.types import Applicability, Edit


class TokenizerOutputNotMoved(DevicePass):
    """Tokenizer output (`return_tensors="pt"`) fed to a model on a device without a move.

    ## What it does
    Finds `tokenizer(..., return_tensors="pt")` (and `.encode`, `.encode_plus`,
    `.apply_chat_template`, processors: any call with `return_tensors="pt"`) whose result
    reaches a model that is on a device, through `model(**inputs)`,
    `model.generate(**inputs)`, `model(inputs["input_ids"])`, `model.generate(inputs.input_ids)`
    or a name bound to one of these, without a `.to(...)` on the way. Token ids made into a
    tensor by hand count too: `torch.tensor(ids)` / `torch.LongTensor([ids])` (no `device=`) of
    what a tokenizer's `encode` returned, and a call of a helper of the file that returns such
    a tensor (`text_to_token_ids(text, tokenizer)`). The model may also be reached through a
    function given it by name next to the data (`generate(model=model, idx=ids)`; when the
    function is defined in the file it must call that model). The fix appends
    `.to(<device>)` to the tokenizer call: the script's device variable when the model was
    moved to it (`model.to(device)`), else `model.device`: a model loaded with `device_map=`,
    a model a Hugging Face or TRL `Trainer` was built with (it moves the model onto its device),
    a PEFT adapter loaded onto such a model (`PeftModel.from_pretrained(base, path)`), or a
    model a class or function receives from its caller annotated as a Hugging Face model
    (`def __init__(self, model: PreTrainedModel)`, no call in the file filling it): the caller
    chooses the device and the model carries it. A tokenizer of the file itself (a function,
    or the `__call__` of a class) that returns a plain dict gets each value moved instead
    (`{key: value.to(device) for key, value in tokenize(text).items()}`: a dict has no
    `.to()`); one whose result is not known declines with that reason. Declined: an
    unannotated model parameter (nothing says it has a `.device`), and a model the file itself
    leaves on the CPU.

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
    TRIGGER_WORDS = ("return_tensors", "encode", "convert_tokens_to_ids", "EncodeAsIds")

    def visit_Call(self, node: cst.Call) -> None:
        argument = keyword_argument(node, "return_tensors")
        if argument is None:
            if not self.facts.flow.token_id_tensor(node):
                return
        elif (
            not isinstance(argument.value, cst.SimpleString)
            or argument.value.evaluated_value != "pt"
        ):
            return
        found = self.facts.flow.model_call_fed(node)
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
        kept = self.facts.cpu_only.use_of(self.facts.scopes.assigned_name(node), node, model_call)
        if kept is not None:
            self.report(
                node,
                message=f"tokenizer output reaches `{model_name}` (line {line}) on the CPU; no "
                f"fix: moving it whole would move `{code_of(kept.expr)}`, which stays on the CPU "
                f"({kept.reason})",
            )
            return
        where = f"tokenizer output reaches `{model_name}` (line {line}) on the CPU"
        kind = self._output_kind(node)
        if kind == "dict":
            moved = self._moved_items(node, device)
            self.report(
                node,
                message=f"{where}; it is a plain dict: each value needs `.to({shown})`",
                fix_title=f"Move each value with `.to({shown})`",
                edits=[Edit(node, moved)],
            )
            return
        if kind is not None:
            self.report(node, message=f"{where}; no fix: {kind}")
            return
        self.report(
            node,
            message=f"{where}; it needs `.to({shown})`",
            fix_title=f"Append `.to({shown})`",
            edits=[Edit(node, method_call(node, "to", device))],
        )

    def _output_kind(self, node: cst.Call) -> str | None:
        """What the call returns when it runs this file's own code: "dict" (a plain dict, which
        has no `.to()`), a reason when that is not known, None for a library's tokenizer or
        processor (a `BatchEncoding`, `BatchFeature` or tensor: all have `.to()`)."""
        if keyword_argument(node, "return_tensors") is None:
            return None  # token ids made into a tensor (by the file's helper or by hand)
        function = self._own_callable(node.func, node)
        if function is None or self.facts.modules.returns_tensor(function):
            return None
        values = [
            statement.value
            for statement in self.facts.scopes.nodes(function.body)
            if isinstance(statement, cst.Return)
        ]
        if values and all(self._is_plain_dict(value) for value in values):
            return "dict"
        if values and all(self._has_to(value) for value in values):
            return None  # hands on a library tokenizer's output, or an object with `.to()`
        return (
            f"`{code_of(node.func)}` is this file's own code and what it returns is not known to "
            "have `.to()` (a plain dict has none)"
        )

    def _own_callable(self, func: cst.BaseExpression, at: cst.CSTNode) -> cst.FunctionDef | None:
        """The definition a call of `func` runs when it is this file's own: a module-level
        function, or the `__call__` of a module-level class whose instance `func` names
        (`proc = TextProcessor(); proc(text)`); None for anything else."""
        if not isinstance(func, cst.Name):
            return None
        scopes = self.facts.scopes
        function = scopes.module_functions().get(func.value)
        if function is not None:
            return function
        values = scopes.assigned_values(func.value, at)
        if len(values) != 1 or not isinstance(values[0], cst.Call):
            return None
        built = values[0].func
        classdef = scopes.module_classes().get(built.value) if isinstance(built, cst.Name) else None
        return method(classdef, "__call__") if classdef is not None else None

    def _has_to(self, value: cst.BaseExpression | None) -> bool:
        """A library tokenizer's output (a call with `return_tensors=`), a `BatchEncoding` or
        `BatchFeature`, or an instance of a class of this file that defines `to`."""
        if not isinstance(value, cst.Call):
            return False
        if keyword_argument(value, "return_tensors") is not None:
            return True
        qualified = self.qualified_name(value.func) or ""
        if qualified.rsplit(".", 1)[-1] in ("BatchEncoding", "BatchFeature") and (
            qualified.startswith("transformers.")
        ):
            return True
        classdef = (
            self.facts.scopes.module_classes().get(value.func.value)
            if isinstance(value.func, cst.Name)
            else None
        )
        return classdef is not None and method(classdef, "to") is not None

    def _is_plain_dict(self, value: cst.BaseExpression | None) -> bool:
        if isinstance(value, (cst.Dict, cst.DictComp)):
            return True
        return isinstance(value, cst.Call) and self.qualified_name(value.func) in (
            "dict",
            "builtins.dict",
        )

    def _moved_items(self, node: cst.Call, device: cst.BaseExpression) -> cst.DictComp:
        """`{key: value.to(device) for key, value in <node>.items()}`, with loop names the
        device expression does not use."""
        used = {n.value for n in self.context.subtree(device) if isinstance(n, cst.Name)}
        key, value = "key", "value"
        while key in used or value in used:
            key, value = f"{key}_", f"{value}_"
        return cst.DictComp(
            key=cst.Name(key),
            value=method_call(cst.Name(value), "to", device),
            for_in=cst.CompFor(
                target=cst.Tuple(
                    [cst.Element(cst.Name(key)), cst.Element(cst.Name(value))], lpar=[], rpar=[]
                ),
                iter=cst.Call(func=cst.Attribute(value=node, attr=cst.Name("items"))),
            ),
        )
