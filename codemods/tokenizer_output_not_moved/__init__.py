"""DF202: tokenizer outputs passed to a model on a device without being moved there."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import method_call, moved_items
from devfix.codemods.analysis.moves import literal_gpu_move
from devfix.codemods.analysis.names import code_of, keyword_argument
from devfix.codemods.tokenizer_output_not_moved.facts import TokenizerOutputs
from devfix.types import Applicability, Edit


class TokenizerOutputNotMoved(DevicePass):
    """Tokenizer output (`return_tensors="pt"`) fed to a model on a device without a move.

    ## What it does
    Finds `tokenizer(..., return_tensors="pt")` (and `.encode`, `.encode_plus`,
    `.apply_chat_template`, processors: any call with `return_tensors="pt"`) whose result
    reaches a model that is on a device (moved by the script, or by a function of the file
    that loads, moves and returns it: `tok, model = build(name)`), through `model(**inputs)`,
    `model.generate(**inputs)`, `model(inputs["input_ids"])`, `model.generate(inputs.input_ids)`
    or a name bound to one of these, without a `.to(...)` on the way. Token ids made into a
    tensor by hand count too: `torch.tensor(ids)` / `torch.LongTensor([ids])` (no `device=`) of
    what a tokenizer's `encode` returned, a call of a helper of the file that returns such
    a tensor (`text_to_token_ids(text, tokenizer)`), and CLIP's token ids (`clip.tokenize(texts)`,
    `open_clip.tokenize(texts)`) fed to `model.encode_text(...)` (or the model itself) where
    `clip.load(name, device=device)` or open_clip's `create_model_and_transforms(...,
    device=device)` put the model on `device` (a loader that names no device is left alone).
    The model may also be reached through a function given it by name next to the data
    (`generate(model=model, idx=ids)`; when the function is defined in the file it must call
    that model), or through the streaming idiom, a `threading.Thread(target=model.generate,
    kwargs=dict(input_ids=ids, streamer=streamer))`. The fix appends
    `.to(<device>)` to the tokenizer call: the script's device variable when the model was
    moved to it (`model.to(device)`, or `accelerator.prepare(model)`, which puts it on
    `accelerator.device`), else `model.device`: a model loaded with `device_map=` (also
    through a `**kwargs` dict the loading function gives a `"device_map"`) or
    in 4 or 8 bits (`quantization_config=`, `load_in_4bit=True`: bitsandbytes places it on the
    current GPU, and such a model refuses `.to()`),
    a model a Hugging Face or TRL `Trainer` was built with (it moves the model onto its device),
    a PEFT adapter loaded onto such a model (`PeftModel.from_pretrained(base, path)`), or a
    model a class or function receives from its caller annotated as a Hugging Face model
    (`def __init__(self, model: PreTrainedModel)`, no call in the file filling it): the caller
    chooses the device and the model carries it; also a model loaded with `from_pretrained`
    that was moved where its device cannot be written at the tokenizer call (a local of the
    loading function two calls away, or only under an `if`): its `.device` says where it went.
    A tokenizer of the file itself (a function,
    or the `__call__` of a class) that returns a plain dict gets each value moved instead
    (`{key: value.to(device) for key, value in tokenize(text).items()}`: a dict has no
    `.to()`); one whose result is not known declines with that reason. A model parameter
    of a function nothing in the file calls (a library's `def top_n(model, text, tokenizer)`)
    that the function shows to be a module (`model.eval()`, `.train()`, `.parameters()`, or
    annotated `nn.Module`) gets `.to(next(model.parameters()).device)`; one it does not is
    reported without a fix (nothing says it has a `.device`), unless the same function
    moves the same tokenizer's output for the same model call elsewhere (`ids =
    tokenize(t).to(dev)` before `clip.embed_text(ids)` in the training loop, where the
    validation loop forgets it): then the move is the same (unsafe: the two may run on
    different devices). Declined: a model the file itself leaves on the CPU.
    A model call that moves one field of an encoding and passes another as it is
    (`generate(input_ids=ids.to(model.device), attention_mask=mask)` with both taken from
    `enc`) gets the same move for the other field (`attention_mask`, `token_type_ids`,
    `position_ids`, `pixel_values`, the decoder's); unsafe where the field may be None
    (`enc.get("attention_mask")`). An encoding one field of which is moved in place
    (`inputs["input_ids"] = inputs.input_ids.to("cuda")`) before the whole of it reaches the
    model (`model.generate(**inputs)`) is moved whole instead (`inputs = inputs.to("cuda")`:
    a `BatchEncoding` moves every field; unsafe). A field cast to a dtype on the way
    (`enc["pixel_values"].to(torch.float16)`) is no move: the encoding still gets its own.
    Tokenizer output (or a field of it, `inputs.input_ids`) sent to a literal GPU
    (`.to("cuda:0")`, `.cuda()`) for a model loaded with a `device_map` the caller chooses (a
    parameter, `kwargs.get("device_map", "auto")`; also rebound from a merge helper of the
    class: `self.lm, self.tok = self._merged(path)`) and never moved goes to `model.device`
    instead: the map may have put the first layer on another GPU (`device_map={"": 1}`) or,
    on a host without one, on the CPU. A map the code spells (`"auto"` in a one-GPU notebook)
    is left with its literal GPU, reported without a fix.

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
    input ids must go. A model whose device map offloads layers to the CPU or disk (`"cpu"` or
    `"disk"` in a literal map, `offload_folder=`) gets no move: accelerate's hook on the whole
    model moves its inputs to the execution device. Where the map offloads the first layer,
    `model.device` is `meta`, and `tokenizer(...).to(model.device)` (or `inputs =
    inputs.to(model.device)`) makes `generate` die ("Tensor.item() cannot be called on meta
    tensors"): that move is dropped.

    ## Fix safety
    The literal-GPU rewrite is unsafe: where the caller's map put the first layer on that very
    GPU nothing changes, but where it did not, later code that counted on the literal GPU
    sees the model's device instead.
    The rest is safe: on a CPU model nothing fires, and the move is a no-op when the tensors
    are already there. When the model was moved to a device that cannot be written at the
    tokenizer call (a local variable of another function) and the model has no `.device`, the
    finding has no fix and says why.

    ## References
    - huggingface/transformers#11165, #16359 (`BatchEncoding.to`); PR#19468 (the `generate`
      warning, and why inputs are not moved automatically).
    """

    CODE = "DF202"
    NAME = "tokenizer-output-not-moved"
    MESSAGE = "tokenizer output reaches a model on a device without being moved"
    FIX_TITLE = "Move the tokenizer output to the model's device"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = (
        "return_tensors",
        "encode",
        "convert_tokens_to_ids",
        "EncodeAsIds",
        "clip",
        "attention_mask",
        "token_type_ids",
    )

    def visit_Call(self, node: cst.Call) -> None:
        self._check_move_to_an_offloaded_model(node)
        self._check_move_to_a_literal_gpu(node)
        self._check_unmoved_siblings(node)
        argument = keyword_argument(node, "return_tensors")
        if argument is None:
            if not self.facts.flow.token_id_tensor(node):
                return
        elif (
            not isinstance(argument.value, cst.SimpleString)
            or argument.value.evaluated_value != "pt"
        ):
            return
        if self._check_field_moved_alone(node):
            return
        found = self.facts.flow.model_call_fed(node)
        if found is None or (
            found[1].move is None
            and not found[1].pretrained
            and self.facts.own(TokenizerOutputs).sibling_move(node) is not None
        ):
            self._check_sibling_move(node)  # where the code moves it for that model elsewhere
            return
        model_call, model = found
        model_name = model.model
        if self.facts.own(TokenizerOutputs).offloads(model_name, model_call) is not None:
            return  # accelerate's hook on the model moves its inputs to the execution device
        if model.move is not None and (model.move.method == "to" or not model.pretrained):
            device = model.move.as_to_argument()
        elif model.pretrained or self.facts.flow.loaded_from_pretrained(
            model_name, self.facts.scopes.enclosing_function(model_call)
        ):
            # A Hugging Face model moved where its device cannot be written here: its
            # `.device` says where that is.
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
        kind = self.facts.own(TokenizerOutputs).output_kind(node)
        if kind == "dict":
            moved = moved_items(node, device)
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

    def _check_field_moved_alone(self, output: cst.Call) -> bool:
        """`enc["input_ids"] = enc.input_ids.to(dev)` before `model.generate(**enc)`: the
        whole encoding goes to `dev` instead (a `BatchEncoding` moves every field)."""
        found = self.facts.own(TokenizerOutputs).field_moved_alone(output)
        if found is None:
            return False
        assign, move = found
        name = code_of(cst.ensure_type(assign.targets[0].target, cst.Subscript).value)
        whole = cst.Assign(
            targets=[cst.AssignTarget(cst.Name(name))],
            value=move.with_changes(
                func=cst.ensure_type(move.func, cst.Attribute).with_changes(value=cst.Name(name))
            ),
        )
        self.report(
            assign,
            message=f"only one field of `{name}` is moved (`{code_of(assign.targets[0].target)}`) "
            f"before the whole encoding reaches the model with `**{name}`: the others (the "
            "attention mask, audio or pixel features) stay on the CPU",
            fix_title=f"Move the whole encoding: `{code_of(whole)}`",
            edits=[Edit(assign, whole)],
            applicability=Applicability.UNSAFE,
        )
        return True

    def _check_unmoved_siblings(self, node: cst.Call) -> None:
        """`generate(input_ids=ids.to(dev), attention_mask=mask)`, both fields of one
        encoding: the mask stays on the CPU beside ids on `dev`."""
        found = self.facts.own(TokenizerOutputs).unmoved_siblings(node)
        if found is None:
            return
        device, left = found
        shown = code_of(device)
        for arg in left:
            value = code_of(arg.value)
            self.report(
                arg,
                message=f"`{value}` comes from the same encoding as the argument this call moves "
                f"to `{shown}`, but stays on the CPU; it needs `.to({shown})` too",
                fix_title=f"Pass `{value}.to({shown})`",
                edits=[Edit(arg, arg.with_changes(value=method_call(arg.value, "to", device)))],
                # A field that may be None (`enc.get("attention_mask")`) has no `.to()` then.
                applicability=Applicability.UNSAFE
                if self.facts.own(TokenizerOutputs).may_be_none(arg.value, node)
                else Applicability.SAFE,
            )

    def _check_sibling_move(self, node: cst.Call) -> None:
        """The same tokenizer's output is moved for the same model elsewhere in the function:
        that model is on that device."""
        sibling = self.facts.own(TokenizerOutputs).sibling_move(node)
        if sibling is None:
            return
        device, model = sibling
        shown = code_of(device)
        self.report(
            node,
            message=f"tokenizer output reaches `{model}` on the CPU, while the same output for "
            f"`{model}` is moved to `{shown}` elsewhere in this function; it needs `.to({shown})`",
            fix_title=f"Append `.to({shown})`",
            edits=[Edit(node, method_call(node, "to", device))],
            applicability=Applicability.UNSAFE,
        )

    def _check_move_to_an_offloaded_model(self, move: cst.Call) -> None:
        """`tokenizer(...).to(model.device)` (or a name bound to tokenizer output moved so)
        for a model whose device map offloads its first layer."""
        func = move.func
        if not (
            isinstance(func, cst.Attribute) and func.attr.value == "to" and len(move.args) == 1
        ):
            return
        device = move.args[0].value
        if not (
            isinstance(device, cst.Attribute)
            and device.attr.value == "device"
            and isinstance(device.value, cst.Name)
        ):
            return
        outputs = self.facts.own(TokenizerOutputs)
        if not outputs.is_tokenizer_output(func.value, move):
            return
        model = device.value.value
        if outputs.offloads(model, move) != "first":
            return
        self.report(
            move,
            message=(
                f"tokenizer output moved to `{model}.device`, the device of the model's first "
                f"parameter, which is `meta`: its device map offloads that layer; "
                f"accelerate's hook on `{model}` moves the inputs to the execution device: leave "
                "them on the CPU"
            ),
            fix_title="Drop the move",
            edits=[self._drop_move(move, func.value)],
        )

    def _check_move_to_a_literal_gpu(self, move: cst.Call) -> None:
        """`tokenizer(...).to("cuda:0")`, `inputs.input_ids.cuda()` (tokenizer output, or a
        field of it) fed to a model loaded with a device map its caller chooses: that choice
        decides the device, which a literal GPU need not be (`device_map={"": 1}`, a map that
        keeps the model on the CPU of a host without a GPU)."""
        func = move.func
        if not isinstance(func, cst.Attribute):
            return
        literal = literal_gpu_move(move)
        if literal is None:
            return
        receiver = func.value
        output = receiver.value if isinstance(receiver, cst.Attribute) else receiver
        if not self.facts.own(TokenizerOutputs).is_tokenizer_output(output, move):
            return
        found = self.facts.flow.model_call_fed(move)
        if found is None:
            return
        model_call, model = found
        if model.move is not None or not model.pretrained:
            return
        device = f"{model.model}.device"
        line = self.context.position(model_call).start.line
        if not self.facts.own(TokenizerOutputs).map_chosen_elsewhere(model.model, move):
            # A map the code spells (`"auto"` in a one-GPU notebook) puts the first layer on
            # that GPU: right as written, and left so.
            self.report(
                move,
                message=(
                    f"tokenizer output moved to {literal} for `{model.model}` (line {line}), "
                    f"which its loading placed; no fix: right while the placement the code spells "
                    f"keeps its first layer there (`{device}` follows any placement)"
                ),
            )
            return
        self.report(
            move,
            message=(
                f"tokenizer output moved to {literal} for `{model.model}` (line {line}), which "
                f"its loading placed (`from_pretrained`), not this code: its inputs go to "
                f"`{device}`"
            ),
            fix_title=f"Move it to `{device}`",
            edits=[Edit(move, method_call(receiver, "to", cst.parse_expression(device)))],
            applicability=Applicability.UNSAFE,
        )

    def _drop_move(self, move: cst.Call, receiver: cst.BaseExpression) -> Edit:
        """The move replaced by what it moves; `inputs = inputs.to(d)` goes whole."""
        assign = self.context.parent(move)
        line = self.context.parent(assign) if isinstance(assign, cst.Assign) else None
        if (
            isinstance(assign, cst.Assign)
            and isinstance(receiver, cst.Name)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == receiver.value
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and len(getattr(self.context.parent(line), "body", ())) > 1
        ):
            return Edit(line, cst.RemovalSentinel.REMOVE)
        return Edit(move, receiver)
