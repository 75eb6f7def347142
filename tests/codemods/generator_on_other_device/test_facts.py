"""codemods.generator_on_other_device.facts: generators, their kind of device and their uses."""

from __future__ import annotations

import libcst as cst

from devfix.codemods.analysis.names import code_of
from devfix.codemods.generator_on_other_device.facts import Generators
from tests.analysis._parsed import parse


def test_generators_their_kind_and_uses() -> None:
    parsed = parse(
        """
        import torch

        g = torch.Generator().manual_seed(3)
        cuda_g = torch.Generator(device="cuda")
        x = torch.randn(2, generator=g)
        y = torch.rand(2, generator=cuda_g)
        z = torch.randperm(4, generator=g)
        """
    )
    generators = parsed.facts.own(Generators)
    use = parsed.one(cst.Call, "torch.randn(2, generator=g)")
    generator = generators.generator_call(cst.Name("g"), use)
    assert generator is not None and code_of(generator) == "torch.Generator()"
    assert generators.generator_kind(generator) == "cpu"
    uses = generators.generator_uses(generator)
    assert uses is not None and [code_of(u.func) for u in uses] == ["torch.randn", "torch.randperm"]
    cuda = generators.generator_call(cst.Name("cuda_g"), use)
    assert cuda is not None and generators.generator_kind(cuda) == "accelerator"
