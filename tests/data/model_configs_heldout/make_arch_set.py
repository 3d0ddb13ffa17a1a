"""Write the architecture set: one default config.json per causal-LM model_type transformers knows.

For every ``model_type`` in ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (text decoders; the audio/vision
ones in ``NOT_TEXT`` are skipped) this writes ``arch/<model_type>.json``: the default configuration
of the type (``CONFIG_MAPPING[model_type]()``, usually the reference checkpoint's sizes) as
``save_pretrained`` would write it (``to_json_string(use_diff=True)``), with ``architectures``
naming the causal-LM class as a checkpoint's does. The truth is counted from that file exactly as
tests/catalog/test_hf_parity.py counts a bundled config: ``AutoConfig.for_model(model_type,
**cfg)`` then ``AutoModelForCausalLM.from_config`` on the meta device, ``sum(p.numel())`` (tied
weights once). It prints one CSV row per type (``arch/<type>.json,-,<params>,transformers-meta,``)
and the types it skipped with why; the ``expect`` column (read|refuse) is filled from what
``gpuwarden plan`` should do, by hand, in expected.csv.

Needs transformers and torch (cpu); run from the repository root:

    PYTHONPATH=src python tests/data/model_configs_heldout/make_arch_set.py [TYPE ...]

``--probe TYPE=BASE ...`` checks a candidate alias (catalog.configs.ALIASES: read TYPE's config
as family BASE) before it is added: it reads arch/TYPE.json (cut to 2 blocks, so it builds
fast) and its variants -- every boolean key flipped, every key dropped (the class default then
applies), bias and tying keys added -- with gpuwarden and with transformers, and prints each
variant gpuwarden reads with a count other than transformers' (a refusal is not a failure).

Versions of the committed set: transformers 5.24, torch 2.13 (cpu).
"""

from __future__ import annotations

import json
import signal
import sys
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import transformers
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

OUT = Path(__file__).resolve().parent / "arch"
# Causal-LM classes whose input is not text (speech, music, images): not what `plan` models.
NOT_TEXT = {
    "musicgen": "music decoder (audio codes)",
    "musicgen_melody": "music decoder (audio codes)",
    "moshi": "speech-text model (audio codes)",
    "whisper": "speech recognition decoder",
    "trocr": "OCR decoder of a vision encoder-decoder",
    "moss_transcribe_diarize": "speech transcription",
}
BUILD_SECONDS = 300  # the largest defaults (671B MoE) build on meta in well under this


class _BuildTimeoutError(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _BuildTimeoutError


def default_config_json(model_type: str) -> dict[str, Any]:
    """The config.json a checkpoint of the default configuration would carry."""
    config = transformers.CONFIG_MAPPING[model_type]()
    cfg: dict[str, Any] = json.loads(config.to_json_string(use_diff=True))
    cfg["model_type"] = model_type
    cfg["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]
    return cfg


def meta_parameters(cfg: dict[str, Any]) -> int:
    """Parameters of the causal LM this config.json builds, as test_hf_parity counts them."""
    kwargs = dict(cfg)
    model_type = kwargs.pop("model_type")
    kwargs.pop("architectures", None)
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


# Keys some families read for a bias or a tied head: added to probe whether the type uses them.
PROBE_KEYS = ("attention_bias", "mlp_bias", "bias", "qkv_bias", "use_bias", "tie_word_embeddings")


def variants(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Label → config: the config cut to 2 blocks, each boolean flipped, each key dropped."""
    base = dict(cfg)
    layers = cfg.get("num_hidden_layers")
    if isinstance(layers, int) and layers > 2:
        # per-block lists (layer_types, mlp_layer_types, ...) are cut with the blocks
        cut = {k: v[:2] for k, v in cfg.items() if isinstance(v, list) and len(v) == layers}
        base = {**cfg, **cut, "num_hidden_layers": 2}
    out = {"default": base}
    for key, value in cfg.items():
        if key in {"model_type", "architectures"}:
            continue
        if isinstance(value, bool):
            out[f"{key}={not value}"] = {**base, key: not value}
        out[f"-{key}"] = {k: v for k, v in base.items() if k != key}
    for key in PROBE_KEYS:
        for value in (True, False):
            if base.get(key) is not value:
                out[f"{key}={value}"] = {**base, key: value}
    return out


def probe(model_type: str, family: str) -> list[str]:
    """The variants of arch/<model_type>.json that gpuwarden, reading them as ``family``,
    counts differently from transformers."""
    from gpuwarden.catalog import configs
    from gpuwarden.errors import InputError

    configs.ALIASES[model_type] = configs.ALIASES.get(model_type) or configs.Alias(family)
    cfg = json.loads((OUT / f"{model_type}.json").read_text(encoding="utf-8"))
    wrong: list[str] = []
    for label, variant in variants(cfg).items():
        try:
            truth = meta_parameters(variant)
        except Exception:
            continue  # transformers cannot build this variant either
        try:
            ours = configs.normalise(model_type, variant, label).total_parameters
        except InputError:
            continue
        if ours != truth:
            wrong.append(f"{label}: {ours} vs {truth} ({(ours - truth) / truth:+.2%})")
    return wrong


def main(types: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")
    skipped: list[str] = []
    for model_type in types or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        if model_type in NOT_TEXT:
            skipped.append(f"{model_type}: {NOT_TEXT[model_type]}")
            continue
        signal.alarm(BUILD_SECONDS)
        try:
            cfg = default_config_json(model_type)
            params = meta_parameters(cfg)
        except _BuildTimeoutError:
            skipped.append(f"{model_type}: no build in {BUILD_SECONDS} s")
            continue
        except Exception as exc:  # a type needing an extra package, or a broken default
            skipped.append(f"{model_type}: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        finally:
            signal.alarm(0)
        (OUT / f"{model_type}.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        print(f"arch/{model_type}.json,-,{params},transformers-meta,", flush=True)
    for line in skipped:
        print(f"# skipped {line}", file=sys.stderr)
    return 0


def main_probe(pairs: list[str]) -> int:
    warnings.simplefilter("ignore")
    failed = 0
    for pair in pairs:
        model_type, family = pair.split("=")
        wrong = probe(model_type, family)
        failed += bool(wrong)
        print(f"{pair}: {'ok' if not wrong else f'{len(wrong)} wrong'}", flush=True)
        for line in wrong:
            print(f"    {line}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        sys.exit(main_probe(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
