"""The runtime's C++ fast path (shim.cpp; devfix.vgpu.runtime._fast_path): the common op on
virtual tensors without __torch_dispatch__, and the same results as the Python path; and the
virtual GPUs' cache of freed blocks (shim.cpp, CountingAllocator)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_a_training_run_is_bit_for_bit_the_same_on_either_path(vgpu_run) -> None:
    """Losses, gradients, an in-place op on a view, memory statistics and provenance of a few
    AdamW steps across two virtual GPUs, with the fast path and with every op on the Python
    path (the script runs both, one after the other)."""
    r = vgpu_run("fast_path_training.py")
    assert r.returncode == 0, r.stdout + r.stderr
    on, off, counts = r.stdout.split("--\n")
    assert on == off and len(on.splitlines()) == 9, (on, off)
    taken, declined, taken_after, declined_after = (int(n) for n in counts.split())
    assert taken > 5 * declined > 0  # most ops of a training step take it
    assert (taken_after, declined_after) == (0, 0)  # removed: every op on the Python path


@pytest.mark.slow
def test_mismatches_modes_and_scalars_still_reach_torch_dispatch(vgpu_run) -> None:
    r = vgpu_run("fast_path_edges.py")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in (
        "taken",
        "mismatch",
        "cpu-scalar",
        "in-place",
        "list-result",
        "dispatch-mode",
        "profiler",
        "autocast",
        "memory",
        "grad",
    ):
        assert f"OK {name}\n" in r.stdout, (name, r.stdout)
    assert r.stdout.endswith("fast path True True\n")


@pytest.mark.slow
def test_freed_blocks_are_kept_for_reuse_up_to_the_peak(vgpu_run) -> None:
    r = vgpu_run("allocator_cache.py", gpus=1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "OK\n"
