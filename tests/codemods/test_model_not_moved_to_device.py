"""DF207 model-not-moved-to-device: inline cases."""

from __future__ import annotations

from devfix.types import Applicability
from tests.helpers import assert_declined, assert_fix, assert_noop

RULE = "DF207"


def test_a_pretrained_model_whose_prompt_ids_are_moved_gets_the_same_move() -> None:
    before = """
        import torch
        from transformers import AutoTokenizer, T5ForConditionalGeneration as T5

        device = "cuda" if torch.cuda.is_available() else "cpu"
        tokenizer = AutoTokenizer.from_pretrained("t5-small")
        model = T5.from_pretrained("t5-small")  # the weights
        ids = tokenizer("translate: hi", return_tensors="pt").input_ids.to(device)
        print(model.generate(ids))
        """
    findings = assert_fix(
        RULE,
        before,
        before.replace(
            '("t5-small")  # the weights\n',
            '("t5-small")  # the weights\n        model.to(device)\n',
        ),
    )
    assert findings[0].applicability is Applicability.SAFE
    assert (
        "`model.generate` (line 9) is called with inputs moved to `device`" in findings[0].message
    )


def test_a_model_built_before_the_device_is_chosen_moves_once_it_is() -> None:
    before = """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

        head = Head()
        dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        for batch in [torch.randn(3, 4)]:
            print(head(batch.to(dev)))
        """
    assert_fix(
        RULE,
        before,
        before.replace("        for batch in", "        head.to(dev)\n        for batch in"),
    )


def test_models_placed_elsewhere_or_handed_on_are_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn
        from transformers import AutoModel

        class Net(nn.Module):
            def forward(self, x):
                return x

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        moved = Net()
        moved.to(device)
        wrapped = Net()
        wrapped = nn.DataParallel(wrapped)
        handed = Net()
        prepare(handed)
        sharded = AutoModel.from_pretrained("m", device_map="auto")
        x = torch.randn(2, 2).to(device)
        print(moved(x), wrapped(x), handed(x), sharded(x))
        on_cpu = Net()
        print(on_cpu(torch.randn(2, 2).to("cpu")))
        """,
    )


def test_a_device_that_does_not_exist_where_the_model_is_built_is_reported() -> None:
    assert_declined(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return x

        net = Net()
        for data in loader:
            device = pick_device()
            print(net(data.to(device)))
        """,
        reason="is not defined where the model is built",
    )


def test_a_model_assembled_from_modules_made_before_it_has_their_device() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        layers = [nn.Linear(4, 4).to(0) for _ in range(2)]
        encoder = nn.Linear(4, 4).cuda()
        stacked = nn.Sequential(*layers)
        pair = nn.Sequential(encoder, nn.ReLU())
        x = torch.randn(2, 4).to(0)
        print(stacked(x), pair(x))
        """,
    )


def test_uses_in_functions_of_the_script_count_both_ways() -> None:
    # A function that moves the global model places it; one that only runs it does not.
    moved_in_a_function = """
        import torch
        import torch.nn as nn

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2)

        def prepare():
            model.to(device)

        prepare()
        print(model(torch.randn(1, 4).to(device)))
        """
    assert_noop(RULE, moved_in_a_function)
    run_in_a_function = moved_in_a_function.replace(
        "def prepare():\n            model.to(device)\n\n        prepare()\n",
        "def predict(x):\n            return model(x.to(device))\n\n",
    ).replace("print(model(torch.randn(1, 4).to(device)))", "print(predict(torch.randn(1, 4)))")
    assert_fix(
        RULE,
        run_in_a_function,
        run_in_a_function.replace(
            "model = nn.Linear(4, 2)\n", "model = nn.Linear(4, 2)\n        model.to(device)\n"
        ),
    )


def test_a_quantized_model_is_placed_as_it_loads_and_never_gets_a_move() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig

        device = "cuda"
        eight = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)
        four = AutoModelForCausalLM.from_pretrained(
            "m", quantization_config=BitsAndBytesConfig(load_in_4bit=True)
        )
        ids = torch.tensor([[1, 2]]).to(device)
        print(eight.generate(ids), four.generate(ids))
        """,
    )


def test_a_wrapper_built_around_a_placed_module_has_its_device() -> None:
    assert_noop(
        RULE,
        """
        import torch
        import torch.nn as nn

        class Wrapper(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Wrapper(nn.Linear(4, 2).to(device))
        print(model(torch.randn(3, 4, device=device)))
        """,
    )


def test_wrappers_and_copies_of_a_model_have_the_device_of_what_they_wrap() -> None:
    assert_noop(
        RULE,
        """
        import copy

        import torch
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP

        rank = 0
        base = nn.Linear(10, 1).to(rank)
        ddp = DDP(copy.deepcopy(base), device_ids=[rank])
        again = DDP(base, device_ids=[rank])
        twin = nn.Sequential(copy.deepcopy(base))
        x = torch.randn(20, 10, device=rank)
        print(ddp(x), again(x.cuda()), twin(x))
        """,
    )


def test_inputs_moved_by_a_comprehension_name_the_device_the_model_needs() -> None:
    assert_fix(
        "DF207",
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 3)

            def forward(self, words, chars):
                return self.proj(words + chars)

        device = "cuda" if torch.cuda.is_available() else "cpu"
        tagger = Tagger()

        def predict(batch):
            feats = {name: t.to(device) for name, t in batch.items()}
            return tagger(**feats)
        """,
        """
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 3)

            def forward(self, words, chars):
                return self.proj(words + chars)

        device = "cuda" if torch.cuda.is_available() else "cpu"
        tagger = Tagger()
        tagger.to(device)

        def predict(batch):
            feats = {name: t.to(device) for name, t in batch.items()}
            return tagger(**feats)
        """,
    )


def test_elements_moved_to_a_device_of_their_own_name_no_device_for_the_model() -> None:
    assert_noop(
        "DF207",
        """
        import torch
        from torch import nn

        tagger = nn.Linear(8, 3)

        def predict(parts, devices):
            moved = [t.to(d) for t, d in zip(parts, devices)]
            return tagger(*moved)
        """,
    )


def test_a_network_an_agent_builds_beside_one_it_moves_is_moved_with_it() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from torch.optim import Adam
        from nets import Critic, Policy

        class ActorCritic:
            def __init__(self, obs_dim, n_actions, gpu=True):
                self.gpu = gpu and torch.cuda.is_available()
                self.pi = Policy(obs_dim, n_actions)
                self.vf = Critic(obs_dim)
                self.opt = Adam(list(self.pi.parameters()) + list(self.vf.parameters()))
                if self.gpu:
                    self.pi.cuda()

            def update(self, obs):
                return self.pi(obs), self.vf(obs)

        class Learner:
            def __init__(self, cfg, device):
                self.device = torch.device(device)
                self.q = Critic(cfg.obs).to(self.device)
                self.target = Critic(cfg.obs)
                self.opt = Adam(self.q.parameters())
                self.target_opt = Adam(self.target.parameters())

            def step(self, obs):
                return self.q(obs) - self.target.forward(obs)
        """,
        """
        import torch
        from torch.optim import Adam
        from nets import Critic, Policy

        class ActorCritic:
            def __init__(self, obs_dim, n_actions, gpu=True):
                self.gpu = gpu and torch.cuda.is_available()
                self.pi = Policy(obs_dim, n_actions)
                self.vf = Critic(obs_dim)
                self.opt = Adam(list(self.pi.parameters()) + list(self.vf.parameters()))
                if self.gpu:
                    self.pi.cuda()
                    self.vf.cuda()

            def update(self, obs):
                return self.pi(obs), self.vf(obs)

        class Learner:
            def __init__(self, cfg, device):
                self.device = torch.device(device)
                self.q = Critic(cfg.obs).to(self.device)
                self.target = Critic(cfg.obs).to(self.device)
                self.opt = Adam(self.q.parameters())
                self.target_opt = Adam(self.target.parameters())

            def step(self, obs):
                return self.q(obs) - self.target.forward(obs)
        """,
        unsafe=True,
    )
    assert {f.applicability for f in findings} == {Applicability.UNSAFE}


def test_a_held_network_handed_elsewhere_or_never_run_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from nets import Critic, Policy

        class Runner:
            def __init__(self, device):
                self.pi = Policy().to(device)
                self.shadow = Critic()
                self.frozen = Critic()
                self.pi_opt = torch.optim.SGD(self.pi.parameters(), lr=0.1)
                self.shadow_opt = torch.optim.SGD(self.shadow.parameters(), lr=0.1)
                self.frozen_opt = torch.optim.SGD(self.frozen.parameters(), lr=0.1)
                self.ema = EMA(self.shadow)

            def act(self, obs):
                return self.pi(obs), self.shadow(obs)
        """,
        unsafe=True,
    )


def test_an_agent_that_moves_none_of_its_networks_but_feeds_them_device_tensors_moves_them() -> (
    None
):
    findings = assert_fix(
        RULE,
        """
        import copy
        import torch
        from mylib.nets import make_policy

        class Learner:
            def __init__(self, spec, lr, args):
                self.policy = make_policy(spec)
                self.frozen = copy.deepcopy(self.policy)
                self.opt = torch.optim.SGD(self.policy.parameters(), lr=lr)
                self.dev = args.device

            def act(self, obs):
                obs = torch.as_tensor(obs).float().to(self.dev)
                return self.policy(obs).argmax(-1)

        class Critic:
            def __init__(self, spec, device):
                self.device = torch.device(device)
                self.value = make_policy(spec)
                self.opt = torch.optim.Adam(self.value.parameters())

            def estimate(self, states):
                return self.value(torch.stack(states).to(self.device))
        """,
        """
        import copy
        import torch
        from mylib.nets import make_policy

        class Learner:
            def __init__(self, spec, lr, args):
                self.policy = make_policy(spec).to(args.device)
                self.frozen = copy.deepcopy(self.policy)
                self.opt = torch.optim.SGD(self.policy.parameters(), lr=lr)
                self.dev = args.device

            def act(self, obs):
                obs = torch.as_tensor(obs).float().to(self.dev)
                return self.policy(obs).argmax(-1)

        class Critic:
            def __init__(self, spec, device):
                self.device = torch.device(device)
                self.value = make_policy(spec).to(self.device)
                self.opt = torch.optim.Adam(self.value.parameters())

            def estimate(self, states):
                return self.value(torch.stack(states).to(self.device))
        """,
        unsafe=True,
    )
    assert "runs it on `obs`, which it moves to `self.dev`" in findings[0].message


def test_an_agents_network_whose_device_is_chosen_after_it_is_built_is_reported_only() -> None:
    finding = assert_declined(
        RULE,
        """
        import torch
        from mylib.nets import make_policy

        class Learner:
            def __init__(self, spec):
                self.policy = make_policy(spec)
                self.opt = torch.optim.SGD(self.policy.parameters(), lr=0.1)
                chosen = "cuda" if torch.cuda.is_available() else "cpu"
                self.device = chosen

            def act(self, obs):
                return self.policy(torch.as_tensor(obs).to(self.device))
        """,
        reason="cannot be named where it is built",
    )
    assert finding.line == 7


AGENT_MODULE = """
import torch
from torch import nn

class Agent(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dev = cfg.device
        self.body = nn.Sequential(nn.Linear(cfg.obs, 64), nn.Tanh())
        self.head = nn.Linear(64, cfg.actions)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=cfg.lr)

    def forward(self, x):
        return self.head(self.body(x))

    def act(self, obs):
        x = torch.tensor(obs, dtype=torch.float32, device=self.dev).unsqueeze(0)
        return self(x).argmax(-1).item()
"""


def test_a_module_that_runs_itself_on_tensors_it_puts_on_its_device_moves_itself_there() -> None:
    findings = assert_fix(
        RULE,
        AGENT_MODULE,
        AGENT_MODULE.replace(
            "        self.optimizer =", "        self.to(self.dev)\n        self.optimizer ="
        ),
        unsafe=True,
    )
    assert "`Agent` runs itself on `x`, which it puts on `self.dev`" in findings[0].message


def test_a_module_the_file_moves_where_it_builds_it_is_left_alone() -> None:
    assert_noop(RULE, AGENT_MODULE + "\nagent = Agent(cfg)\nagent.to(cfg.device)\n")
    assert_noop(RULE, AGENT_MODULE + "\nagent = Agent(cfg).cuda()\n")


def test_model_parameter_of_an_evaluation_function_moved_where_it_moves_the_inputs() -> None:
    # The inputs go to a device the function chooses itself; the model returned by name.
    assert_fix(
        RULE,
        """
        import torch

        def evaluate(encoder, batches):
            dev = "cuda" if torch.cuda.is_available() else "cpu"
            encoder.eval()
            scores = []
            for ids, mask in batches:
                ids, mask = ids.to(dev), mask.to(dev)
                scores.append(encoder.forward(ids, mask).mean())
            return encoder, scores
        """,
        """
        import torch

        def evaluate(encoder, batches):
            dev = "cuda" if torch.cuda.is_available() else "cpu"
            encoder.to(dev)
            encoder.eval()
            scores = []
            for ids, mask in batches:
                ids, mask = ids.to(dev), mask.to(dev)
                scores.append(encoder.forward(ids, mask).mean())
            return encoder, scores
        """,
    )


def test_model_parameter_whose_own_device_the_inputs_follow_is_left_alone() -> None:
    # The device is read off the model itself: the inputs go where it already is, and a
    # `policy.to(dev)` would be a no-op dressed as a fix.
    for read in ("next(policy.parameters()).device", "policy.device", "device_of(policy)"):
        assert_noop(
            RULE,
            f"""
            import torch

            def rollout(env, policy):
                dev = {read}
                obs = env.reset()
                for _ in range(100):
                    act = policy(torch.as_tensor(obs, device=dev)[None])
                    obs = env.step(act.cpu().numpy()[0])
            """,
        )


def test_model_parameter_left_where_the_caller_decides() -> None:
    # A device the caller passes (it may have moved the model there), a model the function
    # moves or hands on, and a loss fed the model's output are all left alone.
    assert_noop(
        RULE,
        """
        import torch

        def train(net, loader, device, loss_fn):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss_fn(net(x), y).backward()

        def train_moved(net, loader):
            device = torch.device("cuda")
            net = net.to(device)
            for x, y in loader:
                net(x.to(device)).sum().backward()

        def validate(net, loader):
            # The current GPU: the process's own after its launcher's `set_device(rank)`.
            device = torch.device("cuda")
            for x, y in loader:
                x = x.to(device)
                print(net(x).argmax(1).eq(y.to(device)).float().mean())

        def predict_all(predict_fn, loader):
            device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
            return [predict_fn(x.to(device)) for x in loader]

        def train_wrapped(net, loader, loss_fn):
            device = torch.device("cuda")
            model = torch.nn.DataParallel(net)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                out = model(x)
                loss_fn(out, y).backward()
        """,
    )


def test_model_parameter_on_the_gpu_or_cpu_a_switch_it_is_handed_picks_is_left_alone() -> None:
    # `opts.use_gpu` decides for the caller too, which placed the model by the same switch;
    # a switch the function reads off the machine itself is its own choice and still moved.
    before = """
        import torch

        def score(opts, clf, rows):
            where = torch.device("cuda" if opts.use_gpu else "cpu")
            clf.eval()
            return [clf(r.to(where)).argmax(-1) for r in rows]

        def score_here(opts, clf, rows):
            where = "cuda" if torch.cuda.is_available() else "cpu"
            clf.eval()
            return [clf(r.to(where)).argmax(-1) for r in rows]
        """
    assert_fix(
        RULE,
        before,
        before.replace(
            'where = "cuda" if torch.cuda.is_available() else "cpu"\n',
            'where = "cuda" if torch.cuda.is_available() else "cpu"\n            clf.to(where)\n',
        ),
    )


def test_a_copy_of_a_network_the_object_moves_is_moved_with_it() -> None:
    # A trainer keeps a frozen copy of the policy it is handed (a PPO "old" policy) and moves
    # only the policy in its `cuda()`: the copy then runs on the CPU with the GPU batch.
    findings = assert_fix(
        RULE,
        """
        import copy

        import torch

        class Trainer:
            def __init__(self, policy, value_net):
                self.policy = policy
                self.frozen = copy.deepcopy(policy)
                self.value_net = value_net

            def ratio(self, obs):
                return self.policy(obs) - self.frozen.forward(obs).detach()

            def cuda(self):
                self.policy.cuda()
                self.value_net.cuda()
        """,
        """
        import copy

        import torch

        class Trainer:
            def __init__(self, policy, value_net):
                self.policy = policy
                self.frozen = copy.deepcopy(policy)
                self.value_net = value_net

            def ratio(self, obs):
                return self.policy(obs) - self.frozen.forward(obs).detach()

            def cuda(self):
                self.policy.cuda()
                self.frozen.cuda()
                self.value_net.cuda()
        """,
        unsafe=True,
    )
    assert "a copy of `self.policy`" in findings[0].message


def test_a_copy_that_is_moved_or_never_run_is_left() -> None:
    assert_noop(
        RULE,
        """
        import copy

        import torch

        class Trainer:
            def __init__(self, policy):
                self.policy = policy
                self.best = copy.deepcopy(policy)
                self.target = copy.deepcopy(self.policy)

            def act(self, obs):
                return self.policy(obs) + self.target(obs)

            def cuda(self):
                self.policy.cuda()
                self.target.cuda()
        """,
    )


def test_a_checkpoint_an_object_loads_and_runs_on_inputs_it_moves_is_built_there() -> None:
    findings = assert_fix(
        RULE,
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        class Captioner:
            def __init__(self, path, device="cuda"):
                self.torch_device = torch.device(device)
                self.tok = AutoTokenizer.from_pretrained(path)
                self.lm = AutoModelForCausalLM.from_pretrained(path)
                self.lm.eval()

            def caption(self, prompt):
                enc = self.tok(prompt, return_tensors="pt").to(self.torch_device)
                ids = self.lm.generate(**enc, max_new_tokens=16)
                return self.tok.decode(ids[0])
        """,
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        class Captioner:
            def __init__(self, path, device="cuda"):
                self.torch_device = torch.device(device)
                self.tok = AutoTokenizer.from_pretrained(path)
                self.lm = AutoModelForCausalLM.from_pretrained(path).to(self.torch_device)
                self.lm.eval()

            def caption(self, prompt):
                enc = self.tok(prompt, return_tensors="pt").to(self.torch_device)
                ids = self.lm.generate(**enc, max_new_tokens=16)
                return self.tok.decode(ids[0])
        """,
        unsafe=True,
    )
    assert "moves to `self.torch_device`" in findings[0].message


def test_the_full_weight_branch_beside_a_placed_adapter_branch_is_built_on_the_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from peft import PeftModel
        from transformers import AutoModelForSequenceClassification

        class Judge:
            def __init__(self, cfg, accelerator):
                self.accelerator = accelerator
                self.cfg = cfg

            def setup(self):
                if self.cfg.adapter:
                    base = AutoModelForSequenceClassification.from_pretrained(
                        self.cfg.name, device_map={"": self.accelerator.local_process_index}
                    )
                    self.critic = PeftModel.from_pretrained(base, self.cfg.adapter)
                else:
                    self.critic = AutoModelForSequenceClassification.from_pretrained(self.cfg.name)
                self.critic.config.pad_token_id = 0

            def judge(self, enc):
                feats = enc.to(self.accelerator.device)
                return self.critic(**feats).logits
        """,
        """
        import torch
        from peft import PeftModel
        from transformers import AutoModelForSequenceClassification

        class Judge:
            def __init__(self, cfg, accelerator):
                self.accelerator = accelerator
                self.cfg = cfg

            def setup(self):
                if self.cfg.adapter:
                    base = AutoModelForSequenceClassification.from_pretrained(
                        self.cfg.name, device_map={"": self.accelerator.local_process_index}
                    )
                    self.critic = PeftModel.from_pretrained(base, self.cfg.adapter)
                else:
                    self.critic = AutoModelForSequenceClassification.from_pretrained(self.cfg.name).to(self.accelerator.device)
                self.critic.config.pad_token_id = 0

            def judge(self, enc):
                feats = enc.to(self.accelerator.device)
                return self.critic(**feats).logits
        """,
        unsafe=True,
    )


def test_a_loaded_checkpoint_handed_elsewhere_or_placed_as_it_loads_is_left_alone() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from transformers import AutoModel, Trainer

        class Handed:
            def __init__(self, path, args):
                self.device = torch.device("cuda")
                self.net = AutoModel.from_pretrained(path)
                self.trainer = Trainer(model=self.net, args=args)

            def embed(self, enc):
                return self.net(**enc.to(self.device)).last_hidden_state

        class Placed:
            def __init__(self, path):
                self.device = torch.device("cuda")
                self.net = AutoModel.from_pretrained(path, device_map="auto")

            def embed(self, enc):
                return self.net(**enc.to(self.device)).last_hidden_state
        """,
    )


def test_a_network_run_through_a_method_of_its_own_class_is_built_on_the_device() -> None:
    assert_fix(
        RULE,
        """
        import torch
        from torch import nn
        from torch.distributions import Normal

        class Gaussian(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.mu = nn.Linear(n_in, n_out)

            def forward(self, s):
                return self.mu(s)

            def dist(self, s):
                return Normal(self(s), 1.0)

        class Learner:
            def __init__(self, n_in, n_out, device):
                self.device = device
                self.pi = Gaussian(n_in, n_out)
                self.opt = torch.optim.Adam(self.pi.parameters())

            def step(self, memory):
                states, actions = memory.batch(device=self.device)
                loss = -self.pi.dist(states).log_prob(actions).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        """,
        """
        import torch
        from torch import nn
        from torch.distributions import Normal

        class Gaussian(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.mu = nn.Linear(n_in, n_out)

            def forward(self, s):
                return self.mu(s)

            def dist(self, s):
                return Normal(self(s), 1.0)

        class Learner:
            def __init__(self, n_in, n_out, device):
                self.device = device
                self.pi = Gaussian(n_in, n_out).to(self.device)
                self.opt = torch.optim.Adam(self.pi.parameters())

            def step(self, memory):
                states, actions = memory.batch(device=self.device)
                loss = -self.pi.dist(states).log_prob(actions).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        """,
        unsafe=True,
    )


def test_inputs_moved_to_a_layer_s_own_device_say_nothing_about_moving_the_module() -> None:
    assert_noop(
        RULE,
        """
        import torch
        from torch import nn

        class Speaker(nn.Module):
            def __init__(self, vocab, hidden):
                super().__init__()
                self.embed = nn.Embedding(vocab, hidden)
                self.out = nn.Linear(hidden, vocab)

            def forward(self, ids):
                return self.out(self.embed(ids))

            def reply(self, tokens):
                ids = torch.tensor(tokens).to(self.out.weight.device)
                return self(ids).argmax(-1)
        """,
    )


def test_a_pretrained_model_handed_to_a_function_that_moves_its_batches_is_moved_once_finished() -> (
    None
):
    before = """
        import torch
        from torch import nn
        from torchvision import models

        dvc = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

        def finetune(net, loader, optim):
            net.train()
            for imgs, tgts in loader:
                imgs, tgts = imgs.to(dvc), tgts.to(dvc)
                loss = nn.functional.cross_entropy(net(imgs), tgts)
                optim.zero_grad()
                loss.backward()
                optim.step()
            return net

        model = models.resnet18(weights=None)
        print(model.fc)
        model.fc = nn.Linear(512, 2)  # two classes
        optim = torch.optim.SGD(model.parameters(), lr=0.001)
        model = finetune(model, loader, optim)
        """
    # Moved after its new head is in place (a move right after it is built would leave the
    # head on the CPU).
    assert_fix(
        RULE,
        before,
        before.replace(
            "model.fc = nn.Linear(512, 2)  # two classes\n",
            "model.fc = nn.Linear(512, 2)  # two classes\n        model.to(dvc)\n",
        ),
    )
    # A function that places the model itself, or returns something else, decides elsewhere.
    assert_noop(RULE, before.replace("    net.train()\n", "    net.to(dvc)\n"))
    assert_noop(RULE, before.replace("    return net\n", "    return loss.item()\n"))


def test_a_layer_built_with_the_device_of_its_inputs_is_placed() -> None:
    assert_noop(
        RULE,
        """
import torch


def half_precision_works(device: str) -> bool:
    try:
        x = torch.randn(3, 5, dtype=torch.float16, device=device)
        norm = torch.nn.LayerNorm(5, dtype=torch.float16, device=device)
        _ = norm(x)
    except RuntimeError:
        return False
    return True
""",
    )


def test_an_annotated_pretrained_attribute_run_through_its_feature_method_is_moved() -> None:
    assert_fix(
        RULE,
        """
import torch
from transformers import CLIPModel, CLIPProcessor


class ImageIndex:
    def __init__(self, name: str, device: str = "cuda"):
        self.device = device
        self.encoder: CLIPModel = CLIPModel.from_pretrained(name)
        self.processor = CLIPProcessor.from_pretrained(name)

    @torch.no_grad()
    def embed(self, images):
        pixels = self.processor(images=images, return_tensors="pt").to(self.device)
        return self.encoder.get_image_features(**pixels).cpu()
""",
        """
import torch
from transformers import CLIPModel, CLIPProcessor


class ImageIndex:
    def __init__(self, name: str, device: str = "cuda"):
        self.device = device
        self.encoder: CLIPModel = CLIPModel.from_pretrained(name).to(self.device)
        self.processor = CLIPProcessor.from_pretrained(name)

    @torch.no_grad()
    def embed(self, images):
        pixels = self.processor(images=images, return_tensors="pt").to(self.device)
        return self.encoder.get_image_features(**pixels).cpu()
""",
        unsafe=True,
    )


def test_a_model_whose_inputs_move_only_under_a_flag_moves_under_that_flag() -> None:
    # An unconditional `.cuda()` would break the script's own `--no-cuda` run.
    assert_fix(
        RULE,
        """
import argparse

import torch
from torch import nn
from torch.autograd import Variable

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
opts = parser.parse_args()
opts.cuda = not opts.no_cuda and torch.cuda.is_available()

critic = nn.Linear(8, 1)


def score(batches):
    for states in batches:
        if opts.cuda:
            states = states.cuda()
        states = Variable(states)
        yield critic(states)
""",
        """
import argparse

import torch
from torch import nn
from torch.autograd import Variable

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
opts = parser.parse_args()
opts.cuda = not opts.no_cuda and torch.cuda.is_available()

critic = nn.Linear(8, 1)
if opts.cuda:
    critic.cuda()


def score(batches):
    for states in batches:
        if opts.cuda:
            states = states.cuda()
        states = Variable(states)
        yield critic(states)
""",
    )


def test_a_flag_the_model_cannot_see_where_it_is_built_gives_no_fix() -> None:
    assert_declined(
        RULE,
        """
import torch
from torch import nn

critic = nn.Linear(8, 1)


def score(batches, on_gpu):
    for states in batches:
        if on_gpu:
            states = states.cuda()
        yield critic(states)
""",
        reason="only when `on_gpu` holds, which cannot be tested where the model is built",
    )
