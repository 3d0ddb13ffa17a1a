"""Rows of ``shared/fixtures/memory/measured.csv`` → ``PlanRequest`` + what to compare with.

One small function per interpretation rule. Each rule reads the row's columns and its ``notes`` as
the source wrote them and cites the note that justifies it. Nothing here is tuned per row to make
the planner look better: a setting the row states is mapped as stated; a setting ``PlanRequest``
cannot express is listed in ``unmodelled`` (and so shows in the table), never approximated by
another knob.

Used by ``planner_accuracy.py`` (tables b and c). Run this file alone to print the mapping.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwarden.planner.layout import lora_targets as planned_lora_targets
from gpuwarden.types import (
    Attention,
    Checkpointing,
    FsdpKind,
    Mode,
    Offload,
    Optimizer,
    PlanRequest,
    Precision,
    Structure,
)
from gpuwarden.types.plan import Engine

if TYPE_CHECKING:
    from gpuwarden.types import GpuSpec, ModelSpec


@dataclass(frozen=True, slots=True)
class Feature:
    """A setting the row states that maps to one PlanRequest knob (if the knob exists)."""

    label: str  # as shown in the table, e.g. "torch.compile"
    knob: str  # PlanRequest field name
    value: object  # a plain value, or ("EnumName", "value") resolved from gpuwarden.types.plan


def _plan_knobs() -> set[str]:
    return {f.name for f in dataclasses.fields(PlanRequest)}


def _resolve_value(value: object) -> object:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        import gpuwarden.types.plan as plan_types

        enum_cls = getattr(plan_types, value[0], None)
        if enum_cls is None:
            raise LookupError(value[0])
        return enum_cls(value[1])
    return value


def shared_dir() -> Path:
    """``shared/`` beside the repository (CI clones main with shared/ beside it)."""
    env = os.environ.get("GPUWARDEN_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared"


def measured_csv() -> Path:
    return shared_dir() / "fixtures" / "memory" / "measured.csv"


# --------------------------------------------------------------------------------------------
# Raw rows
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeasuredRow:
    """One CSV row, as written (strings), plus the parsed measurement."""

    id: str
    model: str
    params_b: str
    arch_source: str
    gpu: str
    n_gpus: int
    mode: str
    precision: str
    optimizer: str
    zero_stage_or_fsdp: str
    tp: int
    pp: int
    micro_batch: str
    seq_len: str
    grad_ckpt: str
    measured_gib: float | None  # None for OOM rows
    what_was_measured: str
    source_url: str
    notes: str

    @property
    def oom(self) -> bool:
        return self.measured_gib is None


def _int(text: str, default: int = 1) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else default


def load_rows(path: Path | None = None) -> list[MeasuredRow]:
    rows: list[MeasuredRow] = []
    with (path or measured_csv()).open(newline="", encoding="utf-8") as f:
        for rec in csv.DictReader(f):
            peak = rec["measured_peak_gib_per_gpu"].strip()
            rows.append(
                MeasuredRow(
                    id=rec["id"],
                    model=rec["model"],
                    params_b=rec["params_b"],
                    arch_source=rec["arch_source"],
                    gpu=rec["gpu"],
                    n_gpus=_int(rec["n_gpus"]),
                    mode=rec["mode"],
                    precision=rec["precision"],
                    optimizer=rec["optimizer"],
                    zero_stage_or_fsdp=rec["zero_stage_or_fsdp"],
                    tp=_int(rec["tp"]),
                    pp=_int(rec["pp"]),
                    micro_batch=rec["micro_batch"],
                    seq_len=rec["seq_len"],
                    grad_ckpt=rec["grad_ckpt"],
                    measured_gib=None if peak.upper() == "OOM" else float(peak),
                    what_was_measured=rec["what_was_measured"],
                    source_url=rec["source_url"],
                    notes=rec["notes"],
                )
            )
    return rows


# --------------------------------------------------------------------------------------------
# What was measured → which prediction it is compared with
# --------------------------------------------------------------------------------------------


class Kind(StrEnum):
    MAX_ALLOCATED = "max_allocated"  # predicted.max_allocated_bytes
    MAX_ACTIVE = "max_active"  # predicted.max_active_bytes (≈ max_allocated when not modelled)
    MAX_RESERVED = "max_reserved"  # predicted.max_reserved_bytes
    NVIDIA_SMI = "nvidia-smi"  # predicted.nvidia_smi_used_bytes
    VLLM_NON_KV = "vllm non-KV"  # weights + activations + non-torch
    # the weights as loaded: plan.component("parameters") + plan.component("buffers")
    VLLM_WEIGHTS = "vllm weights"
    VLLM_KV_TOKENS = "vllm KV tokens"  # the KV pool in tokens: plan.inference.kv_tokens
    # SGLang's "Load weight end ... mem usage=X GB": the same as vLLM's weights figure
    SGLANG_WEIGHTS = "sglang weights"
    SGLANG_KV_TOKENS = "sglang KV tokens"  # max_total_num_tokens: plan.inference.kv_tokens
    OOM = "OOM"  # classification: predicted nvidia-smi > GPU memory


@dataclass(frozen=True, slots=True)
class KindRule:
    kind: Kind
    why: str


def measurement_kind(row: MeasuredRow) -> KindRule:
    what = row.what_was_measured.lower()
    if row.oom or what == "oom":
        # README: "`OOM` = the source reports out-of-memory" → memory.md §6: a classification check.
        return KindRule(Kind.OOM, "OOM: predicted nvidia-smi > GPU memory")
    if what == "max_allocated":
        return KindRule(Kind.MAX_ALLOCATED, "torch.cuda.max_memory_allocated")
    if what == "max_active":
        # README: max_active = torch's active_bytes peak; memory.md §2.10: active ≈ allocated
        # (blocks in use), both exclude the allocator cache. Compared with
        # predicted.max_active_bytes, or max_allocated_bytes when the planner leaves it None.
        return KindRule(Kind.MAX_ACTIVE, "max_active (≈ allocated, memory.md §2.10)")
    if what == "max_reserved":
        return KindRule(Kind.MAX_RESERVED, "torch.cuda.max_memory_reserved")
    if what.startswith("nvidia-smi"):
        return KindRule(Kind.NVIDIA_SMI, "NVML used (context + NCCL + allocator cache)")
    if what.startswith("torchtune peak"):
        # Notes: "README does not say active/alloc/reserved". torchtune's get_memory_stats logs
        # peak_memory_active / _alloc / _reserved; the same README (torchtune @1814feb, table
        # "Optimization flags", rows M009-M018) labels its column "Peak Memory Active (GiB)",
        # and active ≈ allocated. So: compare with the active (≈ allocated) prediction.
        return KindRule(
            Kind.MAX_ACTIVE,
            "torchtune peak → active (README's sister table quotes Peak Memory Active)",
        )
    if what.startswith("vllm profile"):
        # Notes: "weights + non_torch_memory + PyTorch activation peak".
        return KindRule(Kind.VLLM_NON_KV, "weights + activation peak + non-torch")
    raise ValueError(f"{row.id}: unknown measurement kind {row.what_was_measured!r}")


# --------------------------------------------------------------------------------------------
# Settings rules
# --------------------------------------------------------------------------------------------


def flagged(row: MeasuredRow) -> str | None:
    """README: AMBIGUOUS / SUSPECT rows are shown but left out of error statistics."""
    for flag in ("AMBIGUOUS", "SUSPECT"):
        if flag in row.notes:
            return flag
    return None


def parse_mode(row: MeasuredRow) -> Mode:
    # README column `mode`: train | finetune-lora | qlora | infer.
    return {
        "train": Mode.TRAIN,
        "finetune-lora": Mode.LORA,
        "qlora": Mode.QLORA,
        "infer": Mode.INFER,
    }[row.mode.strip()]


def parse_precision(row: MeasuredRow) -> tuple[Precision, list[str]]:
    text = row.precision.lower()
    notes: list[str] = []
    if text.startswith("nf4"):
        # README: "NF4 = bitsandbytes/torchao 4-bit base". Which library and whether the absmax
        # are double-quantized: ``nf4_kernel`` and ``nf4_double_quant``.
        return Precision.NF4, notes
    if "pure" in text:
        # README: "bf16 (pure)" = params, grads and optimizer states all bf16 (torchtune
        # `dtype: bf16`).
        return Precision.BF16, notes
    if "mixed" in text:
        # README: "bf16 mixed" = fp32 master weights and optimizer states.
        return Precision.BF16_MIXED, notes
    if text == "fp32":
        # PEFT README rows: "fp32 weights (no mixed precision in the examples)".
        return Precision.FP32, notes
    if text in {"bf16", "fp16/bf16"}:
        # vLLM rows: 16-bit weights; bf16 and fp16 have the same size.
        return Precision.BF16, notes
    raise ValueError(f"{row.id}: unknown precision {row.precision!r}")


# bitsandbytes PR #1270 (merged 2024-07-16, released in 0.43.2) stopped MatMul4Bit keeping the
# input of every 4-bit Linear for backward; a bnb QLoRA run measured before then used the old
# kernel.


def nf4_kernel(row: MeasuredRow) -> list[Feature]:
    """Which library ran the NF4 Linears, from the row's source and date."""
    if not row.precision.lower().startswith("nf4"):
        return []
    if "torchtune" in row.source_url:
        # torchtune's QLoRA recipes quantize with torchao's NF4Tensor (M005: "torchao NF4"),
        # whose linear_nf4 keeps only the weight; its scalers are always double-quantized.
        return [Feature("torchao NF4", "quant_kernel", ("QuantKernel", "torchao"))]
    if "peft" in row.source_url and "quant_storage" in row.precision:
        # M132-M134: "NF4 (quant_storage bf16)": QLoRA under ZeRO-3 / FSDP needs
        # bnb_4bit_quant_storage (bitsandbytes 0.43.0, 2024-03-08); PEFT documented these runs
        # with 0.10.0 ("QLoRA with DeepSpeed ZeRO3 and FSDP ... requires bitsandbytes>=0.43.0",
        # released 2024-03-21): measured on bitsandbytes 0.43.0/0.43.1, before the 0.43.2 fix.
        return [Feature("bitsandbytes < 0.43.2", "quant_kernel", ("QuantKernel", "bnb-legacy"))]
    return []


def nf4_double_quant(row: MeasuredRow) -> tuple[list[Feature], list[str]]:
    """(features, unmodelled): whether the NF4 absmax were double-quantized, when stated."""
    if not row.precision.lower().startswith("nf4") or "torchtune" in row.source_url:
        return [], []  # torchao always quantizes its scalers (PlanRequest default: on)
    if "nested quant" in row.notes:
        # M132: "nested quant" = bnb_4bit_use_double_quant=True.
        return [Feature("nested quant", "double_quant", True)], []
    if "peft" in row.source_url and row.source_url.endswith("accelerate/fsdp.md"):
        # M133/M134: the launch command fsdp.md quotes (run_peft_qlora_fsdp.sh) passes
        # `--use_nested_quant True`, which train.py forwards as bnb_4bit_use_double_quant.
        return [Feature("nested quant (run_peft_qlora_fsdp.sh)", "double_quant", True)], []
    return [], ["NF4 double-quant not stated"]


def parse_optimizer(row: MeasuredRow) -> tuple[Optimizer, list[Feature]]:
    text = row.optimizer.lower()
    features: list[Feature] = []
    if "optimizer_in_bwd" in text:
        # torchtune optimizer_in_bwd (M001, M014-M016): each parameter steps as soon as its
        # gradient is ready, so the full gradient set is never alive at once.
        features.append(Feature("optimizer_in_bwd", "optimizer_in_backward", True))
    if not text:
        return Optimizer.NONE, features  # inference rows
    if "pagedadamw8bit" in text:
        return Optimizer.PAGED_ADAMW_8BIT, features
    if "adamw8bit" in text:
        return Optimizer.ADAMW_8BIT, features
    if "adamw" in text:
        # "AdamW (fused)", "AdamW (torch)", "AdamW (fp32)", "unspecified (... likely AdamW)".
        features.extend(optimizer_impl(row))
        return Optimizer.ADAMW, features
    raise ValueError(f"{row.id}: unknown optimizer {row.optimizer!r}")


def optimizer_impl(row: MeasuredRow) -> list[Feature]:
    """Which AdamW kernel, when the row says: it decides the step's temporaries (memory.md §2.4)."""
    text = row.optimizer.lower()
    if "fused" in text:
        # M003/M004/M006-M008: "AdamW (fused)" (torchtune configs: `fused: True`).
        return [Feature("fused AdamW", "optimizer_impl", ("OptimizerImpl", "fused"))]
    # M009-M015 "AdamW (torch)": torch.optim.AdamW as opposed to bitsandbytes, kernel not stated.
    # torchtune's configs pass `fused: True`, and a foreach step (a full exp_avg_sq-sized
    # temporary) cannot fit under M013's 24.9 GiB (params + grads + states alone are 23.9 GiB),
    # so the kernel is left to PlanRequest's default (fused) like every other unstated row.
    # "AdamW (fp32)" (PEFT, early 2023: torch version unknown), "AdamW on LoRA params": the
    # kernel is not stated → PlanRequest's default.
    return []


@dataclass(frozen=True, slots=True)
class Sharding:
    zero_stage: int = 0
    fsdp: FsdpKind | None = None
    offload: Offload = Offload.NONE
    assumption: str = ""


def parse_sharding(row: MeasuredRow) -> Sharding:
    text = row.zero_stage_or_fsdp.lower()
    if not text or text == "none":
        return Sharding()
    no_offload = "no offload" in text or "no cpu offload" in text
    offload = "offload" in text and not no_offload
    if "zero-3" in text:
        if not offload:
            return Sharding(zero_stage=3)
        if "optim+params" in text:
            # M123: "DeepSpeed ZeRO-3 + CPU offload (optim+params)".
            return Sharding(zero_stage=3, offload=Offload.OPTIMIZER_AND_PARAMS)
        # M126/M129: "DeepSpeed ZeRO-3 + CPU offload" in the same PEFT README table as M123,
        # which states "(optim+params)" for the same ZeRO-3 CPU config.
        return Sharding(
            zero_stage=3,
            offload=Offload.OPTIMIZER_AND_PARAMS,
            assumption="offload = optim+params (as M123, same PEFT table)",
        )
    if "fsdp" in text and ("full" in text):
        if not offload:
            return Sharding(fsdp=FsdpKind.FULL)
        # FSDP's CPUOffload offloads parameters (their grads and the optimizer step follow them
        # to the CPU); M006 says so explicitly: "(params/grads/optim)".
        return Sharding(fsdp=FsdpKind.FULL, offload=Offload.OPTIMIZER_AND_PARAMS)
    raise ValueError(f"{row.id}: unknown sharding {row.zero_stage_or_fsdp!r}")


def parse_checkpointing(row: MeasuredRow) -> tuple[Checkpointing, list[Feature], str]:
    """(checkpointing, stated features, assumption)."""
    text = row.grad_ckpt.lower().strip()
    if text.startswith("on"):
        # torchtune enable_activation_checkpointing and HF gradient_checkpointing checkpoint every
        # layer (memory.md §2.5 "Full, per layer"). M015-M018: "on+activation offload".
        features = (
            [Feature("activation offload", "activation_offload", True)] if "offload" in text else []
        )
        return Checkpointing.FULL, features, ""
    if text in {"off", ""}:
        return Checkpointing.NONE, [], ""
    if text == "unspecified":
        # Only on AMBIGUOUS rows (M002, M004); M004's note: "AC probably off".
        return Checkpointing.NONE, [], "AC unspecified → off (M004 note: 'AC probably off')"
    raise ValueError(f"{row.id}: unknown grad_ckpt {row.grad_ckpt!r}")


def parse_attention(row: MeasuredRow) -> tuple[Attention, str]:
    notes = row.notes
    if "FlashAttention" in notes:
        # PEFT accelerate docs rows: "FlashAttention-2".
        return Attention.FLASH, ""
    if "torchtune" in row.source_url:
        # torchtune's attention calls F.scaled_dot_product_attention (no eager path).
        return Attention.SDPA, ""
    if "vllm" in row.source_url:
        # vLLM's default attention backend on A100/H100 is FlashAttention.
        return Attention.FLASH, ""
    if "peft" in row.source_url and "README" in row.source_url:
        # PEFT README table (early 2023): T5 and BLOOM ran with eager attention in transformers of
        # that time (SDPA integration came in transformers 4.36).
        return Attention.EAGER, "eager attention (2023 transformers, no SDPA)"
    raise ValueError(f"{row.id}: cannot tell the attention implementation")


_CUMULATIVE = "Cumulative flags table: each row adds one technique to the previous one."


TECHNIQUES: dict[str, Feature] = {
    "torch.compile": Feature("torch.compile", "compile", True),
    "chunked CE": Feature("chunked CE", "loss", ("LossImpl", "chunked")),
    "sharded embeddings": Feature("FSDP-sharded embeddings", "fsdp_shard_embeddings", True),
}


def technique_flags(row: MeasuredRow, previous: frozenset[str]) -> frozenset[str]:
    """compile / chunked CE as the notes state them (techniques with no PlanRequest knob).

    M009-M018 come from torchtune's cumulative flags table: "each row adds one technique to the
    previous one", so "+ ..." and "same flags" inherit the previous row's techniques.
    """
    tail = row.notes.split(_CUMULATIVE)[-1]
    flags: set[str] = set()
    if _CUMULATIVE in row.notes and ("+ ..." in tail or "same flags" in tail):
        flags |= previous
    # M001-M008: "torch.compile on"; M011+: "+ packed + torch.compile", "+ packed + compile";
    # M009: "no compile" (negative look-behind).
    if re.search(r"(?<!no )\b(torch\.)?compile\b", tail):
        flags.add("torch.compile")
    # M012+: "chunked cross-entropy (CEWithChunkedOutputLoss)", M017: "chunked CE".
    if "chunked" in tail.lower():
        flags.add("chunked CE")
    # M001-M008: the README's table runs the recipe configs it names ("Config recipes/configs/
    # ..."); every stored version of those torchtune configs sets CEWithChunkedOutputLoss (later
    # LinearCrossEntropyLoss), which never materialises full fp32 logits.
    # Not the cumulative table (M009-M018): there chunked CE starts where a row adds it (M012);
    # the rows before it ran torch's full cross-entropy on materialised fp32 logits.
    if (
        "torchtune" in row.source_url
        and "README.md" in row.source_url
        and _CUMULATIVE not in row.notes
    ):
        flags.add("chunked CE")
        # M006-M008 (FSDP): the 70B/405B recipe configs the notes cite (70B_full.yaml,
        # 70B_lora.yaml, 405B qlora) set `custom_sharded_layers: ['tok_embeddings', 'output']`:
        # embedding and output are FSDP units of their own, resharded after use.
        if "fsdp" in row.zero_stage_or_fsdp.lower():
            flags.add("sharded embeddings")
    return frozenset(flags)


def framework_of(row: MeasuredRow) -> tuple[list[Feature], str]:
    """Whose model code ran the row: torchtune's recipes (its own MultiHeadAttention), or the
    transformers of the PEFT examples' dates (2023-2024: SDPA repeats GQA K/V). Training only."""
    if row.mode.startswith("infer"):
        return [], ""
    if "pytorch/torchtune" in row.source_url:
        return [Feature("torchtune", "framework", ("Framework", "torchtune"))], ""
    if "huggingface/peft" in row.source_url:
        return [Feature("hf-legacy", "framework", ("Framework", "hf-legacy"))], (
            "transformers of 2023-2024 (the PEFT commit's date): --framework hf-legacy"
        )
    return [], ""


def peft_example(row: MeasuredRow, spec: ModelSpec) -> tuple[list[Feature], list[str]]:
    """The PEFT README table's rows ran PEFT's accelerate example scripts (2023), whose loop is
    `outputs = model(**batch); ...; accelerator.backward(loss); optimizer.step();
    optimizer.zero_grad()` on a model whose config keeps use_cache: the previous step's outputs
    (logits, KV cache) live through the next forward, and
    accelerate before 0.28 called zero_grad(set_to_none=False) (accelerate#2471, fixed by #2472,
    2024-03) — except under DeepSpeed, whose engine owns the gradients. The seq2seq script pads
    the labels to the longest class label."""
    if "huggingface/peft" not in row.source_url or "README.md" not in row.source_url:
        return [], []
    features = [
        Feature("script loop", "loop", ("TrainLoop", "script")),
        Feature("use_cache", "use_cache", True),
    ]
    why = [
        "PEFT example script: `outputs = model(**batch)` loop, config use_cache left on → "
        "--loop script --use-cache"
    ]
    if "deepspeed" in row.zero_stage_or_fsdp.lower():
        # The table dates from PEFT's first release (2023-02): DeepSpeed 0.8, which all-gathered
        # ZeRO-3 parameters on one GPU too (0.9.0, 2023-04, added the one-rank path).
        features.append(Feature("DeepSpeed<0.9", "deepspeed_legacy", True))
        why.append("PEFT's 2023-02 README: DeepSpeed 0.8 → --deepspeed-version 0.8")
    if "deepspeed" not in row.zero_stage_or_fsdp.lower():
        features.append(Feature("accelerate<0.28 zero_grad", "keep_grads", True))
        why.append("accelerate < 0.28 zero_grad(set_to_none=False) → --keep-grads")
    if spec.structure is Structure.ENCODER_DECODER:
        features.append(Feature("labels 3 tokens", "target_len", 3))
        why.append(
            "seq2seq labels padded to the longest class label ('no complaint' + EOS): "
            "--target-len 3"
        )
    return features, why


def parse_unmodelled_flags(row: MeasuredRow) -> list[str]:
    """Other stated effects PlanRequest cannot express."""
    out: list[str] = []
    # M131: "increase at end from FULL_STATE_DICT save".
    if "FULL_STATE_DICT save" in row.notes:
        out.append("FULL_STATE_DICT save spike")
    # M158: "non-PyTorch NCCL allocations not profiled" (vLLM before PR #2031).
    if "not profiled" in row.notes:
        out.append("pre-#2031 vLLM: NCCL outside budget")
    return out


def parse_grad_accum(row: MeasuredRow) -> int:
    # M132: "batch 2, GA 2"; torchtune README rows: "no grad-accum".
    m = re.search(r"\bGA (\d+)", row.notes)
    return int(m.group(1)) if m else 1


# --- LoRA ------------------------------------------------------------------------------------

_ATTN = ("q", "k", "v", "o")


@dataclass(frozen=True, slots=True)
class LoraRule:
    rank: int
    parts: tuple[str, ...]  # generic: q k v o mlp output all-linear qkv(bloom fused)
    why: str


def parse_lora(row: MeasuredRow) -> LoraRule:
    notes = row.notes
    m = re.search(r"\br\s*=\s*(\d+)|rank (\d+)", notes)
    rank = int(next(g for g in m.groups() if g)) if m else 8
    if "all linear incl. output" in notes:
        # M020/M022: "LoRA layers all linear incl. output".
        return LoraRule(rank, ("all-linear", "output"), "all linear + output")
    if "all-linear" in notes:
        # M130-M134: "LoRA r=8 alpha=16 all-linear" (PEFT all-linear: every Linear but the head).
        return LoraRule(rank, ("all-linear",), "PEFT all-linear")
    if "q,k,v,o + MLP" in notes:
        # M005/M008/M023: "r=… on q,k,v,o + MLP".
        return LoraRule(rank, (*_ATTN, "mlp"), "q,k,v,o + MLP")
    if "q,v,o + MLP" in notes:
        # M017: "3B_lora_single_device: r=64 q,v,o + MLP".
        return LoraRule(rank, ("q", "v", "o", "mlp"), "q,v,o + MLP")
    if "3B_qlora_single_device r=64) same flags" in notes:
        # M018: "QLoRA (3B_qlora_single_device r=64) same flags"; that config sets
        # lora_attn_modules ['q_proj','v_proj','output_proj'] + apply_lora_to_mlp (as M017).
        return LoraRule(rank, ("q", "v", "o", "mlp"), "3B_qlora config: q,v,o + MLP")
    if "q,k,v" in notes:
        # M007: "LoRA r=16 on q,k,v".
        return LoraRule(rank, ("q", "k", "v"), "q,k,v")
    if "q,v" in notes:
        # M003/M019/M021: "… on q,v" / "LoRA layers q,v".
        return LoraRule(rank, ("q", "v"), "q,v")
    if "8B_lora_single_device default config" in notes:
        # M024: torchtune llama3/8B_lora_single_device: lora_attn_modules [q,v,output_proj],
        # apply_lora_to_mlp True, rank 8 (config as stored at a later commit).
        return LoraRule(8, ("q", "v", "o", "mlp"), "8B_lora default: q,v,o + MLP r=8")
    # PEFT README rows (M122-M129): "LoRA r=8 alpha=32", no targets → PEFT's default targets
    # for the model type (t5/mt5: q, v; bloom: query_key_value).
    return LoraRule(rank, ("peft-default",), "PEFT default targets")


def inherit_lora(row: MeasuredRow, rule: LoraRule, previous: LoraRule | None) -> LoraRule:
    """A torchtune README table row that states no LoRA details (M004: "AMBIGUOUS: A6000 flags
    not stated") runs the same recipe as the row before it for the same model and method (M003:
    "LoRA r=8 alpha=16 on q,v (8B_lora_single_device @30b8519)")."""
    if rule.parts == ("peft-default",) and "torchtune" in row.source_url and previous is not None:
        return LoraRule(previous.rank, previous.parts, f"as the previous row: {previous.why}")
    return rule


_GENERIC_TO_HF: dict[str, tuple[str, ...]] = {
    "q": ("q_proj", "q"),
    "k": ("k_proj", "k"),
    "v": ("v_proj", "v"),
    "o": ("o_proj", "o", "dense"),
    "mlp": ("gate_proj", "up_proj", "down_proj", "wi", "wi_0", "wi_1", "wo"),
}


def lora_targets(rule: LoraRule, model: ModelSpec) -> tuple[str, ...] | None:
    """Generic parts → the module names the catalog's ModelSpec uses for this model; None where
    the source states no targets: the planner applies PEFT's default for the model type, as
    PEFT does for ``target_modules=None`` (``BlockTraits.peft_targets``, layout.lora_targets)."""
    if rule.parts == ("peft-default",):
        return None
    names = [lin.name for layer in model.parameters.layers[:1] for lin in layer.linears]
    out: list[str] = []
    for part in rule.parts:
        if part == "all-linear":
            out.extend(n for n in names if n not in out)
        elif part == "output":
            out.append("lm_head")
        else:
            candidates = _GENERIC_TO_HF[part]
            found = [n for n in names if n in candidates]
            if not found:  # catalog without linears: HF Llama names
                found = list(candidates[:3] if part == "mlp" else candidates[:1])
            out.extend(found)
    return tuple(out)


def lora_dropout(row: MeasuredRow) -> list[Feature]:
    # PEFT README rows (M122-M129): the notes quote the README's LoraConfig "r=8 alpha=32"; that
    # README's LoraConfig is (r=8, lora_alpha=32, lora_dropout=0.1). Others state no dropout
    # (torchtune configs ship lora_dropout 0.0): PlanRequest's default 0.0 is kept.
    if "peft" in row.source_url and "README" in row.source_url and "r=8 alpha=32" in row.notes:
        return [Feature("lora_dropout 0.1", "lora_dropout", 0.1)]
    # PEFT docs rows (M130-M134): every launch command accelerate/deepspeed.md and fsdp.md quote
    # (run_peft_deepspeed.sh, run_peft_fsdp.sh, run_peft_qlora_*.sh) passes `--lora_dropout 0.1`.
    if "peft" in row.source_url and row.source_url.endswith(("/deepspeed.md", "/fsdp.md")):
        return [Feature("lora_dropout 0.1 (launch command)", "lora_dropout", 0.1)]
    return []


# --- sequence length and batch ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeqRule:
    seq_len: int | None  # None: data-dependent
    bracket: tuple[int, int] | None = None  # for data-dependent rows: (low, high) assumption
    why: str = ""


def parse_seq_len(row: MeasuredRow) -> SeqRule:
    text = row.seq_len.strip()
    if text.isdigit():
        # README: "numeric when every sample has that length, i.e. packed or padded".
        return SeqRule(int(text))
    if text.startswith("<="):
        # M009: "<=4096 (alpaca, unpacked: real lengths mostly short)" — the peak is set by the
        # longest batch of the epoch, which the source does not give. Bracket [256, stated max].
        high = int(re.findall(r"\d+", text)[0])
        return SeqRule(None, (256, high), f"data-dependent ≤{high}: bracket s=256..{high}")
    if "alpaca unpacked" in text:
        # M019-M024: "alpaca_cleaned unpacked (short samples)", no maximum stated. Assumed
        # bracket: s=256 (typical) .. 2048 (an upper bound of a batch's padded length; our
        # assumption, not the source's).
        return SeqRule(
            None, (256, 2048), "data-dependent, unbounded: bracket s=256..2048 (assumed)"
        )
    if text == "dataset-driven":
        # M158: vLLM benchmark_throughput with gpu_memory_utilization=0.9: the KV pool fills the
        # budget whatever the lengths, so the peak does not depend on them. Planner defaults used.
        return SeqRule(None, None, "dataset-driven; KV pool fills the 0.9 budget (lengths moot)")
    raise ValueError(f"{row.id}: unknown seq_len {row.seq_len!r}")


@dataclass(frozen=True, slots=True)
class InferRule:
    batch: int
    prompt_tokens: int
    new_tokens: int
    gpu_memory_utilization: float | None
    why: str
    features: tuple[Feature, ...] = ()


def parse_inference(row: MeasuredRow, seq: SeqRule) -> InferRule:
    if "profile run" in row.micro_batch:
        # M155/M156: vLLM "Memory profiling results": one forward over max_num_batched_tokens
        # (= seq_len column, 8192) tokens; KV pool then fills gpu_memory_utilization (default 0.9).
        # The logs are PR #10511's own (its branch, 0.6.4.post2.dev: the 0.6.4 release line).
        tokens = seq.seq_len or 8192
        version = "0.6.4" if "10511" in row.source_url else None
        features: tuple[Feature, ...] = (
            Feature(f"max_num_batched_tokens {tokens}", "max_num_batched_tokens", tokens),
        )
        if version is not None:
            features += (Feature(f"vLLM {version}", "vllm_version", version),)
        return InferRule(1, tokens, 0, 0.9, f"vLLM profile: 1×{tokens} tokens, util 0.9", features)
    # M158: "exceeded gpu_memory_utilization=0.9".
    m = re.search(r"gpu_memory_utilization=([0-9.]+)", row.notes)
    util = float(m.group(1)) if m else 0.9
    return InferRule(1, 512, 512, util, f"vLLM throughput run, util {util}")


# --- GPU --------------------------------------------------------------------------------------


def gpu_query(row: MeasuredRow) -> str | None:
    """The GPU as the row names it, or None when the source does not say which GPU."""
    text = row.gpu.strip()
    if not text or text.lower().startswith("unspecified") or text.endswith("GPUs"):
        # "unspecified (single GPU)", "unspecified (24GB class)", "24GB GPUs" ...
        return None
    return text


def resolve_gpu_for(row: MeasuredRow) -> tuple[GpuSpec | None, str]:
    query = gpu_query(row)
    if query is None:
        return None, f"GPU unspecified ({row.gpu})"
    try:
        from gpuwarden import catalog
    except ImportError as exc:  # pragma: no cover
        return None, f"catalog unavailable: {exc}"
    resolve = getattr(catalog, "resolve_gpu", None)
    if resolve is None:
        return None, "catalog.resolve_gpu missing"
    # "RTX 4090 24GB", "A100 80GB", "H100 80GB", "A100 40GB", "RTX A6000 48GB".
    m = re.match(r"(.+?)\s+(\d+)\s*GB$", query)
    candidates = [query]
    if m:
        candidates += [f"{m.group(1)}-{m.group(2)}GB", f"{m.group(1)} {m.group(2)}GB", m.group(1)]
    last = ""
    for cand in candidates:
        try:
            spec: GpuSpec = resolve(cand)
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        if m and spec.memory_bytes < int(m.group(2)) * 0.85 * 1e9:
            continue  # matched a smaller variant
        return spec, ""
    return None, f"GPU {query!r} not in catalog ({last.splitlines()[0] if last else '?'})"


# --------------------------------------------------------------------------------------------
# The mapping
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MappedRow:
    row: MeasuredRow
    kind: KindRule
    request: PlanRequest | None  # None when the row cannot be mapped (reason in `error`)
    bracket: tuple[PlanRequest, PlanRequest] | None = None  # data-dependent seq_len rows
    gpu_memory_bytes: int | None = None  # usable by a job (CUDA's total): the OOM classification
    eligible: bool = True  # counts in the error statistics
    exclusion: str = ""
    assumptions: tuple[str, ...] = ()
    unmodelled: tuple[str, ...] = ()
    settings: str = ""
    error: str = ""
    model_spec: ModelSpec | None = field(default=None, compare=False)


def _arch_name(row: MeasuredRow) -> str | None:
    # README: `arch_source` the model config in ../models/ (blank if none).
    if not row.arch_source.strip():
        return None
    return Path(row.arch_source).stem


def _settings_summary(req: PlanRequest, row: MeasuredRow, applied: list[str]) -> str:
    parts: list[str] = [req.precision.value]
    if req.mode is Mode.INFER:
        parts.append(f"tp{req.tp}" if req.tp > 1 else "tp1")
        parts.append(f"{req.batch}x{req.prompt_tokens}+{req.new_tokens}")
        if req.gpu_memory_utilization:
            parts.append(f"util{req.gpu_memory_utilization}")
    else:
        parts.append(req.optimizer.value)
        if req.mode in (Mode.LORA, Mode.QLORA):
            parts.append(
                f"r{req.lora_rank}:"
                + "/".join(t.removesuffix("_proj") for t in planned_lora_targets(req.model, req))
            )
        if req.zero_stage:
            parts.append(f"zero{req.zero_stage}")
        if req.fsdp:
            parts.append(f"fsdp-{req.fsdp.value}")
        if req.offload is not Offload.NONE:
            parts.append(f"offload:{req.offload.value}")
        parts.append(f"b{req.micro_batch}")
        parts.append(f"s{req.seq_len}" if row.seq_len.strip().isdigit() else "s=data")
        if req.grad_accum > 1:
            parts.append(f"ga{req.grad_accum}")
        parts.append(f"ac-{req.checkpointing.value}")
        parts.append(req.attention.value)
    parts.append(f"{req.num_gpus}gpu")
    parts.extend(f"+{label}" for label in applied if not label.startswith("max_num_batched"))
    return " ".join(parts)


def map_row(
    row: MeasuredRow,
    techniques: frozenset[str] = frozenset(),
    previous_lora: LoraRule | None = None,
) -> MappedRow:
    kind = measurement_kind(row)
    flag = flagged(row)
    name = _arch_name(row)
    if name is None:
        # M157: Llama-3.2-11B-Vision — no config in ../models/ (vision encoder, not in catalog).
        return MappedRow(
            row, kind, None, eligible=False, exclusion="no model config (arch_source blank)"
        )
    from gpuwarden.catalog import resolve_model

    try:
        spec = resolve_model(name)
    except Exception as exc:
        return MappedRow(
            row, kind, None, eligible=False, error=f"resolve_model: {type(exc).__name__}: {exc}"
        )

    assumptions: list[str] = []
    unmodelled: list[str] = []
    features: list[Feature] = []
    mode = parse_mode(row)
    precision, prec_notes = parse_precision(row)
    unmodelled.extend(prec_notes)
    features.extend(nf4_kernel(row))
    dq_features, dq_unstated = nf4_double_quant(row)
    features.extend(dq_features)
    unmodelled.extend(dq_unstated)
    optimizer, opt_features = parse_optimizer(row)
    features.extend(opt_features)
    sharding = parse_sharding(row)
    if sharding.assumption:
        assumptions.append(sharding.assumption)
    ckpt, ckpt_features, ckpt_assumption = parse_checkpointing(row)
    features.extend(ckpt_features)
    if ckpt_assumption:
        assumptions.append(ckpt_assumption)
    attention, attn_assumption = parse_attention(row)
    if attn_assumption:
        assumptions.append(attn_assumption)
    features.extend(TECHNIQUES[t] for t in sorted(techniques))
    fw_features, fw_assumption = framework_of(row)
    features.extend(fw_features)
    if fw_assumption:
        assumptions.append(fw_assumption)
    loop_features, loop_why = peft_example(row, spec)
    features.extend(loop_features)
    assumptions.extend(loop_why)
    unmodelled.extend(parse_unmodelled_flags(row))
    seq = parse_seq_len(row)
    if seq.why:
        assumptions.append(seq.why)
    gpu, gpu_note = resolve_gpu_for(row)
    if gpu_note:
        assumptions.append(gpu_note)

    kwargs: dict[str, object] = {
        "model": spec,
        "mode": mode,
        "gpu": gpu,
        "num_gpus": row.n_gpus,
        "precision": precision,
        "optimizer": optimizer,
        "zero_stage": sharding.zero_stage,
        "fsdp": sharding.fsdp,
        "offload": sharding.offload,
        "tp": row.tp,
        "pp": row.pp,
        "checkpointing": ckpt,
        "attention": attention,
        "grad_accum": parse_grad_accum(row),
    }
    if mode in (Mode.LORA, Mode.QLORA):
        rule = inherit_lora(row, parse_lora(row), previous_lora)
        kwargs["lora_rank"] = rule.rank
        kwargs["lora_targets"] = lora_targets(rule, spec)
        if rule.parts == ("peft-default",) or "config" in rule.why or "previous" in rule.why:
            assumptions.append(f"LoRA targets: {rule.why}")
        features.extend(lora_dropout(row))
    if mode is Mode.INFER:
        inf = parse_inference(row, seq)
        kwargs.update(
            batch=inf.batch,
            prompt_tokens=inf.prompt_tokens,
            new_tokens=inf.new_tokens,
            gpu_memory_utilization=inf.gpu_memory_utilization,
        )
        features.extend(inf.features)
        assumptions.append(inf.why)
    else:
        kwargs["micro_batch"] = _int(row.micro_batch, 1)
        kwargs["seq_len"] = seq.seq_len or (seq.bracket[1] if seq.bracket else 2048)

    # Stated settings → their knobs; a knob PlanRequest lacks makes the setting "unmodelled".
    knobs = _plan_knobs()
    applied: list[str] = []
    for feature in features:
        if feature.knob not in knobs:
            unmodelled.append(feature.label)
            continue
        try:
            kwargs[feature.knob] = _resolve_value(feature.value)
        except (LookupError, ValueError):
            unmodelled.append(feature.label)
            continue
        applied.append(feature.label)

    try:
        request = PlanRequest(**kwargs)  # type: ignore[arg-type]
    except Exception as exc:
        return MappedRow(row, kind, None, eligible=False, error=f"PlanRequest: {exc}")

    bracket = None
    exclusion = ""
    if seq.bracket is not None:
        low, high = seq.bracket
        bracket = (replace(request, seq_len=low), replace(request, seq_len=high))
        exclusion = "data-dependent seq_len"
    if flag:
        exclusion = f"{flag} (notes)"
    if kind.kind is Kind.OOM:
        exclusion = exclusion or "OOM: classification only"
    return MappedRow(
        row=row,
        kind=kind,
        request=request,
        bracket=bracket,
        gpu_memory_bytes=gpu.usable_bytes if gpu is not None else None,
        eligible=not exclusion,
        exclusion=exclusion,
        assumptions=tuple(assumptions),
        unmodelled=tuple(unmodelled),
        settings=_settings_summary(request, row, applied),
        model_spec=spec,
    )


def map_rows(path: Path | None = None) -> list[MappedRow]:
    out: list[MappedRow] = []
    previous: frozenset[str] = frozenset()
    lora: dict[tuple[str, str, str], LoraRule] = {}  # (source, model, mode) → last LoRA rule
    for row in load_rows(path):
        previous = technique_flags(row, previous)
        key = (row.source_url, row.model, row.mode)
        mapped = map_row(row, previous, lora.get(key))
        if row.mode in ("finetune-lora", "qlora"):
            lora[key] = inherit_lora(row, parse_lora(row), lora.get(key))
        out.append(mapped)
    return out


if __name__ == "__main__":
    for mapped in map_rows():
        r = mapped.row
        print(f"{r.id} {r.model} [{mapped.kind.kind.value}] {mapped.settings or mapped.error}")
        if mapped.exclusion:
            print(f"    excluded: {mapped.exclusion}")
        for a in mapped.assumptions:
            print(f"    assumption: {a}")
        for u in mapped.unmodelled:
            print(f"    unmodelled: {u}")


# --------------------------------------------------------------------------------------------
# Validation rows (benchmarks/data/validation.csv): never used to choose a formula or constant
# --------------------------------------------------------------------------------------------

GB = 1e9  # LitGPT prints max_memory_allocated() / 1e9 "GB"


# The unit a source printed, as written in the row; anything else is a KeyError, never a guess.
# "MiB": pynvml's `used // 1024**2`, printed as "MB" by the transformers docs (V220-V229).
_GIB_PER_UNIT = {"GiB": 1.0, "GB": GB / 2**30, "MiB": 1 / 1024}


def validation_csv() -> Path:
    return Path(__file__).resolve().parent / "data" / "validation.csv"


def _validation_kind(what: str, oom: bool) -> KindRule:
    if oom:
        return KindRule(Kind.OOM, "OOM: predicted nvidia-smi > GPU memory")
    if what == "max_reserved":
        return KindRule(Kind.MAX_RESERVED, "torch.cuda.max_memory_reserved")
    if what.startswith("vllm profile"):
        # V205 (second batch): vLLM's worker log splits its profile into weights +
        # non_torch_memory + PyTorch activation peak, the same kind as measured.csv's M155-M157.
        return KindRule(Kind.VLLM_NON_KV, "weights + activation peak + non-torch")
    if what.startswith("nvidia-smi"):
        # V220-V229 (fourth batch): the transformers docs read NVML's used memory (pynvml
        # nvmlDeviceGetMemoryInfo) after training: context + the allocator's pool, the same kind
        # as measured.csv's nvidia-smi rows (M130-M134). Without this rule they fell through to
        # max_allocated, which leaves the context and the cache out.
        return KindRule(Kind.NVIDIA_SMI, "NVML used (context + NCCL + allocator cache)")
    if what.startswith("vllm weights"):
        # V209 (third batch): vLLM V1 logs only "Model loading took X GiB" (torch memory allocated
        # by the load, DeviceMemoryProfiler / 2**30), no profile breakdown: compared with the
        # plan's own weights figure, never with the non-KV sum it is one term of. The load also
        # allocates the modules' buffers (the rotary cos/sin tables): the plan's "buffers".
        return KindRule(Kind.VLLM_WEIGHTS, "weights as loaded: parameters + buffers")
    if what.startswith("sglang weights"):
        # V310 (tenth batch): ModelRunner.load_model logs "Load weight end ... mem usage=X GB",
        # the free device memory before the load less after it (get_available_gpu_memory, bytes
        # / 2**30): the checkpoint's tensors and the buffers built with the model.
        return KindRule(Kind.SGLANG_WEIGHTS, "weights as loaded: parameters + buffers")
    return KindRule(Kind.MAX_ALLOCATED, "torch.cuda.max_memory_allocated")


# vLLM's own start-up lines that give the KV pool of one GPU in tokens, as rows quote them in
# `notes` (README, column `notes`). Block counts are multiplied by the row's --kv-block-size.
_VLLM_KV_TOKEN_LINES: tuple[tuple[re.Pattern[str], bool], ...] = (
    # V1 vllm/v1/core/kv_cache_utils.py: "GPU KV cache size: {num_tokens:,} tokens"
    (re.compile(r"GPU KV cache size: ([\d,]+) tokens"), False),
    # V0 executor_base / early V1 kv_cache_utils: "# GPU blocks: %d" ("# CUDA blocks" in V0 0.7)
    (re.compile(r"# (?:GPU|CUDA) blocks: (\d+)"), True),
    # V0 llm_engine / worker _verify_args refusal: num_gpu_blocks × block_size
    (
        re.compile(r"maximum number of tokens that can be stored in KV cache \((\d+)\)"),
        False,
    ),
)
# SGLang's (V310, tenth batch): the pool of one rank in tokens, never in pages.
_SGLANG_KV_TOKEN_LINES: tuple[tuple[re.Pattern[str], bool], ...] = (
    # mem_cache/memory_pool.py: "KV Cache is allocated. #tokens: N, K size: ..."
    (re.compile(r"KV Cache is allocated\. #tokens: ([\d,]+)"), False),
    # scheduler.py: "max_total_num_tokens=N, ..."
    (re.compile(r"max_total_num_tokens=(\d+)"), False),
)
_KV_TOKEN_LINES = {"vllm": _VLLM_KV_TOKEN_LINES, "sglang": _SGLANG_KV_TOKEN_LINES}
_KV_TOKEN_KIND = {"vllm": Kind.VLLM_KV_TOKENS, "sglang": Kind.SGLANG_KV_TOKENS}


@dataclass(frozen=True, slots=True)
class KvTokenRow:
    """A validation row whose quoted vLLM or SGLang log states the KV pool of one GPU in tokens."""

    mapped: MappedRow
    tokens: int
    quote: str  # the log text the figure was read from
    eligible: bool
    exclusion: str = ""


def logged_kv_tokens(notes: str, block_size: int, stack: str = "vllm") -> tuple[int, str] | None:
    """The KV pool in tokens from the first line of ``stack`` (vllm, sglang) in ``notes`` that
    states it."""
    for pattern, in_blocks in _KV_TOKEN_LINES[stack]:
        found = pattern.search(notes)
        if found is None:
            continue
        count = int(found.group(1).replace(",", ""))
        return (count * block_size if in_blocks else count), found.group(0)
    return None


def kv_token_rows(mapped_rows: list[MappedRow]) -> list[KvTokenRow]:
    """vLLM and SGLang rows whose notes quote the pool size, compared as kind ``vllm KV tokens``
    or ``sglang KV tokens``. The pool is what the GPU's budget leaves: a row is eligible only
    when its GPU is named."""
    out: list[KvTokenRow] = []
    for mapped in mapped_rows:
        request = mapped.request
        stack = stack_of_row(mapped)
        if request is None or stack not in _KV_TOKEN_LINES:
            continue
        logged = logged_kv_tokens(mapped.row.notes, request.kv_block_size, stack)
        if logged is None:
            continue
        flag = flagged(mapped.row)
        exclusion = (
            f"{flag} (notes)" if flag else ("" if request.gpu is not None else "GPU not named")
        )
        kind = KindRule(_KV_TOKEN_KIND[stack], "KV pool in tokens: plan.inference.kv_tokens")
        out.append(
            KvTokenRow(replace(mapped, kind=kind), logged[0], logged[1], not exclusion, exclusion)
        )
    return out


def arch_model_argument(arch_source: str) -> str:
    """The MODEL argument for a row's `arch_source`: a catalog name as written, or a config file
    path (ending in .json, e.g. tests/data/model_configs_heldout/X.json) read relative to the
    repository root, so the row plans the same whatever directory the script runs from."""
    name = arch_source.strip()
    if not name.endswith(".json") or Path(name).is_absolute():
        return name
    return str(Path(__file__).resolve().parents[1] / name)


def _cli_request(model: str, flags: str) -> PlanRequest:
    """The request `gpuwarden plan MODEL FLAGS` builds: the row's settings as a user types them."""
    import argparse
    import shlex

    from gpuwarden.cli.commands import plan as plan_cmd

    parser = argparse.ArgumentParser(prog="gpuwarden plan")
    plan_cmd.register(parser)
    args = parser.parse_args([arch_model_argument(model), *shlex.split(flags)])
    return plan_cmd.build_request(args)


def map_validation(path: Path | None = None) -> list[MappedRow]:
    """validation.csv rows → requests through the CLI's own flag parsing."""
    out: list[MappedRow] = []
    with (path or validation_csv()).open(newline="", encoding="utf-8") as f:
        for rec in csv.DictReader(f):
            value = rec["measured"].strip()
            oom = value.upper() == "OOM"
            gib = None if oom else float(value) * _GIB_PER_UNIT[rec["unit"]]
            row = MeasuredRow(
                id=rec["id"],
                model=rec["model"],
                params_b="",
                arch_source=rec["arch_source"],
                gpu=rec["gpu"],
                n_gpus=_int(rec["n_gpus"]),
                mode=rec["mode"],
                precision="",
                optimizer="",
                zero_stage_or_fsdp="",
                tp=1,
                pp=1,
                micro_batch="",
                seq_len="",
                grad_ckpt="",
                measured_gib=gib,
                what_was_measured=rec["what_was_measured"],
                source_url=rec["source_url"],
                notes=rec["notes"],
            )
            kind = _validation_kind(rec["what_was_measured"], oom)
            try:
                request = _cli_request(rec["arch_source"], rec["flags"])
            except (Exception, SystemExit) as exc:  # a row the CLI refuses is shown, not hidden
                out.append(MappedRow(row, kind, None, eligible=False, error=f"flags: {exc}"))
                continue
            flag = flagged(row)
            exclusion = f"{flag} (notes)" if flag else ("OOM: classification only" if oom else "")
            out.append(
                MappedRow(
                    row=row,
                    kind=kind,
                    request=request,
                    gpu_memory_bytes=request.gpu.usable_bytes if request.gpu else None,
                    eligible=not exclusion,
                    exclusion=exclusion,
                    settings=f"{rec['stack']}: {rec['flags']}",
                    model_spec=request.model,
                )
            )
    return out


def stack_of_row(mapped: MappedRow) -> str:
    """The stack a row ran on, for per-stack statistics (the request's --framework; vLLM for the
    calibration's inference rows)."""
    if mapped.request is None:
        return "?"
    if mapped.request.mode is Mode.INFER and mapped.request.serving_engine is Engine.SGLANG:
        return "sglang"
    if mapped.request.mode is Mode.INFER and mapped.request.gpu_memory_utilization is not None:
        return "vllm"
    return mapped.request.framework.value
