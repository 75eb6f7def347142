"""codemods.analysis.flow: model moves, DataLoader loops, data pipelines, checkpoints, the
default device."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.flow.pipeline import DataFunction
from devfix.codemods.analysis.names import code_of, is_main_guard
from tests.analysis._parsed import parse

SCRIPT = """
import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

device = torch.device("cuda")
model = Net().to(device)
model = nn.DataParallel(model)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adagrad(model.parameters())
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
loader = DataLoader(dataset, batch_size=4, collate_fn=collate)

def train(net, batches):
    for step, (x, y) in enumerate(tqdm(batches)):
        loss = criterion(net(x), y)

train(model, loader)
"""


def test_model_device_follows_wrappers_and_callers() -> None:
    parsed = parse(SCRIPT)
    flow = parsed.facts.flow
    call = parsed.one(cst.Call, "net(x)")
    found = flow.model_device(call.func, call)
    assert found is not None and found.move is not None
    assert found.move.code == "device" and found.model == "net"
    loop = parsed.all(cst.For)[0]
    loaders = flow.dataloader_calls(loop.iter, parsed.function("train"))
    assert [code_of(c.func) for c in loaders] == ["DataLoader"]


def test_loop_plan_moves_what_reaches_the_model_and_its_output() -> None:
    parsed = parse(SCRIPT)
    plan = parsed.facts.flow.loop_plan(parsed.all(cst.For)[0])
    assert plan is not None and plan.reason == ""
    assert plan.unmoved == ["x", "y"]
    assert plan.statement_code == "x, y = x.to(device), y.to(device)"


def test_training_objects_and_data_callbacks() -> None:
    parsed = parse(SCRIPT)
    flow = parsed.facts.flow
    objects = flow.training_objects(parsed.module)
    assert objects["optimizer"].kind == "optimizer" and objects["optimizer"].models == {"model"}
    assert objects["scheduler"].kind == "scheduler"
    assert objects["scheduler"].optimizers == {"optimizer"}
    assert "criterion" not in objects
    assert flow.data_callbacks() == frozenset({"collate"})
    assert not flow.is_distributed()


def test_distributed_evidence_names_the_launcher() -> None:
    cases = {
        "import os\nrank = int(os.environ['LOCAL_RANK'])\n": "torchrun",
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n": (
            "DistributedDataParallel"
        ),
        "from accelerate import Accelerator\na = Accelerator()\n": "accelerate",
        "from transformers import Trainer\nt = Trainer(model)\n": "Trainer",
        "import torch\nx = torch.zeros(3)\n": None,
    }
    for source, word in cases.items():
        assert parse(source).facts.flow.distributed_evidence() == word, source


def test_default_device_plain_and_conditional() -> None:
    parsed = parse(
        """
        import torch

        torch.set_default_device("cuda")

        def make():
            return DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.flow.default_device(loader)
    assert found is not None and found.expression == "torch.get_default_device()"
    assert not found.conditional

    parsed = parse(
        """
        import torch

        if args.cuda:
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
        else:
            torch.set_default_tensor_type("torch.FloatTensor")

        def make():
            return DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.flow.default_device(loader)
    assert found is not None and found.conditional
    # get_default_device() answers "cpu" after a CUDA default tensor type: an empty tensor does not
    assert found.expression == "torch.empty(0).device"

    parsed = parse(
        """
        import torch

        if __name__ == "__main__":
            torch.set_default_tensor_type("torch.cuda.FloatTensor")
            loader = DataLoader(ds, shuffle=True)
        """
    )
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    found = parsed.facts.flow.default_device(loader)
    assert found is not None and found.expression == "torch.empty(0).device"
    assert not found.conditional

    parsed = parse("import torch\nloader = DataLoader(ds, shuffle=True)\n")
    loader = parsed.one(cst.Call, "DataLoader(ds, shuffle=True)")
    assert parsed.facts.flow.default_device(loader) is None


def test_checkpoints_that_only_feed_state_dicts() -> None:
    parsed = parse(
        """
        import torch
        ckpt = torch.load(path)
        model.load_state_dict(ckpt["model"])
        start = ckpt["epoch"]
        stats = torch.load(other)
        mean = stats["mean"].cuda()
        """
    )
    flow = parsed.facts.flow
    first, second = parsed.all(cst.Call, "torch.load(path)") + parsed.all(
        cst.Call, "torch.load(other)"
    )
    assert flow.feeds_only_state_dicts(first)
    assert not flow.feeds_only_state_dicts(second)


def test_what_kind_of_program_the_file_is() -> None:
    parsed = parse(
        """
        import torch
        model = Net()
        optimizer = torch.optim.AdamW(model.parameters())
        def fit(batches):
            for x, y in batches:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        if __name__ == "__main__":
            fit(load())
        """
    )
    training = parsed.facts.flow
    assert training.trains()
    assert not training.runs_on_several_gpus() and not training.is_notebook()

    routine = parse("net = Net()\nnet.train(songs=songs, epoch=3)\n")
    assert routine.facts.flow.trains()
    inference = parse(
        """
        import logging
        import torch
        logger = logging.getLogger(__name__)
        def predict(model, x):
            model.train(False)
            model.eval()
            return model(x.to("cuda:0"))
        """
    )
    assert not inference.facts.flow.trains()

    wrapped = parse("from torch import nn\nmodel = nn.DataParallel(Net())\n")
    assert wrapped.facts.flow.runs_on_several_gpus()


def test_a_cuda_check_through_a_variable() -> None:
    parsed = parse(
        """
        import torch
        is_cuda = torch.cuda.is_available()
        if is_cuda:
            model.cuda(0)
        """
    )
    call = parsed.one(cst.Call, "model.cuda(0)")
    assert parsed.facts.flow.guarded_by_cuda_check(call)


def test_backward_is_found_through_the_files_functions_two_calls_deep() -> None:
    parsed = parse(
        """
        def step(loss):
            loss.backward()

        def one(loss):
            step(loss)

        def two(loss):
            one(loss)

        for batch in loader:
            one(compute(batch))
        for batch in loader:
            two(compute(batch))
        for batch in loader:
            evaluate(batch)
        """
    )
    flow = parsed.facts.flow
    first, second, third = parsed.all(cst.For)
    assert flow.calls_backward(first.body)
    assert not flow.calls_backward(second.body)  # three calls deep
    assert not flow.calls_backward(third.body)
    assert flow.calls_backward(parsed.function("step"))


def test_builds_optimizer_is_a_loose_test() -> None:
    parsed = parse(
        """
        import torch
        from apex.optimizers import FusedAdam
        a = torch.optim.SGD(model.parameters(), lr=0.1)
        b = FusedAdam(model.parameters())
        c = build_optimizer(cfg, model)
        d = torch.optim.lr_scheduler.StepLR(a, 1)
        e = torch.nn.Linear(2, 2)
        """
    )
    flow = parsed.facts.flow
    built = [code_of(call.func) for call in parsed.all(cst.Call) if flow.builds_optimizer(call)]
    assert built == ["torch.optim.SGD", "FusedAdam", "build_optimizer"]


def test_main_guard_in_either_order() -> None:
    parsed = parse(
        """
        if __name__ == "__main__":
            main()
        if "__main__" == __name__:
            main()
        if __name__ != "__main__":
            pass
        if name == "__main__":
            pass
        """
    )
    assert [is_main_guard(s) for s in parsed.module.body] == [True, True, False, False]


TOKEN_IDS = """
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, PreTrainedModel

def to_ids(text, tok):
    ids = tok.encode(text)
    batch = torch.tensor(ids)
    return batch[None]

def label_tensor(labels):
    return torch.tensor(labels)

class Wrapper:
    def __init__(self, model: PreTrainedModel, other):
        self.model = model
        self.other = other

    def run(self, ids):
        return self.model(ids), self.other(ids)

base = AutoModelForCausalLM.from_pretrained("m", device_map="auto")
tuned = PeftModel.from_pretrained(base, "adapter")
a = torch.LongTensor([tok.encode("x")])
b = torch.tensor(tok.encode("x"), device="cuda")
c = to_ids("x", tok)
d = label_tensor([1, 2])
tuned(a)
"""


def test_token_id_tensors_by_hand_and_through_a_helper() -> None:
    parsed = parse(TOKEN_IDS)
    flow = parsed.facts.flow
    made = {
        code: flow.token_id_tensor(parsed.one(cst.Call, code))
        for code in (
            'torch.LongTensor([tok.encode("x")])',
            'torch.tensor(tok.encode("x"), device="cuda")',
            'to_ids("x", tok)',
            "label_tensor([1, 2])",
        )
    }
    assert list(made.values()) == [True, False, True, False]


def test_models_that_carry_their_device() -> None:
    parsed = parse(TOKEN_IDS)
    flow = parsed.facts.flow
    adapter_call = parsed.one(cst.Call, "tuned(a)")
    adapter = flow.model_device(adapter_call.func, adapter_call)
    assert adapter is not None and adapter.pretrained and adapter.move is None
    received = parsed.one(cst.Call, "self.model(ids)")
    found = flow.model_device(received.func, received)
    assert found is not None and found.pretrained
    unannotated = parsed.one(cst.Call, "self.other(ids)")
    assert flow.model_device(unannotated.func, unannotated) is None


def test_model_call_fed_reaches_a_submodule_call_only_when_asked() -> None:
    parsed = parse(
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = VAE().to(device)
        z = torch.randn(4, 8)
        image = model.decoder(z)
        """
    )
    flow = parsed.facts.flow
    noise = parsed.one(cst.Call, "torch.randn(4, 8)")
    assert flow.model_call_fed(noise) is None
    found = flow.model_call_fed(noise, submodules=True)
    assert found is not None
    call, model = found
    assert code_of(call) == "model.decoder(z)" and model.model == "model"
    assert model.move is not None and model.move.code == "device"


def test_a_model_moved_the_same_way_on_every_branch_is_not_conditional() -> None:
    source = """
        class Wrapper:
            def __init__(self, name, device):
                self.device = device
                if name == "small":
                    self.net = Small.from_pretrained(name)
                    self.net.to(self.device)
                else:
                    self.net = Large.from_pretrained(name)
                    self.net.to(self.device)

            def run(self, x):
                return self.net(x)
        """
    parsed = parse(source)
    call = parsed.one(cst.Call, "self.net(x)")
    found = parsed.facts.flow.model_device(call.func, call)
    assert found is not None and found.move is not None and found.reason == ""
    # The small model stays where it was loaded: the move depends on the `if`.
    first_move = "self.net.to(self.device)\n                else:"
    partial = parse(source.replace(first_move, "self.net.eval()\n                else:"))
    call = partial.one(cst.Call, "self.net(x)")
    found = partial.facts.flow.model_device(call.func, call)
    assert found is not None and found.move is None and "moved only when" in found.reason


def test_optimizers_built_by_project_factories_and_parameter_helpers() -> None:
    parsed = parse(
        """
        import torch
        from torch import optim as O
        from trainer.build import make_optimizer, get_optimizer_grouped_parameters, optimizer_cls

        def run(cfg):
            encoder = Encoder()
            head = Head()
            opt = make_optimizer(cfg, encoder)
            groups = get_optimizer_grouped_parameters(encoder)
            kind = optimizer_cls(cfg)
            tuned = O.SGD([{"params": conv_weights(head.body, "weight")}], lr=cfg.lr)
            params = head.trainable_groups(cfg.lr)
            aliased = O.AdamW(params)
        """
    )
    objects = parsed.facts.flow.training_objects(parsed.function("run"))
    assert objects["opt"].factory and objects["opt"].kind == "optimizer"
    assert {"cfg", "encoder"} <= objects["opt"].models
    assert "groups" not in objects and "kind" not in objects
    assert not objects["tuned"].factory and "head" in objects["tuned"].models
    assert "cfg" not in objects["tuned"].models
    assert "head" in objects["aliased"].models


def test_batch_moves_of_the_loops_that_consume_data_preparation() -> None:
    parsed = parse(
        """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        model = Net().to(device)
        criterion = nn.CrossEntropyLoss()

        def collate(items):
            x, y = zip(*items)
            return torch.stack(x).to(device), torch.stack(y).to(device)

        loader = DataLoader(data, collate_fn=collate, num_workers=2)
        for x, y in loader:
            loss = criterion(model(x), y)
        """
    )
    flow = parsed.facts.flow
    move = parsed.one(cst.Call, "torch.stack(x).to(device)")
    entry = flow.data_function_of(move)
    assert entry is not None
    loops = flow.consuming_loops(entry)
    planned = flow.data_batch_moves(entry, loops, None)
    assert not isinstance(planned, str)
    assert planned[1] == ["x, y = x.to(device), y.to(device)"]
    assert len(planned[0]) == 1
    assert flow.data_batch_moves(entry, [], None) == (
        "no loop over its DataLoader was found that could move the batch to the model's device "
        "instead"
    )
    # A loader the loops do not iterate (here: the move itself, standing in for one).
    elsewhere = DataFunction(entry.node, entry.role, loaders=[move])
    unfollowed = flow.data_batch_moves(elsewhere, loops, None)
    assert isinstance(unfollowed, str) and "DataLoader on line 12" in unfollowed
