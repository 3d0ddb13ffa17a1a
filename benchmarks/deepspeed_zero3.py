"""DeepSpeed ZeRO-3's gathered-parameter working set: ours vs DeepSpeed's own coordinator.

The planner's ZeRO-3 term says: the prefetcher keeps up to stage3_max_live_parameters (1e9)
elements gathered and stops after a whole tensor, so the peak is 1e9 + the largest tensor (at
most the model's non-persistent parameters). This runs DeepSpeed's real
PartitionedParameterCoordinator on the same models, on the CPU (one rank, gloo), for LoRA
training steps with parameters and optimizer offloaded (the PEFT README rows), and reads how
many parameter elements are gathered after every submodule fetch.

A full-size model does not fit this machine's memory, so each model is built with every width
divided by K (elements by K²) and every DeepSpeed threshold divided by K² too: the coordinator
only compares element counts, so the scaled run makes the same decisions; its counts are
multiplied back by K². Norm vectors scale by K, not K²; they stay under the persistence
threshold either way.

Run:  python benchmarks/deepspeed_zero3.py [--scale K] [--models a,b]   (needs deepspeed, peft
and transformers: pip install -e '.[torch,bench]'; about 1-2 min per model)
It reports; it never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner_accuracy import table

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "fixtures" / "models"
DEFAULT_MODELS = (
    "T0_3B",
    "mt0-xxl",
    "bloomz-7b1",
    "Llama-2-7b-hf",
    "Llama-3.1-8B",
    "Qwen2.5-0.5B",
    "Mixtral-8x7B-v0.1",
)
# DeepSpeed defaults (deepspeed/runtime/zero/config.py), in elements
MAX_LIVE = 1_000_000_000
MAX_REUSE = 1_000_000_000
PREFETCH = 50_000_000
PERSISTENCE = 100_000
BUCKET = 500_000_000
# widths divided by K; "d_kv" / "head_dim" keep the head count
_WIDTHS = ("d_model", "d_ff", "d_kv", "hidden_size", "n_embed", "intermediate_size", "head_dim")
_T0 = time.perf_counter()


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Measured:
    model: str
    peak: float  # gathered non-persistent elements, full-size
    where: str
    total: float  # all parameters of the scaled model × K²


def scaled_config(name: str, k: int) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((MODELS / f"{name}.json").read_text())
    for key in _WIDTHS:
        if isinstance(cfg.get(key), int):
            cfg[key] = max(1, cfg[key] // k)
    cfg["vocab_size"] = max(8, cfg["vocab_size"] // k)
    cfg.pop("architectures", None)
    cfg.pop("torch_dtype", None)
    cfg.pop("quantization_config", None)
    cfg["use_cache"] = True  # PEFT's example scripts leave it on
    return cfg


def measure(
    name: str, k: int, hf_auto: bool = False, max_live: int = MAX_LIVE, max_reuse: int = MAX_REUSE
) -> Measured:
    import deepspeed
    import torch
    import transformers
    from deepspeed.runtime.zero import partitioned_param_coordinator as ppc
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
    from peft import LoraConfig, TaskType, get_peft_model

    cfg = scaled_config(name, k)
    config = transformers.AutoConfig.for_model(**cfg)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    if seq2seq:
        config.decoder_start_token_id = getattr(config, "decoder_start_token_id", None) or 0
        config.pad_token_id = getattr(config, "pad_token_id", None) or 0
        model = transformers.AutoModelForSeq2SeqLM.from_config(config)
        task = TaskType.SEQ_2_SEQ_LM
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
        task = TaskType.CAUSAL_LM
    # PEFT's default targets where it has them (t5: q, v; bloom: query_key_value), else q/v_proj
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    targets = ["q_proj", "v_proj"] if "q_proj" in names else None
    lora = LoraConfig(task_type=task, r=8, lora_alpha=32, lora_dropout=0.1, target_modules=targets)
    model = get_peft_model(model, lora)
    s = 1.0 / (k * k)
    prefetch, persistence, bucket = PREFETCH, PERSISTENCE, BUCKET
    if hf_auto:
        # HF Trainer / accelerate fill "auto" from the full-size hidden size h:
        # prefetch 0.9·h², persistence 10·h, reduce bucket h²
        full = json.loads((MODELS / f"{name}.json").read_text())
        h = int(full.get("hidden_size") or full["d_model"])
        prefetch, persistence, bucket = int(0.9 * h * h), 10 * h, h * h
    ds_config = {
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1,
        "zero_force_ds_cpu_optimizer": False,
        "zero_optimization": {
            "stage": 3,
            "offload_param": {"device": "cpu"},
            "offload_optimizer": {"device": "cpu"},
            "stage3_max_live_parameters": int(max_live * s),
            "stage3_max_reuse_distance": int(max_reuse * s),
            "stage3_prefetch_bucket_size": int(prefetch * s),
            "stage3_param_persistence_threshold": int(persistence * s),
            "reduce_bucket_size": int(bucket * s),
        },
    }
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    params = list(engine.module.parameters())
    total = sum(p.ds_numel for p in params)
    seen: list[tuple[float, str]] = []
    original = ppc.PartitionedParameterCoordinator.fetch_sub_module

    def fetch(self: Any, module: Any, forward: bool) -> None:
        original(self, module, forward)
        gathered = sum(
            p.ds_numel
            for p in params
            if p.ds_status != ZeroParamStatus.NOT_AVAILABLE and not p.ds_persist
        )
        where = f"{'forward' if forward else 'backward'} {type(module).__name__}"
        seen.append((gathered, where))

    ppc.PartitionedParameterCoordinator.fetch_sub_module = fetch  # type: ignore[method-assign]
    try:
        peak = (0.0, "")
        # step 1 records the trace (no prefetch); from step 2 the coordinator prefetches
        for _step in range(3):
            seen.clear()
            ids = torch.randint(0, cfg["vocab_size"], (2, 64))
            mask = torch.ones_like(ids)
            labels = torch.randint(0, cfg["vocab_size"], (2, 3)) if seq2seq else ids
            out = engine(input_ids=ids, attention_mask=mask, labels=labels)
            engine.backward(out.loss)
            engine.step()
            peak = max(seen)
    finally:
        ppc.PartitionedParameterCoordinator.fetch_sub_module = original  # type: ignore[method-assign]
    return Measured(name, peak[0] / s, peak[1], total / s)


def ours(name: str, max_live: int = MAX_LIVE, max_reuse: int = MAX_REUSE) -> tuple[float, float]:
    """(gathered non-persistent elements, largest tensor) at full size, from plan_memory on the
    same job (fp32 LoRA, ZeRO-3, parameters and optimizer offloaded, one GPU)."""
    from gpuwarden.catalog import resolve_model
    from gpuwarden.planner import plan_memory
    from gpuwarden.planner.layout import layout
    from gpuwarden.planner.training import zero3_largest_tensor, zero3_persistent
    from gpuwarden.types.plan import Mode, Offload, PlanRequest, Precision

    spec = resolve_model(str(MODELS / f"{name}.json"))
    request = PlanRequest(
        model=spec,
        mode=Mode.LORA,
        precision=Precision.FP32,
        zero_stage=3,
        offload=Offload.OPTIMIZER_AND_PARAMS,
        micro_batch=2,
        seq_len=64,
        zero3_max_live=max_live,
        zero3_max_reuse=max_reuse,
    )
    plan = plan_memory(request)
    comm = {p.name: p.bytes_by_component.get("communication", 0) for p in plan.phases}
    gathered = (comm["forward"] - comm["optimizer-step"]) / 4  # fp32; the IPG bucket is in both
    persistent = zero3_persistent(spec, layout(request), 0)
    return gathered - persistent, zero3_largest_tensor(spec, layout(request), 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=8, help="widths divided by K (default 8)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument(
        "--max-live",
        type=float,
        default=MAX_LIVE,
        help="stage3_max_live_parameters, full size (default 1e9)",
    )
    parser.add_argument(
        "--max-reuse",
        type=float,
        default=MAX_REUSE,
        help="stage3_max_reuse_distance, full size (default 1e9)",
    )
    parser.add_argument(
        "--hf-auto",
        action="store_true",
        help='the "auto" values HF Trainer / accelerate write (prefetch 0.9·h², persistence 10·h)',
    )
    args = parser.parse_args(argv)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import deepspeed  # noqa: F401
        import peft  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(f"skipped: {exc.name} is not installed (pip install -e '.[torch,bench]')")
        return 0
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29517"), ("RANK", "0")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    rows = []
    for name in args.models.split(","):
        progress(f"{name}: DeepSpeed ZeRO-3, widths / {args.scale}")
        live, reuse = int(args.max_live), int(args.max_reuse)
        with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed logs to stdout
            got = measure(name, args.scale, args.hf_auto, live, reuse)
        mine, largest = ours(name, live, reuse)
        rows.append(
            [
                name,
                f"{got.total / 1e6:,.0f}",
                f"{largest / 1e6:,.0f}",
                f"{got.peak / 1e6:,.0f}",
                got.where,
                f"{mine / 1e6:,.0f}",
                f"{mine / got.peak:.3f}",
            ]
        )
    import deepspeed as ds

    print(
        f"Peak gathered ZeRO-3 parameters (M elements, full size), DeepSpeed {ds.__version__}'s "
        f"coordinator on models scaled 1/{args.scale} in width vs the planner "
        f"(stage3_max_live_parameters {args.max_live:.3g}, "
        f"stage3_max_reuse_distance {args.max_reuse:.3g}"
        f"{', HF auto prefetch/persistence' if args.hf_auto else ''}):"
    )
    print(
        table(
            [
                "model",
                "params (M)",
                "largest tensor (M)",
                "DeepSpeed peak (M)",
                "DeepSpeed peaks at",
                "ours (M)",
                "ours / DeepSpeed",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
