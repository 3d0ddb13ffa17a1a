"""Bytes of storage formats that cannot run on this CPU, modelled from their libraries' layouts.

Pure arithmetic (no torch): exact mode traces a bf16 stand-in and swaps in these sizes, and says so.
"""

from __future__ import annotations

from math import ceil

from gpuwarden.planner.optimizer import BNB_BLOCK, BNB_MIN_8BIT

# bitsandbytes 4-bit (QLoRA): one absmax per 64 weights; with double quantization the absmax are
# stored as uint8, with one fp32 absmax (and an fp32 offset) per 256 of them (memory.md §2.2).
_NF4_BLOCK = 64
_NF4_NESTED_BLOCK = 256

# GPTQ / AWQ int4, group size 128: an fp16 scale and a packed 4-bit zero point per group and column.
_INT4_GROUP = 128

# bitsandbytes 8-bit optimizers (Optimizer2State.init_state): blockwise quantization, one fp32
# absmax per 256 values; tensors smaller than ``min_8bit_size`` keep 32-bit states. Shared with
# the formula planner so both model the same layout.
BNB_OPTIMIZER_BLOCK = BNB_BLOCK
BNB_MIN_8BIT_SIZE = BNB_MIN_8BIT


def weight_bytes(scheme: str, out_features: int, in_features: int) -> int:
    """Bytes of one quantized ``nn.Linear`` weight of shape (out_features, in_features)."""
    n = out_features * in_features
    blocks = ceil(n / _NF4_BLOCK)
    if scheme == "nf4":
        return ceil(n / 2) + blocks + 4 * ceil(blocks / _NF4_NESTED_BLOCK) + 4
    if scheme == "nf4-single":
        # bnb_4bit_use_double_quant=False: one fp32 absmax per block of 64
        return ceil(n / 2) + 4 * blocks
    if scheme == "nf4-torchao":
        # torchao NF4Tensor: int8 scalers, a bf16 quantization factor per 256 scalers, a bf16
        # scaler mean and the 16-entry bf16 NF4 table, per tensor
        return ceil(n / 2) + blocks + 2 * ceil(blocks / _NF4_NESTED_BLOCK) + 2 + 2 * 16
    if scheme == "int8":
        # LLM.int8: int8 weights + one fp32 scale per output row (SCB).
        return n + 4 * out_features
    if scheme == "int4":
        groups = ceil(in_features / _INT4_GROUP)
        return ceil(n / 2) + groups * out_features * 2 + ceil(groups * out_features / 2)
    raise ValueError(f"unknown weight quantization scheme {scheme!r}")


def adam8bit_state_bytes(numel: int) -> int:
    """Bytes of bitsandbytes' 8-bit Adam(W) states (m and v) for one parameter tensor."""
    if numel < BNB_MIN_8BIT_SIZE:
        return 2 * 4 * numel
    return 2 * (numel + 4 * ceil(numel / BNB_OPTIMIZER_BLOCK))


DESCRIPTIONS = {
    "nf4": "bitsandbytes NF4 with double quantization "
    "(0.5 B + 1 B per 64 + 4 B per 16,384 weights)",
    "nf4-single": "bitsandbytes NF4 without double quantization (0.5 B + 4 B per 64 weights)",
    "nf4-torchao": "torchao NF4Tensor (0.5 B + 1 B per 64 + 2 B per 16,384 weights)",
    "int8": "LLM.int8 (1 B per weight + one fp32 scale per output row)",
    "int4": "GPTQ/AWQ int4, group 128 (0.5 B per weight + fp16 scale and 4-bit zero per group)",
}
