"""A checkpoint's own quantization, read from its config's ``quantization_config``.

Each reader turns one ``quant_method`` into how the checkpoint stores its Linear weights (a
``WeightFormat``), which Linears it leaves 16-bit, and what the engines do with it. What each
method stores per Linear weight, from the engines' own ``create_weights``:

* ``awq`` (AutoAWQ GEMM; vLLM ``AWQLinearMethod``): ``qweight`` int32 [in, out/8], ``qzeros`` int32
  [in/g, out/8], ``scales`` fp16 [in/g, out]: 4 bits + per group of g inputs an fp16 scale and a
  4-bit zero per output column. vLLM and AutoAWQ load 4-bit AWQ (awq_marlin also 8-bit).
* ``gptq`` (AutoGPTQ / GPTQModel; vLLM ``GPTQLinearMethod``): ``qweight`` int32 [in·bits/32, out],
  ``qzeros`` int32 [in/g, out·bits/32], ``scales`` fp16 [in/g, out], ``g_idx`` int32 [in] (saved
  whether or not ``desc_act``); ``group_size`` -1 is one group per output column; 2, 3, 4, 8 bits.
* ``fp8`` (DeepSeek-V3, transformers FineGrainedFP8): e4m3 weights + fp32 ``weight_scale_inv``
  per ``weight_block_size`` block, else one per tensor; ``fbgemm_fp8``: fp32 per output row.
* ``compressed-tensors`` (llm-compressor): per ``config_groups`` entry, int (``pack-quantized``
  int32, W4A16 / W8A16; ``int-quantized`` W8A8) or float (fp8, nvfp4) weights; vLLM
  ``CompressedTensorsWNA16``: ``weight_packed`` int32 [out, in·bits/32], ``weight_scale`` in the
  model dtype [out, in/g], ``weight_zero_point`` when asymmetric, ``weight_g_idx`` with actorder.
* ``bitsandbytes``: ``load_in_4bit`` NF4/FP4 codes + absmax per 64 (double quantized or not),
  ``load_in_8bit`` int8 + one fp32 ``SCB`` per row.
* ``mxfp4`` (gpt-oss): routed experts only, E2M1 + an E8M0 scale per 32.

Embeddings, the LM head, norms and routers stay in the checkpoint's 16-bit dtype (the quantizers
skip them; vLLM's ParallelLMHead is not a LinearBase), and so do the Linears a config names in
``modules_to_not_convert`` / ``ignore`` / ``llm_int8_skip_modules``. A config that is not what its
method reads raises ``InvalidConfigError`` (exit 2): a plan is never built on a guessed layout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from gpuwarden.errors import InvalidConfigError
from gpuwarden.planner.weight_formats import (
    FP16_BYTES,
    FP32_BYTES,
    G_IDX_BYTES,
    MXFP4,
    NF4_DOUBLE_QUANT,
    NF4_SINGLE_QUANT,
    MoeKernelLayout,
    Scales,
    WeightFormat,
)

Config = Mapping[object, object]


class Below(StrEnum):
    """What transformers does on a GPU older than the format's minimum compute capability."""

    DEQUANTIZES = "dequantizes"  # loads the weights dequantized to bf16 (MXFP4)
    REFUSES = "refuses"  # raises at load time (FP8 below 8.9, AutoAWQ below 7.5)


@dataclass(frozen=True, slots=True)
class CheckpointFormat:
    """How a checkpoint stores its quantized weights (its ``quantization_config.quant_method``),
    which of them, and what the engines do with it."""

    method: str
    weights: WeightFormat
    # transformers loads it packed from this compute capability on (below: see ``below``)
    hf_min_capability: tuple[int, int]
    # vLLM serves it from this compute capability on (its QuantizationConfig refuses below)
    vllm_min_capability: tuple[int, int]
    source: str
    vllm_config: str = ""  # the vLLM QuantizationConfig class whose get_min_capability refuses
    hf_check: str = ""  # what refuses below hf_min_capability in transformers
    below: Below = Below.REFUSES
    experts_only: bool = False  # only the routed experts are stored quantized (gpt-oss)
    skipped: frozenset[str] = frozenset()  # Linear names the config leaves 16-bit
    only: frozenset[str] | None = None  # GPTQ modules_in_block_to_quantize: the others 16-bit
    # PEFT trains LoRA over the weights as stored (transformers' quantizer is_trainable)
    lora: bool = False
    # the transformers option that loads the checkpoint dequantized (fine-tuning); "" if none
    dequantize_option: str = ""
    not_trainable: str = ""  # why fine-tuning cannot go through the stored weights

    def keeps_16_bit(self, name: str) -> bool:
        """Whether the config leaves the Linear ``name`` unquantized."""
        return name in self.skipped or (self.only is not None and name not in self.only)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(key: str, value: object, expected: str) -> InvalidConfigError:
    """A field the method cannot read; ``read_checkpoint_format`` names the method, once."""
    return InvalidConfigError(
        f"quantization_config.{key} = {_shown(value)} is not {expected}",
        hint="fix the checkpoint's config.json, or pass --precision to plan every weight in a "
        "precision you choose",
        reference="invalid-quantization-config",
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _choice(
    config: Config, keys: tuple[str, ...], allowed: tuple[object, ...], default: object
) -> object:
    """The first of ``keys`` the config sets, which must be one of ``allowed`` (same type: JSON
    ``true`` is not 1, ``4.0`` is not 4)."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if not any(type(value) is type(a) and value == a for a in allowed):
            raise _bad(key, value, "one of " + ", ".join(map(str, allowed)))
        return value
    return default


def _bits(config: Config, keys: tuple[str, ...], allowed: tuple[int, ...]) -> int:
    value = _choice(config, keys, allowed, 4)
    assert isinstance(value, int)
    return value


def _flag(config: Config, key: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(key, value, "true or false")
    return value


def _group(config: Config, keys: tuple[str, ...], default: int) -> int:
    """Input rows per group scale; 0 for ``-1`` (one group per output column)."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value == 0 or value < -1:
            raise _bad(key, value, "-1 or a positive whole number")
        return max(0, value)
    return default


def _pair(value: object) -> tuple[int, int] | None:
    if isinstance(value, list) and len(value) == 2 and all(_is_int(v) and v > 0 for v in value):
        return int(value[0]), int(value[1])
    return None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _module_names(config: Config, key: str) -> frozenset[str]:
    """The last name of each module a skip list gives (``model.layers.0.mlp.down_proj`` →
    ``down_proj``; a regex ``re:.*mlp.gate$`` → ``gate``): a Linear of that name stays 16-bit in
    every block (an entry for one layer is read as all layers: more 16-bit bytes, not fewer)."""
    value = config.get(key)
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(key, value, "a list of module names")
    names = set()
    for entry in value:
        found = _NAME.findall(entry.removeprefix("re:"))
        if found:
            names.add(found[-1])
    return frozenset(names)


def _int_group_format(
    bits: int, group: int, label: str, *, zeros: bool, g_idx: bool, scale: float = FP16_BYTES
) -> WeightFormat:
    return WeightFormat(
        bits / 8,
        Scales.GROUP,
        label=label,
        scale_bytes=scale,
        group=group,
        zero_bytes=bits / 8 if zeros else 0.0,
        row_bytes=G_IDX_BYTES if g_idx else 0.0,
    )


def _group_text(group: int) -> str:
    return f"group {group}" if group else "per output column"


def _quantized_names(value: object) -> frozenset[str] | None:
    """GPTQ ``modules_in_block_to_quantize`` ([["self_attn.q_proj", ...], ["mlp.down_proj"]]): the
    Linears quantized, the block's others 16-bit; None when the config does not say."""
    if value is None:
        return None
    rows = value if isinstance(value, list) else [None]
    names = [n for row in rows if isinstance(row, list) for n in row]
    if not all(isinstance(row, list) for row in rows) or not all(isinstance(n, str) for n in names):
        raise _bad("modules_in_block_to_quantize", value, "a list of lists of names")
    return _module_names({"names": names}, "names")


def _awq(config: Config) -> CheckpointFormat:
    bits = _bits(config, ("bits", "w_bit"), (4, 8))
    group = _group(config, ("group_size", "q_group_size"), 128)
    _flag(config, "zero_point", True)  # vLLM allocates qzeros either way
    label = f"AWQ {bits}-bit, {_group_text(group)}: fp16 scales + {bits}-bit zeros"
    return CheckpointFormat(
        "awq",
        _int_group_format(bits, group, label, zeros=True, g_idx=False),
        hf_min_capability=(7, 5),
        vllm_min_capability=(7, 5),
        source="vLLM AWQLinearMethod.create_weights (qweight, qzeros int32, scales fp16 per "
        "group); AutoAWQ: compute capability 7.5+",
        vllm_config="AWQConfig",
        hf_check="AutoAWQ's kernels: Turing (7.5) and newer",
        skipped=_module_names(config, "modules_to_not_convert"),
        lora=True,  # transformers AwqQuantizer.is_trainable: autoawq >= 0.2.0 (PEFT)
        not_trainable="transformers has no option that dequantizes AWQ weights",
    )


def _gptq(config: Config) -> CheckpointFormat:
    bits = _bits(config, ("bits",), (2, 3, 4, 8))
    group = _group(config, ("group_size",), 128)
    _flag(config, "desc_act", False)  # g_idx is saved either way
    sym = _flag(config, "sym", True)
    listed = _quantized_names(config.get("modules_in_block_to_quantize"))
    label = f"GPTQ {bits}-bit, {_group_text(group)}: fp16 scales + {bits}-bit zeros + g_idx" + (
        "" if sym else " (asymmetric)"
    )
    return CheckpointFormat(
        "gptq",
        _int_group_format(bits, group, label, zeros=True, g_idx=True),
        hf_min_capability=(0, 0),
        vllm_min_capability=(6, 0),
        source="vLLM GPTQLinearMethod.create_weights (qweight, qzeros, g_idx int32, scales fp16 "
        "per group)",
        vllm_config="GPTQConfig",
        skipped=_module_names(config, "modules_to_not_convert"),
        only=listed,
        lora=True,  # PEFT's GPTQ LoRA layer; transformers GptqHfQuantizer is trainable
        not_trainable="transformers has no option that dequantizes GPTQ weights",
    )


def _fp8(config: Config) -> CheckpointFormat:
    raw = config.get("weight_block_size")
    block = _pair(raw)
    if raw is not None and block is None:
        raise _bad("weight_block_size", raw, "[rows, columns] of positive whole numbers")
    if block is None:
        fmt = WeightFormat(
            1.0, Scales.TENSOR, label="FP8, one fp32 scale per tensor", floating=True
        )
    else:
        fmt = WeightFormat(
            1.0, Scales.BLOCK, block, f"FP8, {block[0]}×{block[1]} block fp32 scales", floating=True
        )
    return CheckpointFormat(
        "fp8",
        fmt,
        hf_min_capability=(8, 9),
        vllm_min_capability=(8, 0),
        source="vLLM Fp8LinearMethod.create_weights (fp8 weight, fp32 weight_scale_inv per "
        "block); transformers FineGrainedFP8HfQuantizer: compute capability 8.9+",
        vllm_config="Fp8Config",
        hf_check="FineGrainedFP8HfQuantizer.validate_environment raises below 8.9",
        skipped=_module_names(config, "modules_to_not_convert"),
        dequantize_option="FineGrainedFP8Config(dequantize=True)",
        not_trainable="FineGrainedFP8HfQuantizer.is_trainable is False",
    )


def _fbgemm_fp8(config: Config) -> CheckpointFormat:
    return CheckpointFormat(
        "fbgemm_fp8",
        WeightFormat(1.0, Scales.CHANNEL, label="FP8, one fp32 scale per row", floating=True),
        hf_min_capability=(9, 0),
        vllm_min_capability=(8, 0),
        source="vLLM FBGEMMFp8Config (fp8 weight, fp32 per-channel weight_scale); transformers "
        "FbgemmFp8HfQuantizer: compute capability 9.0+",
        vllm_config="FBGEMMFp8Config",
        hf_check="FbgemmFp8HfQuantizer.validate_environment raises below 9.0",
        skipped=_module_names(config, "modules_to_not_convert"),
        not_trainable="FbgemmFp8HfQuantizer.is_trainable is False",
    )


def _bitsandbytes(config: Config) -> CheckpointFormat:
    four = _flag(config, "load_in_4bit", False)
    eight = _flag(config, "load_in_8bit", False)
    if four == eight:
        raise _bad(
            "load_in_4bit / load_in_8bit",
            (four, eight),
            "exactly one true",
        )
    skipped = _module_names(config, "llm_int8_skip_modules")
    if four:
        kind = _choice(config, ("bnb_4bit_quant_type",), ("nf4", "fp4"), "fp4")
        double = _flag(config, "bnb_4bit_use_double_quant", False)
        fmt = WeightFormat(
            NF4_DOUBLE_QUANT if double else NF4_SINGLE_QUANT,
            Scales.INLINE,
            label=f"bitsandbytes {str(kind).upper()}, absmax per 64"
            + (" (double quantized)" if double else " (fp32)"),
        )
    else:
        fmt = WeightFormat(1.0, Scales.CHANNEL, label="bitsandbytes int8, one fp32 SCB per row")
    return CheckpointFormat(
        "bitsandbytes",
        fmt,
        hf_min_capability=(0, 0),
        vllm_min_capability=(7, 0),
        source="bitsandbytes Params4bit / Int8Params (QuantState absmax, SCB); vLLM "
        "BitsAndBytesLinearMethod",
        vllm_config="BitsAndBytesConfig",
        skipped=skipped,
        lora=True,  # QLoRA: PEFT trains adapters over the 4-bit / 8-bit base
        not_trainable="bitsandbytes weights are frozen (Params4bit / Int8Params)",
    )


def _ct_weights(group: object, name: str) -> WeightFormat | None:
    """One ``config_groups`` entry's weight format (None: the entry quantizes no weights)."""
    if not isinstance(group, dict):
        raise _bad(f"config_groups.{name}", group, "an object")
    weights = group.get("weights")
    if weights is None:
        return None
    if not isinstance(weights, dict):
        raise _bad(f"config_groups.{name}.weights", weights, "an object")
    key = f"config_groups.{name}.weights"
    bits = _bits(weights, ("num_bits",), (2, 3, 4, 8))
    kind = _choice(weights, ("type",), ("int", "float"), "int")
    strategy = _choice(
        weights,
        ("strategy",),
        ("tensor", "channel", "group", "block", "tensor_group"),
        "tensor",
    )
    floating = kind == "float"
    # scales: fp8 (e4m3) for 4-bit floats (NVFP4), fp32 for fp8 and W8A8, the model dtype for
    # the weight-only integer formats (vLLM CompressedTensorsWNA16: params_dtype)
    scale = 1.0 if floating and bits == 4 else FP32_BYTES
    if not floating and group.get("input_activations") is None:
        scale = FP16_BYTES
    zeros = not _flag(weights, "symmetric", True) and not floating
    zero_bytes = bits / 8 if zeros else 0.0
    label = f"compressed-tensors {kind}{bits}, {strategy}"
    if strategy in {"group", "tensor_group"}:
        size = _group(weights, ("group_size",), -1)
        if size < 1:
            raise _bad(
                f"{key}.group_size",
                weights.get("group_size"),
                "a positive whole number for group scales",
            )
        g_idx = weights.get("actorder") not in (None, False, "static")
        return WeightFormat(
            bits / 8,
            Scales.GROUP,
            label=f"{label} {size}",
            scale_bytes=scale,
            group=size,
            zero_bytes=zero_bytes,
            row_bytes=G_IDX_BYTES if g_idx else 0.0,
            tensor_bytes=FP32_BYTES if strategy == "tensor_group" else 0.0,
            floating=floating,
        )
    if strategy == "block":
        block = _pair(weights.get("block_structure"))
        if block is None:
            raise _bad(
                f"{key}.block_structure",
                weights.get("block_structure"),
                "[rows, columns] of positive whole numbers",
            )
        return WeightFormat(
            bits / 8,
            Scales.BLOCK,
            block,
            f"{label} {block[0]}×{block[1]}",
            scale_bytes=scale,
            floating=floating,
        )
    kinds = {"channel": Scales.CHANNEL, "tensor": Scales.TENSOR}
    return WeightFormat(
        bits / 8,
        kinds[str(strategy)],
        label=label,
        scale_bytes=scale,
        zero_bytes=zero_bytes,
        floating=floating,
    )


def _compressed_tensors(config: Config) -> CheckpointFormat | None:
    groups = config.get("config_groups")
    if groups is None:
        return None  # sparsity or KV-cache scales only: the weights are dense 16-bit
    if not isinstance(groups, dict):
        raise _bad("config_groups", groups, "an object")
    formats = [f for name, g in groups.items() if (f := _ct_weights(g, str(name))) is not None]
    if not formats:
        return None
    # several groups (per-module targets): the widest one, so the plan errs towards more bytes
    fmt = max(formats, key=lambda f: (f.weight_bytes, f.scales is not Scales.TENSOR))
    if len(set(formats)) > 1:
        fmt = replace(fmt, label=fmt.label + " (the widest of its config_groups)")
    return CheckpointFormat(
        "compressed-tensors",
        fmt,
        hf_min_capability=(0, 0),
        vllm_min_capability=(7, 0),
        source="vLLM CompressedTensorsWNA16 / W8A8 create_weights (packed int32 or fp8 weights, "
        "scales per config_groups strategy)",
        vllm_config="CompressedTensorsConfig",
        skipped=_module_names(config, "ignore"),
        dequantize_option="CompressedTensorsConfig(run_compressed=False)",
        not_trainable="transformers runs compressed-tensors weights compressed",
    )


def _mxfp4(config: Config) -> CheckpointFormat:
    return CheckpointFormat(
        "mxfp4",
        MXFP4,
        hf_min_capability=(7, 5),
        vllm_min_capability=(8, 0),
        source="transformers 5.24 Mxfp4HfQuantizer (compute capability >= 7.5, Triton >= 3.4 and "
        "the kernels package; else it dequantizes to bf16); vLLM Mxfp4Config.get_min_capability "
        "80 (Triton kernels on SM90-100, FlashInfer on SM100, Marlin otherwise)",
        vllm_config="Mxfp4Config",
        below=Below.DEQUANTIZES,
        experts_only=True,
        dequantize_option="Mxfp4Config(dequantize=True)",
        not_trainable="Mxfp4HfQuantizer.is_trainable is False",
    )


# vLLM's MXFP4 MoE backends, as each holds the routed experts once loaded
# (vllm/model_executor/layers/quantization/mxfp4.py Mxfp4MoEMethod, read at 007d500; from 0.15 on
# the same code in fused_moe/oracle/mxfp4.py, read at 001eda3).
MARLIN_MXFP4 = MoeKernelLayout(
    "Marlin (weight-only FP4)",
    # create_weights: "The moe marlin kernel requires that for each linear n % 256 == 0 and
    # k % 128 == 0": hidden round_up(·, 256), intermediate round_up(·, 128); then
    # prepare_moe_fp4_layer_for_marlin repacks values, E8M0 scales and bf16 biases in place
    hidden_multiple=256,
    intermediate_multiple=128,
)
TRITON_HOPPER_MXFP4 = MoeKernelLayout(
    "Triton (triton_kernels matmul_ogs, Hopper swizzle)",
    # create_weights: intermediate round_up(·, 64), hidden as is
    intermediate_multiple=64,
    # process_weights_after_loading: w13_bias / w2_bias .to(torch.float32)
    bias_bytes=FP32_BYTES,
    # _swizzle_mxfp4 → HopperMXValueLayout (triton_kernels release/3.5.x): each dim padded to its
    # swizzle pack, 16 rows × 32 bytes; the swizzled values replace the loaded ones (del
    # layer.w13_weight)
    value_multiple=(16, 32),
    # HopperMXScaleLayout(num_warps=8): rows padded to 2·8·2·8 = 256, columns to 2; the swizzled
    # scales live in w13/w2_precision_config while layer.w13/w2_weight_scale stay registered
    scale_copy=(256, 2),
)
FLASHINFER_TRTLLM_MXFP4 = MoeKernelLayout(
    "FlashInfer TRT-LLM MXFP4 × BF16 (SM100)",
    # create_weights: intermediate and hidden round_up(·, 256); process_weights_after_loading
    # shuffles values and scales into new tensors of the same shapes, biases to fp32
    hidden_multiple=256,
    intermediate_multiple=256,
    bias_bytes=FP32_BYTES,
)


@dataclass(frozen=True, slots=True)
class VllmMoeBackend:
    """The MXFP4 MoE backend a range of vLLM releases picks by default on a range of GPUs."""

    since: tuple[int, int, int]  # first vLLM release
    until: tuple[int, int, int] | None  # first release that no longer does this
    min_capability: tuple[int, int]
    below_capability: tuple[int, int] | None  # the first compute capability past the range
    layout: MoeKernelLayout
    source: str


# Releases before 0.11.1: a plain `pip install vllm` has neither triton_kernels (a dependency
# only from PR #27370, pinned to triton v3.5.0) nor FlashInfer (an optional extra since PR
# #21959; a default CUDA dependency again from PR #26443), so get_mxfp4_backend falls back to
# Marlin on every GPU (vllm#23278's 0.10.1 log on an H100: "Weight-only FP4 compression will be
# used leveraging the Marlin kernel"). vLLM's docker images may carry both: not modelled.
_FIRST_MXFP4 = (0, 10, 1)  # gpt-oss / Mxfp4Config first served
_WITH_KERNELS = (0, 11, 1)
VLLM_MXFP4_BACKENDS: tuple[VllmMoeBackend, ...] = (
    VllmMoeBackend(
        _FIRST_MXFP4,
        _WITH_KERNELS,
        (8, 0),
        None,
        MARLIN_MXFP4,
        "vLLM 0.10.1-0.11.0 get_mxfp4_backend: no triton_kernels / FlashInfer installed → Marlin",
    ),
    VllmMoeBackend(
        _WITH_KERNELS,
        None,
        (8, 0),
        (9, 0),
        MARLIN_MXFP4,
        "get_mxfp4_backend: Triton only on (9, 0) <= capability < (11, 0), FlashInfer on SM90 "
        "only with VLLM_USE_FLASHINFER_MOE_MXFP4_BF16=1 → Marlin",
    ),
    VllmMoeBackend(
        _WITH_KERNELS,
        None,
        (9, 0),
        (10, 0),
        TRITON_HOPPER_MXFP4,
        "get_mxfp4_backend on SM90: has_triton_kernels() (triton_kernels a dependency from "
        "PR #27370, release/3.5.x for torch 2.9) → Triton",
    ),
    VllmMoeBackend(
        _WITH_KERNELS,
        None,
        (10, 0),
        (11, 0),
        FLASHINFER_TRTLLM_MXFP4,
        "get_mxfp4_backend on the SM100 family with has_flashinfer() (FlashInfer a default CUDA "
        "dependency from PR #26443) → SM100_FI_MXFP4_BF16",
    ),
    VllmMoeBackend(
        _WITH_KERNELS,
        None,
        (11, 0),
        None,
        MARLIN_MXFP4,
        "get_mxfp4_backend on SM110 / SM120: Triton excluded (vllm#29317, triton#8498), "
        "FlashInfer only on the SM100 family → Marlin",
    ),
)
# The newest release whose MXFP4 MoE layouts were read; later ones are assumed unchanged (newer
# triton_kernels pad the Hopper value layout further, triton PRs #8677 / #10428: not modelled).
VLLM_MXFP4_VERIFIED_UNTIL = (0, 14, 1)


def vllm_mxfp4_backend(
    release: tuple[int, int, int], capability: tuple[int, int]
) -> VllmMoeBackend | None:
    """The MXFP4 MoE backend vLLM ``release`` picks by default on a GPU of ``capability``;
    None before vLLM served MXFP4 (0.10.1) or below its minimum capability."""
    for row in VLLM_MXFP4_BACKENDS:
        if release < row.since or (row.until is not None and release >= row.until):
            continue
        if capability < row.min_capability:
            continue
        if row.below_capability is None or capability < row.below_capability:
            return row
    return None


# quant_method → its reader (None from a reader: the config quantizes no weights)
CHECKPOINT_FORMATS: dict[str, Callable[[Config], CheckpointFormat | None]] = {
    "awq": _awq,
    "gptq": _gptq,
    "fp8": _fp8,
    "fbgemm_fp8": _fbgemm_fp8,
    "compressed-tensors": _compressed_tensors,
    "bitsandbytes": _bitsandbytes,
    "mxfp4": _mxfp4,
}


def read_checkpoint_format(config: object) -> CheckpointFormat | None:
    """The format a ``quantization_config`` describes; None when there is none, it quantizes no
    weights, or its method is not modelled (``unmodelled`` says which)."""
    if not isinstance(config, dict):
        return None
    method = config.get("quant_method")
    reader = CHECKPOINT_FORMATS.get(method) if isinstance(method, str) else None
    if reader is None:
        return None
    try:
        return reader(config)
    except InvalidConfigError as exc:  # the field's reader said what; the method is named here
        raise InvalidConfigError(
            f"{exc.message} (quant_method {method!r})", hint=exc.hint, reference=exc.reference
        ) from None


def unmodelled(config: object) -> str:
    """Why a present ``quantization_config`` is not modelled (empty when it is, or is absent)."""
    if config is None:
        return ""
    if not isinstance(config, dict):
        return "its quantization_config is not a JSON object"
    method = config.get("quant_method")
    if not isinstance(method, str):
        return "its quantization_config names no quant_method"
    if method not in CHECKPOINT_FORMATS:
        return f"its quantization ({_shown(method)}) is not modelled"
    return ""
