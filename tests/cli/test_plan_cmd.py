"""`gpuwarden plan`: human and JSON output, --fit, --exact, and every kind of bad input."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuwarden.cli.main import main
from gpuwarden.cli.options import element_count
from gpuwarden.types.plan import PlanRequest

TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "vocab_size": 1000,
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuwarden", *args], capture_output=True, text=True, check=False
    )


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["plan", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_every_knob_has_an_option() -> None:
    # build_request sets each knob from the option of the same name; only these three are read
    # from options named otherwise (--gpus, --zero, --deepspeed-version). A knob with neither
    # would keep its default whatever the user types.
    from gpuwarden.catalog import resolve_model
    from gpuwarden.cli.commands.plan import build_request, register

    parser = argparse.ArgumentParser()
    register(parser)
    args = parser.parse_args(["Llama-2-7b-hf"])
    knobs = {f.name for f in dataclasses.fields(PlanRequest)}
    assert knobs - set(vars(args)) == {"num_gpus", "zero_stage", "deepspeed_legacy"}
    # and the options' defaults are PlanRequest's own
    assert build_request(args) == PlanRequest(model=resolve_model("Llama-2-7b-hf"))


def test_human_output_breakdown_verdict_and_fixes() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--gpu", "A100 80GB", "--seq-len", "4096")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for text in ("parameters", "optimizer states", "activations", "runtime overhead", "share"):
        assert text in out
    assert "max_memory_allocated" in out and "nvidia-smi used" in out
    assert "DOES NOT FIT" in out and "A100 SXM4 80GB" in out
    assert "fixes" in out and "activation checkpointing" in out
    assert proc.stderr == ""


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--mode", "qlora"], "no checkpointing · LoRA r8 q_proj,v_proj"),
        (
            ["--mode", "lora", "--checkpointing", "full", "--lora-rank", "16"],
            "checkpointing full · LoRA r16 q_proj,v_proj",
        ),
        ([], "no checkpointing"),
    ],
)
def test_the_title_says_checkpointing_and_the_adapters(
    capsys: pytest.CaptureFixture[str], flags: list[str], said: str
) -> None:
    """Two plans 9 GiB apart had the same title: checkpointing was not in it."""
    assert main(["plan", "Llama-2-7b-hf", "--gpu", "L4", *flags]) == 0
    title = " ".join(capsys.readouterr().out.split("┏")[0].split())
    assert said in title


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys, "Llama-2-7b-hf", "--gpu", "A100 80GB", "--gpus", "8", "--zero", "3",
        "--seq-len", "4096", "--checkpointing", "full",
    )  # fmt: skip
    assert doc["schema"] == "gpuwarden.plan/1"
    per_gpu = doc["per_gpu_bytes"]
    for key in ("parameters", "gradients", "optimizer_states", "activations", "kv_cache"):
        assert isinstance(per_gpu[key], int)
    assert per_gpu["runtime_overhead"] > 0
    assert per_gpu["total"] == doc["predicted"]["nvidia_smi_used_bytes"]
    assert sum(doc["at_peak_bytes"].values()) == per_gpu["total"]
    predicted = doc["predicted"]
    assert predicted["max_allocated_bytes"] < predicted["max_reserved_bytes"]
    assert predicted["max_reserved_bytes"] < predicted["nvidia_smi_used_bytes"]
    # the verdict is against what CUDA gives a job (A100 80GB: 81251 of the 81920 MiB nvidia-smi
    # prints), with the margin to spare
    assert doc["gpu"]["memory_bytes"] == 81920 * 2**20
    assert doc["usable_bytes"] == doc["gpu"]["usable_bytes"] == 81251 * 2**20
    assert doc["fits"] is True and doc["verdict"] == "fits"
    assert doc["headroom_bytes"] == doc["usable_bytes"] - per_gpu["total"]
    assert doc["headroom_bytes"] >= doc["margin_bytes"] == int(0.1 * doc["usable_bytes"])
    assert doc["fixes"] == []
    assert doc["request"]["zero_stage"] == 3 and doc["request"]["num_gpus"] == 8
    # every knob is echoed, from PlanRequest itself
    assert set(doc["request"]) == {f.name for f in dataclasses.fields(PlanRequest)}
    assert doc["request"]["gpu"] == "a100-sxm4-80gb" and doc["request"]["lora_rank"] is None
    assert doc["model"]["parameters"] == 6_738_415_616
    assert doc["model"]["trainable_parameters"] == 6_738_415_616
    assert doc["peak_phase"] in {p["name"] for p in doc["phases"]}
    assert doc["sources"]["activations"]["source"].startswith("memory.md §2.5")
    assert doc["warnings"] == []
    assert doc["summary"].startswith("FITS") and doc["scale_out"] is None


def test_json_fixes_when_it_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "Llama-2-7b-hf", "--gpu", "L4", "--mode", "lora", "--seq-len", "4096")
    assert doc["fits"] is False
    assert doc["fixes"] and all(f["saved_bytes"] > 0 for f in doc["fixes"])
    assert any(f["key"] == "activation-checkpointing" and f["fits"] for f in doc["fixes"])
    assert doc["fixes"][0]["fits"] is True  # fixes that fit come first


def test_inference_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys, "Meta-Llama-3-8B", "--mode", "infer", "--gpu", "H100 80GB",
        "--gpu-memory-utilization", "0.9", "--prompt-tokens", "2048", "--new-tokens", "2048",
    )  # fmt: skip
    inf = doc["inference"]
    assert inf["kv_bytes_per_token"] == 128 * 1024 and inf["block_size"] == 16
    assert inf["max_sequences"] > 0 and doc["fits"] is True
    assert doc["per_gpu_bytes"]["kv_cache"] == inf["kv_pool_bytes"]


def test_config_json_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    doc = run_json(capsys, str(folder / "config.json"))
    assert doc["model"]["name"] == "tiny-llama"
    assert doc["model"]["parameters"] > 0


def test_fit_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys, "Llama-2-7b-hf", "--fit", "--gpu", "A100 80GB", "--gpu", "L4", "--max-gpus", "8",
        "--top", "3",
    )  # fmt: skip
    assert doc["schema"] == "gpuwarden.plan.fit/1"
    options = doc["options"]
    assert [o["rank"] for o in options] == [1, 2, 3]
    counts = [o["num_gpus"] for o in options]
    assert counts == sorted(counts)
    assert all(o["peak_bytes"] <= o["usable_bytes"] for o in options)
    assert options[0]["max_micro_batch"] >= 1


def test_fit_json_prices_per_gpu_hour_with_the_instance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = run_json(capsys, "Qwen2.5-0.5B", "--fit", "--gpu", "H200", "--gpu", "B200",
                   "--max-gpus", "1", "--top", "8")  # fmt: skip
    options = doc["options"]
    priced = [o for o in options if o["usd_per_hour"] is not None]
    assert priced and options[: len(priced)] == priced  # no price ranks last
    for o in priced:  # one GPU of an 8-GPU p5en.48xlarge at $84.80/hour
        assert (o["instance"], o["instance_gpus"]) == ("aws p5en.48xlarge", 8)
        assert o["usd_per_gpu_hour"] == o["usd_per_hour"] == pytest.approx(84.8 / 8)
        assert o["verdict"] == "fits" and o["headroom_bytes"] > 0
    unpriced = options[len(priced) :]
    assert unpriced and all(o["gpu"] == "b200-hgx-180gb" for o in unpriced)
    assert all(o["usd_per_gpu_hour"] is None and o["instance"] is None for o in unpriced)


def test_tight_verdict_json_and_human(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "Meta-Llama-3-8B", "--mode", "qlora", "--gpu", "L4")
    assert (doc["fits"], doc["verdict"]) == (False, "tight")
    assert doc["usable_bytes"] == doc["gpu"]["usable_bytes"] == 22478 * 2**20
    assert doc["gpu"]["memory_bytes"] == 23034 * 2**20
    assert doc["gpu"]["nominal_memory_bytes"] == 24 * 2**30
    assert 0 < doc["headroom_bytes"] < doc["margin_bytes"]
    assert "10%" in doc["verdict_rule"] and doc["summary"].startswith("TIGHT")
    assert any(f["verdict"] == "fits" for f in doc["fixes"])
    proc = run_cli("plan", "Meta-Llama-3-8B", "--mode", "qlora", "--gpu", "L4")
    assert proc.returncode == 0, proc.stderr
    assert "TIGHT" in proc.stdout and "21.95 GiB usable" in proc.stdout


def test_no_single_fix_answers_with_the_gpus_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "Llama-3.1-405B", "--gpu", "H100")
    assert doc["verdict"] == "does-not-fit"
    assert doc["scale_out"].startswith("no single change fits: it needs 64× H100 SXM5 80GB")
    assert "--fit" in doc["scale_out"]
    assert doc["fixes"][-1]["key"] == "needs-more-gpus"
    proc = run_cli("plan", "Llama-3.1-405B", "--gpu", "H100")
    assert "it needs 64× H100 SXM5 80GB" in " ".join(proc.stdout.split())


def test_zero3_gradients_detail_names_the_bytes_it_holds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ZeRO-3 holds the bf16 partition through backward, then the fp32 one at the step: the
    # component's peak is 4 B per parameter over the ranks, and the detail says so.
    doc = run_json(capsys, "Llama-2-7b-hf", "--gpu", "A100 80GB", "--gpus", "8", "--zero", "3")
    detail = doc["sources"]["gradients"]["detail"]
    assert detail.startswith("6,738,415,616 trainable × 4 B, sharded over 8")
    assert "fp32 copy" not in detail
    assert doc["per_gpu_bytes"]["gradients"] == pytest.approx(6_738_415_616 * 4 / 8, abs=8)


def test_fit_human() -> None:
    proc = run_cli("plan", "Qwen2.5-0.5B", "--fit", "--gpu", "L4", "--max-gpus", "2", "--top", "2")
    assert proc.returncode == 0, proc.stderr
    assert "configurations that fit" in proc.stdout and "L4" in proc.stdout


def test_zero_on_one_gpu_warns() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--zero", "2")
    assert proc.returncode == 0
    assert "no-op" in proc.stdout


@pytest.mark.parametrize(
    ("args", "reference", "named"),
    [
        (["Llama-2-7b"], "unknown-model", "Llama-2-7b-hf"),
        # the walk-through's typo: the org-style prefix is what people leave out
        (["Lama-3-8B"], "unknown-model", "'Meta-Llama-3-8B'"),
        (["Llama-2-7b-hf", "--gpu", "A100-90GB"], "unknown-gpu", "a100"),
        (["Llama-2-7b-hf", "--tp", "3", "--gpus", "3"], "tp-heads-mismatch", "32 attention heads"),
        (["Qwen2.5-7B", "--tp", "7", "--gpus", "7"], "tp-kv-heads-mismatch", "4 KV heads"),
        (["Llama-2-7b-hf", "--pp", "33", "--gpus", "33"], "pp-exceeds-layers", "32 layers"),
        (
            ["Llama-2-7b-hf", "--mode", "qlora", "--precision", "bf16"],
            "qlora-needs-4bit-base",
            "bf16",
        ),
        # named as the user typed them, not as the planner's knobs (micro_batch)
        (["Llama-2-7b-hf", "--micro-batch", "0"], "invalid-argument", "--micro-batch: 0"),
        (["Llama-2-7b-hf", "--seq-len", "-5"], "invalid-argument", "--seq-len: -5"),
        (["Llama-2-7b-hf", "--fit", "--tp", "3", "--gpus", "3"], "tp-heads-mismatch", "heads"),
    ],
)
def test_bad_input_exits_2_with_reference_and_hint(
    args: list[str], reference: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *args]) == 2
    err = capsys.readouterr().err
    assert f"error: {reference}" in err
    assert named in err and "hint:" in err
    assert "Traceback" not in err


def test_config_missing_fields(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    proc = run_cli("plan", str(path))
    assert proc.returncode == 2
    assert "error: config-field-missing" in proc.stderr and "num_hidden_layers" in proc.stderr
    assert "hint:" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_input_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Llama-2-7b-hf", "--pp", "99", "--gpus", "99", "--json"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["schema"] == "gpuwarden.error/1"
    assert error["reference"] == "pp-exceeds-layers" and error["hint"]


@pytest.mark.skipif(
    importlib.util.find_spec("gpuwarden.planner.exact") is None
    or importlib.util.find_spec("torch") is None,
    reason="exact mode (gpuwarden.planner.exact + the torch extra) is not installed",
)
def test_exact_shows_formula_next_to_exact(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    proc = run_cli(
        "plan", str(path), "--exact", "--precision", "bf16", "--attention", "sdpa",
        "--seq-len", "256", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    exact = doc["exact"]
    assert exact["saved_activation_bytes"] > 0
    # The closed form and the trace agree on the saved activations (memory.md §2.5).
    formula = doc["per_gpu_bytes"]["activations"]
    assert formula == pytest.approx(exact["saved_activation_bytes"], rel=0.02)


def test_fsdp_shard_embeddings_option(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("Llama-3.1-70B", "--gpus", "8", "--fsdp", "full")
    plain = run_json(capsys, *base)
    own = run_json(capsys, *base, "--fsdp-shard-embeddings")
    assert plain["request"]["fsdp_shard_embeddings"] is False
    assert own["request"]["fsdp_shard_embeddings"] is True
    assert own["per_gpu_bytes"]["communication"] < plain["per_gpu_bytes"]["communication"]
    assert "custom_sharded_layers" in own["sources"]["communication"]["detail"]


def test_keep_grads_option_and_its_fix(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("Llama-2-7b-hf", "--precision", "bf16", "--gpu", "A100-40GB", "--seq-len", "1024")
    freed = run_json(capsys, *base)
    kept = run_json(capsys, *base, "--keep-grads")
    assert freed["request"]["keep_grads"] is False and kept["request"]["keep_grads"] is True
    forward = {p["name"]: p for p in kept["phases"]}["forward"]
    assert forward["bytes"]["gradients"] == 6_738_415_616 * 2  # every bf16 gradient
    fix = next(f for f in kept["fixes"] if f["key"] == "free-gradients-between-steps")
    assert fix["total_bytes"] == freed["per_gpu_bytes"]["total"]
    assert fix["saved_bytes"] == kept["per_gpu_bytes"]["total"] - freed["per_gpu_bytes"]["total"]
    assert not any(f["key"] == "free-gradients-between-steps" for f in freed["fixes"])


def test_human_output_names_the_framework() -> None:
    out = run_cli("plan", "Llama-3.2-3B", "--framework", "torchtune")
    assert out.returncode == 0, out.stderr
    assert "· torchtune" in out.stdout.splitlines()[0]
    assert "torchtune" not in run_cli("plan", "Llama-3.2-3B").stdout.splitlines()[0]


def test_framework_option(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3.2-3B (24 heads, 8 K/V heads), b2 s4096, no checkpointing: torchtune's copies of
    K and V for every head add 2 × 16 heads × 128 × 2 B per token and block."""
    base = ("Llama-3.2-3B", "--precision", "bf16", "--micro-batch", "2", "--seq-len", "4096")
    hf = run_json(capsys, *base, "--attention", "sdpa")
    tune = run_json(capsys, *base, "--attention", "sdpa", "--framework", "torchtune")
    legacy = run_json(capsys, *base, "--attention", "sdpa", "--framework", "hf-legacy")
    legacy_flash = run_json(capsys, *base, "--framework", "hf-legacy")
    compiled = run_json(capsys, *base, "--framework", "torchtune", "--compile")
    assert hf["request"]["framework"] == "hf" and tune["request"]["framework"] == "torchtune"
    copies = 2 * 16 * 128 * 2 * (2 * 4096) * 28
    act = "activations"
    assert tune["per_gpu_bytes"][act] - hf["per_gpu_bytes"][act] == copies
    assert legacy["per_gpu_bytes"][act] == tune["per_gpu_bytes"][act]
    # flash-attention 2 took grouped K/V; compiled, the copies stay saved (SDPA's backward reads
    # them: torch.compile's partitioner never recomputes them, tests/planner/
    # test_compiled_partition.py)
    assert legacy_flash["per_gpu_bytes"][act] == run_json(capsys, *base)["per_gpu_bytes"][act]
    hf_compiled = run_json(capsys, *base, "--compile")
    assert compiled["per_gpu_bytes"][act] - hf_compiled["per_gpu_bytes"][act] == copies


@pytest.mark.parametrize(
    "args",
    [
        ["--fit", "--top", "0"],
        ["--fit", "--max-gpus", "0"],
        ["--mode", "infer", "--new-tokens", "-1"],
    ],
)
def test_counts_out_of_range_are_usage_errors(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "Llama-2-7b-hf", *args]) == 2
    err = capsys.readouterr().err
    assert args[-2] in err and "Traceback" not in err


def test_bnb_version_and_double_quant(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("Llama-2-7b-hf", "--mode", "qlora", "--seq-len", "512", "--lora-dropout", "0.05")
    old = run_json(capsys, *args, "--bnb-version", "0.43.1", "--no-double-quant")
    new = run_json(capsys, *args, "--bnb-version", "0.43.2", "--no-double-quant")
    assert (old["request"]["quant_kernel"], new["request"]["quant_kernel"]) == (
        "bnb-legacy",
        "bnb",
    )
    assert old["request"]["double_quant"] is False
    assert "PR #1270" in old["notes"]["quant_kernel"]
    assert "PR #1270" in old["sources"]["activations"]["detail"]
    assert old["per_gpu_bytes"]["activations"] > new["per_gpu_bytes"]["activations"]
    dq = run_json(capsys, *args, "--quant-kernel", "bnb")
    # without double quantization each 4-bit weight costs 0.5625 B instead of 0.5159 B
    assert new["per_gpu_bytes"]["parameters"] > dq["per_gpu_bytes"]["parameters"]
    plain = run_json(capsys, "Llama-2-7b-hf", "--quant-kernel", "bnb-legacy")
    assert plain["request"]["quant_kernel"] is None  # not an NF4 job
    assert any("quant_kernel bnb-legacy" in w for w in plain["warnings"])


def test_deepspeed_version_picks_the_one_gpu_gather(capsys: pytest.CaptureFixture[str]) -> None:
    args = (
        "bloomz-7b1", "--mode", "lora", "--precision", "fp32", "--zero", "3",
        "--offload", "optimizer+params", "--lora-targets", "query_key_value", "--seq-len", "64",
    )  # fmt: skip
    old = run_json(capsys, *args, "--deepspeed-version", "0.8.3")
    new = run_json(capsys, *args, "--deepspeed-version", "0.9.0")
    default = run_json(capsys, *args)
    assert (old["request"]["deepspeed_legacy"], new["request"]["deepspeed_legacy"]) == (True, False)
    assert new["per_gpu_bytes"] == default["per_gpu_bytes"]
    # DeepSpeed 0.8 gathers the 250880 × 4096 fp32 embedding from a second GPU copy: 3.83 GiB
    extra = old["per_gpu_bytes"]["communication"] - new["per_gpu_bytes"]["communication"]
    assert extra == pytest.approx(250_880 * 4096 * 4, abs=8)
    assert "DeepSpeed < 0.9" in old["sources"]["communication"]["detail"]


def test_zero3_live_and_reuse_flags(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("Llama-2-70b-hf", "--gpus", "8", "--zero", "3", "--checkpointing", "full")
    default = run_json(capsys, *args)
    tuned = run_json(capsys, *args, "--zero3-max-live", "3e8", "--zero3-max-reuse", "300_000_000")
    assert (tuned["request"]["zero3_max_live"], tuned["request"]["zero3_max_reuse"]) == (
        300_000_000,
        300_000_000,
    )
    # 7e8 fewer bf16 elements gathered
    saved = default["per_gpu_bytes"]["communication"] - tuned["per_gpu_bytes"]["communication"]
    assert saved == 700_000_000 * 2
    plain = run_json(capsys, "Llama-2-7b-hf", "--zero3-max-live", "1e8")
    assert any("no effect without --zero 3" in w for w in plain["warnings"])


@pytest.mark.parametrize("value", ["-5", "1.5", "1e-3", "nan", "inf", "lots", "1e400", "-0.5"])
def test_zero3_max_live_rejects_non_counts(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "Llama-2-7b-hf", "--zero", "3", "--zero3-max-live", value]) == 2
    err = capsys.readouterr().err
    assert "--zero3-max-live" in err and "Traceback" not in err


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=24))
@example("1e9")
@example("1_000")
@example("²")
def test_element_count_never_raises_anything_else(text: str) -> None:
    try:
        value = element_count(text)
    except argparse.ArgumentTypeError:
        return
    assert value >= 0


def test_zero3_max_live_and_reuse_of_0_release_every_parameter_after_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """stage3_max_live_parameters / stage3_max_reuse_distance 0 (Axolotl's
    zero3_bf16_cpuoffload_all.json, many DeepSpeed examples): DeepSpeed takes them; the plan
    keeps only the largest tensor gathered, less than any positive setting."""
    args = ("Llama-2-7b-hf", "--zero", "3", "--gpus", "8")
    zero = run_json(capsys, *args, "--zero3-max-live", "0", "--zero3-max-reuse", "0")
    one = run_json(capsys, *args, "--zero3-max-live", "1e7", "--zero3-max-reuse", "1e7")
    assert (zero["request"]["zero3_max_live"], zero["request"]["zero3_max_reuse"]) == (0, 0)
    gathered = zero["per_gpu_bytes"]["communication"]
    assert 0 < gathered < one["per_gpu_bytes"]["communication"]


def test_deepspeed_version_unreadable_is_exit_2() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--zero", "3", "--deepspeed-version", "latest")
    assert proc.returncode == 2
    assert "deepspeed-version-unreadable" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


def test_bnb_version_unreadable_is_exit_2() -> None:
    proc = run_cli("plan", "Llama-2-7b-hf", "--mode", "qlora", "--bnb-version", "latest")
    assert proc.returncode == 2
    assert "bnb-version-unreadable" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


def test_human_output_names_the_4bit_kernel() -> None:
    proc = run_cli(
        "plan", "Llama-2-7b-hf", "--mode", "qlora", "--quant-kernel", "bnb-legacy",
        "--lora-dropout", "0.05",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "4-bit kernel: bitsandbytes < 0.43.2" in proc.stdout
    assert "4-bit weights: NF4 with double quantization" in proc.stdout


def test_script_loop_option_and_its_fix(capsys: pytest.CaptureFixture[str]) -> None:
    base = (
        "gpt2-xl",
        "--precision",
        "fp32",
        "--gpu",
        "T4",
        "--micro-batch",
        "4",
        "--seq-len",
        "1024",
    )
    trainer = run_json(capsys, *base)
    script = run_json(capsys, *base, "--loop", "script")
    cached = run_json(capsys, *base, "--loop", "script", "--use-cache")
    assert trainer["request"]["loop"] == "trainer" and script["request"]["loop"] == "script"
    assert cached["request"]["use_cache"] is True and script["request"]["use_cache"] is False
    logits = 4 * 1024 * 50257 * 4  # the previous step's fp32 logits
    cache = 48 * 2 * 4 * 1024 * 1600 * 4  # and, with use_cache, its 48 layers' K and V
    assert {p["name"]: p for p in script["phases"]}["forward"]["bytes"]["held_outputs"] == logits
    forward = {p["name"]: p for p in cached["phases"]}["forward"]
    assert forward["bytes"]["held_outputs"] == logits + cache
    assert "held_outputs" not in trainer["per_gpu_bytes"]
    fix = next(f for f in script["fixes"] if f["key"] == "drop-previous-outputs")
    assert fix["total_bytes"] == trainer["per_gpu_bytes"]["total"]
    assert not any(f["key"] == "drop-previous-outputs" for f in trainer["fixes"])
    assert any(f["key"] == "use-cache-off" for f in cached["fixes"])


def test_target_len_is_for_encoder_decoders() -> None:
    out = run_cli("plan", "Llama-3.2-1B", "--target-len", "8")
    assert out.returncode == 2
    assert "target-len-needs-encoder-decoder" in out.stderr
    assert "Traceback" not in out.stderr
    seq2seq = run_cli("plan", "T0_3B", "--seq-len", "512", "--target-len", "32")
    assert seq2seq.returncode == 0, seq2seq.stderr
    assert "512 → 32 tokens" in seq2seq.stdout.splitlines()[0]


def test_stack_profiles_fill_the_knobs_a_user_of_the_stack_does_not_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = run_json(
        capsys, "Llama-2-7b-hf", "--mode", "lora", "--framework", "litgpt", "--gpus", "2"
    )
    req = doc["request"]
    # LitGPT: bf16-true; several GPUs: FSDPStrategy with Block activation checkpointing
    assert (req["precision"], req["fsdp"], req["checkpointing"]) == ("bf16", "full", "full")
    doc = run_json(capsys, "Llama-3.1-8B", "--framework", "torchtitan", "--gpus", "8")
    assert doc["request"]["checkpointing"] == "op"
    assert doc["request"]["pp_microbatch_size"] == 1
    # an explicit flag wins over the profile
    doc = run_json(capsys, "Llama-3.1-8B", "--framework", "torchtitan", "--checkpointing", "full")
    assert doc["request"]["checkpointing"] == "full"


def test_lifecycle_flags_reach_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys,
        "Llama-2-13b-hf",
        "--gpus",
        "8",
        "--fsdp",
        "full",
        "--checkpointing",
        "full",
        "--save",
        "full-gpu",
        "--load-dtype",
        "bf16",
        "--eval-batch",
        "4",
    )
    names = [p["name"] for p in doc["phases"]]
    assert "checkpoint-save" in names and "evaluation" in names
    assert doc["peak_phase"] == "checkpoint-save"
    assert doc["request"]["save"] == "full-gpu"
    assert "checkpoint_save" in doc["notes"]


def test_stack_versions_and_their_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = ("Llama-3.1-70B", "--gpus", "64", "--tp", "8", "--pp", "8", "--micro-batch", "32")
    # torchtitan of 2024: no microbatch size filled in, the plan splits into one per stage
    doc = run_json(capsys, *pipeline, "--framework", "torchtitan-2024")
    assert doc["request"]["pp_microbatch_size"] is None
    assert "micro-batch(es) for 8 pipeline stages" not in " ".join(doc["warnings"])
    # --pp-microbatches is the count users of that version set: 32 / 8 = 4 per microbatch
    doc = run_json(capsys, *pipeline, "--framework", "torchtitan", "--pp-microbatches", "8")
    assert doc["request"]["pp_microbatch_size"] == 4
    assert main(["plan", *pipeline, "--pp-microbatches", "5"]) == 2
    assert "pp-microbatches-uneven" in capsys.readouterr().err
    # the float8 knobs of torchtitan's config reach the request
    doc = run_json(
        capsys,
        "Llama-3.1-8B",
        "--framework",
        "torchtitan",
        "--precision",
        "fp8",
        "--gpus",
        "8",
        "--float8-recompute-weight",
        "--float8-precompute-scales",
    )
    assert doc["request"]["float8_recompute_weight"] is True
    assert "precomputed scales" in doc["notes"]["float8"]
    # LitGPT pins bitsandbytes 0.42.0: its 4-bit Linears keep their input unless told otherwise
    doc = run_json(capsys, "Llama-2-7b-hf", "--mode", "qlora", "--framework", "litgpt")
    assert doc["request"]["quant_kernel"] == "bnb-legacy"
    doc = run_json(
        capsys,
        "Llama-2-7b-hf",
        "--mode",
        "qlora",
        "--framework",
        "litgpt",
        "--bnb-version",
        "0.45.0",
    )
    assert doc["request"]["quant_kernel"] == "bnb"


@settings(max_examples=100, deadline=None)
@given(local=st.integers(min_value=1, max_value=4096), count=st.integers(min_value=1, max_value=64))
def test_pp_microbatches_split_the_local_batch_evenly_or_say_why(local: int, count: int) -> None:
    from gpuwarden.cli.commands.plan import _pp_microbatch_size
    from gpuwarden.errors import InvalidConfigError

    args = argparse.Namespace(pp_microbatches=count, micro_batch=local, pp_microbatch_size=None)
    if local % count:
        with pytest.raises(InvalidConfigError) as err:
            _pp_microbatch_size(args, None)
        assert err.value.reference == "pp-microbatches-uneven"
    else:
        assert _pp_microbatch_size(args, None) == local // count


def test_cuda_version_picks_the_module_loading(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("bert-large-uncased", "--gpu", "V100-16GB", "--seq-len", "512", "--micro-batch", "4")
    old = run_json(capsys, *args, "--cuda-version", "11.2")
    new = run_json(capsys, *args, "--cuda-version", "11.7")
    default = run_json(capsys, *args)
    forced = run_json(capsys, *args, "--module-loading", "eager")
    assert (old["request"]["module_loading"], new["request"]["module_loading"]) == ("eager", "lazy")
    assert new["per_gpu_bytes"] == default["per_gpu_bytes"]
    assert forced["per_gpu_bytes"] == old["per_gpu_bytes"]
    # pytorch/pytorch PR #86509: 666,632,192 B eager vs 287,047,680 B lazy for one tensor
    extra = old["per_gpu_bytes"]["runtime_overhead"] - new["per_gpu_bytes"]["runtime_overhead"]
    assert extra == 666_632_192 - 287_047_680
    assert "eagerly" in old["notes"]["cuda_context"] and "cuda_context" not in new["notes"]
    assert "eagerly" in old["sources"]["runtime_overhead"]["detail"]


def test_cuda_version_unreadable_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "bert-large-uncased", "--cuda-version", "cu112"]) == 2
    err = capsys.readouterr().err
    assert "cuda-version-unreadable" in err and "torch.version.cuda" in err
    assert "Traceback" not in err
    # the version decides the loading, so both at once would contradict each other
    both = ["--cuda-version", "11.2", "--module-loading", "lazy"]
    assert main(["plan", "bert-large-uncased", *both]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_gpt_oss_is_planned_with_its_mxfp4_experts_unless_a_precision_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = ("openai/gpt-oss-20b", "--mode", "infer", "--gpu", "RTX-4090")
    stored = run_json(capsys, *job)
    assert stored["fits"] is True and stored["request"]["dequantize"] is False
    # the hub checkpoint's tensors: 13,761,264,768 B (model.safetensors.index.json total_size)
    assert stored["per_gpu_bytes"]["parameters"] == pytest.approx(13_761_264_768, abs=8)
    assert "MXFP4" in stored["notes"]["checkpoint_weights"]
    for extra in (("--precision", "bf16"), ("--dequantize",)):
        dequantized = run_json(capsys, *job, *extra)
        assert dequantized["request"]["dequantize"] is True and dequantized["fits"] is False
        assert dequantized["per_gpu_bytes"]["parameters"] == 2 * 20_914_757_184


def test_gpt_oss_human_output_names_the_checkpoint_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "gpt-oss-120b", "--mode", "infer", "--gpu", "H100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "checkpoint weights: routed experts as the checkpoint stores them" in out
    assert "FITS" in out


# --- checkpoints stored quantized (planner/checkpoint_formats.py) --------------------------------

QWEN_AWQ = {  # Qwen2.5-*-Instruct-AWQ's quantization_config (AutoAWQ GEMM)
    "bits": 4,
    "group_size": 128,
    "modules_to_not_convert": None,
    "quant_method": "awq",
    "version": "gemm",
    "zero_point": True,
}


def _quantized_config(tmp_path: Path, quantization: object) -> str:
    from gpuwarden.catalog import resolve_model

    config = {**resolve_model("Qwen2.5-7B").raw_config, "quantization_config": quantization}
    path = tmp_path / "qwen-quantized.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_an_awq_config_is_planned_as_stored_unless_a_precision_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = (_quantized_config(tmp_path, QWEN_AWQ), "--mode", "infer", "--gpu", "L4")
    stored = run_json(capsys, *job)
    assert stored["request"]["dequantize"] is False
    # 4-bit codes + an fp16 scale and a 4-bit zero per 128 inputs; embedding and head 16-bit
    assert stored["per_gpu_bytes"]["parameters"] / 2**30 == pytest.approx(5.19, abs=0.01)
    assert "AWQ 4-bit, group 128" in stored["notes"]["checkpoint_weights"]
    asked = run_json(capsys, *job, "--precision", "bf16")
    assert asked["request"]["dequantize"] is True
    assert asked["per_gpu_bytes"]["parameters"] == 2 * 7_615_616_512
    assert main(["plan", *job]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "checkpoint weights: block Linears as the checkpoint stores them, AWQ" in out


def test_fine_tuning_an_awq_checkpoint_names_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _quantized_config(tmp_path, QWEN_AWQ)
    assert main(["plan", path]) == 2  # full fine-tuning: the AWQ weights cannot train
    err = capsys.readouterr().err
    assert "prequantized-training" in err and "--precision bf16-mixed" in err
    assert "Traceback" not in err
    lora = run_json(capsys, path, "--mode", "lora")
    assert "PEFT trains the adapters" in lora["notes"]["checkpoint_weights"]
    assert run_json(capsys, path, "--precision", "bf16-mixed")["per_gpu_bytes"]["parameters"] > 0


@pytest.mark.parametrize(
    "quantization",
    [
        {"quant_method": "gptq", "bits": "four"},
        {"quant_method": "awq", "group_size": 0},
        {"quant_method": "fp8", "weight_block_size": [128]},
        {"quant_method": "bitsandbytes"},
        {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": []}}},
    ],
)
def test_an_unreadable_quantization_config_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], quantization: object
) -> None:
    path = _quantized_config(tmp_path, quantization)
    assert main(["plan", path, "--mode", "infer"]) == 2
    err = capsys.readouterr().err
    assert "invalid-quantization-config" in err and "quantization_config." in err
    assert "Traceback" not in err
    # the hint's way out: an explicit precision plans every weight in it
    assert main(["plan", path, "--mode", "infer", "--precision", "bf16"]) == 0


def test_an_unknown_quant_method_is_planned_16_bit_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _quantized_config(tmp_path, {"quant_method": "exl2", "bits": 4.65})
    doc = run_json(capsys, path, "--mode", "infer")
    assert doc["per_gpu_bytes"]["parameters"] == 2 * 7_615_616_512
    assert any("quantization ('exl2') is not modelled" in w for w in doc["warnings"])


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("gpt2", 1024),  # 1,024 learned positions
        ("models/bert-large-uncased.json", 512),
        ("Llama-2-7b-hf", 2048),  # a context of 4,096: the default stands
    ],
)
def test_the_default_sequence_fits_the_model_s_positions(
    capsys: pytest.CaptureFixture[str], fixtures: Path, model: str, tokens: int
) -> None:
    path = fixtures / model
    document = run_json(capsys, str(path) if path.is_file() else model, "--mode", "lora")
    assert document["request"]["seq_len"] == tokens
    assert document["warnings"] == []


def test_a_sequence_past_learned_positions_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_json(capsys, "gpt2", "--seq-len", "4096")
    (warning,) = [w for w in document["warnings"] if "learned positions" in w]
    assert "1,024 learned positions" in warning and "cannot run" in warning


@pytest.mark.parametrize(
    ("flags", "gpus"),
    [
        ([], 1),
        (["--tp", "2"], 2),
        (["--tp", "2", "--pp", "2"], 4),
        (["--tp", "2", "--gpus", "8"], 8),
    ],
)
def test_the_world_size_defaults_to_the_model_parallel_degree(
    capsys: pytest.CaptureFixture[str], flags: list[str], gpus: int
) -> None:
    """`--tp 2` alone is two GPUs (vLLM's --tensor-parallel-size 2 is): it was refused as
    "does not divide the 1 GPUs"."""
    args = ["plan", "Llama-3.1-8B", "--mode", "infer", "--gpu", "A100 80GB", *flags, "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["request"]["num_gpus"] == gpus


def test_a_world_size_the_model_parallel_degree_does_not_divide_names_gpus(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["plan", "Llama-3.1-8B", "--mode", "infer", "--gpu", "A100 80GB", "--tp", "2"]
    assert main([*args, "--gpus", "3", "--json"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["reference"] == "parallelism-mismatch" and "--gpus" in error["hint"]


def test_each_fix_s_trade_off_is_printed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """The trade-off cell kept one line and ended in "…" ("(saved = ca…"), even on a wide
    terminal: what a fix costs is read whole."""
    args = ["plan", "Llama-2-7b-hf", "--gpu", "L4", "--mode", "lora"]
    assert main([*args, "--json"]) == 0
    tradeoffs = [f["tradeoff"] for f in json.loads(capsys.readouterr().out)["fixes"]]
    assert main(args) == 0
    table = capsys.readouterr().out.split("fixes (each re-planned")[1]
    cells = [line.split("│")[-2].strip() for line in table.splitlines() if line.count("│") > 2]
    column = " ".join(" ".join(cells).split())
    assert tradeoffs and all(" ".join(t.split()) in column for t in tradeoffs), column
