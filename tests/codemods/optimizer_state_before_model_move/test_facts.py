"""codemods.optimizer_state_before_model_move.facts: moving statements of a block past a later one."""

from __future__ import annotations

from devfix.codemods.optimizer_state_before_model_move.facts import Reordering
from tests.analysis._parsed import parse

SCRIPT = """
import torch
model = Net()
optimizer = torch.optim.Adam(model.parameters())
groups = optimizer.param_groups
ckpt = torch.load("c.pt")
optimizer.load_state_dict(ckpt["opt"])
model.to("cuda")
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
train(model, scheduler)
"""


def test_statements_that_move_along_and_where_they_go() -> None:
    parsed = parse(SCRIPT)
    reorder = parsed.facts.own(Reordering)
    body = parsed.module.body
    objects = parsed.facts.flow.training_objects(parsed.module)
    assert reorder.restores(body[5], objects, {"optimizer"})
    assert not reorder.restores(body[5], objects, {"scheduler"})
    moved = [2, 5]
    assert reorder.close_dependencies(body, moved, 6, {"optimizer"}) is None
    assert moved == [2, 3, 5]  # reads the optimizer; the checkpoint load does not
    assert reorder.rebinding_conflict(body, moved, 6, "model") is None
    assert reorder.insertion_index(body, moved, 6, objects, {"optimizer"}) == 7
    assert reorder.insertion_index(body, moved, 6, objects, set()) == 6


def test_what_stops_a_reordering() -> None:
    parsed = parse(
        """
        import torch
        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        for batch in data:
            optimizer.step()
        model = Other()
        model.cuda()
        """
    )
    reorder = parsed.facts.own(Reordering)
    body = parsed.module.body
    blocked = reorder.close_dependencies(body, [2], 5, {"optimizer"})
    assert blocked is not None and "uses `optimizer` before the model move" in blocked
    clash = reorder.rebinding_conflict(body, [2], 5, "model")
    assert clash is not None and "rebinds `model`" in clash
