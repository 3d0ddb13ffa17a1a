"""HF ``config.json`` → ``ModelSpec``, dispatched on ``model_type`` to one normaliser per family.

Parameter counts are exact: they equal ``sum(p.numel() for p in model.parameters())`` of the
transformers 5.23 implementation (tied weights once), as checked for every bundled config in tests
(``tests/catalog/test_hf_parity.py``). The family modules live in ``catalog/families/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuwarden.catalog.families.bert import bert
from gpuwarden.catalog.families.deepseek import deepseek_v3
from gpuwarden.catalog.families.falcon import falcon
from gpuwarden.catalog.families.fields import Config
from gpuwarden.catalog.families.gpt2 import gpt2_like
from gpuwarden.catalog.families.llama import llama_like
from gpuwarden.catalog.families.modern import gemma3, granite, olmo2, starcoder2
from gpuwarden.catalog.families.moe2 import gpt_oss, llama4
from gpuwarden.catalog.families.neox import bloom, gpt_neox
from gpuwarden.catalog.families.phi import phi
from gpuwarden.catalog.families.qwen import qwen
from gpuwarden.catalog.families.t5 import t5
from gpuwarden.errors import InputError, InvalidConfigError
from gpuwarden.files import CaptureTooLargeError, read_capped
from gpuwarden.types.model import ModelSpec

__all__ = [
    "MAX_CONFIG_FILE_BYTES",
    "NORMALISERS",
    "Config",
    "Normaliser",
    "llama_like",
    "normalise",
    "read_config_text",
]

# As the hub client's limit for a fetched config.json: the largest real one is a few hundred KiB.
MAX_CONFIG_FILE_BYTES = 16 << 20


def read_config_text(path: Path) -> str:
    """A local config.json as text, read no further than MAX_CONFIG_FILE_BYTES (``/dev/zero`` or a
    pipe that never ends is cut there). Raises OSError and UnicodeDecodeError as reading does,
    InputError ``config-too-large`` past the limit."""
    try:
        raw, _ = read_capped(str(path), MAX_CONFIG_FILE_BYTES)
    except CaptureTooLargeError:
        raise InputError(
            f"{path}: larger than {MAX_CONFIG_FILE_BYTES >> 20} MiB, too large for a config.json",
            reference="config-too-large",
            hint="pass the model's config.json (a few KiB), not its weights or an archive",
        ) from None
    return raw.decode("utf-8")


Normaliser = Callable[[str, Config, str], ModelSpec]

NORMALISERS: dict[str, Normaliser] = {
    "bert": bert,
    "bloom": bloom,
    "deepseek_v2": deepseek_v3,
    "deepseek_v3": deepseek_v3,
    "falcon": falcon,
    "gemma": llama_like,
    "gemma2": llama_like,
    "gemma3": gemma3,
    "gemma3_text": gemma3,
    "gpt2": gpt2_like,
    "gpt_bigcode": gpt2_like,
    "gpt_oss": gpt_oss,
    "gpt_neox": gpt_neox,
    "granite": granite,
    "llama": llama_like,
    "llama4": llama4,
    "llama4_text": llama4,
    "mistral": llama_like,
    "mixtral": llama_like,
    "mt5": t5,
    "olmo2": olmo2,
    "phi": phi,
    "phi3": llama_like,
    "qwen2": llama_like,
    "qwen2_moe": qwen,
    "qwen3": qwen,
    "qwen3_moe": qwen,
    "starcoder2": starcoder2,
    "t5": t5,
}


def normalise(name: str, cfg: Config, source: str) -> ModelSpec:
    """Turn one HF config into a ``ModelSpec``; unknown families get a clear error."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise InvalidConfigError(
            f"{source}: no 'model_type' field, so the architecture is unknown"
            if model_type is None
            else f"{source}: field 'model_type' must be a string, got {model_type!r}",
            reference="config-field-missing" if model_type is None else "config-field-invalid",
            hint="an HF config.json names its architecture in 'model_type' (e.g. \"llama\")",
        )
    normaliser = NORMALISERS.get(model_type)
    if normaliser is None:
        raise InvalidConfigError(
            f"{source}: model_type {model_type!r} is not supported by the formula planner",
            reference="unsupported-architecture",
            hint=f"supported: {', '.join(sorted(NORMALISERS))}; `--exact` traces any HF model",
        )
    try:
        return normaliser(name, cfg, source)
    except InvalidConfigError as exc:
        # the field helpers name the field; the config is named here, once
        raise exc.about(source) from None
