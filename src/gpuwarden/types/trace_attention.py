"""The attention backends of a rank (``RankInsights.attention``).

A module of its own, imported where a trace calls for it: a trace without them does not pay
for creating their classes (see ``gpuwarden.types.trace_insights``), which still names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.types.trace_insights import SdpaBackend


@dataclass(frozen=True, slots=True)
class SdpaBackendUse:
    """One attention backend in a rank: ``calls`` of its SDPA CPU op (0 when only its kernels
    are in the trace), ``kernel_time_us`` of its kernels (0 for math, which has none of its own)."""

    backend: SdpaBackend
    calls: int
    kernel_time_us: float


@dataclass(frozen=True, slots=True)
class AttentionReport:
    """Attention backends that ran in one rank, from SDPA's CPU ops
    (``aten::_scaled_dot_product_flash_attention``, ``..._efficient_attention``,
    ``..._cudnn_attention``, ``aten::_scaled_dot_product_attention_math``) and fused attention
    kernel names. ``None`` in RankInsights when the trace has neither."""

    sdpa_calls: int  # aten::scaled_dot_product_attention ops
    backends: tuple[SdpaBackendUse, ...]  # by calls, then kernel time, desc
    fix: str | None

    @property
    def math_calls(self) -> int:
        return sum(b.calls for b in self.backends if b.backend is SdpaBackend.MATH)

    @property
    def fused_calls(self) -> int:
        return sum(b.calls for b in self.backends if b.backend is not SdpaBackend.MATH)
