"""DF308: AMP objects (autocast, GradScaler) hard-coded to CUDA in a script whose device may not
be CUDA."""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import (
    and_keyword,
    keyword_arg,
    positional_as_keywords,
    rebuilt_call,
    replace_argument,
)
from devfix.codemods.amp_device_type_hard_coded.facts import AUTOCAST_POSITIONAL, AmpObjects
from devfix.codemods.analysis.names import call_tail, code_of
from devfix.types import Applicability, Edit, ImportSpec

_AUTOCAST_WARNING = "CUDA is not available or torch_xla is imported. Disabling autocast."
_SCALER_WARNING = "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."


class AmpDeviceTypeHardCoded(DevicePass):
    """AMP objects hard-coded to CUDA in a script whose device may be MPS or the CPU.

    ## What it does
    In training code (not in model code, where `autocast(enabled=False)` blocks are
    deliberate), finds `torch.autocast("cuda")`, `torch.amp.autocast("cuda")`,
    `torch.cuda.amp.autocast()`, `torch.amp.GradScaler("cuda")` (and `torch.amp.GradScaler()`,
    whose default is CUDA) and `torch.cuda.amp.GradScaler()` in a script whose device is chosen
    at run time (`"cuda" if torch.cuda.is_available() else "cpu"`, a `--device` option, a
    device helper), and gives them the script's device type: a device-type variable it keeps
    (`device_type`), else `device.type` for a `torch.device` (`torch.device(device).type` for a
    device string or a value of unknown kind). GradScaler stays enabled only on CUDA:
    `torch.amp.GradScaler(device.type, enabled=... and device.type == "cuda")`. A device type
    computed by hand that knows only CUDA and the CPU (`device_type = "cuda" if "cuda" in device
    else "cpu"`, which turns `mps` into `cpu`) becomes `torch.device(device).type`, where the
    device may be something else (a `--device` option); where every value the device is given
    is CUDA or the CPU (`"cuda" if torch.cuda.is_available() else "cpu"`), the two spellings are
    equivalent and the code is left alone. In a script
    that always runs on CUDA (a device every binding of which, or every caller's argument for
    which, is CUDA, or a GPU index the code gives to `.cuda(gpu)` or
    `torch.cuda.set_device(gpu)`; a process's GPU index, such as the one `mp.spawn` hands its
    worker, is never taken for a device: it is an int, or None where one process drives every
    GPU, and `torch.device(None)` fails), the CUDA-only objects are right and are left alone, the
    deprecated `torch.cuda.amp.*` spellings included: a deprecation warning is not a device
    bug. So is an object already enabled only on CUDA (`enabled=device.type == "cuda"`, under
    `if torch.cuda.is_available():`), and one in a branch on torch's version (`if
    Version(torch.__version__) >= Version("2.4"): ... else: torch.cuda.amp.GradScaler(...)`):
    the spelling is the one the older release has.

    ## Why is this bad?
    It does not crash: on a machine without CUDA, or with an Apple GPU, the CUDA-only objects
    warn and switch themselves off. `torch.autocast("cuda")` prints `UserWarning: CUDA is not
    available or torch_xla is imported. Disabling autocast.` and the model trains in float32;
    the GradScaler prints `UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not
    available.  Disabling.` Mixed precision is silently lost on the devices the script was
    written to support, and `torch.cuda.amp.*` is deprecated (`FutureWarning`).

    ## Example
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x.to(device)).sum()
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")
    with torch.autocast(device_type=device.type):
        loss = model(x.to(device)).sum()
    ```

    ## Fix safety
    GradScaler: safe, nothing changes on CUDA and the scaler stays off elsewhere (without the
    warning). Autocast with the script's device
    type, and a device type that now says `mps` instead of `cpu`: unsafe, because on the CPU
    and on MPS autocast now runs in lower precision (bfloat16 on the CPU by default) where it
    was switched off. `enabled` given by position, `*args` in a deprecated spelling, and a
    script device the call cannot see are reported without a fix; `torch.autocast(*args)`, whose
    device type is not in sight, is left alone.

    ## References
    - `torch.amp` docs (`torch.cuda.amp.autocast(args...)` is deprecated);
      karpathy/nanoGPT#654 and PR#698; mlfoundations/open_clip PR#654.
    """

    CODE = "DF308"
    NAME = "amp-device-type-hard-coded"
    MESSAGE = "an AMP object is hard-coded to CUDA in a script whose device may not be CUDA"
    FIX_TITLE = "Use the script's device type"
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("autocast", "GradScaler", "amp")
    REQUIRED_WORDS = ("torch",)

    def visit_Call(self, node: cst.Call) -> None:
        if call_tail(node.func) not in ("autocast", "GradScaler"):
            return
        objects = self.facts.own(AmpObjects)
        call = objects.cuda_amp_call(node)
        if call is None or not objects.in_training_code(node):
            return
        if objects.chosen_by_torch_version(node):
            return  # the spelling of the release the branch runs on
        what = f"`{code_of(node.func)}({code_of(call.device.value) if call.device else ''})`"
        if any(arg.star for arg in node.args):
            self.report(node, message=f"{what} is CUDA-only; rewrite its `*args` by hand")
            return
        if call.by_position:
            if call.scaler:
                self.report(node, message=f"{what} gets `enabled` by position; rewrite it by hand")
            return
        amp = objects.amp_device_for(node, call.enabled)
        if amp is None or amp.cuda_only:
            return
        torch, imports = self.facts.names.torch_spelling()
        device_type = amp.expression
        assert device_type is not None
        value = cst.parse_expression(device_type)
        if call.scaler:
            rest = [arg for arg in node.args if arg is not call.device]
            rest = and_keyword(rest, "enabled", f'{device_type} == "cuda"')
            func = cst.parse_expression(f"{torch}.amp.GradScaler")
            func = func if call.deprecated else node.func
            new = rebuilt_call(node, func, [cst.Arg(value)], rest)
        elif call.device is not None:
            new = replace_argument(node, call.device, value)
        else:
            rest = positional_as_keywords(node.args, AUTOCAST_POSITIONAL)
            func = cst.parse_expression(f"{torch}.autocast")
            new = rebuilt_call(node, func, [keyword_arg("device_type", value)], rest)
        shown = f"{code_of(new.func)}({'' if call.scaler else 'device_type='}{device_type}, ...)"
        off_cuda = f"{what} is CUDA-only, but the script's device (`{amp.device}`) may not be CUDA"
        if call.scaler:
            message = f"{off_cuda}: there it warns `{_SCALER_WARNING}`; use `{shown}`, enabled "
            message += "only on CUDA"
        else:
            message = f"{off_cuda}: there autocast warns `{_AUTOCAST_WARNING}` and trains in "
            message += f"float32; use `{shown}`"
        self.report(
            node,
            message=message,
            fix_title=f"Use `{shown}`",
            edits=[Edit(node, new)],
            imports=imports if call.deprecated else [],
            # The scaler (off outside CUDA) is safe; on CPU and MPS autocast now runs in lower
            # precision instead of switching off.
            applicability=Applicability.SAFE if call.scaler else Applicability.UNSAFE,
        )

    def visit_IfExp(self, node: cst.IfExp) -> None:
        objects = self.facts.own(AmpObjects)
        device = objects.hand_made_device_type(node)
        if device is None or not objects.in_training_code(node):
            return
        if not objects.amp_uses_hand_made_type(node):
            return
        if objects.only_cuda_or_cpu(device, node):
            return  # the device is CUDA or the CPU: the hand-made type is exactly its type
        fixed = objects.device_type_of(device, node)
        imports: list[ImportSpec] = []
        if fixed.startswith("torch.") and self.facts.names.torch_alias() is None:
            imports = [ImportSpec("torch")]
        self.report(
            node,
            message=f"`{code_of(node)}` knows only CUDA and the CPU: on `mps` (or `xpu`) the AMP "
            f"objects get `cpu` and autocast is skipped; use `{fixed}`",
            fix_title=f"Use `{fixed}`",
            edits=[Edit(node, cst.parse_expression(fixed))],
            imports=imports,
            applicability=Applicability.UNSAFE,
        )
