"""Fixes made from a run's evidence (devfix.vgpu.synthesis), in-process: hand-written
diagnoses as the child writes them (tests/vgpu/test_repair_from_run.py has the real runs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devfix.vgpu.synthesis import Declined, RuntimeFix, synthesise


def tensor(device: str, holds: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"kind": "tensor", "device": device, "holds": holds, "global": False, **extra}


def device(name: str) -> dict[str, Any]:
    return {"kind": "device", "device": name, "global": False}


def module(devices: dict[str, str], **holds: str) -> dict[str, Any]:
    return {"kind": "module", "devices": devices, "holds": holds, "global": False}


def frame(
    path: str,
    line: int,
    span: tuple[int, int] | None,
    names: dict[str, Any],
    *,
    function: str = "<module>",
    qualname: str | None = None,
    first_line: int = 1,
    last_line: int = 99,
    params: tuple[str, ...] = (),
    module_method: bool = False,
) -> dict[str, Any]:
    col, end_col = span if span is not None else (None, None)
    return {
        "path": path,
        "line": line,
        "col": col,
        "end_line": line if span is not None else None,
        "end_col": end_col,
        "function": function,
        "qualname": qualname or function,
        "first_line": first_line,
        "last_line": last_line,
        "params": list(params),
        "module_method": module_method,
        "names": names,
    }


def diagnosis(
    site: dict[str, Any], frames: list[dict[str, Any]], needed: str = "cuda:0"
) -> dict[str, Any]:
    root = {"label": "other", "device": "cpu", "root": True, "site": site, "findings": []}
    other = {"label": "self", "device": needed, "root": False, "site": None, "findings": []}
    evidence = {"root_device": "cpu", "needed": needed, "frames": frames}
    return {"error": "E", "operands": [other, root], "evidence": evidence}


def site(path: str, line: int, kind: str = "created", **extra: Any) -> dict[str, Any]:
    return {"path": path, "line": line, "function": "<module>", "kind": kind, "op": "", **extra}


def made(result: RuntimeFix | Declined) -> RuntimeFix:
    assert isinstance(result, RuntimeFix), result
    old, new = set(result.code.splitlines()), result.proposed.splitlines()
    added = [line for line in new if line not in old]
    assert added and not any(re.search("[\"'](cuda|cpu)", line) for line in added)  # no literal
    compile(result.proposed, "<fixed>", "exec")
    return result


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


LABELS = """\
import torch
import torch.nn.functional as F

for step in range(3):
    labels = torch.randint(0, 3, (4,))  # the targets
    logits = model(inputs)
    loss = F.cross_entropy(logits, labels)
"""


def labels_case(source: str = LABELS, **names: Any) -> dict[str, Any]:
    line = 7
    text = source.splitlines()[line - 1]
    start = text.index("F.cross_entropy")
    span = (start, len(text))
    frames = [
        frame(
            "train.py",
            line,
            span,
            {
                "labels": tensor("cpu", "root"),
                "logits": tensor("cuda:1", "other-site"),
                "model": module({"cuda:0": "first.weight", "cuda:1": "second.weight"}),
                **names,
            },
        )
    ]
    return diagnosis(site("train.py", 5, op="aten::randint"), frames, needed="cuda:1")


def test_at_the_use_the_root_goes_to_the_other_operands_device(work: Path) -> None:
    (work / "train.py").write_text(LABELS)
    fix = made(synthesise(labels_case()))
    assert (fix.path, fix.line, fix.summary) == ("train.py", 7, ".to(logits.device)")
    assert "    loss = F.cross_entropy(logits, labels.to(logits.device))\n" in fix.proposed
    assert "  # the targets\n" in fix.proposed  # comments survive
    assert fix.proposed.replace("labels.to(logits.device)", "labels") == LABELS
    # not at the creation: `logits` is bound after it, the module's parameter is a last resort
    assert "device=" not in fix.proposed


def test_at_the_use_an_ambiguous_name_is_declined(work: Path) -> None:
    source = LABELS.replace("(logits, labels)", "(logits, labels + labels)")
    (work / "train.py").write_text(source)
    result = synthesise(labels_case(source))
    assert isinstance(result, Declined)
    assert "occurs more than once" in result.reason


def test_at_the_use_two_names_of_the_root_are_declined(work: Path) -> None:
    source = LABELS.replace("(logits, labels)", "(logits, labels, targets)")
    (work / "train.py").write_text(source)
    result = synthesise(labels_case(source, targets=tensor("cpu", "root")))
    assert isinstance(result, Declined) and "ambiguous" in result.reason


def test_without_a_name_on_the_needed_device_it_declines(work: Path) -> None:
    (work / "train.py").write_text(LABELS)
    case = labels_case()
    names = case["evidence"]["frames"][0]["names"]
    del names["logits"], names["model"]
    result = synthesise(case)
    assert isinstance(result, Declined)
    assert result.reason == (
        "no name at train.py:7 holds a tensor or device on cuda:1; "
        "no name visible at train.py:5 holds a tensor or device on cuda:1"
    )


def test_no_evidence_no_fix() -> None:
    case = diagnosis(site("train.py", 5), [])
    del case["evidence"]
    assert synthesise(case) == Declined(
        "the run kept no frame of your code to name the operands from"
    )


TOKENS = """\
import torch

device = torch.device("cuda")
model = Classifier().to(device)
inputs = tokenizer(["hello"])
print(model(**inputs).argmax(-1))
"""


def tokens_case(inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    forward = frame(
        "tok.py",
        20,
        (18, 39),
        {"self": module({"cuda:0": "embed.weight"}, other="embed.weight")},
        function="forward",
        qualname="Classifier.forward",
        first_line=19,
        last_line=21,
        params=("self", "input_ids"),
        module_method=True,
    )
    forward["names"]["input_ids"] = tensor("cpu", "root-site")
    outer = frame(
        "tok.py",
        6,
        (6, 21),
        {
            "device": device("cuda:0"),
            "model": module({"cuda:0": "embed.weight"}, other="embed.weight"),
            "inputs": inputs
            or {"kind": "dict", "holds": "root-site", "all_tensors": True, "string_keys": True},
        },
    )
    root_site = site("tok.py", 8, function="TinyTokenizer.__call__")
    root_site["function"] = "TinyTokenizer.__call__"
    return diagnosis(root_site, [forward, outer])


def test_at_the_models_call_each_value_of_the_dict_moves(work: Path) -> None:
    (work / "tok.py").write_text(TOKENS + "\n" * 20)
    fix = made(synthesise(tokens_case()))
    assert (fix.line, fix.summary) == (6, "each value of `inputs` .to(device)")
    assert "print(model(**{k: v.to(device) for k, v in inputs.items()}).argmax(-1))\n" in (
        fix.proposed
    )


def test_at_the_models_call_a_dict_with_other_values_is_declined(work: Path) -> None:
    (work / "tok.py").write_text(TOKENS + "\n" * 20)
    mixed = {"kind": "dict", "holds": "root-site", "all_tensors": False, "string_keys": True}
    result = synthesise(tokens_case(mixed))
    # the next strategy may still move it inside forward; the call's reason is not lost
    assert isinstance(result, (Declined, RuntimeFix))
    if isinstance(result, RuntimeFix):
        assert result.line != 6


def test_at_the_models_call_a_tensor_argument_moves(work: Path) -> None:
    source = """\
def score(model, records):
    features = torch.stack([torch.tensor(r) for r in records])
    return model(features).sigmoid().tolist()
"""
    (work / "score.py").write_text(source + "\n" * 20)
    forward = frame(
        "score.py",
        20,
        None,
        {"features": tensor("cpu", "root")},
        function="forward",
        qualname="Scorer.forward",
        params=("self", "features"),
        module_method=True,
        first_line=19,
        last_line=21,
    )
    caller = frame(
        "score.py",
        3,
        (11, 26),
        {
            "model": module(
                {"cuda:0": "encoder.weight"},
                other="encoder.bias",
                **{"other-site": "encoder.weight"},
            ),
            "features": tensor("cpu", "root"),
        },
        function="score",
        params=("model", "records"),
        first_line=1,
        last_line=3,
    )
    root_site = site("score.py", 2)
    root_site["function"] = "score.<locals>.<listcomp>"
    fix = made(synthesise(diagnosis(root_site, [forward, caller])))
    assert "    return model(features.to(model.encoder.weight.device)).sigmoid().tolist()\n" in (
        fix.proposed
    )


MASK = """\
class Causal(nn.Module):
    def forward(self, x):
        steps = x.shape[1]
        mask = torch.tril(torch.ones(steps, steps))  # lower triangle
        scores = self.proj(x) @ x.transpose(1, 2)
        return scores.masked_fill(mask == 0, float("-inf"))
"""


def mask_case(**names: Any) -> dict[str, Any]:
    forward = frame(
        "mask.py",
        6,
        (15, 59),
        {
            "self": module({"cuda:0": "proj.weight"}),
            "x": tensor("cuda:0"),
            "mask": tensor("cpu", "root-site"),
            "scores": tensor("cuda:0", "other"),
            **names,
        },
        function="forward",
        qualname="Causal.forward",
        first_line=2,
        last_line=6,
        params=("self", "x"),
        module_method=True,
    )
    root_site = site("mask.py", 4, op="aten::ones")
    root_site["function"] = "Causal.forward"
    return diagnosis(root_site, [forward])


def test_at_the_creation_the_input_at_hand_names_the_device(work: Path) -> None:
    (work / "mask.py").write_text(MASK)
    fix = made(synthesise(mask_case()))
    assert (fix.line, fix.summary) == (4, "device=x.device")
    assert (
        "        mask = torch.tril(torch.ones(steps, steps, device=x.device))  # lower triangle\n"
    ) in fix.proposed


def test_a_name_bound_after_the_creation_is_not_visible_there(work: Path) -> None:
    """`scores` is the other operand, but it is bound after the mask: the fix goes to the use
    when no input of the function names the device."""
    (work / "mask.py").write_text(MASK)
    case = mask_case()
    names = case["evidence"]["frames"][0]["names"]
    names["x"] = tensor("cpu")
    fix = made(synthesise(case))
    assert fix.summary == ".to(scores.device)"
    assert "scores.masked_fill(mask.to(scores.device) == 0" in fix.proposed


def test_a_factory_that_names_its_device_is_left_alone(work: Path) -> None:
    source = MASK.replace("torch.ones(steps, steps)", 'torch.ones(steps, steps, device="cpu")')
    (work / "mask.py").write_text(source)
    fix = made(synthesise(mask_case()))
    assert fix.summary == ".to(scores.device)"  # at the use instead


def test_a_bare_ignore_comment_keeps_the_line(work: Path) -> None:
    (work / "mask.py").write_text(MASK.replace("# lower triangle", "# devfix: ignore"))
    fix = made(synthesise(mask_case()))
    assert fix.line == 6  # the creation's line says ignore; the use is another line


WEIGHTS = """\
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = counts.sum() / (3 * counts)
criterion = nn.CrossEntropyLoss(weight=weights)
model = nn.Linear(5, 3).to(device)
loss = criterion(model(x), y)
"""


def weights_case(**names: Any) -> dict[str, Any]:
    script = frame(
        "w.py",
        8,
        (7, 29),
        {
            "device": device("cuda:0"),
            "weights": tensor("cpu", "root"),
            "criterion": module({"cpu": "weight"}, root="weight"),
            "model": module({"cuda:0": "weight"}, **{"other-site": "weight"}),
            **names,
        },
    )
    parent = site("w.py", 5, op="aten::div")
    return diagnosis(site("w.py", 6, "buffer", parent=parent), [script])


def test_a_buffers_value_moves_where_it_is_registered(work: Path) -> None:
    (work / "w.py").write_text(WEIGHTS)
    fix = made(synthesise(weights_case()))
    assert (fix.line, fix.summary) == (6, ".to(device)")
    assert "criterion = nn.CrossEntropyLoss(weight=weights.to(device))\n" in fix.proposed


def test_a_device_variable_bound_again_later_is_not_used(work: Path) -> None:
    (work / "w.py").write_text(WEIGHTS + 'device = torch.device("cpu")\n')
    result = synthesise(weights_case())
    # `model` is bound after the registration too: no name on the device is visible there
    assert isinstance(result, Declined)
    assert "no name visible at w.py:6 holds a tensor or device on cuda:0" in result.reason


def test_a_module_level_name_a_function_declares_global_is_not_used(work: Path) -> None:
    source = WEIGHTS + "def reset():\n    global device\n    device = None\n"
    (work / "w.py").write_text(source)
    result = synthesise(weights_case())
    assert isinstance(result, Declined)


def test_at_the_use_a_name_the_line_itself_assigns_is_not_used(work: Path) -> None:
    """`hidden` is on the device, but this line binds it first (the first time round the loop
    it does not exist yet)."""
    source = LABELS.replace(
        "    loss = F.cross_entropy(logits, labels)\n",
        "    hidden = F.cross_entropy(logits, labels)\n",
    )
    (work / "train.py").write_text(source)
    case = labels_case(source, hidden=tensor("cuda:1"))
    names = case["evidence"]["frames"][0]["names"]
    del names["logits"]
    case["evidence"]["frames"][0]["col"] = source.splitlines()[6].index("F.")
    result = synthesise(case)
    assert isinstance(result, Declined) or "hidden.device" not in result.proposed
