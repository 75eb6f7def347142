"""DF311: a tensor made on the CPU handed to a collective of a process group on the GPUs."""

from __future__ import annotations

from typing import cast

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import made_on, method_chain
from devfix.codemods.analysis.names import argument_of, call_tail, code_of, keyword_argument
from devfix.codemods.analysis.torch_names import (
    COLLECTIVE_TENSORS,
    LEGACY_CONSTRUCTORS,
    tails,
)
from devfix.types import Applicability, Edit

_COLLECTIVE_TAILS = tails(COLLECTIVE_TENSORS)
#: Backends that take CPU tensors for every collective.
_CPU_BACKENDS = ("gloo", "mpi")


class CpuTensorInCollective(DevicePass):
    """A tensor made on the CPU handed to `dist.all_reduce` (or another collective) of NCCL.

    ## What it does
    Finds a tensor made on the CPU (`torch.tensor([...])`, `torch.Tensor([...])`, a factory
    such as `torch.zeros(n)` without `device=`, `torch.from_numpy(a)`, also through a name
    and tensor methods such as `.float()`) that is handed to a `torch.distributed`
    collective: `all_reduce`, `reduce`, `broadcast`, `all_gather` (its input, and outputs
    made in a comprehension), `all_gather_into_tensor`, `reduce_scatter_tensor`,
    `all_to_all_single`. It makes the tensor where the script moves its work instead:
    `device=<its device>` for a factory, `.to(<its device>)` for a legacy constructor or
    `from_numpy`; `.cuda()` in a script that moves its work with bare `.cuda()` and always
    makes an NCCL group (one that can run without a GPU gets a finding without a fix). The
    device is the one the function (or the module level) moves its model and data to, when
    it names exactly one; with none in sight, a tensor the function's own tensor sizes
    (`self.n = torch.as_tensor(x.shape[0])`, a count of the rows it reduces beside it) is
    made on `x.device`. A collective whose `group=` is a Gloo group
    (`dist.new_group(backend="gloo")`), and a file whose process groups are all Gloo (or MPI,
    or `"cpu:gloo,cuda:nccl"`), are left alone: they take CPU tensors; a `group=` made where
    the file cannot see (a parameter) gets a finding without a fix. Where the file names no
    backend or one it computes, the finding is a latent hazard: NCCL, torch's backend for GPUs,
    refuses the tensor.

    ## Why is this bad?
    NCCL communicates between GPUs only. A collective of an NCCL group handed a CPU tensor
    fails: `RuntimeError: No backend type associated with device type cpu` (older releases:
    `Tensors must be CUDA and dense`). Validation metrics gathered across ranks
    (`torch.tensor([correct])`, `torch.Tensor([loss])`) are the usual case: the training loss,
    computed on the GPU, reduces fine, and the script first fails at the end of an epoch.

    ## Example
    ```python
    dist.init_process_group("nccl")
    model = Net().to(device)
    ...
    correct = torch.tensor([n_correct])
    dist.all_reduce(correct)
    ```

    ## Use instead
    ```python
    dist.init_process_group("nccl")
    model = Net().to(device)
    ...
    correct = torch.tensor([n_correct], device=device)
    dist.all_reduce(correct)
    ```
    A value read back on the host after the collective (`correct.item()`) works on either
    device.

    ## Fix safety
    Safe: the device is the one the code already moves its model and data to, where NCCL
    needs the tensor; a Gloo group on a CPU run gets the CPU there, and Gloo also reduces
    CUDA tensors. Without one such device in sight, or with one not yet bound where the
    tensor is made, the finding is reported without a fix.

    ## References
    - PyTorch docs, "Distributed communication package" (backends: which devices each
      supports).
    """

    CODE = "DF311"
    NAME = "cpu-tensor-in-collective"
    MESSAGE = "a tensor made on the CPU is handed to a collective that NCCL runs on the GPUs"
    FIX_TITLE = "Make the tensor on the script's device"
    APPLICABILITY = Applicability.SAFE
    TRIGGER_WORDS = tuple(sorted(_COLLECTIVE_TAILS))
    REQUIRED_WORDS = ("torch",)

    def visit_Call(self, node: cst.Call) -> None:
        if call_tail(node.func) not in _COLLECTIVE_TAILS and not (
            isinstance(node.func, cst.Name)
            and node.func.value in self.facts.names.imported_aliases("torch.distributed")
        ):
            return
        collective = self.qualified_name(node.func)
        if collective not in COLLECTIVE_TENSORS:
            return
        backends = self.facts.flow.collective_backends(node)
        if backends and all(any(cpu in backend for cpu in _CPU_BACKENDS) for backend in backends):
            return  # Gloo (or MPI) takes CPU tensors
        nccl = backends is not None and any("nccl" in backend for backend in backends)
        for position, keyword in COLLECTIVE_TENSORS[collective]:
            argument = argument_of(node, keyword, position)
            made = (
                self.facts.devices.cpu_factory_of(argument.value, node)
                if argument is not None
                else None
            )
            if made is None or argument is None:
                continue
            if backends is None:
                group = code_of(cast("cst.Arg", keyword_argument(node, "group")).value)
                self.report(
                    made,
                    message=f"`{code_of(argument.value)}` is made on the CPU and handed to "
                    f"`{collective.rsplit('.', 1)[1]}` of `{group}`, a group made elsewhere; no "
                    "fix: NCCL needs it on the GPU, a Gloo group takes it as it is",
                )
                continue
            self._report(node, collective, argument.value, made, nccl=nccl)

    def _report(
        self,
        node: cst.Call,
        collective: str,
        shown: cst.BaseExpression,
        made: cst.Call,
        *,
        nccl: bool,
    ) -> None:
        what = f"`{code_of(shown)}` is made on the CPU (`{code_of(made.func)}(...)`)"
        why = (
            "but this NCCL group communicates CUDA tensors only"
            if nccl
            else "but NCCL, the GPUs' backend, communicates CUDA tensors only"
        )
        where = f"{what} and handed to `{collective.rsplit('.', 1)[1]}`, {why}"
        devices = self.facts.moves.moved_devices(made)
        sized = self.facts.devices.sized_by(made, node) if not devices else None
        if sized is not None:
            # A count of the rows of a tensor the code reduces beside it: where that tensor
            # is, which is where NCCL needs it (and Gloo takes either).
            counted = sized[: -len(".device")]
            self._make_on(made, where, sized, f"where `{counted}` is, whose size it counts")
            return
        if not nccl and not devices:
            return  # no GPU in sight: perhaps a Gloo run on the CPU
        named = [device for device in devices if not device.startswith(".")]
        if len(named) == 1 and not [d for d in devices if d.startswith(".")]:
            device_text = named[0]
            if not self.facts.moves.visible_at(device_text, made):
                self.report(
                    made,
                    message=f"{where}; no fix: `{device_text}` is not set where it is made "
                    f"(line {self.facts.scopes.line_of(made)})",
                )
                return
            self._make_on(made, where, device_text, "where the script moves its work")
            return
        if devices == [".cuda()"] and self.facts.flow.requires_nccl():
            fix, edit = "`.cuda()`", Edit(made, method_chain(made, "cuda"))
            message = f"{where}; make it with {fix}, where the script moves its work"
            self.report(made, message=message, fix_title=f"Use {fix}", edits=[edit])
        elif devices == [".cuda()"]:
            # A run without a GPU would get a Gloo group (or skip the NCCL one), which takes
            # the CPU tensor, and `.cuda()` would fail there.
            self.report(
                made,
                message=f"{where}; no fix: the script moves its work with bare `.cuda()` and "
                "can run without a GPU (no NCCL group on every path); make it with `.cuda()` "
                "where the group is NCCL",
            )
        else:
            several = "the code moves its work to several devices"
            reason = several if devices else "no device the code moves its work to is in sight"
            self.report(made, message=f"{where}; no fix: {reason}")

    def _make_on(self, made: cst.Call, where: str, device_text: str, why: str) -> None:
        maker = self.qualified_name(made.func)
        # Legacy constructors and `from_numpy` take no `device=`.
        factory = maker not in LEGACY_CONSTRUCTORS and maker != "torch.from_numpy"
        device = cst.parse_expression(device_text)
        fix = f"`device={device_text}`" if factory else f"`.to({device_text})`"
        self.report(
            made,
            message=f"{where}; make it with {fix}, {why}",
            fix_title=f"Use {fix}",
            edits=[Edit(made, made_on(made, device, takes_device=factory))],
        )
