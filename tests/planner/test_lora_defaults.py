"""LoRA's default targets are PEFT's for the model type, as PEFT applies them.

PEFT 0.21.2 (``tuners/lora/model.py`` ``LoraModel._prepare_adapter_config``) takes
TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING[model_type] whenever ``target_modules`` is
None, also where q_proj / v_proj exist (phi: + fc1, fc2), and finds nothing to adapt where the
mapping has no entry. ``PlanRequest.lora_targets`` None is that default; a request that names
targets keeps them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from gpuwarden.catalog import resolve_model
from gpuwarden.catalog.configs import normalise
from gpuwarden.catalog.traits import ROWS
from gpuwarden.cli.commands.plan import build_request, register
from gpuwarden.cli.main import main
from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner import plan_memory
from gpuwarden.planner.layout import (
    adapted_names,
    lora_parameters,
    lora_target_choice,
    lora_targets_note,
)
from gpuwarden.planner.validate import validate
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Framework, Mode, PlanRequest

ARCH = Path(__file__).resolve().parents[1] / "data" / "model_configs_heldout" / "arch"
PHI_PEFT = ("q_proj", "v_proj", "fc1", "fc2")  # PEFT 0.21.2 constants.py: "phi"


def _arch_spec(model_type: str) -> ModelSpec:
    return normalise(model_type, json.loads((ARCH / f"{model_type}.json").read_text()), model_type)


def _cli_request(*flags: str) -> PlanRequest:
    parser = argparse.ArgumentParser()
    register(parser)
    return build_request(parser.parse_args(["phi-1_5", "--mode", "lora", *flags]))


def test_the_cli_passes_none_without_the_flag_and_the_names_with_it() -> None:
    assert _cli_request().lora_targets is None
    assert _cli_request("--lora-targets", "q_proj,v_proj").lora_targets == ("q_proj", "v_proj")
    assert _cli_request("--lora-targets", " fc1 ,").lora_targets == ("fc1",)


def _plan_json(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["plan", "phi-1_5", "--mode", "lora", "--gpu", "H100", *flags, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_phi_json_echoes_pefts_default_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    kept = _plan_json(capsys)
    assert kept["request"]["lora_targets"] == list(PHI_PEFT)
    assert kept["notes"]["lora_targets"] == "q_proj, v_proj, fc1, fc2: PEFT's default for phi"
    chosen = _plan_json(capsys, "--lora-targets", "q_proj,v_proj")
    assert chosen["request"]["lora_targets"] == ["q_proj", "v_proj"]
    assert chosen["notes"]["lora_targets"] == "q_proj, v_proj: as requested"
    assert chosen["at_peak_bytes"]["activations"] < kept["at_peak_bytes"]["activations"]


def test_phi_trains_pefts_default_adapters_unless_targets_are_given() -> None:
    # phi-1_5: 24 blocks, hidden 2048, fc1/fc2 2048 <-> 8192; rank 8: r * (d_in + d_out) each
    spec = resolve_model("phi-1_5")
    qv = 8 * (2048 + 2048) * 2
    mlp = 8 * (2048 + 8192) * 2
    kept = plan_memory(PlanRequest(model=spec, mode=Mode.LORA))
    assert kept.request.lora_targets == PHI_PEFT
    assert kept.trainable_parameters == 24 * (qv + mlp) == 5_505_024
    chosen = plan_memory(PlanRequest(model=spec, mode=Mode.LORA, lora_targets=("q_proj", "v_proj")))
    assert chosen.request.lora_targets == ("q_proj", "v_proj")
    assert chosen.trainable_parameters == 24 * qv == 1_572_864


def test_a_type_without_a_peft_entry_keeps_q_and_v_and_says_so() -> None:
    spec = _arch_spec("qwen3_moe")
    request = PlanRequest(model=spec, mode=Mode.LORA)
    targets, why = lora_target_choice(spec, request)
    assert targets == ("q_proj", "v_proj")
    assert why == "PEFT has no default for qwen3_moe: q_proj, v_proj assumed"
    assert adapted_names(spec, request) == {"q_proj", "v_proj"}
    assert lora_parameters(spec, request) > 0


def test_a_type_without_a_peft_entry_nor_q_and_v_is_refused() -> None:
    spec = _arch_spec("mamba")  # in_proj, x_proj, dt_proj, out_proj; PEFT has no mamba entry
    with pytest.raises(InvalidConfigError) as caught:
        validate(PlanRequest(model=spec, mode=Mode.LORA))
    assert caught.value.reference == "lora-targets-unknown"
    assert validate(PlanRequest(model=spec, mode=Mode.LORA, lora_targets=("in_proj",))) == ()


@pytest.mark.parametrize(
    ("framework", "why"),
    [(Framework.LITGPT, "litgpt's own LoRA"), (Framework.TORCHTUNE, "torchtune's own LoRA")],
)
def test_stacks_with_their_own_lora_keep_query_and_value(framework: Framework, why: str) -> None:
    spec = resolve_model("phi-2")
    request = PlanRequest(model=spec, mode=Mode.LORA, framework=framework)
    targets, reason = lora_target_choice(spec, request)
    assert targets == ("q_proj", "v_proj")
    assert reason.startswith(why)


def test_the_planners_own_picks_are_types_peft_has_no_entry_for() -> None:
    pytest.importorskip("peft")
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFT

    own = {t for t, row in ROWS.items() if row.traits.peft_targets is not None and t not in PEFT}
    assert own == {"phi3"}
    spec = resolve_model("Phi-3-mini-4k-instruct")
    targets, why = lora_target_choice(spec, PlanRequest(model=spec, mode=Mode.LORA))
    assert targets == ("qkv_proj",)
    assert why == "PEFT has no default for phi3: its fused projection assumed"


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore::UserWarning")  # PEFT: GPT-2's Conv1D sets fan_in_fan_out
@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers: is_gradient_checkpointing
@pytest.mark.parametrize(
    "model_type", ["phi", "nemotron_h", "llama", "gpt2", "bloom", "gpt_neox", "qwen3_moe"]
)
def test_peft_adapts_the_linears_the_planner_plans(model_type: str) -> None:
    """PEFT itself, on the meta-device model of the same config, with target_modules=None."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    cfg = json.loads((ARCH / f"{model_type}.json").read_text())
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**cfg)
        )
    spec = _arch_spec(model_type)
    planned = adapted_names(spec, PlanRequest(model=spec, mode=Mode.LORA))
    if model_type not in peft.utils.constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING:
        with pytest.raises(ValueError, match="target_modules"):  # no entry: PEFT adapts nothing
            peft.get_peft_model(model, peft.LoraConfig(r=8))
        assert planned == {"q_proj", "v_proj"}  # the planner's assumption (layout.py)
        return
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=8))
    lora_layer = peft.tuners.lora.LoraLayer
    adapted = {
        n.rsplit(".", 1)[-1] for n, m in wrapped.named_modules() if isinstance(m, lora_layer)
    }
    assert adapted == planned


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("meta-llama/Llama-3.1-8B", "PEFT's default for llama"),  # its entry is q_proj, v_proj
        ("phi-1_5", "PEFT's default for phi"),
        ("Qwen/Qwen3-30B-A3B", "PEFT has no default for qwen3_moe: q_proj, v_proj assumed"),
        # PEFT maps the text-only Gemma 3 (gemma3_text) but not the multimodal gemma3
        ("gemma-3-1b-it", "PEFT's default for gemma3_text"),
        ("gemma-3-12b-it", "PEFT has no default for gemma3: q_proj, v_proj assumed"),
    ],
)
def test_the_note_says_whether_peft_has_a_default(model: str, why: str) -> None:
    """An entry of exactly q_proj, v_proj (llama) and no entry (qwen3_moe) plan the same
    adapters; the note tells them apart (catalog.traits.PEFT_DEFAULT_TYPES)."""
    spec = resolve_model(model)
    note = lora_targets_note(PlanRequest(model=spec, mode=Mode.LORA))["lora_targets"]
    assert note.split(": ", 1)[1] == why
