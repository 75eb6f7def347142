"""examples/: one script per pass, each generated from one golden `before` case.

An example is its golden case without the `# devfix-...` directive lines (which only the golden
tests read), its `# Run:` line naming the example. `pytest tests/test_examples.py --update-goldens` rewrites examples/ from golden/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devfix.registry import all_passes

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "golden"

#: examples/<pass module>.py is generated from golden/<pass module>/<case>.before.py.
SOURCES = {
    "amp_device_type_hard_coded": "cuda_amp_with_cpu_fallback",
    "batch_not_moved_to_device": "cifar_tutorial_unpack",
    "data_parallel": "argparse_main",
    "device_fixed_at_construction": "global_device_rnn_state",
    "device_in_data_pipeline": "collate_fn_cuda",
    "device_map_in_distributed_training": "qlora_device_map_zero",
    "generator_on_other_device": "seeded_noise_on_the_device",
    "hard_coded_device": "amp_training_cuda_index",
    "labels_not_on_logits_device": "causal_lm_shifted_labels",
    "loss_weight_on_cpu": "class_weights_from_counts",
    "metric_not_on_device": "accuracy_in_training_loop",
    "model_copy_on_other_device": "ema_copied_before_the_move",
    "module_moved_in_forward": "bare_cuda_head",
    "move_result_discarded": "from_numpy_batch",
    "numpy_of_device_tensor": "epoch_loss_np_mean",
    "optimizer_state_before_model_move": "adagrad_built_before_move",
    "tensor_attribute_not_buffer": "seed001_dataparallel_scale",
    "tensor_factory_without_device": "seed001_transformer_positions",
    "tokenizer_output_not_moved": "classify_batch_star_star",
    "torch_load_without_map_location": "pickled_model_on_rank",
    "unregistered_submodules": "appended_layers",
}


def example_text(golden_before: str, case: str, module: str) -> str:
    """The golden case without its directives, its `# Run:` line naming the example's file."""
    return "".join(
        line.replace(f"{case}.before.py", f"{module}.py") if line.startswith("# Run:") else line
        for line in golden_before.splitlines(keepends=True)
        if not line.startswith("# devfix-")
    )


def test_every_pass_has_one_example_and_nothing_else_is_there() -> None:
    modules = {cls.__module__.rsplit(".", 1)[1] for cls in all_passes()}
    assert set(SOURCES) == modules
    scripts = {path.stem for path in EXAMPLES.glob("*.py")}
    assert scripts == modules


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_example_is_generated_from_its_golden_case(
    module: str, request: pytest.FixtureRequest
) -> None:
    source = GOLDEN / module / f"{SOURCES[module]}.before.py"
    expected = example_text(source.read_text(encoding="utf-8"), SOURCES[module], module)
    example = EXAMPLES / f"{module}.py"
    if request.config.getoption("--update-goldens"):
        example.write_text(expected, encoding="utf-8")
    assert example.read_text(encoding="utf-8") == expected, (
        f"examples/{module}.py differs from golden/{module}/{SOURCES[module]}.before.py; "
        "run pytest tests/test_examples.py --update-goldens"
    )
