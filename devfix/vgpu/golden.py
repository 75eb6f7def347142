"""Golden-tier helpers: how a golden ``before`` script declares that it fails.

A ``before`` script carries one header comment line such as::

    # devfix-golden: gpus=2 fails-with="Expected all tensors to be on the same device" \
devices="cuda:1,cuda:0" env="K=V K2=V2"

The check asserts on the message prefix anywhere in stderr (DataParallel wraps it) and on the
exact *set* of devices named in the device-error line, not the whole line: the first op that
meets the stray tensor decides which of PyTorch's two formats appears.

``gpus=0`` is the machine without CUDA that a script falls back to (plain CPU torch): the
configuration of bugs that only appear there, such as CUDA-only AMP objects, which warn and
switch themselves off (``env="PYTHONWARNINGS=error::UserWarning"`` makes the warning the
failure, as ``python -W error::UserWarning`` would).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field

from devfix.vgpu.diagnose import devices_in

HEADER = "# devfix-golden:"
DEFAULT_PREFIX = "Expected all tensors to be on the same device"


@dataclass(frozen=True)
class GoldenExpectation:
    gpus: int = 2
    fails_with: str = DEFAULT_PREFIX
    devices: frozenset[str] = field(default_factory=frozenset)
    env: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.gpus, self.fails_with, self.devices, tuple(sorted(self.env.items()))))


class GoldenHeaderError(ValueError):
    """A ``# devfix-golden:`` line that cannot be parsed."""


def _split_devices(text: str) -> frozenset[str]:
    parts = [p.strip() for p in re.split(r"[,\s{}]+", text) if p.strip()]
    return frozenset(parts)


def parse_golden_header(text: str) -> GoldenExpectation | None:
    """Parse the ``# devfix-golden:`` line of a script; None if it has none."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith(HEADER):
            continue
        try:
            tokens = shlex.split(line[len(HEADER) :])
        except ValueError as e:
            raise GoldenHeaderError(f"bad devfix-golden header {line!r}: {e}") from e
        gpus = 2
        fails_with = DEFAULT_PREFIX
        devices: frozenset[str] = frozenset()
        env: dict[str, str] = {}
        for tok in tokens:
            if "=" not in tok:
                raise GoldenHeaderError(f"bad devfix-golden field {tok!r} in {line!r}")
            key, val = tok.split("=", 1)
            if key == "gpus":
                if not val.isdigit():
                    raise GoldenHeaderError(f"gpus must be a whole number in {line!r}")
                gpus = int(val)
            elif key == "fails-with":
                fails_with = val
            elif key == "devices":
                devices = _split_devices(val)
            elif key == "env":
                for pair in val.split():
                    if "=" not in pair:
                        raise GoldenHeaderError(f"env entries must be K=V in {line!r}")
                    k, v = pair.split("=", 1)
                    env[k] = v
            else:
                raise GoldenHeaderError(f"unknown devfix-golden field {key!r} in {line!r}")
        return GoldenExpectation(gpus=gpus, fails_with=fails_with, devices=devices, env=env)
    return None


def _last_line_with(text: str, needle: str) -> str | None:
    found = None
    for ln in text.splitlines():
        if needle in ln:
            found = ln
    return found


def check_failure(
    expectation: GoldenExpectation, completed: subprocess.CompletedProcess[str]
) -> str | None:
    """None if ``completed`` failed as declared, else a one-line reason."""
    stderr = completed.stderr or ""
    if completed.returncode == 0:
        return f"expected a failure with {expectation.fails_with!r}, but the script exited 0"
    line = _last_line_with(stderr, expectation.fails_with)
    if line is None:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        last = tail[-1].strip() if tail else "(empty stderr)"
        return (
            f"exit {completed.returncode} without {expectation.fails_with!r} in stderr; "
            f"last line: {last}"
        )
    if expectation.devices:
        named = frozenset(devices_in(line))
        if named != expectation.devices:
            return (
                f"devices {{{', '.join(sorted(named))}}} named instead of "
                f"{{{', '.join(sorted(expectation.devices))}}} in: {line.strip()}"
            )
    return None
