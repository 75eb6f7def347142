"""Process group: one process per device, set up where the training starts (after the command
line is parsed there, so that `torchrun train.py --help` starts no process group).

`local_rank`, `rank` and `world_size` come from the variables torchrun sets (LOCAL_RANK, RANK,
WORLD_SIZE); without them (plain `python`) the script runs as one process, without a process
group. `torch.cuda.set_device(local_rank)` comes before the process group and before any CUDA
tensor; the backend is NCCL on CUDA and gloo on CPU. The top of the file says how to launch.
"""

from __future__ import annotations

import os
import re

import libcst as cst

from devfix.codemods.data_parallel.plan import Plan, parse_statements
from devfix.codemods.data_parallel.script import Decline, Script

#: Names the setup binds in the code that runs the training.
SETUP_NAMES = ("local_rank", "rank", "world_size", "distributed")


def check_names(script: Script) -> None:
    for name in SETUP_NAMES:
        if name in script.bound:
            raise Decline(f"the script already uses the name `{name}`")


def setup_statements(script: Script, *, unused: frozenset[str] = frozenset()) -> str:
    """The setup; `rank` and `world_size` are left out when the code it runs does not read
    them (`unused`)."""
    rank = "" if "rank" in unused else 'rank = int(os.environ.get("RANK", "0"))\n'
    world_size = (
        "" if "world_size" in unused else 'world_size = int(os.environ.get("WORLD_SIZE", "1"))\n'
    )
    return script.t(
        "# One process per device: torchrun sets LOCAL_RANK, RANK and WORLD_SIZE.\n"
        'local_rank = int(os.environ.get("LOCAL_RANK", "0"))\n'
        + rank
        + world_size
        + 'distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ\n'
        "if torch.cuda.is_available():\n"
        "    torch.cuda.set_device(local_rank)  # before the process group and any CUDA tensor\n"
        "if distributed:\n"
        '    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")\n'
    )


def plan_process_group(script: Script, plan: Plan) -> None:
    """Called after the planners whose code reads `rank` or `world_size` in the run."""
    run = script.scope
    added = plan.new_code(script.in_run, main_block=run.block is None)
    read = set(re.findall(r"\b(rank|world_size)\b", added))
    unused = frozenset(name for name in ("rank", "world_size") if name not in read)
    setup = parse_statements(setup_statements(script, unused=unused))
    parsed = _argument_parsing_end(script, run.block)
    if parsed is not None:
        # `torchrun train.py --help` prints the help and starts no process group.
        change = plan.statement(parsed)
        change.after = [*setup, *change.after]
    else:
        plan.prepend(run.block, setup)
        if run.block is not None:
            plan.spaced.add(id(run.block))
    plan.need("os")
    plan.need("dist")
    name = os.path.basename(script.path)
    command = name if name.endswith(".py") else "train.py"
    plan.file_comment.append(
        f"devfix DF401: launch with `torchrun --standalone --nproc_per_node=<GPUs> {command}` "
        f"(`python {command}` runs one process)"
    )


def _argument_parsing_end(
    script: Script, block: cst.IndentedBlock | None
) -> cst.BaseStatement | None:
    """The statement of `block` that parses the command line (`args = parser.parse_args()`),
    when nothing before it reads what the setup binds or touches CUDA: the setup can follow it.
    None: the setup goes first."""
    # A flat script's run is the top-level code that goes into the new main block.
    statements = list(script.scope.statements) if block is None else list(block.body)
    found: cst.BaseStatement | None = None
    for statement in statements:
        if _parses_arguments(script, statement):
            found = statement
            break
    if found is None:
        return None
    for statement in statements[: statements.index(found) + 1]:
        read = script.scopes.names_read(statement)
        if read & {*SETUP_NAMES, "dist"} or "cuda" in script.code(statement):
            return None
    return found


def _parses_arguments(script: Script, statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(
        isinstance(node, cst.Attribute)
        and node.attr.value in ("parse_args", "parse_known_args", "parse_args_into_dataclasses")
        for node in script.scopes.nodes(statement)
    )
