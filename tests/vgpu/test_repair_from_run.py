"""`devfix verify --fix` end to end on `golden/_repair_from_run/`: scripts whose root cause no
static rule covers at the root's line, repaired from the run's evidence (a fix made from the
run) or by the static finding on the root's provenance chain. The command runs in this
process, its rounds in the worker's warm server (the `verify` fixture)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.vgpu.conftest import Verify

pytestmark = pytest.mark.slow

CASES_DIR = Path(__file__).resolve().parents[2] / "golden" / "_repair_from_run"

#: script -> (flags, the round line's fix, a line of the repaired file)
CASES = {
    "s1_optim_build.py": (
        ["--unsafe-fixes"],
        "applied DF301 at s1_optim_build.py:12 (unsafe)",
        "    model.to(device)\n    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)\n",
    ),
    "s2_labels_mp.py": (
        [],
        "applied runtime fix at s2_labels_mp.py:25 (.to(logits.device))",
        "    loss = F.cross_entropy(logits, labels.to(logits.device))\n",
    ),
    "s3_tok_dict.py": (
        [],
        "applied runtime fix at s3_tok_dict.py:29 (each value of `inputs` .to(device))",
        "    print(model(**{k: v.to(device) for k, v in inputs.items()}).argmax(-1).tolist())\n",
    ),
    "s4_class_weights.py": (
        [],
        "applied runtime fix at s4_class_weights.py:9 (.to(device))",
        "criterion = nn.CrossEntropyLoss(weight=weights.to(device))\n",
    ),
    "s5_mask_forward.py": (
        ["--unsafe-fixes"],
        "applied DF101 at s5_mask_forward.py:13 (unsafe)",
        "        mask = torch.tril(torch.ones(steps, steps, device=x.device))\n",
    ),
    "s6_mask_rule_ignored.py": (
        [],
        "applied runtime fix at s6_mask_rule_ignored.py:14 (device=x.device)",
        "        mask = torch.tril(torch.ones(steps, steps, device=x.device))\n",
    ),
    "s7_score_records.py": (
        [],
        "applied runtime fix at s7_score_records.py:21 (.to(model.encoder.weight.device))",
        "    return model(features.to(model.encoder.weight.device)).sigmoid().tolist()\n",
    ),
}


def test_every_script_of_the_folder_is_a_case() -> None:
    assert sorted(p.name for p in CASES_DIR.glob("*.py")) == sorted(CASES)


def _copy(name: str, tmp_path: Path) -> Path:
    shutil.copy(CASES_DIR / name, tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("name", sorted(CASES))
def test_verify_fix_repairs_the_script(name: str, tmp_path: Path, verify: Verify) -> None:
    flags, applied, repaired = CASES[name]
    script = _copy(name, tmp_path)
    before = script.read_text()
    r = verify("--fix", *flags, name, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rounds = re.findall(r"^devfix verify --fix: round \d+: .*$", r.stdout, re.M)
    assert len(rounds) == 2, r.stdout
    assert rounds[0].endswith(f" -> {applied}"), rounds[0]
    assert rounds[1] == f"devfix verify --fix: round 2: the script runs (changed: {name})"
    after = script.read_text()
    assert repaired in after
    added = [
        line
        for line in r.stdout.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert added and not any(re.search(r"[\"'](cuda|cpu)", line) for line in added)
    # Only the fix's lines changed: comments, blank lines and the rest are the file's own.
    kept = set(before.splitlines()) - set(after.splitlines())
    assert len(kept) <= 2, kept
    compile(after, name, "exec")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (
            "s1_optim_build.py",
            "  the finding DF301 at s1_optim_build.py:12, on the root's provenance chain, has an "
            "unsafe fix (allow it with --unsafe-fixes): stop",
        ),
        (
            "s5_mask_forward.py",
            "  the finding at the root's line has an unsafe fix (allow it with --unsafe-fixes): "
            "stop",
        ),
    ],
)
def test_a_static_unsafe_fix_on_the_chain_needs_unsafe_fixes(
    name: str, why: str, tmp_path: Path, verify: Verify
) -> None:
    """The static finding is the root cause: no fix is made from the run instead of it."""
    script = _copy(name, tmp_path)
    before = script.read_text()
    r = verify("--fix", name, cwd=tmp_path)
    assert r.returncode == 1
    assert why in r.stderr.splitlines()
    assert "runtime fix" not in r.stdout + r.stderr
    assert script.read_text() == before


def test_the_diagnosis_of_a_restored_optimizer_names_its_chain(
    tmp_path: Path, verify: Verify
) -> None:
    _copy("s1_optim_build.py", tmp_path)
    r = verify("s1_optim_build.py", cwd=tmp_path)
    assert r.returncode == 1
    assert (
        "  the cpu tensor `self[0]` (shape [2, 4]) was restored into an optimizer's state at "
        "s1_optim_build.py:16 by optimizer.load_state_dict(...) (the optimizer built at "
        "s1_optim_build.py:12)  (root cause)"
    ) in r.stderr
    assert "      its value was loaded onto cpu at s1_optim_build.py:14 by torch.load(...)" in (
        r.stderr
    )
    assert "    -> DF301 at s1_optim_build.py:12 fixes it: Move it after `model.to(device)`" in (
        r.stderr
    )
    assert "suggested edit" not in r.stderr  # no literal map_location any more


def test_the_diagnosis_shows_the_fix_from_the_run(tmp_path: Path, verify: Verify) -> None:
    _copy("s4_class_weights.py", tmp_path)
    r = verify("s4_class_weights.py", cwd=tmp_path)
    assert r.returncode == 1
    assert (
        "    -> no devfix rule covers this line; fix from the run (`devfix verify --fix` applies "
        "it) at s4_class_weights.py:9: .to(device)\n"
        "         criterion = nn.CrossEntropyLoss(weight=weights.to(device))\n"
    ) in r.stderr


def test_the_json_diagnosis_carries_the_runs_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `devfix verify --format json` prints as `diagnosis`, from a warm child."""
    from devfix.vgpu.launch import run_one_json
    from devfix.vgpu.warm import runner
    from tests.warm_servers import SERVER_ENV

    _copy("s3_tok_dict.py", tmp_path)
    monkeypatch.chdir(tmp_path)
    code, result = run_one_json(
        "s3_tok_dict.py", (), gpus=2, env={}, capture=True, warm=runner(2, SERVER_ENV)
    )
    assert code == 1
    evidence = json.loads(json.dumps(result["diagnosis"]))["evidence"]
    assert (evidence["root_device"], evidence["needed"]) == ("cpu", "cuda:0")
    forward, script = evidence["frames"]
    assert (forward["qualname"], forward["line"], forward["module_method"]) == (
        "Classifier.forward",
        20,
        True,
    )
    assert forward["params"] == ["self", "input_ids", "mask"]
    # `index` is input_ids flattened by the embedding: the same site, not the same object
    assert forward["names"]["input_ids"]["holds"] == "root-site"
    assert forward["names"]["self"]["holds"] == {"other": "embed.weight"}
    assert (script["function"], script["line"], script["col"], script["end_col"]) == (
        "<module>",
        29,
        10,
        25,
    )
    assert script["names"]["device"] == {"kind": "device", "device": "cuda:0", "global": True}
    assert script["names"]["inputs"]["kind"] == "dict"
    assert script["names"]["inputs"]["all_tensors"] is True
