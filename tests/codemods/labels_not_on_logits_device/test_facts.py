"""codemods.labels_not_on_logits_device.facts: loss targets moved to their input's device."""

from __future__ import annotations

from devfix.codemods.labels_not_on_logits_device.facts import AlignedTargets
from tests.analysis._parsed import parse


def test_aligns_targets_with_inputs_needs_a_loss_target_moved_to_its_input() -> None:
    moved_before = """
        import torch.nn as nn
        def nll(logits, labels):
            loss_fct = nn.CrossEntropyLoss()
            labels = labels.to(logits.device)
            return loss_fct(logits, labels)
        """
    moved_inline = """
        import torch.nn.functional as F
        def nll(out, y):
            return F.cross_entropy(out.flatten(0, 1), y.flatten().to(out.device))
        """
    weight_moved = """
        import torch.nn as nn
        def nll(logits, labels, w):
            return nn.CrossEntropyLoss(weight=w.to(logits.device))(logits, labels)
        """
    other_device = """
        import torch.nn.functional as F
        def nll(logits, labels, batch):
            return F.cross_entropy(logits, labels.to(batch.device))
        """
    assert parse(moved_before).facts.own(AlignedTargets).aligns_targets_with_inputs()
    assert parse(moved_inline).facts.own(AlignedTargets).aligns_targets_with_inputs()
    assert not parse(weight_moved).facts.own(AlignedTargets).aligns_targets_with_inputs()
    assert not parse(other_device).facts.own(AlignedTargets).aligns_targets_with_inputs()
