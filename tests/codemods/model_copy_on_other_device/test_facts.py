"""codemods.model_copy_on_other_device.facts: EMA updates, where a model and its copies live, how a
copy was made, EMA restores and start-event moves."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.model_copy_on_other_device.facts import ModelCopies
from tests.analysis._parsed import parse


def test_ema_updates_and_where_the_copies_live() -> None:
    parsed = parse(
        """
        import copy
        import torch
        from torch import nn

        device = torch.device("cuda")
        model = nn.Linear(2, 2)
        ema = copy.deepcopy(model)
        model.to(device)
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.9).add_(p, alpha=0.1)
        for (name, e2), (_, p2) in zip(ema.named_parameters(), model.named_parameters()):
            e2.copy_(p2)
        """
    )
    copies = parsed.facts.own(ModelCopies)
    updates = copies.ema_updates(parsed.module)
    assert [(u.copy, u.model, u.target) for u in updates] == [("ema", "model", "e")]
    update = updates[0]
    assert update.source is not None and update.source.value == "p"
    copy = copies.module_placement("ema", update.node)
    model = copies.module_placement("model", update.node)
    assert copy is not None and copy.on_cpu and "still on the CPU" in copy.evidence
    assert model is not None and model.move is not None and model.move.code == "device"
    creation = copies.copy_creation("ema", update.node)
    assert creation is not None and code_of(creation) == "copy.deepcopy(model)"


def test_own_device_copy_of_an_ema_class() -> None:
    parsed = parse(
        """
        from copy import deepcopy

        class Ema:
            def __init__(self, model, device=None):
                self.shadow = deepcopy(model).eval()
                if device is not None:
                    self.shadow.to(device=device)
        """
    )
    classdef = parsed.all(cst.ClassDef)[0]
    move = parsed.facts.own(ModelCopies).own_device_copy("shadow", classdef)
    assert move is not None and code_of(move) == "self.shadow.to(device=device)"
    assert parsed.facts.own(ModelCopies).own_device_copy("other", classdef) is None


def test_ema_restores_in_a_load_hook_and_after_the_move() -> None:
    parsed = parse(
        """
        import torch
        from diffusers.training_utils import EMAModel as Averaged

        def train(runner, net):
            shadow = Averaged(net.parameters())

            def on_load(models, folder):
                restored = Averaged.from_pretrained(folder, Net)
                shadow.load_state_dict(restored.state_dict())

            def on_load_moved(models, folder):
                shadow.load_state_dict(torch.load(folder))
                shadow.to(runner.device)

            runner.register_load_state_pre_hook(on_load)
            shadow.to(runner.device)
            shadow.load_state_dict(saved)
            shadow.load_state_dict(saved)
            shadow.to(runner.device)
        """
    )
    restores = parsed.facts.own(ModelCopies).ema_restores()
    lines = [(parsed.facts.scopes.line_of(r.load), r.visible) for r in restores]
    assert lines == [(10, True)]  # the hook; not the moved hook, not the loads the move follows
    assert code_of(restores[0].move) == "shadow.to(runner.device)"


def test_ema_restores_ignore_modules_that_copy_on_load() -> None:
    parsed = parse(
        """
        import copy
        ema = copy.deepcopy(model)
        ema.to(device)

        def hook(state):
            ema.load_state_dict(state)
        """
    )
    assert parsed.facts.own(ModelCopies).ema_restores() == []


def test_start_event_moves_find_branches_that_can_come_before_fitting() -> None:
    parsed = parse(
        """
        class Averager:
            def handle(self, event, state):
                if event in (Stage.FIT_START, Stage.RESUME):
                    # after a restore the copy may be on the CPU
                    self.shadow.to_device_of(state.model)
                if event == Stage.EVAL_START:
                    self._swap_in(state)
                if event == Stage.PREDICT_START:
                    self.shadow.to_device_of(state.model)
                    self._swap_in(state)
                if event == Stage.TEST_START:
                    state.log("testing")

            def _swap_in(self, state):
                self.shadow.swap(state.model)
        """
    )
    found = parsed.facts.own(ModelCopies).start_event_moves()
    assert [(f.holder, f.event, code_of(f.move.body[0])) for f in found] == [
        ("self.shadow", "EVAL_START", "self.shadow.to_device_of(state.model)")
    ]
