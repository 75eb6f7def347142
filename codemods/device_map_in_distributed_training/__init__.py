"""DF305: `from_pretrained(device_map=...)` in a script that trains with several processes."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import remove_argument
from devfix.codemods.analysis.names import keyword_argument
from devfix.codemods.device_map_in_distributed_training.facts import (
    ShardedModel,
    quantized_load,
    spreading_risk,
)
from devfix.codemods.device_map_in_distributed_training.wrapped import WrappedDeviceMaps
from devfix.types import Applicability, Edit

#: Names whose presence means a library places the model on the process's device itself.
_PLACING_TAILS = frozenset({"prepare", "prepare_model"})


class DeviceMapInDistributedTraining(DevicePass):
    """`from_pretrained(..., device_map=...)` in a multi-process training script.

    ## What it does
    Finds Hugging Face `from_pretrained(...)` calls (`transformers.AutoModel*`,
    `LlamaForCausalLM`, ..., `peft.AutoPeftModel*`, TRL's `AutoModelFor*WithValueHead`, also
    one chosen into a local name: `cls = A if causal else B`) with a fixed or automatic device map
    (`device_map="auto"`, `"balanced"`, `"cuda:0"`, `"cuda"`, `0`, `{"": 0}`) in a script that
    trains with several processes (torchrun, `DistributedDataParallel`, accelerate, `Trainer`),
    and removes the `device_map` argument, so that `Trainer`, accelerate or the script's own
    `model.to(device)` puts the model on each process's GPU. A quantized load
    (`load_in_4bit=True`, `load_in_8bit=True`, `quantization_config=...`), which must be placed
    at load time, and a script that never moves the model itself, get
    `device_map={"": local_rank}` instead. Scripts that only run inference are left alone.

    ## Why is this bad?
    `device_map` is Big Model Inference: it places the model when it is loaded. Under torchrun
    every process loads its own copy, so `"auto"` or `"cuda:0"` puts all copies on GPU 0: an
    out-of-memory error there for a large model. Where `Trainer` takes such a model as "already
    placed" and does not move it while it moves the batches to the rank's GPU, rank 1 dies with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two devices,
    cuda:1 and cuda:0!` (the multi-GPU Llama fine-tunes this rule was written for); accelerate
    1.x moves a model whose map names one device to the rank's GPU in `prepare_model`, after
    every copy was loaded onto GPU 0. A map
    spread over several GPUs cannot be trained with DDP at all: accelerate refuses it ("You
    can't train a model that has been loaded with `device_map='auto'` in any distributed
    mode"), which is what `"auto"` gives rank 1 as soon as the model does not fit on one GPU.

    ## Example
    ```python
    model = LlamaForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", device_map="cuda:0")
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
    ```

    ## Use instead
    ```python
    model = LlamaForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
    ```
    For a 4/8-bit model: `device_map={"": accelerator.local_process_index}` where the script
    builds an `Accelerator` (what accelerate documents), else the script's own `local_rank`
    variable, else `{"": int(os.environ.get("LOCAL_RANK", "0"))}`. A load in a function that
    neither trains nor hands a model back (a merge of the adapter, an export, an evaluation
    after training) is one copy used there and then, so its `device_map="auto"` is right and is
    left alone.

    ## Fix safety
    Safe for a single fixed device (`"cuda:0"`, `0`, `{"": 0}`): on one process the model ends up
    where it was. Unsafe for `"auto"` and the other spreading strategies: a script started with
    plain `python` may split a model that does not fit on one GPU on purpose (naive model
    parallelism); without the map it must fit on one GPU (use FSDP or DeepSpeed ZeRO-3
    otherwise). Left alone: `device_map="cuda"` in a script that calls
    `torch.cuda.set_device(local_rank)` (it is the rank's GPU there), and device maps that are
    computed rather than literal (TRL's `get_kbit_device_map()`,
    `{"": PartialState().local_process_index}`).

    ## References
    - accelerate docs, "Big Model Inference"; huggingface/accelerate#1802, #1167, #2378.
    - huggingface/sentence-transformers#3207; huggingface/transformers#21736.

    The golden cases run without Hugging Face installed: each folder has a tiny `transformers.py`
    stand-in with the same call shapes, so the scripts' imports resolve to `transformers.*`.
    """

    CODE = "DF305"
    NAME = "device-map-in-distributed-training"
    MESSAGE = "`device_map` in a multi-process training script places every copy on the same GPU"
    FIX_TITLE = "Remove `device_map`"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("from_pretrained",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained"):
            self._check_wrapper(node)
            return
        arg = keyword_argument(node, "device_map")
        if arg is None:
            return
        if not self.facts.own(ShardedModel).library_model_class(func.value, node):
            return
        kind = self.facts.moves.device_map_kind(arg.value, node)
        if kind is None:
            return
        if (
            isinstance(arg.value, cst.SimpleString)
            and arg.value.evaluated_value == "cuda"
            and self.facts.flow.sets_current_device()
        ):
            return  # "cuda" is the current device: the rank's GPU after `set_device(local_rank)`
        evidence = self.facts.flow.distributed_evidence()
        if evidence is None:
            return  # inference only: a device map is what Big Model Inference is for
        sharded = self.facts.own(ShardedModel)
        if sharded.one_process_reason() is not None:
            return  # a notebook is one process: the map places its one copy of the model
        if sharded.self_contained_use(node):
            return  # a reload to merge, export or evaluate after training: one model, one map
        model_name = self.facts.scopes.assigned_name(node)
        if model_name is not None and (
            sharded.declares_model_parallelism(model_name)
            or self.facts.own(WrappedDeviceMaps).wrapped(model_name)
        ):
            # `model.model_parallel = True`, or a wrapper handed to Trainer that gets the map:
            # split over the GPUs of one process on purpose
            return
        quantized = quantized_load(node)
        shown = self.context.module.code_for_node(arg.value)
        spread = kind == "spread"
        applicability = Applicability.UNSAFE if spread else Applicability.SAFE
        risk = spreading_risk(evidence) if spread else ""
        placed_by_library = evidence in ("Trainer", "accelerate") or (
            model_name is not None and sharded.moved_after(model_name, node)
        )
        if quantized or not placed_by_library:
            rank, imports = self.facts.own(ShardedModel).local_rank(node)
            value = cst.parse_expression(f'{{"": {rank}}}')
            why = (
                "a quantized model is placed when it is loaded"
                if quantized
                else "the script does not move the model itself"
            )
            self.report(
                node,
                message=(
                    f"`device_map={shown}` in a script that trains with {evidence} puts the model "
                    f"of every process on the same GPU; {why}, so load it on this process's GPU"
                    f"{risk}"
                ),
                fix_title=f'Use `device_map={{"": {rank}}}`',
                edits=[Edit(arg, arg.with_changes(value=value))],
                imports=imports,
                applicability=applicability,
            )
            return
        self.report(
            node,
            message=(
                f"`device_map={shown}` in a script that trains with {evidence} puts the model of "
                f"every process on the same GPU; remove it and let {evidence} place the model"
                f"{risk}"
            ),
            edits=[Edit(node, remove_argument(node, arg))],
            applicability=applicability,
        )

    def _check_wrapper(self, trainer: cst.Call) -> None:
        """`Trainer(model=Wrapper(encoder))` where `encoder` is spread over GPUs by its device
        map: the wrapper needs the map, or Trainer takes it for a model on one device."""
        hidden = self.facts.own(WrappedDeviceMaps).hidden_map(trainer)
        if hidden is not None:
            edit = Edit(hidden.statement, cst.FlattenSentinel([hidden.statement, hidden.line()]))
            self.report(
                hidden.statement,
                message=hidden.message(),
                fix_title=f"Insert `{hidden.code}`",
                edits=[edit],
                applicability=Applicability.UNSAFE,
            )
