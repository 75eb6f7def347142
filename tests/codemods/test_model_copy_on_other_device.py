"""DF306 model-copy-on-other-device."""

from __future__ import annotations

from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF306"


def test_deepcopy_before_the_move_in_a_script() -> None:
    assert_fix(
        RULE,
        """
        import copy
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = ResNet18()
        ema_model = copy.deepcopy(model)  # weights averaged for evaluation
        model = model.to(device)
        for x, y in loader:
            train_step(model, x.to(device), y.to(device))
            with torch.no_grad():
                for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                    ema_p.mul_(0.999).add_(p, alpha=0.001)
        """,
        """
        import copy
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = ResNet18()
        ema_model = copy.deepcopy(model).to(device)  # weights averaged for evaluation
        model = model.to(device)
        for x, y in loader:
            train_step(model, x.to(device), y.to(device))
            with torch.no_grad():
                for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                    ema_p.mul_(0.999).add_(p, alpha=0.001)
        """,
    )


def test_update_in_a_helper_function_with_a_known_model_class() -> None:
    assert_fix(
        RULE,
        """
        from copy import deepcopy
        import torch
        from torch import nn

        @torch.no_grad()
        def update_ema(ema, model, decay=0.9999):
            for e, m in zip(ema.state_dict().values(), model.state_dict().values()):
                if e.dtype.is_floating_point:
                    e.lerp_(m, 1 - decay)

        def main(steps):
            model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
            ema = deepcopy(model).eval()
            model.cuda()
            for step in range(steps):
                update_ema(ema, model)
        """,
        """
        from copy import deepcopy
        import torch
        from torch import nn

        @torch.no_grad()
        def update_ema(ema, model, decay=0.9999):
            for e, m in zip(ema.state_dict().values(), model.state_dict().values()):
                if e.dtype.is_floating_point:
                    e.lerp_(m, 1 - decay)

        def main(steps):
            model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
            ema = deepcopy(model).eval().cuda()
            model.cuda()
            for step in range(steps):
                update_ema(ema, model)
        """,
    )


def test_teacher_built_from_the_class_and_device_chosen_later() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

        student = Student()
        teacher = Student()
        teacher.load_state_dict(student.state_dict())
        device = torch.device(args.device)
        student.to(device)
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.data = 0.99 * t.data + 0.01 * s.data
        """,
        """
        import torch
        from torch import nn

        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

        student = Student()
        teacher = Student()
        teacher.load_state_dict(student.state_dict())
        device = torch.device(args.device)
        student.to(device)
        teacher.to(device)
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.data = 0.99 * t.data + 0.01 * s.data
        """,
    )


def test_foreach_update_of_a_copy_made_before_the_move() -> None:
    assert_fix(
        RULE,
        """
        import copy
        import torch

        device = "cuda"
        net = torch.nn.Linear(3, 3)
        swa = copy.deepcopy(net)
        net.to(device)
        swa_params = list(swa.parameters())
        net_params = list(net.parameters())
        torch._foreach_lerp_(swa_params, net_params, 0.1)
        """,
        """
        import copy
        import torch

        device = "cuda"
        net = torch.nn.Linear(3, 3)
        swa = copy.deepcopy(net).to(device)
        net.to(device)
        swa_params = list(swa.parameters())
        net_params = list(net.parameters())
        torch._foreach_lerp_(swa_params, net_params, 0.1)
        """,
    )


def test_ema_class_with_a_device_of_its_own() -> None:
    assert_fix(
        RULE,
        """
        from copy import deepcopy
        import torch
        from torch import nn

        class ModelEma(nn.Module):
            def __init__(self, model, decay=0.999, device=None):
                super().__init__()
                self.ema = deepcopy(model).eval()
                self.decay = decay
                if device is not None:
                    self.ema.to(device=device)

            @torch.no_grad()
            def update(self, model):
                for ema_v, model_v in zip(self.ema.state_dict().values(), model.state_dict().values()):
                    if ema_v.is_floating_point():
                        ema_v.mul_(self.decay).add_(model_v, alpha=1 - self.decay)
        """,
        """
        from copy import deepcopy
        import torch
        from torch import nn

        class ModelEma(nn.Module):
            def __init__(self, model, decay=0.999, device=None):
                super().__init__()
                self.ema = deepcopy(model).eval()
                self.decay = decay
                if device is not None:
                    self.ema.to(device=device)

            @torch.no_grad()
            def update(self, model):
                for ema_v, model_v in zip(self.ema.state_dict().values(), model.state_dict().values()):
                    if ema_v.is_floating_point():
                        ema_v.mul_(self.decay).add_(model_v.to(ema_v.device), alpha=1 - self.decay)
        """,
    )


def test_copies_made_after_the_move_and_moved_updates_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import copy
        import torch

        device = torch.device("cuda")
        model = Net().to(device)
        ema = copy.deepcopy(model)
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.99).add_(p, alpha=0.01)

        class Ema:
            def __init__(self, model, device=None):
                self.module = copy.deepcopy(model)
                self.device = device
                if device is not None:
                    self.module.to(device=device)

            def update(self, model):
                for e, m in zip(self.module.state_dict().values(), model.state_dict().values()):
                    if self.device is not None:
                        m = m.to(device=self.device)
                    e.copy_(e * 0.99 + m * 0.01)

            def set(self, model):
                for e, m in zip(self.module.state_dict().values(), model.state_dict().values()):
                    e.copy_(m)
        """,
    )


def test_copy_on_a_device_the_pass_cannot_place_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import copy

        ema = copy.deepcopy(load_model())
        model = load_model().cuda()
        for e, p in zip(ema.parameters(), model.parameters()):
            e.lerp_(p, 0.01)
        """,
    )


def test_ema_helper_on_the_cpu_called_with_gpu_inputs_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from timm.utils import ModelEmaV3

        model = create_model().to("cuda")
        model_ema = ModelEmaV3(model, decay=0.9998, device="cpu")
        for x, y in loader:
            x = x.cuda()
            out = model_ema.module(x)
        """,
        reason="keeps the average on the CPU",
    )


def test_ema_helper_on_the_model_device_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch.optim.swa_utils import AveragedModel

        model = create_model().to("cuda")
        swa_model = AveragedModel(model)
        cpu_swa = AveragedModel(model, device="cpu")
        for x, y in loader:
            out = swa_model(x.cuda())
        """,
    )


def test_ema_restored_in_a_load_hook_is_moved_again() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from diffusers.training_utils import EMAModel

        def main(args, accelerator, unet):
            ema = EMAModel(unet.parameters(), decay=0.999)

            def restore_hook(models, folder):
                loaded = EMAModel.from_pretrained(folder + "/ema", Unet)
                ema.load_state_dict(loaded.state_dict())  # shadow weights
                del loaded

            accelerator.register_load_state_pre_hook(restore_hook)
            unet = accelerator.prepare(unet)
            ema.to(accelerator.device)
            accelerator.load_state(args.resume)
            for batch in loader:
                ema.step(unet.parameters())
        """,
        """
        import torch
        from diffusers.training_utils import EMAModel

        def main(args, accelerator, unet):
            ema = EMAModel(unet.parameters(), decay=0.999)

            def restore_hook(models, folder):
                loaded = EMAModel.from_pretrained(folder + "/ema", Unet)
                ema.load_state_dict(loaded.state_dict())  # shadow weights
                ema.to(accelerator.device)
                del loaded

            accelerator.register_load_state_pre_hook(restore_hook)
            unet = accelerator.prepare(unet)
            ema.to(accelerator.device)
            accelerator.load_state(args.resume)
            for batch in loader:
                ema.step(unet.parameters())
        """,
    )


def test_ema_restore_after_the_move_in_a_script_with_an_alias() -> None:
    assert_fix(
        RULE,
        """
        import torch
        import diffusers.training_utils as tu

        device = torch.device("cuda")
        shadow = tu.EMAModel(net.parameters())
        shadow.to(device)
        if resume:
            shadow.load_state_dict(torch.load(resume, map_location="cpu"))
        """,
        """
        import torch
        import diffusers.training_utils as tu

        device = torch.device("cuda")
        shadow = tu.EMAModel(net.parameters())
        shadow.to(device)
        if resume:
            shadow.load_state_dict(torch.load(resume, map_location="cpu"))
            shadow.to(device)
        """,
    )


def test_ema_restored_before_its_move_or_moved_after_is_fine() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from diffusers.training_utils import EMAModel

        shadow = EMAModel(net.parameters())
        if resume:
            shadow.load_state_dict(torch.load(resume))
        shadow.to(device)

        def hook(models, folder):
            shadow.load_state_dict(EMAModel.from_pretrained(folder, Net).state_dict())
            shadow.to(device)
        """,
    )


def test_ema_restore_where_the_device_is_unknown_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        from diffusers.training_utils import EMAModel

        def setup(net):
            shadow = EMAModel(net.parameters())

            def hook(folder):
                shadow.load_state_dict(EMAModel.from_pretrained(folder, Net).state_dict())

            dev = pick()
            shadow.to(dev)
            return hook
        """,
        reason="its device is not known here",
    )


def test_copy_moved_only_at_fit_start_is_moved_at_eval_start_too() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch

        class Averaging:
            def run(self, event, state):
                if event == Event.FIT_START:
                    self.copy.to(state.device)
                if event == Event.EVAL_START and not self.swapped:
                    # evaluate with the averaged weights
                    self.swap(state)

            def swap(self, state):
                for a, b in zip(self.copy.parameters(), state.model.parameters()):
                    a.data, b.data = b.data, a.data
        """,
        """
        import torch

        class Averaging:
            def run(self, event, state):
                if event == Event.FIT_START:
                    self.copy.to(state.device)
                if event == Event.EVAL_START and not self.swapped:
                    self.copy.to(state.device)
                    # evaluate with the averaged weights
                    self.swap(state)

            def swap(self, state):
                for a, b in zip(self.copy.parameters(), state.model.parameters()):
                    a.data, b.data = b.data, a.data
        """,
        unsafe=True,
    )
    assert "`EVAL_START` uses it too" in findings[0].message


def test_eval_start_that_does_not_use_the_copy_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch

        class Averaging:
            def run(self, event, state):
                if event == Event.FIT_START:
                    self.copy.to(state.device)
                if event == Event.EVAL_START:
                    state.timer.reset()
        """,
    )


def test_an_object_moved_to_self_device_while_the_module_is_built_is_moved_where_used() -> None:
    findings = assert_fix(
        RULE,
        """
        import lightning as L
        import torch
        from torch import nn

        class Running:
            def __init__(self, n):
                self.mean = torch.zeros(n)

            def to(self, device):
                self.mean = self.mean.to(device)
                return self

            def push(self, x):
                self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)

        class Regressor(L.LightningModule):
            def __init__(self, n):
                super().__init__()
                self.net = nn.Linear(n, 1)
                self.running = Running(n)
                self.running.to(self.device)

            def training_step(self, batch, batch_idx):
                x, y = batch
                if batch_idx % 10 == 0:
                    self.running.push(x)
                return nn.functional.mse_loss(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters())
        """,
        """
        import lightning as L
        import torch
        from torch import nn

        class Running:
            def __init__(self, n):
                self.mean = torch.zeros(n)

            def to(self, device):
                self.mean = self.mean.to(device)
                return self

            def push(self, x):
                self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)

        class Regressor(L.LightningModule):
            def __init__(self, n):
                super().__init__()
                self.net = nn.Linear(n, 1)
                self.running = Running(n)
                self.running.to(self.device)

            def training_step(self, batch, batch_idx):
                x, y = batch
                if batch_idx % 10 == 0:
                    self.running.to(self.device)
                    self.running.push(x)
                return nn.functional.mse_loss(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters())
        """,
    )
    assert "where `self.device` is still the CPU" in findings[0].message


def test_a_submodule_or_tensor_moved_to_self_device_in_init_is_not_this_shape() -> None:
    assert_noop(
        RULE,
        """
        import lightning as L
        import torch
        import torchmetrics
        from torch import nn

        class Tagger(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
                self.head.to(self.device)
                self.f1 = torchmetrics.F1Score(task="binary")
                self.f1.to(self.device)

            def training_step(self, batch, batch_idx):
                self.f1.update(self.head(batch).argmax(-1), batch_idx)
                return self.head(batch).sum()
        """,
    )
