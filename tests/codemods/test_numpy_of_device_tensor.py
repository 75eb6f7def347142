"""DF203 numpy-of-device-tensor: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_fix, assert_noop

RULE = "DF203"


def test_model_output_numpy_gets_detach_cpu_and_the_comment_stays() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2).to(device)
        out = model(x)
        preds = out.argmax(1).numpy()  # predicted classes
        probs = torch.softmax(out, dim=1).detach().numpy()
        weights = out.data.numpy()
        """,
        """
        import torch
        from torch import nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2).to(device)
        out = model(x)
        preds = out.argmax(1).detach().cpu().numpy()  # predicted classes
        probs = torch.softmax(out, dim=1).detach().cpu().numpy()
        weights = out.data.cpu().numpy()
        """,
    )
    assert all(f.applicability is Applicability.SAFE for f in findings)


def test_loss_from_a_criterion_and_tuple_outputs() -> None:
    assert_fix(
        RULE,
        """
        import torch.nn as nn

        net = Seq2Seq().cuda()
        criterion = nn.MSELoss()
        out, hidden = net(src)
        loss = criterion(out, target)
        history = loss.numpy()
        h = hidden[0].numpy()
        """,
        """
        import torch.nn as nn

        net = Seq2Seq().cuda()
        criterion = nn.MSELoss()
        out, hidden = net(src)
        loss = criterion(out, target)
        history = loss.detach().cpu().numpy()
        h = hidden[0].detach().cpu().numpy()
        """,
    )


def test_explicit_moves_and_device_factories() -> None:
    assert_fix(
        RULE,
        """
        import torch as t

        a = t.randn(3, device="cuda").numpy()
        b = t.ones(2).cuda()
        c = (b * 2).numpy()
        """,
        """
        import torch as t

        a = t.randn(3, device="cuda").detach().cpu().numpy()
        b = t.ones(2).cuda()
        c = (b * 2).detach().cpu().numpy()
        """,
    )


def test_np_mean_over_a_list_of_device_losses_becomes_torch_stack() -> None:
    findings = assert_fix(
        RULE,
        """
        import numpy as np
        import torch as th

        model = Net().to(device)
        losses = []
        for x, y in batches:
            loss = th.nn.functional.cross_entropy(model(x), y)
            losses.append(loss)
        print("epoch", np.mean(losses), np.sum([loss, loss]))
        """,
        """
        import numpy as np
        import torch as th

        model = Net().to(device)
        losses = []
        for x, y in batches:
            loss = th.nn.functional.cross_entropy(model(x), y)
            losses.append(loss)
        print("epoch", th.stack(losses).mean(), th.stack([loss, loss]).sum())
        """,
        unsafe=True,
    )
    assert all(f.applicability is Applicability.UNSAFE for f in findings)


def test_noop_for_cpu_tensors_items_and_unknown_values() -> None:
    assert_noop(
        RULE,
        """
        import numpy as np
        import torch

        model = Net()
        a = model(x).detach().numpy()
        b = torch.randn(3).numpy()
        gpu = Net().to("cuda")
        c = gpu(x).cpu().numpy()
        d = gpu(x).detach().cpu().numpy()
        e = gpu(x).to("cpu").numpy()
        def f(t):
            return t.numpy()
        values = []
        values.append(gpu(x).item())
        print(np.mean(values), np.mean(c), np.sum(values, axis=0))
        mixed = []
        mixed.append(gpu(x))
        mixed.append(1.0)
        np.mean(mixed)
        """,
    )


def test_numpy_function_of_an_error_summed_over_gpu_tensors() -> None:
    # `mse` starts as a Python number and becomes a CUDA tensor once a GPU error is added.
    before = """
        import numpy as np
        import torch

        def validate(loader, model):
            mse = 0
            for img, target in loader:
                output = model(img.cuda())
                gt_count = target.sum().float().cuda()
                mse += (gt_count - output.data.sum()) ** 2
            mse = np.sqrt(mse / len(loader))
            return mse
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            "np.sqrt(mse / len(loader))", "np.sqrt((mse / len(loader)).detach().cpu().numpy())"
        ),
    )
    # A Python float summed from `.item()` is NumPy's already.
    assert_noop(RULE, before.replace("output.data.sum()) ** 2", "output.data.sum()).item() ** 2"))


def test_output_of_a_model_fed_a_gpu_input_is_on_the_gpu() -> None:
    # The model is never moved here, but it is called on a CUDA input: its output (if the call
    # works at all) is on the GPU, and `.numpy()` needs it on the CPU.
    before = """
        import torch
        from model import handpose_model

        model = handpose_model()
        model.load_state_dict(torch.load("hand.pth"))
        data = torch.from_numpy(image).float()
        if torch.cuda.is_available():
            data = data.cuda()
        with torch.no_grad():
            output = model(data).numpy()
        """
    assert_fix(
        RULE, before, before.replace("model(data).numpy()", "model(data).detach().cpu().numpy()")
    )
    # An object that is not used as a model says nothing about where its result is.
    assert_noop(
        RULE,
        before.replace('model.load_state_dict(torch.load("hand.pth"))', "model.configure()"),
    )


def test_tensors_on_a_device_handed_to_a_scikit_learn_metric() -> None:
    before = """
        import torch
        from sklearn import metrics
        from sklearn.metrics import f1_score as f1

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        for x, y in loader:
            y = y.to(device)
            preds = model(x.to(device)).argmax(1)
            print(metrics.accuracy_score(y, preds), f1(y_true=y, y_pred=preds.cpu().numpy()))
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            "metrics.accuracy_score(y, preds)",
            "metrics.accuracy_score(y.detach().cpu().numpy(), preds.detach().cpu().numpy())",
        ).replace("f1(y_true=y,", "f1(y_true=y.detach().cpu().numpy(),"),
    )
    assert len(findings) == 3 and "scikit-learn converts it with NumPy" in findings[0].message


def test_a_conversion_that_runs_only_without_cuda_is_left_and_its_gpu_twin_is_fixed() -> None:
    assert_fix(
        RULE,
        """
        import numpy as np
        import torch as T

        has_gpu = T.cuda.is_available()
        classifier = Classifier()
        if has_gpu:
            classifier.cuda()
        scores = classifier(batch)
        top = scores.argmax(1)
        hits = np.squeeze(top.numpy()) if not has_gpu else np.squeeze(top.cpu().numpy())
        if T.cuda.is_available():
            seen = top.numpy()
        else:
            seen = top.numpy()
        if not has_gpu:
            kept = top.numpy()
        elif verbose:
            kept = top.numpy()
        """,
        """
        import numpy as np
        import torch as T

        has_gpu = T.cuda.is_available()
        classifier = Classifier()
        if has_gpu:
            classifier.cuda()
        scores = classifier(batch)
        top = scores.argmax(1)
        hits = np.squeeze(top.numpy()) if not has_gpu else np.squeeze(top.cpu().numpy())
        if T.cuda.is_available():
            seen = top.detach().cpu().numpy()
        else:
            seen = top.numpy()
        if not has_gpu:
            kept = top.numpy()
        elif verbose:
            kept = top.detach().cpu().numpy()
        """,
    )


def test_a_test_that_only_mentions_cuda_among_other_things_does_not_count_as_without_cuda() -> None:
    assert_fix(
        RULE,
        """
        import torch

        net = Net().cuda()
        out = net(x)
        value = out.numpy() if not (torch.cuda.is_available() and debug) else None
        """,
        """
        import torch

        net = Net().cuda()
        out = net(x)
        value = out.detach().cpu().numpy() if not (torch.cuda.is_available() and debug) else None
        """,
    )


def test_detached_tensor_of_a_helper_in_a_file_that_moves_work_to_a_gpu_is_copied_first() -> None:
    # A latent hazard: nothing says where `net` is, but the script puts it on `device`; on the
    # CPU the added copy changes nothing.
    findings = assert_fix(
        RULE,
        """
        import torch

        def priorities(net, states, targets):
            errors = (net(states) - targets).abs()
            return errors.detach().numpy(), net(states).data.numpy()[0]

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = QNet().to(device)
        """,
        """
        import torch

        def priorities(net, states, targets):
            errors = (net(states) - targets).abs()
            return errors.detach().cpu().numpy(), net(states).data.cpu().numpy()[0]

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        net = QNet().to(device)
        """,
    )
    assert all("a latent hazard" in f.message for f in findings)


def test_detached_tensors_are_left_where_the_code_never_leaves_the_cpu_or_splits_by_device() -> (
    None
):
    assert_noop(
        RULE,
        """
        import torch

        def priorities(net, states):
            return net(states).detach().numpy()
        """,
    )
    assert_noop(
        RULE,
        """
        import torch

        class Agent:
            def __init__(self, actor, use_cuda):
                self.actor = actor.cuda() if use_cuda else actor
                self.use_cuda = use_cuda

            def act(self, state):
                probs = self.actor(state)
                if self.use_cuda:
                    action = probs.data.cpu().numpy()[0]
                else:
                    action = probs.data.numpy()[0]
                return action, probs.cpu().detach().numpy()
        """,
    )


_AGENT = """
import torch
from common import to_tensors

class Agent:
    def __init__(self, net, device, action_dim):
        self.net = net
        self.device = device
        self.action_dim = action_dim
        self.head = make_head(self.action_dim)

    def learn(self, batch):
        states, targets = to_tensors(self.device, batch["s"], batch["y"])
        errors = self.net(states) - targets
        errors.pow(2).mean().backward()
        return errors.detach().numpy()
"""


def test_detached_numpy_in_a_file_that_hands_a_helper_its_device_is_a_latent_hazard() -> None:
    # The file's only word on devices is `self.device`, handed to a helper of another module
    # that builds the batch there: the errors are on that device; `.cpu()` is a no-op on the CPU.
    findings = assert_fix(
        RULE, _AGENT, _AGENT.replace("errors.detach().numpy()", "errors.detach().cpu().numpy()")
    )
    assert "hands its work a device chosen at run time (line 13)" in findings[0].message


def test_a_size_or_a_cpu_device_handed_to_a_helper_says_nothing_of_a_gpu() -> None:
    assert_noop(RULE, _AGENT.replace("self.device, ", ""))
    assert_noop(RULE, _AGENT.replace("to_tensors(self.device, ", 'to_tensors("cpu", '))


_ATTENTION_PROBE = """
import torch


class Probe:
    def __init__(self, device):
        self.device = device

    def load(self, path):
        net = AttentionNet()
        net.load_state_dict(torch.load(path, map_location="cpu"))
        net = net.to(self.device)
        self.net = net

    def attention_map(self, head):
        return self.net.last_attention[head].numpy()
"""


def test_numpy_of_a_field_a_placed_model_keeps_gets_a_host_copy() -> None:
    # `forward` leaves its attention in `self.last_attention`: on the model's device, which
    # `load` chose through a local it then stored. On the CPU the copy is a no-op.
    findings = assert_fix(
        RULE,
        _ATTENTION_PROBE,
        _ATTENTION_PROBE.replace(
            "self.net.last_attention[head].numpy()",
            "self.net.last_attention[head].detach().cpu().numpy()",
        ),
    )
    assert "it is kept by `self.net`, a model moved to a device" in findings[0].message


def test_numpy_of_a_field_of_a_model_left_on_the_cpu_is_left() -> None:
    assert_noop(RULE, _ATTENTION_PROBE.replace("        net = net.to(self.device)\n", ""))
