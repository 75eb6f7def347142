"""Script flow: what a training script does around its model. Which device the model called
at some point was moved to (and how that device can be written there), which DataLoaders a loop
iterates, which batch names reach the model unmoved, which functions prepare data, and whether
the script runs as one process of several.

Only what the code states is used. When the device is known but cannot be written where it is
needed, the answer carries the reason, and the passes report instead of guessing.

One analysis, `ScriptFlow` (`facts.flow`), composed of one part per concept, each in its module:

- `calls`: the file's calls of its own functions, and the argument a call binds to a parameter.
- `placement`: model placement, where a model's device comes from and how to write it.
- `loops`: DataLoader and batch-loop plans.
- `pipeline`: data functions, the loops they feed, and the moves of their output.
- `processes`: process and GPU topology, notebook cells, device selection, the default device.
- `training`: optimizers, training objects, the script's role and its output.
- `model_calls`: the model calls values are fed to, and token-id tensors.
- `checkpoints`: what `torch.load` reads and where it goes.
- `ranks`: global ranks and the local GPU index of a process.

A part asks the parts it builds on through `self` (each part's base classes are the parts it
uses), so the composed class answers every question in one place.
"""

from __future__ import annotations

from devfix.codemods.analysis.flow.checkpoints import Checkpoints
from devfix.codemods.analysis.flow.model_calls import ModelCalls
from devfix.codemods.analysis.flow.pipeline import DataPipelines
from devfix.codemods.analysis.flow.ranks import ProcessRanks
from devfix.codemods.analysis.flow.training import TrainingCode


class ScriptFlow(DataPipelines, ModelCalls, TrainingCode, Checkpoints, ProcessRanks):
    """Where models are moved, what loops iterate and feed, of one file; built on first use."""
