"""``explain``: a pasted error, log excerpt or kernel log → ranked diagnoses (cause, evidence,
fixes, what decides). Pure: text in, ``Explanation`` out (diagnosis.md §1 is the vocabulary).

The knowledge is data: ``causes.CAUSES`` (what each cause means and what fixes it),
``signatures.SIGNATURES`` (the tell-tale phrases), ``cuda_errors.CUDA_ERRORS``; the numbers have
parsers (``oom_parse``/``oom`` for out-of-memory arithmetic, ``nccl`` for watchdog timeouts,
``kernel`` for Xids).
"""

from __future__ import annotations

from gpuwarden.health.explain.causes import BY_CODE, CAUSES, Cause
from gpuwarden.health.explain.explainer import NEXT_STEPS, explain_text

__all__ = ["BY_CODE", "CAUSES", "NEXT_STEPS", "Cause", "explain_text"]
