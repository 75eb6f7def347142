"""codemods.optimizer_state_before_model_move.facts: optimizer state before the model move, and
moving statements of a block past a later one."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
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


def test_optimizer_restore_directly_or_through_a_checkpoint_helper() -> None:
    parsed = parse(
        """
        import torch
        from utils import ckpt

        def restore_local(path, net, opt):
            state = torch.load(path)
            net.load_state_dict(state["net"])
            opt.load_state_dict(state["opt"])

        def load_report(path, opt):
            print(path, opt)

        def main(optimizer, model):
            optimizer.load_state_dict(state)
            model.load_state_dict(state)
            ckpt.resume_from(path, model, optimizer)
            restore_local(path, model, optimizer)
            load_report(path, optimizer)
            ckpt.save_checkpoint(path, model, optimizer)
        """
    )
    reordering = parsed.facts.own(Reordering)
    found = {
        code_of(call.func): reordering.optimizer_restore(call, {"optimizer"})
        for call in parsed.all(cst.Call)
        if parsed.facts.scopes.enclosing_function(call) == parsed.function("main")
    }
    assert found["optimizer.load_state_dict"] == "optimizer"
    assert found["model.load_state_dict"] is None
    assert found["ckpt.resume_from"] == "optimizer"
    assert found["restore_local"] == "optimizer"
    assert found["load_report"] is None  # defined here, restores nothing
    assert found["ckpt.save_checkpoint"] is None


def test_runs_module_calls_and_hands_it_a_fresh_tensor() -> None:
    parsed = parse(
        """
        import torch
        net(x)
        net.forward(x)
        writer.add_graph(net, torch.rand(1, 3, 8, 8))
        load_weights(net, state)
        net.load_state_dict(state)
        """
    )
    reordering = parsed.facts.own(Reordering)
    runs = [reordering.runs_module(statement, "net") for statement in parsed.module.body[1:]]
    assert runs == [True, True, True, False, False]


def test_optimizer_state_built_or_restored_before_the_model_move() -> None:
    parsed = parse(
        """
        import torch
        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        optimizer.load_state_dict(ckpt["opt"])
        model.to("cuda")
        late = torch.optim.SGD(model.parameters())
        """
    )
    flow = parsed.facts.flow
    objects = flow.training_objects(parsed.module)
    early = parsed.facts.own(Reordering).early_optimizer_state(parsed.module, objects)
    assert [(e.kind, e.name, e.label) for e in early] == [
        ("construct", "optimizer", ""),
        ("load", "optimizer", "optimizer.load_state_dict"),
    ]
    assert all(code_of(e.move) == 'model.to("cuda")' for e in early)  # `late` comes after it
