"""DF302: `torch.load` without `map_location` restores tensors where they were saved from."""

from __future__ import annotations

import re

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods._edits import append_keyword, defaulted_in
from devfix.codemods.analysis.names import call_tail, code_of, has_star_kwargs, keyword_argument
from devfix.codemods.analysis.torch_names import URL_STATE_LOADERS
from devfix.types import Applicability, Edit

_LOAD_WORD = re.compile(r"\bload\b|\bload_url\b|\bload_state_dict_from_url\b")
_LOADER_TAILS = frozenset({"load", "load_url", "load_state_dict_from_url"})
#: Where a URL loader can be imported from under another name (`... import load_url as get`).
_LOADER_MODULES = tuple(sorted({name.rsplit(".", 1)[0] for name in URL_STATE_LOADERS}))


class TorchLoadWithoutMapLocation(DevicePass):
    """`torch.load(...)` without `map_location=`.

    ## What it does
    Finds `torch.load(path)` calls that do not say where the loaded tensors go, and adds
    `map_location="cpu"`; the same for the loaders of pretrained weights from a URL, which
    pass their `map_location` on to `torch.load` (`torch.hub.load_state_dict_from_url`,
    `torch.utils.model_zoo.load_url`, torchvision's re-export). In a distributed script
    (torchrun, DDP, accelerate, `Trainer`) whose process device is held in a variable
    (`device = torch.device("cuda", local_rank)`), that variable is used instead; so it is in
    a single-process script whose loaded tensors are used directly (not only through
    `load_state_dict`) and that holds its device in a variable. Tensors used directly in a
    script that moves its work with bare `.cuda()` calls only go to `map_location="cuda"`: the
    current GPU, where `.cuda()` puts the rest.
    `weights_only`, `mmap` and every other argument stay exactly as written; keywords the
    function builds itself and passes as `**kw` get the default in front
    (`**{"map_location": "cpu", **kw}`), so a `map_location` in them still wins (keywords
    handed on from the caller's `**kwargs` are the caller's to set). A script that
    imports `torch` nowhere but takes it from a star-imported helper module
    (`from utils import *`) is read the same way. A helper that hands its own
    `map_location=None` parameter on (`def read_blocks(path, map_location=None): return
    torch.load(path, map_location=map_location)`) is judged at each call of the file that
    leaves it unset, which gets the keyword.

    Left alone: a load in one branch of an `if` whose other branch loads with a `map_location`
    (`if args.gpu is None: torch.load(path)`, `else: torch.load(path, map_location=loc)`): the
    author chose where each branch's tensors go. A single-process program (a notebook, a
    tutorial script) that loads back the state it saved itself into `load_state_dict`
    (`torch.save(model.state_dict(), "best.pt")` during training, then
    `model.load_state_dict(torch.load("best.pt"))`): the values go onto the parameters' devices,
    and the devices it was saved from are this machine's (unless each run picks its GPU on its
    command line, `.cuda(args.gpu)`: the next run may lack the GPU the last saved from). The
    same file-name template in one scope counts (`f"ckpt-{epoch}.pt"` saved, `f"ckpt-{best}.pt"`
    loaded); a path that two functions take from their callers (`save(self, path)`, `load(self,
    path)`: a resume API) does not: the caller may name another run's file. In a distributed
    script, a file each process writes and reads back for itself, named after its rank
    (`torch.save({"queue": queue}, path)` and `torch.load(path)` with `path =
    f"queue{args.rank}.pth"`): its tensors return to the GPU the process saved them from.

    ## Why is this bad?
    Without `map_location`, `torch.load` puts every tensor back on the device it was saved from.
    A checkpoint written by rank 0 holds `cuda:0` tensors, so every process of a `torchrun` job
    allocates them on GPU 0 (an out-of-memory error on GPU 0, pytorch/examples#1078), a machine
    without that GPU cannot load it at all, and any tensor used straight from the checkpoint
    (normalisation statistics, class weights, a pickled model) meets the process's own tensors
    with `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`.

    ## Example
    ```python
    checkpoint = torch.load("checkpoint.pth")
    model.load_state_dict(checkpoint["model_state_dict"])
    ```

    ## Use instead
    ```python
    checkpoint = torch.load("checkpoint.pth", map_location="cpu")
    model.load_state_dict(checkpoint["model_state_dict"])
    ```
    `model.load_state_dict` and `optimizer.load_state_dict` copy the values onto the parameters'
    own devices, so loading to the CPU is always correct for them and avoids the GPU-0 spike.

    ## Fix safety
    Safe when everything loaded goes through `load_state_dict` (or is read under a metadata key
    such as `"epoch"`), or when the loaded tensors go to the script's device variable or to the
    current GPU of a script that moves its work with `.cuda()`. Unsafe
    otherwise (no device variable in scope): tensors that the script uses straight from the
    checkpoint now arrive on the CPU and need a `.to(device)` of their own (the message says
    so). `weights_only` is never added,
    removed or changed (its default became `True` in PyTorch 2.6).

    ## References
    - PyTorch docs, `torch.load` (`map_location`); DDP tutorial, "Save and Load Checkpoints".
    - pytorch/examples#1078; pytorch/pytorch#23138.
    """

    CODE = "DF302"
    NAME = "torch-load-without-map-location"
    MESSAGE = (
        "`torch.load` without `map_location` puts tensors back on the device they were saved from"
    )
    FIX_TITLE = 'Add `map_location="cpu"`'
    APPLICABILITY = Applicability.SAFE
    APPLICABILITIES = (Applicability.SAFE, Applicability.UNSAFE)
    TRIGGER_WORDS = ("load",)
    REQUIRED_WORDS = ("torch",)

    @classmethod
    def wakes_on(cls, text: str) -> bool:
        # `torch.load` as a whole word: not `load_state_dict` or `download` (nearly every file).
        return super().wakes_on(text) and _LOAD_WORD.search(text) is not None

    def visit_Call(self, node: cst.Call) -> None:
        tail = call_tail(node.func)
        if tail not in _LOADER_TAILS and not (
            isinstance(node.func, cst.Name)
            and node.func.value in self.facts.names.imported_aliases(*_LOADER_MODULES)
        ):
            return  # resolve only what can be a loader: this runs for every call of the file
        # A script may take `torch` from a star-imported helper module (`from utils import *`),
        # and name a URL loader as it likes (`from torch.hub import ... as fetch`).
        loader = self.facts.names.qualified_name_through_star(node.func)
        # `map_location` is torch.load's second argument and a URL loader's third.
        position = 1 if loader == "torch.load" else URL_STATE_LOADERS.get(loader or "")
        if position is None:
            return
        positional = [arg for arg in node.args if arg.keyword is None and arg.star != "**"]
        if not positional or len(positional) > position or any(arg.star for arg in positional):
            return  # `map_location` given by position, or perhaps inside `*args`
        forwarded = keyword_argument(node, "map_location")
        if forwarded is not None and isinstance(forwarded.value, cst.Name):
            # `def load(path, map_location=None)`: judged at each call that leaves it None.
            for call in self.facts.flow.callers_leaving_default(node, forwarded.value.value):
                self._check(call, via=f" (`{code_of(call.func)}` passes it `map_location=None`)")
        if forwarded is not None:
            return
        if has_star_kwargs(node):
            built = self.facts.scopes.keywords_built_here(node)
            if built is not None:
                self._check(node, keywords=built)
            return  # keywords from the caller (`**kwargs`): theirs to set
        self._check(node)

    def _check(self, node: cst.Call, via: str = "", keywords: cst.Arg | None = None) -> None:
        if self.facts.flow.other_branch_maps(node, _LOADER_TAILS):
            return
        flow = self.facts.flow
        only_state = flow.feeds_only_state_dicts(node)
        if only_state and not flow.is_distributed() and flow.reads_back_its_own_devices(node):
            # One process reads back the state it saved, and `load_state_dict` copies it onto
            # the parameters' devices: neither a GPU-0 spike nor a missing device.
            return
        if flow.is_distributed() and flow.per_process_file(node) and flow.loads_its_own_save(node):
            # Each process reads back the file it wrote from its own GPU: the tensors return
            # there, and loading them to the CPU would break their direct use.
            return
        target, reason, certain = self._map_target(node, only_state)
        message = f"{self.MESSAGE}{via}; {reason}"
        if not certain:
            message += (
                "; tensors the script uses straight from the checkpoint now arrive on the CPU "
                "and need `.to(device)`"
            )
        value = cst.parse_expression(target)
        edit = Edit(node, append_keyword(node, "map_location", value))
        if keywords is not None:
            message += f"; a `map_location` in `{code_of(keywords.value)}` still wins"
            edit = Edit(keywords, defaulted_in(keywords, "map_location", value))
        self.report(
            node,
            edits=[edit],
            message=message,
            fix_title=f"Add `map_location={target}`",
            applicability=Applicability.SAFE if certain else Applicability.UNSAFE,
        )

    def _map_target(self, node: cst.Call, only_state: bool) -> tuple[str, str, bool]:
        """(map_location source, why, certain)."""
        distributed = self.facts.flow.is_distributed()
        for name in self.facts.moves.device_names(node):
            if distributed and self.facts.moves.is_process_device(name, node):
                return name, f"`{name}` is this process's device", True
        if not only_state and not distributed:
            for name in self.facts.moves.device_names(node):
                if self.facts.moves.is_computed_device(name, node):
                    return (
                        name,
                        f"the loaded tensors are used directly, so load them onto `{name}`",
                        True,
                    )
        if not only_state and self.facts.moves.moved_devices(node) == [".cuda()"]:
            # `"cuda"` maps to the current GPU, the one every bare `.cuda()` of the script uses.
            return (
                '"cuda"',
                "the loaded tensors are used directly and the script puts its work on the "
                "current GPU with `.cuda()`: load them there",
                True,
            )
        reason = "load to the CPU; `load_state_dict` places the values"
        return '"cpu"', reason, only_state
