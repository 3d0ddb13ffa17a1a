"""A plan of a Liger-patched model says so where a reader looks: the title and the notes."""

from __future__ import annotations

import subprocess
import sys


def _plan(*flags: str) -> str:
    argv = [sys.executable, "-m", "gpuwarden", "plan", "Meta-Llama-3-8B", "--gpu", "A100 80GB"]
    proc = subprocess.run([*argv, *flags], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_title_and_notes_name_liger_kernels() -> None:
    out = _plan("--kernels", "liger")
    title = out.split("\n\n", 1)[0]
    assert "Liger kernels" in title
    assert "kernels: Liger-Kernel: RMSNorm keeps its input" in out
    assert "fused linear cross-entropy" in out  # --loss defaults to Liger's fused loss


def test_a_plan_without_liger_names_it_only_as_a_fix() -> None:
    out = _plan()
    assert "Liger kernels" not in out.split("\n\n", 1)[0] and "kernels:" not in out
    assert "Liger-Kernel (use_liger_kernel=True)" in out  # offered in the fix list
