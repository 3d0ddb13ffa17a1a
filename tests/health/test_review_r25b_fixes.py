"""Review r25b: the order of a diagnosis's fixes when a reading without fixes of its own is as
strong as one with them (a CPU-only PyTorch under a CPU-only extension)."""

from __future__ import annotations

import pytest

from gpuwarden.health.explain import explain_text
from gpuwarden.health.explain.causes import BY_CODE

TORCH_CPU_ONLY = "AssertionError: Torch not compiled with CUDA enabled"


def _cpu_only_fixes(text: str) -> tuple[str, ...]:
    (diagnosis,) = (d for d in explain_text(text).diagnoses if d.cause == "cpu-only-build")
    return diagnosis.fixes


@pytest.mark.parametrize(
    ("extension_message", "its_fix_starts"),
    [
        ("torch_scatter: Not compiled with CUDA support", "install the extension's CUDA wheel"),
        ("RuntimeError: k2 compiled without CUDA support", "install k2's CUDA wheel"),
    ],
)
def test_a_cpu_only_torch_is_fixed_before_the_extension_built_against_it(
    extension_message: str, its_fix_starts: str
) -> None:
    # PyTorch's own message reads first at the same weight: the extension's CUDA wheel is
    # built for a CUDA torch ("${CUDA} = its CUDA, not cpu"), so torch's CUDA build comes first
    fixes = _cpu_only_fixes(f"{TORCH_CPU_ONLY}\n{extension_message}")
    generic = BY_CODE["cpu-only-build"].fixes
    assert fixes[: len(generic)] == generic
    assert fixes[len(generic)].startswith(its_fix_starts)
    assert len(fixes) == len(set(fixes)) == len(generic) + 1


def test_the_extension_alone_keeps_its_own_fix_first() -> None:
    fixes = _cpu_only_fixes("torch_scatter: Not compiled with CUDA support")
    assert fixes[0].startswith("install the extension's CUDA wheel")
    assert fixes[1:] == BY_CODE["cpu-only-build"].fixes
