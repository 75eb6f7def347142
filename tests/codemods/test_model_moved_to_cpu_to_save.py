"""DF310 model-moved-to-cpu-to-save: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF310"


def test_a_state_read_through_cpu_in_the_epoch_loop_is_copied_instead() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        def run(model, loader, opt, device, epochs):
            model = model.to(device)
            for epoch in range(epochs):
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.l1_loss(model(x.to(device)), y.to(device)).backward()
                    opt.step()
                snapshot = model.cpu().state_dict(keep_vars=False)
                torch.save(snapshot, f"e{epoch}.pt")
        """,
        """
        import torch

        def run(model, loader, opt, device, epochs):
            model = model.to(device)
            for epoch in range(epochs):
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.l1_loss(model(x.to(device)), y.to(device)).backward()
                    opt.step()
                snapshot = {k: v.cpu() for k, v in model.state_dict(keep_vars=False).items()}
                torch.save(snapshot, f"e{epoch}.pt")
        """,
        unsafe=True,
    )
    assert findings[0].applicability is Applicability.UNSAFE
    assert "moves `model` itself to the CPU" in findings[0].message


def test_the_whole_module_pickled_on_the_cpu_is_reported_without_a_fix() -> None:
    assert_declined(
        RULE,
        """
        import torch

        encoder = Encoder().cuda()
        while not done():
            encoder(batch().cuda()).mean().backward()
            torch.save(encoder.cpu(), "encoder.pt")
        """,
        reason="no fix: a CPU copy of the module needs `copy.deepcopy(encoder).cpu()`",
    )


def test_a_save_after_training_one_moved_back_or_an_unmoved_model_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        net = Net().cuda()
        for step in range(10):
            net(torch.randn(2, 3).cuda()).sum().backward()
            torch.save(net.cpu().state_dict(), "last.pt")
            net.cuda()
        torch.save(net.cpu().state_dict(), "final.pt")

        cpu_net = Net()
        for step in range(10):
            cpu_net(torch.randn(2, 3)).sum().backward()
            torch.save(cpu_net.cpu().state_dict(), "cpu.pt")
        """,
    )
