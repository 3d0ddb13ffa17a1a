"""How close is `gpuwarden plan` to the truth? Three tables in one run.

(a) Saved activations: the formula planner vs the exact trace (FakeTensorMode) for 5 families ×
    3 shapes; (a') one block under torch.compile: the formula vs AOTAutograd's partitioner.
(b) Predicted vs measured for every row of shared/fixtures/memory/measured.csv, comparing each
    measurement with the prediction of the same kind (mapping rules: measured_rows.py).
(c) The same rows through accelerate's and DeepSpeed's estimators, side by side.
(d) VALIDATION: benchmarks/data/validation.csv, measurements never used to tune the planner.

Run:  python benchmarks/planner_accuracy.py   (progress on stderr, tables on stdout)
It reports; it never asserts: the exit code is 0 even when goals are missed.
Needs the `torch` extra for (a) and the `bench` extra for (c): pip install -e '.[torch,bench]'.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from anchors import (
    AnchorValue,
    accelerate_estimate,
    deepspeed_column_title,
    deepspeed_estimate,
)
from gpuwarden.types import Attention, Checkpointing, Mode, PlanRequest, Precision
from gpuwarden.units import GIB
from measured_rows import (
    Kind,
    KvTokenRow,
    MappedRow,
    flagged,
    kv_token_rows,
    map_rows,
    map_validation,
    stack_of_row,
)

_T0 = time.perf_counter()


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return text if len(text) <= 90 else text[:87] + "..."


# --------------------------------------------------------------------------------------------
# Table helpers
# --------------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown pipe table, padded so it also reads well in a terminal."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return "\n".join(lines)


def gib(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def pct(err: float | None) -> str:
    return "–" if err is None else f"{err:+.1f}%"


def rel_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured * 100.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class Stats:
    n: int
    median_abs: float
    p90_abs: float
    median_signed: float

    @classmethod
    def of(cls, errors: Sequence[float]) -> Stats:
        if not errors:
            return cls(0, float("nan"), float("nan"), float("nan"))
        abs_errors = [abs(e) for e in errors]
        return cls(
            len(errors),
            statistics.median(abs_errors),
            percentile(abs_errors, 0.9),
            statistics.median(errors),
        )

    def text(self) -> str:
        if self.n == 0:
            return "n=0"
        return (
            f"n={self.n}: median |error| {self.median_abs:.1f}%, "
            f"p90 |error| {self.p90_abs:.1f}%, median signed {self.median_signed:+.1f}%"
        )


# --------------------------------------------------------------------------------------------
# Public planner APIs (imported lazily: their absence is reported, not fatal)
# --------------------------------------------------------------------------------------------


def load_plan_memory() -> tuple[Callable[[PlanRequest], Any] | None, str]:
    try:
        from gpuwarden.planner import plan_memory
    except Exception as exc:
        return None, short_error(exc)
    return plan_memory, ""


def load_run_exact() -> tuple[Callable[..., Any] | None, str]:
    try:
        from gpuwarden.planner import run_exact
    except Exception:
        try:
            from gpuwarden.planner.exact import run_exact
        except Exception as exc:
            return None, short_error(exc)
    return run_exact, ""


# --------------------------------------------------------------------------------------------
# (a) activations: formula vs exact trace
# --------------------------------------------------------------------------------------------

FAMILIES = (
    "Llama-2-7b-hf",
    "Mistral-7B-v0.1",
    "Qwen2.5-7B",
    "Phi-3-mini-4k-instruct",
    "Mixtral-8x7B-v0.1",
)
SHAPES = ((1, 512), (2, 2048), (1, 4096))  # (micro_batch, seq_len)


def activation_request(model_name: str, batch: int, seq: int) -> PlanRequest:
    from gpuwarden.catalog import resolve_model

    return PlanRequest(
        model=resolve_model(model_name),
        mode=Mode.TRAIN,
        num_gpus=1,
        precision=Precision.BF16,
        micro_batch=batch,
        seq_len=seq,
        checkpointing=Checkpointing.NONE,
        attention=Attention.SDPA,
    )


def formula_saved_bytes(plan: Any) -> int:
    """What of the formula is comparable with saved-for-backward bytes: the activations term."""
    return int(plan.component("activations"))


def table_a(families: Sequence[str], shapes: Sequence[tuple[int, int]], trace: bool = True) -> str:
    header = (
        "(a) Saved activations per GPU: train, pure bf16, SDPA, no checkpointing, 1 GPU.\n"
        "    formula = plan_memory(req).component('activations'): the saved-for-backward term,\n"
        "              incl. what the loss keeps (fp32 log-softmax); the plan's separate 'logits'\n"
        "              component (transient bf16/fp32 logits around the loss) is NOT included.\n"
        "    exact   = run_exact(req).saved_activation_bytes: unique storages saved for backward\n"
        "              by the forward incl. the loss (FakeTensorMode trace of the HF model).\n"
        "    Neither counts weights, gradients, optimizer states, temporaries or the allocator."
    )
    plan_memory, plan_err = load_plan_memory()
    run_exact, exact_err = load_run_exact() if trace else (None, "skipped (--skip-exact)")
    rows: list[list[str]] = []
    errors: list[float] = []
    failures = 0
    for name in families:
        for batch, seq in shapes:
            shape = f"b={batch} s={seq}"
            progress(f"(a) {name} {shape}")
            try:
                req = activation_request(name, batch, seq)
            except Exception as exc:
                rows.append([name, shape, "–", "–", "–", "no", f"model: {short_error(exc)}"])
                failures += 1
                continue
            formula: float | None = None
            exact: float | None = None
            notes: list[str] = []
            if plan_memory is None:
                notes.append(f"planner: {plan_err}")
            else:
                try:
                    formula = formula_saved_bytes(plan_memory(req)) / GIB
                except Exception as exc:
                    notes.append(f"formula: {short_error(exc)}")
            if run_exact is None:
                notes.append(f"exact: {exact_err}")
            else:
                try:
                    t = time.perf_counter()
                    report = run_exact(req)
                    exact = report.saved_activation_bytes / GIB
                    notes.append(f"trace {time.perf_counter() - t:.1f}s")
                except Exception as exc:
                    notes.append(f"exact failed: {short_error(exc)}")
            err = None
            if formula is not None and exact is not None and exact > 0:
                err = rel_error(formula, exact)
                errors.append(err)
            else:
                failures += 1
            within = "–" if err is None else ("yes" if abs(err) <= 2.0 else "no")
            rows.append([name, shape, gib(formula), gib(exact), pct(err), within, "; ".join(notes)])
    ok = sum(1 for e in errors if abs(e) <= 2.0)
    summary = (
        f"Summary (a): {ok}/{len(errors)} compared cells within 2% "
        f"({failures} of {len(rows)} cells without a comparison); "
        + (
            f"median |error| {statistics.median(abs(e) for e in errors):.2f}%, "
            f"max |error| {max(abs(e) for e in errors):.2f}%."
            if errors
            else "no comparison possible."
        )
    )
    return "\n".join(
        [
            header,
            "",
            table(
                ["model", "shape", "formula GiB", "exact GiB", "error %", "within 2%", "note"],
                rows,
            ),
            "",
            summary,
        ]
    )


# --------------------------------------------------------------------------------------------
# (a') torch.compile: the formula's compile terms vs the min-cut partitioner
# --------------------------------------------------------------------------------------------

# table (a)'s families and two GELU families: Phi-2 (Python tanh-GELU, LayerNorm, parallel
# block) and Gemma (torch's own tanh-GELU in a gated MLP)
COMPILED_FAMILIES = (*FAMILIES, "phi-2", "gemma-2b")


def formula_block_bytes(plan: Any) -> int:
    """The plan's saved activations of its largest block kind, one micro-batch."""
    facts = next(c.facts for c in plan.components if type(c.facts).__name__ == "ActivationFacts")
    return int(max(facts.per_block_bytes.values()))


def _compiled_cells(req: PlanRequest) -> tuple[float | None, float | None, str]:
    """(formula, partitioner) bytes per token of one block, and a note."""
    from gpuwarden.planner import plan_memory
    from gpuwarden.planner.exact import compiled_block

    tokens = req.micro_batch * req.seq_len
    formula = formula_block_bytes(plan_memory(req)) / tokens
    t = time.perf_counter()
    traced = compiled_block(req)
    return formula, traced.block_bytes / tokens, f"{traced.block} {time.perf_counter() - t:.1f}s"


def table_a_compiled(families: Sequence[str], shapes: Sequence[tuple[int, int]]) -> str:
    header = (
        "(a') One decoder block under torch.compile: train, pure bf16, SDPA, 1 GPU, bytes per "
        "token.\n"
        "    formula     = plan_memory(req, compile=True): the activations' per-block bytes.\n"
        "    partitioner = exact.compiled_block(req): the block traced under FakeTensorMode\n"
        "                  (CPU fakes, bf16) through AOTAutograd's min_cut_rematerialization_\n"
        "                  partition(compiler='inductor'); the backward graph's saved inputs by\n"
        "                  storage, parameters and shared RoPE tables / masks left out."
    )
    rows: list[list[str]] = []
    errors: list[float] = []
    for name in families:
        for batch, seq in shapes:
            shape = f"b={batch} s={seq}"
            progress(f"(a') {name} {shape}")
            try:
                req = replace(activation_request(name, batch, seq), compile=True)
                formula, traced, note = _compiled_cells(req)
            except Exception as exc:
                rows.append([name, shape, "–", "–", "–", short_error(exc)])
                continue
            err = rel_error(formula, traced) if formula is not None and traced else None
            if err is not None:
                errors.append(err)
            rows.append([name, shape, f"{formula:,.0f}", f"{traced:,.0f}", pct(err), note])
    summary = (
        f"Summary (a'): {sum(1 for e in errors if abs(e) <= 0.5)}/{len(errors)} cells within "
        f"0.5%; max |error| {max(abs(e) for e in errors):.2f}%."
        if errors
        else "Summary (a'): no comparison possible."
    )
    return "\n".join(
        [
            header,
            "",
            table(
                ["model", "shape", "formula B/tok", "partitioner B/tok", "error %", "note"], rows
            ),
            "",
            summary,
        ]
    )


# --------------------------------------------------------------------------------------------
# (b) predicted vs measured
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prediction:
    gib: float | None
    low: float | None = None  # bracket rows
    high: float | None = None
    error: str = ""
    reserved_gib: float | None = None
    verdict: str | None = None  # fits / tight / does-not-fit on the row's GPU


def predicted_bytes(plan: Any, kind: Kind) -> int:
    pred = plan.predicted
    if kind is Kind.MAX_ALLOCATED:
        return int(pred.max_allocated_bytes)
    if kind is Kind.MAX_ACTIVE:
        active = getattr(pred, "max_active_bytes", None)
        return int(pred.max_allocated_bytes if active is None else active)
    if kind is Kind.MAX_RESERVED:
        return int(pred.max_reserved_bytes)
    if kind in (Kind.NVIDIA_SMI, Kind.OOM):
        return int(pred.nvidia_smi_used_bytes)
    if kind is Kind.VLLM_NON_KV:
        # vLLM's profile = weights + PyTorch activation peak + non-torch memory: the planner's
        # own prediction of it (MemoryPlan.inference.non_kv_bytes) when it gives one, else
        # allocated-without-KV + non-torch (nvidia-smi − reserved: CUDA context, NCCL, ...).
        inference = getattr(plan, "inference", None)
        if inference is not None and getattr(inference, "non_kv_bytes", None):
            return int(inference.non_kv_bytes)
        non_torch = int(pred.nvidia_smi_used_bytes) - int(pred.max_reserved_bytes)
        return int(pred.max_allocated_bytes) - int(plan.component("kv_cache")) + non_torch
    if kind in (Kind.VLLM_WEIGHTS, Kind.SGLANG_WEIGHTS):
        # "model weights take" / "Model loading took" (vLLM), "Load weight end ... mem usage"
        # (SGLang): the memory the load took, i.e. the checkpoint's tensors and the buffers built
        # with the model (the rotary tables)
        return int(plan.component("parameters")) + int(plan.component("buffers"))
    raise ValueError(kind)


def predict(mapped: MappedRow, plan_memory: Callable[[PlanRequest], Any]) -> Prediction:
    kind = mapped.kind.kind
    try:
        if mapped.bracket is not None:
            lo_plan = plan_memory(mapped.bracket[0])
            hi_plan = plan_memory(mapped.bracket[1])
            return Prediction(
                None,
                predicted_bytes(lo_plan, kind) / GIB,
                predicted_bytes(hi_plan, kind) / GIB,
            )
        assert mapped.request is not None
        plan = plan_memory(mapped.request)
        return Prediction(
            predicted_bytes(plan, kind) / GIB,
            reserved_gib=int(plan.predicted.max_reserved_bytes) / GIB,
            verdict=plan.verdict.value if plan.verdict else None,
        )
    except Exception as exc:
        return Prediction(None, error=short_error(exc))


def verdict_lines(results: Sequence[RowResult]) -> list[str]:
    """The plan's verdict on every measured row with a known GPU, and whether each "fits" held
    (the measured peak within the GPU's usable memory)."""
    counts: dict[str, list[str]] = {}
    broken: list[str] = []
    for res in results:
        verdict = res.prediction.verdict
        if verdict is None or res.mapped.kind.kind is Kind.OOM:
            continue
        counts.setdefault(verdict, []).append(res.mapped.row.id)
        cap = gpu_memory_gib(res.mapped)
        measured = res.mapped.row.measured_gib
        if verdict == "fits" and cap is not None and measured is not None and measured > cap:
            broken.append(res.mapped.row.id)
    if not counts:
        return []
    seen = ", ".join(
        f"{v} {len(ids)}" + (f" ({' '.join(ids)})" if v != "fits" else "")
        for v, ids in sorted(counts.items())
    )
    held = (
        "every 'fits' held (measured ≤ usable)"
        if not broken
        else f"'fits' did not hold on {' '.join(broken)} (measured > usable)"
    )
    return [f"  verdicts on measured rows with a known GPU: {seen}; {held}"]


def gpu_memory_gib(mapped: MappedRow) -> float | None:
    if mapped.gpu_memory_bytes is not None:
        return mapped.gpu_memory_bytes / GIB
    import re

    m = re.search(r"(\d+)\s*GB", mapped.row.gpu)
    return float(m.group(1)) if m else None  # "80GB" cards have 80 GiB


@dataclass
class RowResult:
    mapped: MappedRow
    prediction: Prediction
    error_pct: float | None  # for eligible numeric rows
    oom_correct: bool | None = None


def evaluate(mapped_rows: Sequence[MappedRow]) -> tuple[list[RowResult], str]:
    plan_memory, plan_err = load_plan_memory()
    results: list[RowResult] = []
    for mapped in mapped_rows:
        progress(f"(b) {mapped.row.id} {mapped.row.model}")
        if mapped.request is None:
            results.append(RowResult(mapped, Prediction(None, error=mapped.error), None))
            continue
        if plan_memory is None:
            results.append(RowResult(mapped, Prediction(None, error=f"planner: {plan_err}"), None))
            continue
        pred = predict(mapped, plan_memory)
        err = None
        oom_ok = None
        measured = mapped.row.measured_gib
        if mapped.kind.kind is Kind.OOM:
            cap = gpu_memory_gib(mapped)
            if pred.gib is not None and cap is not None:
                oom_ok = pred.gib > cap
        elif pred.gib is not None and measured is not None:
            err = rel_error(pred.gib, measured)
        results.append(RowResult(mapped, pred, err, oom_ok))
    return results, plan_err


def oom_line(results: Sequence[RowResult]) -> str:
    """OOM classification over the rows that count (README: AMBIGUOUS / SUSPECT rows are shown
    but left out of the statistics); flagged OOM rows are named apart."""
    oom = [res for res in results if res.mapped.kind.kind is Kind.OOM]
    counted = [res for res in oom if flagged(res.mapped.row) is None]
    left_out = [res.mapped.row.id for res in oom if flagged(res.mapped.row) is not None]
    ok = sum(1 for res in counted if res.oom_correct)
    apart = f" (left out, flagged: {' '.join(left_out)})" if left_out else ""
    return f"  OOM classification: {ok}/{len(counted)} correct{apart}."


def _note_b(res: RowResult) -> str:
    mapped = res.mapped
    bits: list[str] = []
    if mapped.exclusion and mapped.kind.kind is not Kind.OOM:
        bits.append(f"excl.: {mapped.exclusion}")
    if mapped.unmodelled:
        bits.append("no knob: " + ", ".join(mapped.unmodelled))
    if res.prediction.error:
        bits.append(res.prediction.error)
    if mapped.row.what_was_measured.startswith("torchtune") and res.prediction.reserved_gib:
        bits.append(f"reserved pred {res.prediction.reserved_gib:.2f}")
    return "; ".join(bits)


def _pred_cells(res: RowResult) -> tuple[str, str]:
    pred = res.prediction
    measured = res.mapped.row.measured_gib
    if pred.low is not None and pred.high is not None:
        cell = f"{pred.low:.2f}–{pred.high:.2f}"
        if measured is None:
            return cell, "–"
        if pred.low <= measured <= pred.high:
            return cell, "in range"
        if measured < pred.low:
            return cell, f"{rel_error(pred.low, measured):+.1f}% (low end)"
        return cell, f"{rel_error(pred.high, measured):+.1f}% (high end)"
    if res.mapped.kind.kind is Kind.OOM:
        cap = gpu_memory_gib(res.mapped)
        verdict = "–" if res.oom_correct is None else ("OOM ✓" if res.oom_correct else "✗ fits")
        return gib(pred.gib), f"{verdict} (cap {gib(cap)})"
    if res.error_pct is None and pred.gib is not None and measured is not None:
        return gib(pred.gib), pct(rel_error(pred.gib, measured))
    return gib(pred.gib), pct(res.error_pct)


def table_b(results: Sequence[RowResult]) -> str:
    header = (
        "(b) Predicted vs measured, per GPU, GiB. Each measurement is compared with the\n"
        "    prediction of the same kind:\n"
        "    max_allocated → predicted.max_allocated; max_active and torchtune peak →\n"
        "    predicted.max_active (= max_allocated when the planner models no stream overlap);\n"
        "    max_reserved → predicted.max_reserved; nvidia-smi → predicted.nvidia_smi_used;\n"
        "    vllm non-KV → plan.inference.non_kv_bytes (weights + activation peak + non-torch);\n"
        "    OOM → correct when predicted nvidia_smi_used > the GPU's usable memory\n"
        "    (what CUDA gives a job: the nvidia-smi total less the driver's reservation).\n"
        "    error % = (predicted − measured) / measured.\n"
        "    Mapping rules: benchmarks/measured_rows.py."
    )
    rows: list[list[str]] = []
    for res in results:
        r = res.mapped.row
        measured = "OOM" if r.oom else f"{r.measured_gib:.2f}"
        pred_cell, err_cell = _pred_cells(res)
        rows.append(
            [
                r.id,
                r.model,
                r.mode,
                res.mapped.settings or "–",
                measured,
                res.mapped.kind.kind.value,
                pred_cell,
                err_cell,
                _note_b(res),
            ]
        )
    eligible = [
        res.error_pct for res in results if res.mapped.eligible and res.error_pct is not None
    ]
    expressible = [
        res.error_pct
        for res in results
        if res.mapped.eligible and res.error_pct is not None and not res.mapped.unmodelled
    ]
    not_predicted = [
        res.mapped.row.id
        for res in results
        if res.mapped.eligible and res.error_pct is None and res.mapped.kind.kind is not Kind.OOM
    ]
    excluded = [
        f"{res.mapped.row.id} ({res.mapped.exclusion or res.mapped.error or 'n/a'})"
        for res in results
        if not res.mapped.eligible and res.mapped.kind.kind is not Kind.OOM
    ]
    ran = [
        res
        for res in results
        if res.mapped.kind.kind is not Kind.OOM
        and res.prediction.gib is not None
        and gpu_memory_gib(res.mapped) is not None
        and res.mapped.kind.kind is Kind.NVIDIA_SMI
    ]
    stats = Stats.of(eligible)
    goal_median = stats.n > 0 and stats.median_abs <= 5.0
    goal_p90 = stats.n > 0 and stats.p90_abs <= 15.0
    lines = [
        header,
        "",
        table(
            [
                "id",
                "model",
                "mode",
                "settings",
                "measured GiB",
                "kind",
                "predicted GiB",
                "error %",
                "note",
            ],
            rows,
        ),
        "",
        f"Summary (b), eligible rows: {stats.text()} "
        f"(goal median ≤ 5%: {'met' if goal_median else 'missed'}; "
        f"p90 ≤ 15%: {'met' if goal_p90 else 'missed'}).",
        "  eligible rows whose settings PlanRequest fully expresses: "
        + Stats.of(expressible).text(),
        oom_line(results),
        *per_stack_lines(results, "calibration"),
    ]
    if ran:
        false_oom = [
            res.mapped.row.id for res in ran if res.prediction.gib > gpu_memory_gib(res.mapped)
        ]  # type: ignore[operator]
        lines.append(
            f"  nvidia-smi rows that ran but are predicted not to fit their GPU: "
            f"{len(false_oom)}/{len(ran)} {' '.join(false_oom)}"
        )
    lines += verdict_lines(results)
    if not_predicted:
        lines.append(f"  eligible but not predicted (planner error): {' '.join(not_predicted)}")
    lines.append(f"  left out of the statistics: {'; '.join(excluded) or 'none'}")
    lines.append("")
    lines.append("Row-mapping assumptions (beyond what the row's columns state):")
    for res in results:
        if res.mapped.assumptions:
            lines.append(f"  {res.mapped.row.id}: " + "; ".join(res.mapped.assumptions))
    return "\n".join(lines)


def per_stack_lines(results: Sequence[RowResult], label: str) -> list[str]:
    """Median and p90 |error| per stack (the request's --framework), eligible rows only."""
    by_stack: dict[str, list[float]] = {}
    for res in results:
        if res.mapped.eligible and res.error_pct is not None:
            by_stack.setdefault(stack_of_row(res.mapped), []).append(res.error_pct)
    lines = [f"  {label}, per stack:"]
    for stack, errors in sorted(by_stack.items()):
        lines.append(f"    {stack:<11} {Stats.of(errors).text()}")
    return lines


def source_label(url: str) -> str:
    """``repo file @commit`` of a GitHub blob URL (the page a row was read on)."""
    parts = url.split("/")
    if "blob" in parts:
        at = parts.index("blob")
        return f"{parts[at - 1]} {parts[-1]} @{parts[at + 1][:7]}"
    return url


def per_source_lines(results: Sequence[RowResult]) -> list[str]:
    """Median and p90 |error| per published source, eligible rows only."""
    by_source: dict[str, list[float]] = {}
    for res in results:
        if res.mapped.eligible and res.error_pct is not None:
            by_source.setdefault(source_label(res.mapped.row.source_url), []).append(res.error_pct)
    lines = ["  validation, per source:"]
    for source, errors in sorted(by_source.items()):
        lines.append(f"    {source:<48} {Stats.of(errors).text()}")
    return lines


def table_d(results: Sequence[RowResult]) -> str:
    """Validation rows (benchmarks/data/validation.csv): measurements the planner was never
    tuned on, each mapped through the CLI flags a user of that stack would pass."""
    header = (
        "(d) VALIDATION: predicted vs measured on benchmarks/data/validation.csv, rows never\n"
        "    used to choose a formula or constant. Each row's `flags` column is the\n"
        "    `gpuwarden plan` command a user of that stack types for the stated settings;\n"
        "    LitGPT's 'GB' are 1e9 bytes (converted to GiB). Same comparison rules as (b)."
    )
    rows: list[list[str]] = []
    for res in results:
        r = res.mapped.row
        pred_cell, err_cell = _pred_cells(res)
        verdict = res.prediction.verdict or "–"
        rows.append(
            [
                r.id,
                r.model,
                stack_of_row(res.mapped),
                r.mode,
                "OOM" if r.oom else f"{r.measured_gib:.2f}",
                res.mapped.kind.kind.value,
                pred_cell,
                err_cell,
                verdict,
                _note_b(res),
            ]
        )
    eligible = [
        res.error_pct for res in results if res.mapped.eligible and res.error_pct is not None
    ]
    stats = Stats.of(eligible)
    lines = [
        header,
        "",
        table(
            [
                "id",
                "model",
                "stack",
                "mode",
                "measured GiB",
                "kind",
                "predicted GiB",
                "error %",
                "verdict",
                "note",
            ],
            rows,
        ),
        "",
        f"Summary (d), VALIDATION, eligible rows: {stats.text()} "
        f"(goal median ≤ 5%: {'met' if stats.n and stats.median_abs <= 5 else 'missed'}; "
        f"p90 ≤ 15%: {'met' if stats.n and stats.p90_abs <= 15 else 'missed'}).",
        *per_stack_lines(results, "validation"),
        *per_source_lines(results),
        oom_line(results),
        *verdict_lines(results),
    ]
    return "\n".join(lines)


def _kv_token_cells(kv: KvTokenRow, plan_memory: Callable[[PlanRequest], Any] | None) -> list[str]:
    """id, model, measured tokens, predicted tokens, error, quote / note for one row."""
    r = kv.mapped.row
    request = kv.mapped.request
    predicted = "–"
    err = "–"
    note = kv.exclusion
    if plan_memory is not None and request is not None and request.gpu is not None:
        try:
            tokens = int(plan_memory(request).inference.kv_tokens)
        except Exception as exc:
            note = "; ".join(n for n in (note, short_error(exc)) if n)
        else:
            predicted = f"{tokens:,}"
            err = pct(rel_error(tokens, kv.tokens))
    return [r.id, r.model, f"{kv.tokens:,}", predicted, err, f"'{kv.quote}'", note]


def table_d_kv(rows: Sequence[KvTokenRow]) -> str:
    """Validation rows whose quoted vLLM or SGLang log gives the KV pool in tokens: kinds `vllm KV
    tokens` and `sglang KV tokens`, compared with plan.inference.kv_tokens (rows without a named
    GPU are shown, not scored)."""
    plan_memory, _ = load_plan_memory()
    cells = [_kv_token_cells(kv, plan_memory) for kv in rows]
    errors = [
        rel_error(float(c[3].replace(",", "")), kv.tokens)
        for kv, c in zip(rows, cells, strict=True)
        if kv.eligible and c[3] != "–"
    ]
    header = (
        "(d) KV tokens: vLLM's and SGLang's pool of one GPU in tokens, read from the log lines\n"
        "    the rows quote ('GPU KV cache size: N tokens'; '# GPU blocks: N' × the row's block\n"
        "    size; V0's refusal 'maximum number of tokens that can be stored in KV cache (N)';\n"
        "    SGLang's 'KV Cache is allocated. #tokens: N' / 'max_total_num_tokens=N'), compared\n"
        "    with plan.inference.kv_tokens. Rows whose GPU is not named are shown, not scored."
    )
    return "\n".join(
        [
            header,
            "",
            table(
                ["id", "model", "logged tokens", "planned tokens", "error %", "log", "note"], cells
            ),
            "",
            f"Summary (d), KV tokens, eligible rows: {Stats.of(errors).text()}.",
        ]
    )


# --------------------------------------------------------------------------------------------
# (c) anchors
# --------------------------------------------------------------------------------------------


def _anchor_cells(value: AnchorValue, res: RowResult) -> tuple[str, float | None, bool | None]:
    if value.gib is None:
        return value.label, None, None
    measured = res.mapped.row.measured_gib
    if res.mapped.kind.kind is Kind.OOM:
        cap = gpu_memory_gib(res.mapped)
        ok = None if cap is None else value.gib > cap
        verdict = "–" if ok is None else ("OOM ✓" if ok else "✗ fits")
        return f"{value.gib:.2f} {verdict} [{value.label}]", None, ok
    if measured is None:
        return f"{value.gib:.2f} [{value.label}]", None, None
    err = rel_error(value.gib, measured)
    return f"{value.gib:.2f} ({err:+.0f}%) [{value.label}]", err, None


def table_c(results: Sequence[RowResult]) -> str:
    ds_title = deepspeed_column_title()
    header = (
        "(c) The same rows through the public estimators (per GPU, GiB, error vs measured).\n"
        "    accelerate = `accelerate estimate-memory` internals on the bundled config (AutoModel\n"
        "    on init_empty_weights, as its CLI builds it: no LM head): 'Training using Adam' =\n"
        "    max over its phases (fp16 row: 8·P_base bytes; fp32 row: 16·P_base) for full\n"
        "    training, 'Total Size' for inference; single-GPU rows only (it has no parallelism).\n"
        f"    {ds_title}: model states per GPU (true P; ZeRO-3 adds 4× the largest layer);\n"
        "    ZeRO rows, FSDP full-shard full training (≈ ZeRO-3) and unsharded full training\n"
        "    (ZeRO-2 with G = world size). Neither counts activations."
    )
    rows: list[list[str]] = []
    acc_err: list[float] = []
    ds_err: list[float] = []
    ds_err_full: list[float] = []
    ours_acc: list[float] = []
    ours_ds: list[float] = []
    ours_ds_full: list[float] = []
    oom_acc: list[bool] = []
    oom_ds: list[bool] = []
    for res in results:
        progress(f"(c) {res.mapped.row.id}")
        r = res.mapped.row
        try:
            acc = accelerate_estimate(res.mapped)
        except Exception as exc:
            acc = AnchorValue(None, f"failed: {short_error(exc)}")
        try:
            ds = deepspeed_estimate(res.mapped)
        except Exception as exc:
            ds = AnchorValue(None, f"failed: {short_error(exc)}")
        acc_cell, a_err, a_oom = _anchor_cells(acc, res)
        ds_cell, d_err, d_oom = _anchor_cells(ds, res)
        if a_oom is not None:
            oom_acc.append(a_oom)
        if d_oom is not None:
            oom_ds.append(d_oom)
        ours = res.error_pct
        if res.mapped.eligible:
            if a_err is not None:
                acc_err.append(a_err)
                if ours is not None:
                    ours_acc.append(ours)
            if d_err is not None:
                ds_err.append(d_err)
                if ours is not None:
                    ours_ds.append(ours)
                if r.mode == "train":
                    ds_err_full.append(d_err)
                    if ours is not None:
                        ours_ds_full.append(ours)
        ours_cell, ours_err = _pred_cells(res)
        rows.append(
            [
                r.id,
                r.model,
                r.mode,
                "OOM" if r.oom else f"{r.measured_gib:.2f}",
                res.mapped.kind.kind.value,
                f"{ours_cell} ({ours_err})" if ours_cell != "–" else "–",
                acc_cell,
                ds_cell,
                "" if res.mapped.eligible else f"excl.: {res.mapped.exclusion or 'not mapped'}",
            ]
        )
    lines = [
        header,
        "",
        table(
            [
                "id",
                "model",
                "mode",
                "measured GiB",
                "kind",
                "gpuwarden",
                "accelerate",
                ds_title,
                "note",
            ],
            rows,
        ),
        "",
        "Summary (c), eligible rows where the anchor gives a number:",
        f"  accelerate:  {Stats.of(acc_err).text()}",
        f"    gpuwarden on those rows: {Stats.of(ours_acc).text()}",
        f"  DeepSpeed:   {Stats.of(ds_err).text()}",
        f"    gpuwarden on those rows: {Stats.of(ours_ds).text()}",
        f"  DeepSpeed, full-training rows only: {Stats.of(ds_err_full).text()}",
        f"    gpuwarden on those rows: {Stats.of(ours_ds_full).text()}",
        f"  OOM classification: accelerate {sum(oom_acc)}/{len(oom_acc)}, "
        f"DeepSpeed {sum(oom_ds)}/{len(oom_ds)}.",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-exact", action="store_true", help="table (a) without traces")
    parser.add_argument(
        "--only", choices=["a", "b", "c", "d"], action="append", help="tables to print"
    )
    args = parser.parse_args(argv)
    only = set(args.only or ["a", "b", "c", "d"])
    out: list[str] = []
    try:
        if "a" in only:
            out.append(table_a(FAMILIES, SHAPES, trace=not args.skip_exact))
            if not args.skip_exact:
                out.append(table_a_compiled(COMPILED_FAMILIES, SHAPES))
        if only & {"b", "c"}:
            progress("mapping measured.csv rows")
            mapped = map_rows()
            results, _ = evaluate(mapped)
            if "b" in only:
                out.append(table_b(results))
            if "c" in only:
                out.append(table_c(results))
        if "d" in only:
            progress("mapping validation.csv rows")
            validation_rows = map_validation()
            validation, _ = evaluate(validation_rows)
            out.append(table_d(validation))
            out.append(table_d_kv(kv_token_rows(validation_rows)))
    except Exception:
        traceback.print_exc()
        out.append("benchmark aborted (traceback on stderr)")
    print("\n\n".join(out))
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
