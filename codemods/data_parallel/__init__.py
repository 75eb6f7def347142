"""DF401: `nn.DataParallel` training scripts, converted to DDP under torchrun.

The pass finds the wraps and asks its planners, one concern each (`entry_point`,
`process_group`, `model_wrap`, `loaders`, `checkpoints`, `output`, `devices`, `teardown`,
`imports`; `convert` runs them in order), what to change; `plan.Plan` turns their decisions into
one finding whose edits are statement-level (see `devfix.edit_plan`), so the conversion shares
rounds with other fixes and review shows it hunk by hunk while accepting it as one change set.
"""

from __future__ import annotations

import libcst as cst

from devfix.codemods._base import DevicePass
from devfix.codemods.data_parallel import model_wrap
from devfix.codemods.data_parallel.convert import convert
from devfix.codemods.data_parallel.script import Decline, Script
from devfix.context import FileContext
from devfix.types import Applicability


class DataParallelTraining(DevicePass):
    """`nn.DataParallel` training script that should run as DistributedDataParallel under torchrun.

    ## What it does
    Finds a training script that wraps its model in `nn.DataParallel` (any spelling:
    `nn.DataParallel`, `torch.nn.parallel.DataParallel`, `from torch.nn import DataParallel as
    DP`) and converts it to one process per device with `DistributedDataParallel` and a
    `DistributedSampler`, launched with `torchrun --standalone --nproc_per_node=N script.py`.
    The converted script still runs as a single process with plain `python script.py`.

    ## Why is this bad?
    `DataParallel` runs one Python thread per GPU and copies the model to `cuda:1`, `cuda:2`, ...
    on every forward. Every tensor the model makes on a fixed device (a global `device`,
    `"cuda:0"`, a plain tensor attribute) then meets activations on another GPU and fails with
    `RuntimeError: Expected all tensors to be on the same device, but found at least two
    devices, cuda:1 and cuda:0!`. PyTorch recommends `DistributedDataParallel` instead: each
    process owns exactly one device, so `"cuda"` always means the right one, and it is faster.

    ## Example
    ```python
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    model = Net().to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model, device_ids=[0, 1])
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        for x, y in loader:
            ...
        print(epoch, loss.item())
        torch.save(model.state_dict(), "model.pt")
    ```

    ## Use instead
    ```python
    # devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs> train.py` ...
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if __name__ == "__main__":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        rank = int(os.environ.get("RANK", "0"))
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        if distributed:
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        sampler = DistributedSampler(
            dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0
        )
        loader = DataLoader(dataset, batch_size=64 // world_size, sampler=sampler)
        model = Net().to(device)
        if distributed:
            if torch.cuda.is_available():
                model = model.to(torch.device("cuda", local_rank))
                model = DistributedDataParallel(
                    model, device_ids=[local_rank], output_device=local_rank
                )
            else:
                model = DistributedDataParallel(model)
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for x, y in loader:
                ...
            if rank == 0:
                print(epoch, loss.item())
                torch.save((model.module if distributed else model).state_dict(), "model.pt")
        if distributed:
            dist.barrier()  # all work done before teardown (avoids a gloo abort at exit)
            dist.destroy_process_group()
    ```
    In detail: `torch.cuda.set_device(local_rank)` comes before the process group and before any
    CUDA tensor; the backend is `nccl` on CUDA and `gloo` on CPU; the model is moved to the
    process's device and wrapped (with `device_ids` only on CUDA); `DataParallel` and its
    `device_ids=[0, 1]` go. The condition around the wrap (`if torch.cuda.device_count() > 1:`,
    `if n_gpu > 1:`, `if len(device_ids) > 1:`, `if args.multi_gpu:`, a one-line `if`, `model =
    DP(model) if n_gpu > 1 else model`, `if torch.cuda.is_available(): ... else:` with a CPU
    branch) keeps whatever else it does (a `print` of the GPU count stays) and the DDP wrap
    follows it: under torchrun the launch decides. Several wrapped models (a GAN's generator and
    discriminator) each become a DDP model under the one process group; a wrapped model that no
    optimizer trains (a frozen teacher) is only unwrapped. An optimizer built from a wrapped
    model before its wrap moves after it, and the DataParallel idiom `if n_gpu > 1: loss =
    loss.mean()` goes. Every training `DataLoader` (one iterated in a loop that calls
    `.backward()`, passed to a function that does, looped over as a global by a flat script's
    `train(epoch)`, or returned by a factory such as `set_loader(opt)`, also as calls: `return
    DataLoader(train, ...), DataLoader(valid)`) gets a
    `DistributedSampler` with the loader's former `shuffle`, the same seed on every rank, and
    `sampler.set_epoch(epoch)` at the start of each epoch; the `train_sampler = None`
    placeholder of ImageNet-style scripts becomes that sampler. DataParallel's `batch_size` was
    the global batch, so each process takes `batch_size // world_size` (a comment says what
    happens when it does not divide). Checkpoints are written on rank 0 only, from the unwrapped
    module (`model.module` and `model.state_dict()` read it, `isinstance(model,
    nn.DataParallel)` asks about DDP), followed by `dist.barrier()` when the script reads them
    back; `load_state_dict` after the wrap strips the `module.` prefix of DataParallel-era
    checkpoints. `print`, `logging`, `torch.save` and other file writes (`os.makedirs`,
    `shutil.copyfile`, `save_image`) run on rank 0 only, and so does a function of the file that
    only writes checkpoints. Evaluation loaders are left whole: every process evaluates the full
    evaluation set, so metrics, early stopping and "save the best model" decisions agree on
    every rank and no collective can hang. Hard-coded `"cuda:0"` and `.cuda(0)` become `"cuda"`
    / `.cuda()` (after `set_device` that is the process's own GPU). The setup goes at the start
    of the code that trains: a flat script moves under `if __name__ == "__main__":`; training in
    `main()` or `train(args)` (called once from the entry point, directly or through other
    functions) gets it at the top of that function, and a model wrapped in a factory it calls
    (`model = set_model(opt)`) is wrapped there once the process group exists. The script's own
    `torch.cuda.set_device(...)` goes. The end of that code gets `dist.destroy_process_group()`,
    the top of the file the launch command; imports join the file's imports, and new lines
    respect the file's line length.

    Not converted (reported without a fix, with the reason): the functional form
    `nn.parallel.data_parallel(module, inputs, device_ids)` (it replicates the module on every
    call, wherever the call is, so the code around it must be restructured by hand), notebooks
    (torchrun cannot launch them: the message says what to do instead), `DataParallel` inside a
    class or a function the file never calls (library code) or calls more than once, models
    wrapped in different functions, scripts that already use `mp.spawn`, `init_process_group` or
    `DistributedDataParallel`, Hugging Face `Trainer` scripts (the Trainer runs DDP itself
    under torchrun), a wrap inside a loop, `with` or `try`, training data not read through a
    `DataLoader` (or only through loaders with samplers of their own, or built by the caller of
    the function that wraps the model), a hard-coded GPU other than 0, `set_device` outside
    the training code, no optimizer at all (inference), and names the conversion needs
    (`rank`, `world_size`, `dist`, ...) already used for something else.

    ## Fix safety
    Unsafe: the script must now be launched with `torchrun`, per-process quantities change
    (training losses printed by rank 0 are its local batch's, `len(train_loader)` is per process,
    BatchNorm normalises each process's batch), and `DistributedSampler` pads the data set so
    every process gets the same number of samples. With a mean-reduced loss, a global batch
    divisible by the number of processes and no randomness that differs per process (dropout,
    augmentation), the converted script trains to the same weights as the original.

    ## References
    - PyTorch tutorials, "Multi GPU training with DDP" and "Getting Started with Distributed Data
      Parallel"; `torchrun` documentation ("Important Notices").
    - `torch.nn.parallel.DistributedDataParallel` and
      `torch.utils.data.distributed.DistributedSampler` docstrings (`set_epoch`, `seed`,
      padding); distributed docs, "Which backend to use?".
    - pytorch/pytorch#3805 (the `module.` prefix), #53979 (evaluation through the wrapper).
    """

    CODE = "DF401"
    NAME = "data-parallel"
    MESSAGE = "`nn.DataParallel` training; use DistributedDataParallel under torchrun"
    FIX_TITLE = "Convert to DistributedDataParallel + DistributedSampler (launch with torchrun)"
    APPLICABILITY = Applicability.UNSAFE
    TRIGGER_WORDS = ("DataParallel", "data_parallel")

    def __init__(self, context: FileContext, *, keep_per_process_batch: bool = False) -> None:
        super().__init__(context)
        #: Keep `batch_size` as the per-process batch (the global batch grows with the processes).
        self.keep_per_process_batch = keep_per_process_batch

    def visit_Module(self, node: cst.Module) -> bool:
        script = Script(self.context)
        for call, message in model_wrap.functional_data_parallel(script):
            self.report(call, message=message)
        calls = model_wrap.data_parallel_calls(script)
        if not calls:
            return False
        try:
            plan = convert(script, calls, keep_per_process_batch=self.keep_per_process_batch)
        except Decline as reason:
            # Each wrap gets the reason: each is a place the user looks at.
            for call in calls:
                self.report(
                    call,
                    message=(
                        f"`nn.DataParallel` is not converted to DistributedDataParallel: {reason}"
                    ),
                )
            return False
        self.report(calls[0], edits=plan.edits(), imports=plan.imports)
        return False
