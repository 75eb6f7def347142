"""codemods.device_map_in_distributed_training.facts: one process or several, a model split over
the GPUs of one process on purpose, a model moved after it is loaded."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.device_map_in_distributed_training.facts import ShardedModel
from tests.analysis._parsed import parse


def test_a_script_is_not_one_process_by_itself() -> None:
    parsed = parse("import torch\nmodel = Net()\n")
    assert parsed.facts.own(ShardedModel).one_process_reason() is None


def test_a_model_declared_split_over_the_gpus_of_one_process() -> None:
    parsed = parse(
        """
        model = AutoModel.from_pretrained(name, device_map="auto")
        model.model_parallel = True
        other.is_parallelizable = False
        """
    )
    sharded = parsed.facts.own(ShardedModel)
    declared = sharded.declares_model_parallelism("model")
    assert isinstance(declared, cst.Assign)
    assert sharded.declares_model_parallelism("other") is None


def test_a_model_moved_after_it_is_loaded() -> None:
    parsed = parse(
        """
        model = AutoModel.from_pretrained(name, device_map="auto")
        model.to(device)
        """
    )
    load = parsed.one(cst.Call, 'AutoModel.from_pretrained(name, device_map="auto")')
    sharded = parsed.facts.own(ShardedModel)
    assert sharded.moved_after("model", load)
    assert not sharded.moved_after("tokenizer", load)
