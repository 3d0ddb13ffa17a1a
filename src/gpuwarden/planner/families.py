"""What autograd keeps per token in one transformer block, family by family.

Each recipe lists the tensors the HF transformers 5 implementation saves for backward, derived by
tracing the real models under FakeTensorMode and reading the per-op dump (memory.md §5; the
Llama closed form of §2.5 is the special case ``s·b·(20h + 4h_kv + 8i) + 4·a·s·b + 8·s·b``).
A tensor that only a Linear's weight gradient needs names that Linear in ``consumers``: it is kept
only when that weight trains or carries an adapter reading the same storage (LoRA), which is
what makes frozen bases cheaper. Kernel-level facts are CUDA's: dropout masks are 1-byte bools,
flash/SDPA keeps a logsumexp instead of the s² probabilities, LayerNorm statistics are fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwarden.catalog.families.moe2 import llama4_rope_layers
from gpuwarden.planner import stacks
from gpuwarden.planner.mixers import state_recipe
from gpuwarden.planner.tensors import Ctx, Dt, Role, Saved, Wiring, dropout, wiring
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import (
    Activation,
    EagerSoftmax,
    ExpertMlp,
    LayerParameters,
    Mixer,
    ModelSpec,
    OutputGate,
    PostNorms,
    QkNorm,
    RopeTables,
    Router,
    Structure,
)
from gpuwarden.types.plan import Attention, Framework, PlanRequest

_KV = frozenset({Role.K, Role.V})
# q/k norms with a recipe here (Llama 4's L2 norms: _llama4_attention)
_QK_NORM_RECIPES = frozenset({QkNorm.PER_HEAD, QkNorm.WHOLE, QkNorm.LAYER_PER_HEAD})
_DEEPSEEK_ROUTERS = frozenset({Router.DEEPSEEK_V2, Router.DEEPSEEK_V3})
_QKV = _KV | {Role.Q}


def eager_only(spec: ModelSpec) -> bool:
    """No SDPA path in transformers (BlockTraits.eager_only: Bloom's ALiBi through baddbmm,
    Gemma-2's soft-capped scores, gpt-oss's sinks): "sdpa" and flash requests run eager."""
    return spec.traits.eager_only


# --- building blocks -----------------------------------------------------------------------------


def _norm(spec: ModelSpec, ctx: Ctx, tag: str, out: frozenset[str]) -> list[Saved]:
    h = spec.hidden_size
    o = Saved(f"{tag} output", h, Dt.RES, out, tp=False, cast=True, role=Role.NORM_OUTPUT)
    kept_input = Saved(f"{tag} input", h, Dt.RES, tp=False, role=Role.NORM_INPUT)
    if spec.norm.value == "layernorm":
        # native_layer_norm keeps its input and fp32 mean / rstd.
        return [kept_input, Saved(f"{tag} stats", 2, Dt.F32), o]
    if ctx.compile or ctx.fused_norms:
        # Inductor recomputes the normalisation from (x, rstd) in backward; a fused norm kernel
        # (Transformer Engine, apex: Ctx.fused_norms) keeps the same two.
        return [kept_input, Saved(f"{tag} rstd", 1, Dt.F32), o]
    items = [
        Saved(f"{tag} fp32 input", h, Dt.F32, tp=False, role=Role.NORM_INPUT),
        Saved(f"{tag} rstd", _rstd_values(spec), Dt.F32),
    ]
    if spec.traits.f32_norm_scale:
        # Gemma normalises and scales by (1 + w) in fp32, then casts (OLMo 2: w · x̂ in fp32).
        items.append(Saved(f"{tag} fp32 x̂", h, Dt.F32, tp=False, norm=True))
    elif spec.traits.t5_stack:
        # T5LayerNorm keeps the input for ∂/∂rstd, and x̂ in the weight dtype for ∂/∂γ; its fp32
        # copy exists only when the residual stream is narrower.
        items[0] = replace(items[0], residual_cast=True)
        items.append(kept_input)
        items.append(Saved(f"{tag} x̂", h, Dt.RES, tp=False, norm=True))
    else:
        items.append(Saved(f"{tag} x̂", h, Dt.RES, tp=False, norm=True))
    return [*items, o]


def _rstd_values(spec: ModelSpec) -> int:
    """fp32 values an RMSNorm keeps per row besides its input: rstd, or pow's input and output."""
    return 2 if spec.traits.norm_pow_rstd else 1


def _v_norm(spec: ModelSpec, v_width: int, head_dim: int) -> list[Saved]:
    """Gemma 4's scale-less RMSNorm on V (no weight, so no x̂): its fp32 input and pow's values
    per head."""
    return [
        Saved("v_norm fp32 input", v_width, Dt.F32, role=Role.NORM_INPUT),
        Saved("v_norm rstd", _rstd_values(spec) * (v_width // head_dim), Dt.F32),
    ]


def _norm_read_elsewhere(spec: ModelSpec, ctx: Ctx, tag: str) -> list[Saved]:
    """A norm whose output another recipe counts (post-LN: the next block's q/k/v input)."""
    return [x for x in _norm(spec, ctx, tag, frozenset()) if x.role is not Role.NORM_OUTPUT]


def _attention(
    spec: ModelSpec,
    ctx: Ctx,
    w: Wiring,
    *,
    p_attn: float,
    q_width: int,
    kv_width: int,
    fused: bool = False,
    v_width: int | None = None,
    out_width: int | None = None,
) -> list[Saved]:
    """``kv_width``: the keys' width; ``v_width`` the values' and ``out_width`` the attention
    output's (heads × value head dim), as wide as the keys and q unless the block says otherwise
    (MiMo-V2-Flash: values 128 wide against q / k 192; ``BlockWidths``)."""
    a = spec.num_heads
    softmax = spec.traits.eager_softmax
    eager = ctx.eager or spec.traits.eager_only
    v_width = kv_width if v_width is None else v_width
    out_width = q_width if out_width is None else out_width
    one_kv_head = 0 < kv_width < q_width and kv_width == q_width // a
    items: list[Saved]
    if not eager and _falcon_kv_copies(spec) and not _falcon_new(spec):
        # Falcon-7B multi-query hands SDPA a 1-head K/V without enable_gqa: no fused kernel takes
        # it (CPU or CUDA), so the math kernel runs in fp32 and keeps the scaled q, k and v (one
        # head at b = 1, where expand stays a view) and the fp32 probabilities.
        kv = kv_width if ctx.single else q_width
        return [
            Saved("scaled q (fp32, math SDPA)", q_width, Dt.F32, role=Role.Q),
            Saved("k (fp32)", kv, Dt.F32, role=Role.K),
            Saved("v (fp32)", kv, Dt.F32, role=Role.V),
            Saved("probabilities (fp32)", a * ctx.s, Dt.F32, quadratic=True),
            Saved("dense input", q_width, Dt.ACT, w.attn_out),
        ]
    if not eager and _falcon_new(spec):
        # Falcon new_decoder_architecture broadcasts K/V to every head and copies them, always
        # materialises the causal mask (a bf16 s² mask per sequence and block), and the SDPA
        # output is the dense input as is.
        return [
            Saved("q (after RoPE)", q_width, Dt.ACT, role=Role.Q),
            Saved("k (all heads)", q_width, Dt.ACT, role=Role.K),
            Saved("v (all heads)", q_width, Dt.ACT, role=Role.V),
            Saved("attention output = dense input", q_width, Dt.ACT, role=Role.ATTENTION_OUTPUT),
            Saved("logsumexp", a, Dt.F32),
            Saved("causal mask", ctx.s, Dt.ACT, tp=False),
        ]
    if not eager:
        k_saved = kv_width + (q_width - kv_width) * ctx.masked if kv_width else 0
        v_saved = v_width + (out_width - v_width) * ctx.masked if v_width else 0
        if ctx.expand_kv and kv_width and not one_kv_head:
            # copies of K/V for every head (one K/V head expands as a stride-0 view instead)
            k_saved, v_saved = q_width, out_width
        items = [
            Saved("q (after RoPE)", q_width, Dt.ACT, role=Role.Q),
            Saved("k", k_saved, Dt.ACT, role=Role.K),
            Saved("v", v_saved, Dt.ACT, role=Role.V),
            Saved("attention output", out_width, Dt.ACT, role=Role.ATTENTION_OUTPUT),
            Saved("logsumexp", a, Dt.F32),
        ]
        if ctx.masked:
            items.append(Saved("additive attention mask", ctx.s * ctx.masked, Dt.ACT, tp=False))
        if spec.traits.sdpa_out_copy or ctx.heads_first_q:
            items.append(Saved("o_proj input", out_width, Dt.ACT, w.attn_out))
        else:
            items[3] = replace(items[3], what="attention output = o_proj input")
        return items
    # Eager: q·kᵀ keeps q and k (expanded to all heads by repeat_kv), softmax(fp32) and its cast.
    s = ctx.s
    kv, v = q_width, out_width
    if ctx.single and one_kv_head:
        # MQA, one sequence: repeat_kv's expand + reshape stay views of one head
        kv, v = kv_width, v_width
    if ctx.single and fused and kv_width == q_width and spec.position_encoding.value == "rope":
        # One sequence, no KV repeat: matmul keeps V as a view of the whole fused qkv output
        # (q and k are RoPE'd copies).
        v = q_width + 2 * kv_width
    items = [
        Saved("q", q_width, Dt.ACT, role=Role.Q),
        Saved("k (all heads)", kv, Dt.ACT, role=Role.K),
        Saved("v (all heads)", v, Dt.ACT, role=Role.V),
        Saved("softmax (fp32)", a * s, Dt.F32, quadratic=True),
        Saved("o_proj input", out_width, Dt.ACT, w.attn_out),
    ]
    if softmax is EagerSoftmax.COMPUTE_ONLY:
        # T5 takes the softmax in the compute dtype: no fp32 copy, no cast.
        items[3] = Saved("softmax", a * s, Dt.ACT, quadratic=True)
    elif softmax is EagerSoftmax.COMPUTE:
        # softmax in the compute dtype: kept once (it is also the second matmul's input); under
        # autocast softmax runs in fp32 and its bf16 cast feeds the matmul.
        items[3] = Saved("softmax", a * s, Dt.ACT, quadratic=True, autocast_f32=True)
    elif softmax is EagerSoftmax.SINK:
        # The sink logit joins each row: softmax over s + 1 columns in the compute dtype (the
        # matmul reads a view without the sink); the row max subtracted first keeps its indices.
        items[3] = Saved("softmax with sink", a * (s + 1), Dt.ACT, quadratic=True)
        items.append(Saved("row max indices", a, Dt.I64))
    elif p_attn == 0:
        # the cast is the second matmul's input; with dropout, the dropped copy is (below)
        items.append(
            Saved("probabilities (cast)", a * s, Dt.ACT, quadratic=True, low_precision_only=True)
        )
    if spec.traits.soft_caps:
        # Gemma-2 soft-caps the scores: cap · tanh(scores / cap) keeps the tanh output.
        items.append(Saved("soft-capped scores (tanh)", a * s, Dt.ACT, quadratic=True))
    if p_attn > 0:
        # dropout keeps its mask, and matmul(·, v) keeps the dropped probabilities.
        items.append(Saved("attention dropout mask", a * s, Dt.MASK, quadratic=True))
        items.append(Saved("dropped probabilities", a * s, Dt.ACT, quadratic=True))
    return items


def _mla_attention(spec: ModelSpec, ctx: Ctx, w: Wiring, p_attn: float) -> list[Saved]:
    """Multi-head latent attention (modeling_deepseek_v3.py / _v2 DeepseekV3Attention): q is a
    ``torch.cat`` of its RoPE and no-RoPE parts and k a ``new_empty`` filled from the latent
    (expand_kv), so both are copies; v is a split view of kv_b_proj's output, nope and v parts.

    SDPA: v's head dim differs from q / k's, which CUDA's flash kernel refuses, so CUDA runs the
    memory-efficient kernel (sdp_utils.cpp): it keeps q, k, v (the whole kv_b_proj output), its
    output, in (b, s, a, d) memory so the o_proj input is a view, and a logsumexp. Eager
    (eager_attention_forward): q·kᵀ keeps q and k, softmax in fp32 and its bf16 cast, matmul
    keeps v, and the head merge copies the output for o_proj."""
    assert spec.mla is not None
    mla = spec.mla
    a, s = spec.num_heads, ctx.s
    qk = a * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    v = a * mla.v_head_dim
    items = [Saved("q (cat copy)", qk, Dt.ACT), Saved("k (expanded from the latent)", qk, Dt.ACT)]
    if not ctx.eager:
        return [
            *items,
            Saved("v (view of kv_b_proj's output)", a * mla.qk_nope_head_dim + v, Dt.ACT),
            Saved("attention output = o_proj input", v, Dt.ACT, role=Role.ATTENTION_OUTPUT),
            Saved("logsumexp", a, Dt.F32),
        ]
    # matmul folds (b, a) of the strided v: a copy, except for one sequence, where it is a view
    v_kept = a * mla.qk_nope_head_dim + v if ctx.single else v
    items += [
        Saved("softmax (fp32)", a * s, Dt.F32, quadratic=True),
        Saved("v (copy; one sequence: view of kv_b_proj's output)", v_kept, Dt.ACT),
        Saved("o_proj input (merged heads copy)", v, Dt.ACT, w.attn_out),
    ]
    if p_attn == 0:
        items.append(
            Saved("probabilities (cast)", a * s, Dt.ACT, quadratic=True, low_precision_only=True)
        )
    else:
        items.append(Saved("attention dropout mask", a * s, Dt.MASK, quadratic=True))
        items.append(Saved("dropped probabilities", a * s, Dt.ACT, quadratic=True))
    return items


def _latent_norms(spec: ModelSpec, ctx: Ctx) -> list[Saved]:
    """MLA's RMSNorms on the q and kv latents (q_a_layernorm, kv_a_layernorm; V2-Lite has no q
    latent): what ``_norm`` keeps for a block norm, at the latent's width, in the compute dtype
    (the down-projection's output), with q_b_proj / kv_b_proj reading the output. The
    down-projections are replicated under tensor parallelism (Megatron-Core MLA builds them
    "duplicated"), so the latents are whole on every rank."""
    assert spec.mla is not None
    mla = spec.mla
    items: list[Saved] = []
    for tag, rank, reader in (
        ("q latent norm", mla.q_lora_rank or 0, "q_b_proj"),
        ("kv latent norm", mla.kv_lora_rank, "kv_b_proj"),
    ):
        if not rank:
            continue
        out = frozenset({reader})
        if ctx.compile:
            items += [
                Saved(f"{tag} input", rank, Dt.ACT, tp=False, role=Role.NORM_INPUT),
                Saved(f"{tag} rstd", 1, Dt.F32, tp=False),
            ]
        else:
            items += [
                Saved(f"{tag} fp32 input", rank, Dt.F32, tp=False, role=Role.NORM_INPUT),
                Saved(f"{tag} rstd", 1, Dt.F32, tp=False),
                Saved(f"{tag} x̂", rank, Dt.ACT, tp=False, norm=True),
            ]
        items.append(Saved(f"{tag} output", rank, Dt.ACT, out, tp=False, role=Role.NORM_OUTPUT))
    return items


def _qk_norms(
    spec: ModelSpec,
    ctx: Ctx,
    widths: tuple[int, int],
    grads: tuple[bool, bool],
    *,
    fused: bool = False,
    head_dim: int | None = None,
) -> list[Saved]:
    """RMSNorms on q and k before RoPE: each keeps what a block RMSNorm keeps (``_norm``: the
    fp32 input, rstd, and x̂ for its weight's gradient, in fp32 where the family scales in fp32),
    one rstd per head where it normalises each head (Qwen3, Gemma 3) and one per token where it
    normalises the whole projection (OLMo 2); RoPE multiplies by cos / sin and keeps no copy of
    the normed q or k. LayerNorms over each head (Persimmon's q_layernorm / k_layernorm) keep
    what a block LayerNorm keeps: the input (a view of a fused qkv output, kept as a whole
    already, when one Linear makes q, k and v) and fp32 mean / rstd per head. A branch whose
    projection gets no gradient (``grads``: q, k; layer 0 under a frozen embedding) keeps
    nothing. ``head_dim``: the block's own (Gemma 4's full blocks: 512 against 256)."""
    kind = spec.traits.qk_norm
    if kind not in _QK_NORM_RECIPES:
        return []
    x_hat = Dt.F32 if spec.traits.f32_norm_scale else Dt.ACT
    d = spec.head_dim if head_dim is None else head_dim
    items: list[Saved] = []
    for name, width, grad in zip(("q", "k"), widths, grads, strict=True):
        if not grad:
            continue
        rows = 1 if kind is QkNorm.WHOLE else width // d
        if kind is QkNorm.LAYER_PER_HEAD:
            if not fused:
                items.append(Saved(f"{name}_layernorm input", width, Dt.ACT, role=Role.NORM_INPUT))
            items.append(Saved(f"{name}_layernorm mean, rstd", 2 * rows, Dt.F32))
            continue
        if ctx.compile or ctx.fused_norms:
            # a fused kernel keeps its input and rstd; TE's RMSNorm op saves `input_.contiguous()`
            # (ops/basic/rmsnorm.py op_forward), so k, a strided split of the fused qkv output,
            # is kept as a copy of its own too
            items.append(Saved(f"{name}_norm input", width, Dt.ACT, role=Role.NORM_INPUT))
            items.append(Saved(f"{name}_norm rstd", rows, Dt.F32))
            continue
        items += [
            Saved(f"{name}_norm fp32 input", width, Dt.F32, role=Role.NORM_INPUT),
            Saved(f"{name}_norm rstd", rows * _rstd_values(spec), Dt.F32),
            Saved(f"{name}_norm x̂", width, x_hat, norm=True),
        ]
    return items


@dataclass(frozen=True, slots=True)
class BlockWidths:
    """Per-token widths of one block's attention, all heads: q, keys, values and the attention
    output (o_proj's input: query heads × value head dim)."""

    q: int
    k: int
    v: int
    out: int


_ATTENTION_LINEARS = frozenset({"q_proj", "k_proj", "v_proj", "o_proj"})


def block_widths(spec: ModelSpec, layer: LayerParameters) -> BlockWidths:
    """The widths one block's attention runs at, read from its own q_proj / k_proj / v_proj /
    o_proj (``LinearShape``): Gemma 4's full blocks are 512 wide per head with their own KV-head
    count, with no v_proj under ``attention_k_eq_v`` (V is K: modeling_gemma4.py
    Gemma4TextAttention); MiMo-V2-Flash's values and o_proj input are ``v_head_dim`` 128 wide
    against q / k 192, and its sliding blocks have their own KV-head count. A gate riding in
    q_proj (Qwen3-Next: a per-element gate beside each head's q; per head: one value a head) is
    taken out of q. Fused or otherwise named projections, and state mixers, keep the spec-wide
    fields (MLA: q and the per-head expanded k are nope + rope wide)."""
    q_width = spec.num_heads * spec.head_dim
    if spec.mla is not None:
        mla = spec.mla
        q_width = spec.num_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        return BlockWidths(q_width, q_width, q_width, q_width)  # k expanded from the latent
    spec_wide = BlockWidths(q_width, spec.kv_width, spec.kv_width, q_width)
    lin = {x.name: x for x in layer.linears if x.part == "attention"}
    q, k, o = lin.get("q_proj"), lin.get("k_proj"), lin.get("o_proj")
    if (
        layer.mixer is Mixer.STATE
        or q is None
        or k is None
        or o is None
        or set(lin) - _ATTENTION_LINEARS
    ):
        return spec_wide
    q_out = q.out_features
    gate = spec.traits.output_gate
    if gate is OutputGate.PER_ELEMENT:
        q_out -= o.in_features
    elif gate is OutputGate.PER_HEAD:
        q_out -= spec.num_heads
    v = lin.get("v_proj")
    return BlockWidths(
        q_out, k.out_features, v.out_features if v else k.out_features, o.in_features
    )


def _falcon_new(spec: ModelSpec) -> bool:
    return spec.traits.falcon_attention and bool(spec.raw_config.get("new_decoder_architecture"))


def _falcon_kv_copies(spec: ModelSpec) -> bool:
    """Falcon's SDPA keeps K/V copies, not views of the fused qkv output: new_decoder_architecture
    broadcasts them to all heads, multi-query (Falcon-7B) takes the fp32 math kernel."""
    multi_query = spec.kv_width == spec.head_dim < spec.num_heads * spec.head_dim
    return spec.traits.falcon_attention and (_falcon_new(spec) or multi_query)


def _gated_mlp(
    ctx: Ctx, i: float, w_in: frozenset[str], w_out: frozenset[str], py_gelu: bool
) -> list[Saved]:
    act_saves = _gelu_saves(ctx) if py_gelu and not ctx.fused_glu else 1
    items = [
        Saved("gate output (activation input)", act_saves * i, Dt.ACT, role=Role.GATE_OUTPUT),
        Saved("up output", i, Dt.ACT, role=Role.UP_OUTPUT),
        Saved("down_proj input", i, Dt.ACT, w_out),
    ]
    # a fused gated activation (Megatron's bias_swiglu_impl) keeps its input only: the
    # activation output is recomputed in backward, as Inductor does
    if not ctx.compile and not ctx.fused_glu:
        items.append(Saved("activation output", i, Dt.ACT, role=Role.ACTIVATION_OUTPUT))
    return items


def _gelu_saves(ctx: Ctx) -> int:
    """Tensors as wide as its input that a tanh-approximated GELU keeps. torch's own kernel
    (F.gelu(approximate="tanh"), ``native_gelu``) keeps its input. transformers' Python gelu_new
    keeps four in eager; compiled, the partitioner recomputes the polynomial but keeps tanh's
    output beside the input, since tanh's backward reads its output (traced through the min-cut
    partitioner, ``exact._compiled``: Phi-2's fc1 output and tanh output)."""
    if ctx.native_gelu:
        return 1
    return 2 if ctx.compile else 4


def _activation(spec: ModelSpec) -> str:
    """ "relu2" (ReLU output and its square), "relu" (keeps its output), "gelu_py" (Python
    tanh-GELU: four tensors) or "gelu"."""
    if spec.traits.activation is Activation.RELU2:
        return "relu2"
    if spec.traits.activation is Activation.XIELU:
        return "xielu"
    cfg = spec.raw_config
    name = str(
        cfg.get("feed_forward_proj")
        or cfg.get("hidden_act")
        or cfg.get("activation_function")
        or cfg.get("hidden_activation")
        or ""
    ).lower()
    if "relu" in name:
        return "relu"
    if spec.traits.activation is Activation.PY_GELU or name in {
        "gelu_new",
        "gated-gelu",
        "gelu_fast",
    }:
        return "gelu_py"
    return "gelu"


def _plain_mlp(spec: ModelSpec, ctx: Ctx, w_out: frozenset[str], p: float) -> list[Saved]:
    i = spec.intermediate_size
    act = _activation(spec)
    t5_dropout = spec.traits.t5_stack and p > 0
    if act == "relu2":
        # ReLUSquaredActivation: relu keeps its output (also square's input), and the square is
        # the down projection's input
        return [Saved("ReLU output", i, Dt.ACT), Saved("down_proj input (ReLU²)", i, Dt.ACT, w_out)]
    if act == "xielu":
        return _xielu(i, w_out)
    if act == "relu":
        # ReLU keeps its output, which is also fc2's input unless dropout sits between them.
        items = [Saved("ReLU output", i, Dt.ACT)]
        if t5_dropout:
            items += [Saved("dropout mask", i, Dt.MASK), Saved("wo input", i, Dt.ACT, w_out)]
        return items
    act_saves = _gelu_saves(ctx) if act == "gelu_py" else 1
    items = [Saved("fc1 output (activation input)", act_saves * i, Dt.ACT)]
    if t5_dropout:
        return [*items, Saved("dropout mask", i, Dt.MASK), Saved("wo input", i, Dt.ACT, w_out)]
    return [*items, Saved("fc2 input", i, Dt.ACT, w_out)]


def _xielu(i: float, w_out: frozenset[str]) -> list[Saved]:
    """transformers' XIELUActivation without the xIELU CUDA wheel (its Python fallback):
    ``where(x > 0, α_p·x·x + β·x, (expm1(min(x, ε)) − x)·α_n + β·x)`` with learned α_p, α_n.
    The products with α keep their tensor operands for α's gradient: x, α_p·x, expm1's output
    (its own backward's input) and expm1(·) − x; where keeps its bool condition (traced on
    Apertus: 3 compute-dtype tensors and a mask beyond up / down's)."""
    return [
        Saved("up output (xIELU input)", i, Dt.ACT),
        Saved("xIELU α_p·x, expm1 output, expm1 − x", 3 * i, Dt.ACT),
        Saved("xIELU x > 0 mask", i, Dt.MASK),
        Saved("down_proj input", i, Dt.ACT, w_out),
    ]


def amp_only(spec: ModelSpec, layer: LayerParameters) -> tuple[Saved, ...]:
    """Tensors a block keeps only when its weights are wider than its activations (AMP: fp32
    weights under bf16 autocast). T5DenseActDense casts wo's input to wo's weight dtype
    (modeling_t5.py: kept for 8-bit flan-t5-xxl), so under AMP wo's matmul keeps autocast's bf16
    copy of that fp32 cast, next to the ReLU output ReLU keeps; with dropout between them the
    copy replaces the dropped output, and in the gated MLP the product, same bytes."""
    if not spec.traits.t5_stack or _activation(spec) != "relu" or dropout(spec)[0] > 0:
        return ()
    w = wiring(layer, spec.hidden_size)
    return (
        Saved("wo input (bf16 copy of its fp32 cast)", spec.intermediate_size, Dt.ACT, w.mlp_out),
    )


def _moe(spec: ModelSpec, ctx: Ctx, w: Wiring) -> list[Saved]:
    assert spec.moe is not None
    moe = spec.moe
    k, e, h, i = (
        moe.experts_per_token,
        moe.num_experts,
        spec.hidden_size,
        moe.expert_intermediate_size,
    )
    expert_mlp = spec.traits.expert_mlp
    if expert_mlp is ExpertMlp.CLAMPED_SWIGLU:
        return _gpt_oss_moe(k, h, i, w)
    if expert_mlp is ExpertMlp.EVERY_EXPERT:
        return _llama4_moe(ctx, k, e, h, i, w)
    if spec.traits.experts_beside_mlp:
        routing = _router_beside_mlp(spec, ctx, k, e)
    else:
        routing = [Saved("router softmax (fp32)", e, Dt.F32, tp=False), *_routing(spec, k)]
    items = [
        *routing,
        Saved("token permutation", 3 * k, Dt.I64, tp=False),
        Saved("tokens gathered per expert", k * h, Dt.ACT, w.expert_in, role=Role.ROUTED_DISPATCH),
        Saved("expert gate/up output", 2 * k * i, Dt.ACT, role=Role.ROUTED_DISPATCH),
        Saved("expert down input", k * i, Dt.ACT, w.expert_out, role=Role.ROUTED_DISPATCH),
        Saved("expert output (× routing weight)", k * h, Dt.ACT, role=Role.ROUTED_DISPATCH),
    ]
    if not ctx.compile:
        items.append(Saved("expert activation output", k * i, Dt.ACT, role=Role.ROUTED_DISPATCH))
    if spec.traits.experts_beside_mlp:
        return items  # the dense MLP beside them is the block's own recipe (_block)
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.shared_intermediate_size
        items += _gated_mlp(ctx, shared, w.mlp_in, w.mlp_out, py_gelu=False)
    if spec.traits.shared_expert_gate:
        # sigmoid(shared_expert_gate(x)) * shared_expert(x): the product keeps both factors
        # (the sigmoid's output is also what its backward reads)
        items += [
            Saved("shared expert gate (sigmoid output)", 1, Dt.ACT, tp=False),
            Saved("shared expert output", h, Dt.ACT, tp=False),
        ]
    return items


def _router_beside_mlp(spec: ModelSpec, ctx: Ctx, k: int, e: int) -> list[Saved]:
    """Gemma 4's MoE block (modeling_gemma4.py Gemma4TextDecoderLayer with enable_moe_block,
    Gemma4TextRouter): the router reads the block's residual through its own scale-less RMSNorm,
    times a learned per-channel scale (which keeps the normed input) before its proj; the fp32
    softmax's top-k weights are renormalised (the division keeps its operands), times the
    per-expert scale gathered per choice, and the experts keep that fp32 weight per routed copy.
    The experts' input goes through pre_feedforward_layernorm_2 and their output through
    post_feedforward_layernorm_2: two more norms whose outputs no Linear keeps (the experts keep
    their gathered copy)."""
    h = spec.hidden_size
    router = frozenset({"router"})
    items = [
        Saved("router norm fp32 input", h, Dt.F32, tp=False, role=Role.NORM_INPUT),
        Saved("router norm rstd", _rstd_values(spec), Dt.F32, tp=False),
        Saved("router normed input (× scale)", h, Dt.ACT, router, tp=False),
        Saved("router proj input", h, Dt.ACT, router, tp=False),
        Saved("router softmax (fp32)", e, Dt.F32, tp=False),
        Saved("top-k indices", k, Dt.I64, tp=False),
        Saved(
            "top-k weights: raw, sum, renormalised, per routed copy", 3 * k + 1, Dt.F32, tp=False
        ),
        Saved("per-expert scale per choice", k, Dt.ACT, tp=False),
    ]
    for tag in ("experts' pre-norm", "experts' post-norm"):
        items += _norm(spec, ctx, tag, frozenset())
    return items


def per_layer_width(layer: LayerParameters) -> int:
    """hidden_size_per_layer_input: per_layer_input_gate's width (0: no per-layer inputs)."""
    return next((x.out_features for x in layer.linears if x.name == "per_layer_input_gate"), 0)


def _per_layer_input(
    spec: ModelSpec,
    ctx: Ctx,
    layer: LayerParameters,
    grad: bool,
    adapted: frozenset[str],
    embedding_grad: bool,
) -> list[Saved]:
    """Gemma4TextDecoderLayer's per-layer input, after the MLP's residual add: per_layer_input_gate
    reads the residual, its GELU keeps its input, the product with the block's slice of the
    per-layer inputs keeps that slice (and the GELU output when the slice requires grad: the
    per-layer embedding trains), per_layer_projection reads the product, and
    post_per_layer_input_norm norms the projection before the add. The slices are views of one
    (b, s, layers, p) tensor, kept whole: one slice per block adds up to it. ``grad``: a
    gradient reaches the block's output; an adapter on either Linear starts one of its own."""
    p = per_layer_width(layer)
    if not spec.traits.per_layer_inputs or not p:
        return []
    act_saves = _gelu_saves(ctx) if _activation(spec) == "gelu_py" else 1
    gate, projection = frozenset({"per_layer_input_gate"}), frozenset({"per_layer_projection"})
    items = [
        Saved(
            "per-layer gate input (residual)", spec.hidden_size, Dt.RES, gate, tp=False, cast=True
        ),
        Saved("per-layer gate output (GELU input)", act_saves * p, Dt.ACT, tp=False),
        Saved("per-layer input (this block's slice)", p, Dt.RES, tp=False),
        Saved("per-layer projection input", p, Dt.ACT, projection, tp=False),
    ]
    if embedding_grad:
        items.append(Saved("per-layer GELU output", p, Dt.ACT, tp=False))
    gate_grad = grad or bool(gate & adapted)
    norm = _norm(spec, ctx, "per-layer input norm", frozenset())
    return _gated(items, gate_grad) + _gated(norm, gate_grad or bool(projection & adapted))


def _per_layer_projection(spec: ModelSpec) -> list[Saved]:
    """Gemma4TextModel.project_per_layer_inputs: per_layer_model_projection reads the embedding
    output, and per_layer_projection_norm (an RMSNorm over each block's p values: one row per
    block) keeps its fp32 input, pow's values per row and its fp32 x̂."""
    layers = spec.parameters.layers
    p = per_layer_width(layers[0]) if layers else 0
    if not spec.traits.per_layer_inputs or not p:
        return []
    n = spec.num_layers
    return [
        Saved(
            "embedding output (per-layer projection input)",
            spec.hidden_size,
            Dt.ACT,
            tp=False,
            role=Role.FIRST_BLOCK_INPUT,
        ),
        Saved("per-layer projection norm fp32 input", n * p, Dt.F32, tp=False),
        Saved("per-layer projection norm rstd", n * _rstd_values(spec), Dt.F32, tp=False),
        Saved("per-layer projection norm fp32 x̂", n * p, Dt.F32, tp=False, norm=True),
    ]


def _gpt_oss_moe(k: int, h: int, i: float, w: Wiring) -> list[Saved]:
    """GptOssMLP: softmax over the top-k router logits (compute dtype), grouped experts with
    biases, and the clamped SwiGLU (clamp gate, clamp up, gate · σ(α · gate), (up + 1) · glu)."""
    return [
        Saved("top-k indices", k, Dt.I64, tp=False),
        Saved("top-k softmax", k, Dt.ACT, tp=False),
        Saved("token permutation and scatter index", 3 * k, Dt.I64, tp=False),
        Saved("grouped-GEMM index (expert weight gradients)", k, Dt.I64, w.expert_in, tp=False),
        Saved("tokens gathered per expert", k * h, Dt.ACT, w.expert_in, role=Role.ROUTED_DISPATCH),
        Saved("expert gate/up output", 2 * k * i, Dt.ACT, role=Role.ROUTED_DISPATCH),
        Saved("clamped gate, σ, glu, up + 1", 4 * k * i, Dt.ACT),
        Saved("expert down input", k * i, Dt.ACT, w.expert_out, role=Role.ROUTED_DISPATCH),
        Saved("routing weight per copy", k, Dt.ACT, tp=False),
        Saved("expert output (× routing weight)", k * h, Dt.ACT, role=Role.ROUTED_DISPATCH),
    ]


def _llama4_moe(ctx: Ctx, k: int, e: int, h: int, i: float, w: Wiring) -> list[Saved]:
    """Llama4TextMoe runs every token through every expert (bmm), each copy pre-scaled by its
    sigmoid router score (0 outside the top k), plus a shared expert of the same width."""
    items = [
        Saved("top-k indices", k, Dt.I64, tp=False),
        Saved("router scores (fp32 sigmoid)", e, Dt.F32, tp=False),
        Saved("router score per copy", e, Dt.ACT, tp=False),
        # repeat() of the MLP norm's output, in its dtype (fp32 under autocast), which the
        # product with the router scores keeps
        Saved("input repeated per expert", e * h, Dt.RES),
        Saved("scaled input per expert", e * h, Dt.ACT, w.expert_in),
        Saved("expert gate/up output", 2 * e * i, Dt.ACT, role=Role.ROUTED_DISPATCH),
        Saved("expert down input", e * i, Dt.ACT, w.expert_out, role=Role.ROUTED_DISPATCH),
    ]
    if not ctx.compile:
        items.append(Saved("expert activation output", e * i, Dt.ACT, role=Role.ROUTED_DISPATCH))
    return items + _gated_mlp(ctx, i, w.mlp_in, w.mlp_out, py_gelu=False)


def _llama4_attention(
    spec: ModelSpec, q_width: int, kv_width: int, grads: tuple[bool, bool]
) -> list[Saved]:
    """Llama 4 extras, averaged over the blocks: RoPE layers L2-normalise q and k in fp32
    (use_qk_norm: fp32 copies and one rstd per head, for a branch that gets a gradient); NoPE
    layers scale q by an fp32 per-position temperature (attn_temperature_tuning)."""
    raw = spec.raw_config
    rope = llama4_rope_layers(raw) / spec.num_layers if spec.num_layers else 0.0
    items: list[Saved] = []
    if rope and raw.get("use_qk_norm", True) is not False:
        branches = (("q", q_width, spec.num_heads), ("k", kv_width, spec.num_kv_heads))
        for (tag, width, heads), grad in zip(branches, grads, strict=True):
            if grad:
                items += [
                    Saved(f"{tag} L2 norm fp32 input", width * rope, Dt.F32, role=Role.NORM_INPUT),
                    Saved(f"{tag} L2 norm rstd", heads * rope, Dt.F32),
                ]
    if rope < 1 and raw.get("attn_temperature_tuning", True) is not False:
        items.append(Saved("temperature scale (fp32)", 1 - rope, Dt.F32, tp=False))
    return items


def _routing(spec: ModelSpec, k: int) -> list[Saved]:
    """What the top-k routing keeps per token besides the router softmax."""
    router = spec.traits.router
    if router in _DEEPSEEK_ROUTERS:
        return _deepseek_routing(spec, k)
    if router is not Router.QWEN:
        # Mixtral-style: renormalised fp32 top-k weights
        return [Saved("routing indices and weights", 5 * k + 1, Dt.F32, tp=False)]
    items = [
        Saved("top-k indices", k, Dt.I64, tp=False),
        Saved("routing weights (compute dtype)", k, Dt.ACT, tp=False),
    ]
    if spec.raw_config.get("norm_topk_prob") is True:  # transformers' default: False
        items.append(Saved("top-k weights and their sum (fp32)", k + 1, Dt.F32, tp=False))
    return items


def _deepseek_routing(spec: ModelSpec, k: int) -> list[Saved]:
    """DeepseekV3TopkRouter / DeepseekV2TopkRouter (modeling_deepseek_v3.py / _v2): an fp32
    Linear on an fp32 copy of its input (``hidden_states.type(torch.float32)``; the weight is
    kept in fp32, _keep_in_fp32_modules_strict), then top-k indices, and the fp32 weight per
    routed copy the experts multiply by. Group-limited routing (V3 always, V2 with
    ``topk_method: group_limited_greedy``) keeps the indices of its per-group reductions (V3:
    the top 2 of each group; V2: the max), of the top groups, and the bool mask of the experts
    outside them; V3 renormalises the top-k weights under ``norm_topk_prob``."""
    assert spec.moe is not None
    raw = spec.raw_config
    groups, top_groups = (
        value if isinstance(value, int) and value > 0 else 1
        for value in (raw.get("n_group"), raw.get("topk_group"))
    )
    v3 = spec.traits.router is Router.DEEPSEEK_V3
    items = [
        # with an fp32 residual stream (autocast) the copy is the norm's output itself, whose
        # bf16 cast for the router the norm counts
        Saved(
            "router input (fp32 copy)",
            spec.hidden_size,
            Dt.F32,
            frozenset({"router"}),
            tp=False,
            residual_cast=True,
        ),
        Saved("top-k indices", k, Dt.I64, tp=False),
        Saved("routing weight per copy (fp32)", k, Dt.F32, tp=False),
    ]
    if v3 or raw.get("topk_method") == "group_limited_greedy":
        per_group = 2 if v3 else 1
        items += [
            Saved("per-group top indices", per_group * groups, Dt.I64, tp=False),
            Saved("top group indices", top_groups, Dt.I64, tp=False),
            Saved(
                "mask of experts outside the top groups", spec.moe.num_experts, Dt.MASK, tp=False
            ),
        ]
    if v3 and raw.get("norm_topk_prob"):
        items.append(Saved("top-k weights and their sum (fp32)", k + 1, Dt.F32, tp=False))
    return items


def _output_gate(
    spec: ModelSpec, attn: list[Saved], w: Wiring, q_width: int, out_width: int | None = None
) -> list[Saved]:
    """A sigmoid gate on the attention output before o_proj (Qwen3-Next / Qwen3.5 gated
    attention: ``attn_output * torch.sigmoid(gate)`` with the gate a chunk of q_proj's output;
    AFMoE's gate_proj; Laguna's g_proj, one value per head or per element): the product keeps
    both factors, the sigmoid's output (also its own backward's input) and the attention output,
    and the product is o_proj's input."""
    gate = spec.traits.output_gate
    if gate is OutputGate.NONE:
        return attn
    out = q_width if out_width is None else out_width
    width = spec.num_heads if gate is OutputGate.PER_HEAD else out
    # the kernel output (or its merged-heads copy) stays as the product's factor, not o_proj's
    kept = [
        replace(x, what=f"{x.what} (gate product factor)", consumers=None)
        if x.consumers == w.attn_out
        else x
        for x in attn
    ]
    if spec.traits.output_gate_softplus:
        # Laguna: F.softplus(g_proj(x).float()).to(dtype): softplus keeps its fp32 input, the
        # product the gate's cast
        kept += [
            Saved("output gate fp32 (softplus input)", width, Dt.F32),
            Saved("output gate (softplus, cast)", width, Dt.ACT),
        ]
    else:
        kept.append(Saved("output gate (sigmoid output)", width, Dt.ACT))
    return [*kept, Saved("gated attention output = o_proj input", out, Dt.ACT, w.attn_out)]


def _residual_dropout(p: float, h: int, sites: int) -> list[Saved]:
    return [Saved("residual dropout mask", sites * h, Dt.MASK, tp=False)] if p > 0 else []


# --- one block -----------------------------------------------------------------------------------


# The entry keeps the spec and the block it was keyed on alive, so their ids are not reused while
# it stands (a block built outside spec.parameters would otherwise die and lend its id to another).
_MEMO: dict[
    tuple[int, int, Ctx, int, frozenset[str] | None],
    tuple[ModelSpec, LayerParameters | None, tuple[Saved, ...]],
] = {}


def block(
    spec: ModelSpec,
    layer: LayerParameters,
    ctx: Ctx,
    *,
    cross_len: int = 0,
    frozen_input: frozenset[str] | None = None,
) -> tuple[Saved, ...]:
    """Tensors saved per token by one block of ``spec`` (a decoder block when ``cross_len``).

    ``frozen_input``: the block's input does not require grad (layer 0 under a frozen embedding,
    LoRA); the value is the set of adapted Linears, where gradients start to flow.
    Memoised per (model, block, context): ``--fit`` plans thousands of variants of one model.
    """
    key = (id(spec), id(layer), ctx, cross_len, frozen_input)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is spec and hit[1] is layer:
        return hit[2]
    items = tuple(_block(spec, layer, ctx, cross_len, frozen_input))
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[key] = (spec, layer, items)
    return items


_ATTENDING = frozenset({Mixer.ATTENTION, Mixer.HYBRID})


def _fused_qkv(layer: LayerParameters, w: Wiring, q_width: int, kv_width: int) -> bool:
    """A single Linear projects q, k and v (Phi-3 qkv_proj, GPT-2 c_attn, NeoX query_key_value)."""
    if len(w.attn_in) != 1:
        return False
    name = next(iter(w.attn_in))
    return any(
        lin.name == name and lin.out_features == q_width + 2 * kv_width for lin in layer.linears
    )


def _gated(items: list[Saved], grad: bool) -> list[Saved]:
    """Ops whose inputs do not require grad save nothing; a Linear's input stays, priced by its
    consumers (an adapter's lora_A keeps it even when no gradient reaches it)."""
    return items if grad else [x for x in items if x.consumers is not None]


def _eager_scores_on_grad_free_input(attn: list[Saved], qk_grads: tuple[bool, bool]) -> list[Saved]:
    """Eager attention's q·kᵀ keeps q for k's gradient and k for q's: on a grad-free block input
    (layer 0 under a frozen embedding, LoRA) with an adapter on only one of q_proj / k_proj, the
    other side's copy is not kept (autograd saves a matmul operand only for the other's grad)."""
    q_grad, k_grad = qk_grads
    return [
        x
        for x in attn
        if not (x.role is Role.Q and not k_grad) and not (x.role is Role.K and not q_grad)
    ]


def _gated_attention(items: list[Saved], grad: bool, w: Wiring) -> list[Saved]:
    """``_gated`` for attention: the kernel's output, when it is the output projection's input
    as is, stays for an adapter on that projection (priced by its consumers)."""
    kept = _gated(items, grad)
    if not grad and not any(x.consumers == w.attn_out for x in kept):
        out = next((x for x in items if x.role is Role.ATTENTION_OUTPUT), None)
        if out is not None:
            kept.append(Saved("o_proj input", out.width, Dt.ACT, w.attn_out))
    return kept


def _partial_gated_mlp(items: list[Saved], w: Wiring, adapted: frozenset[str]) -> list[Saved]:
    """A gated MLP on a grad-free input with adapters on only one of gate / up: act(gate) * up
    keeps up's output only if the gate branch requires grad, act's output only if up's does."""
    up = frozenset(n for n in w.mlp_in if "up" in n and "gate" not in n)
    gate = w.mlp_in - up
    if not up or not gate:
        return items
    gate_grad, up_grad = bool(gate & adapted), bool(up & adapted)
    drop: set[Role] = set()
    if not gate_grad:
        drop |= {Role.GATE_OUTPUT, Role.UP_OUTPUT}
    if not up_grad:
        drop.add(Role.ACTIVATION_OUTPUT)
    return [x for x in items if x.role not in drop]


def grad_free_inputs(
    spec: ModelSpec, layer: LayerParameters, adapted: frozenset[str]
) -> frozenset[str]:
    """Linears of a block whose input does not require grad when the block's input does not
    (PEFT on layer 0 under a frozen embedding): gradients start at the first adapter."""
    w = wiring(layer, spec.hidden_size)
    attn = bool(w.attn_in & adapted)
    free = set(w.attn_in) | (set() if attn else set(w.attn_out))
    if spec.parallel_attention_mlp or not (attn or w.attn_out & adapted):
        free |= w.mlp_in | w.expert_in
        if not (w.mlp_in & adapted or w.expert_in & adapted):
            free |= w.mlp_out | w.expert_out
    return frozenset(free)


def _block(
    spec: ModelSpec,
    layer: LayerParameters,
    ctx: Ctx,
    cross_len: int,
    frozen_input: frozenset[str] | None = None,
) -> list[Saved]:
    traits = spec.traits
    h = spec.hidden_size
    w = wiring(layer, h)
    has_mlp = bool(layer.mlp or layer.experts)
    p_res, p_attn = dropout(spec)
    widths = block_widths(spec, layer)
    q_width, kv_width = widths.q, widths.k
    own = state_recipe(spec, layer, ctx, w)
    # a state mixer alone (gated DeltaNet, Mamba-2 modelled) replaces the attention recipe; beside
    # attention (Mixer.HYBRID) it adds to it; an unmodelled state mixer is planned as attention
    mixer = own is not None and layer.mixer is Mixer.STATE
    attends = layer.mixer in _ATTENDING or (layer.mixer is Mixer.STATE and not mixer)
    fused = attends and (
        _fused_qkv(layer, w, q_width, kv_width)
        or (ctx.fused_qkv and (kv_width == q_width or ctx.qkv_views))
    )
    attn: list[Saved] = []
    if not attends:
        pass
    elif spec.mla is not None:
        attn = _mla_attention(spec, ctx, w, p_attn) + _latent_norms(spec, ctx)
    else:
        attn = _attention(
            spec,
            ctx,
            w,
            p_attn=p_attn,
            q_width=q_width,
            kv_width=kv_width,
            fused=fused,
            v_width=widths.v,
            out_width=widths.out,
        )
        attn = _output_gate(spec, attn, w, q_width, widths.out)
    if fused and not (ctx.eager or traits.eager_only or _falcon_kv_copies(spec)):
        # One projection makes q, k and v. Without a KV cache v — and q, k too when no RoPE
        # rewrites them — stay views of its output, so the kernel keeps it whole. A cache hands
        # the kernel its own (concatenated) copies of k and v: then only an un-rotated q is a
        # view of the fused output.
        roped = spec.position_encoding.value == "rope"
        if not ctx.cached:
            attn = [
                Saved("fused qkv output (v is a view)", q_width + 2 * kv_width, Dt.ACT),
                *[x for x in attn if x.role not in _QKV],
            ]
            if roped:
                attn += [Saved("q, k after RoPE", q_width + kv_width, Dt.ACT)]
        elif not roped:
            attn = [
                Saved("fused qkv output (q is a view)", q_width + 2 * kv_width, Dt.ACT),
                *[x for x in attn if x.role is not Role.Q],
            ]

    # PEFT with a frozen embedding: nothing before the first adapter requires grad, so layer 0's
    # leading norm saves nothing, nor does any branch no adapter feeds (frozen_input).
    adapted = frozen_input if frozen_input is not None else frozenset()
    lead = frozen_input is None
    qk_grads = (lead or "q_proj" in adapted, lead or "k_proj" in adapted)
    separate_qk = {"q_proj", "k_proj"} <= w.attn_in  # a fused qkv adapter feeds both
    if not lead and separate_qk and (ctx.eager or traits.eager_only) and spec.mla is None:
        attn = _eager_scores_on_grad_free_input(attn, qk_grads)
    if attends:
        # the block's own head width (MLA's q is nope + rope wide: the spec's stands)
        head_dim = spec.head_dim if spec.mla is not None else q_width // spec.num_heads
        attn += _qk_norms(spec, ctx, (q_width, kv_width), qk_grads, fused=fused, head_dim=head_dim)
        if traits.v_norm and (lead or "v_proj" in adapted or "k_proj" in adapted):
            attn += _v_norm(spec, widths.v, head_dim)
    if attends and traits.qk_norm is QkNorm.L2_ROPE_LAYERS:
        attn += _llama4_attention(spec, q_width, kv_width, qk_grads)
    if own is not None:
        attn += own
    elif layer.mixer is Mixer.HYBRID and spec.state is not None:
        # an unmodelled state mixer beside attention: the attention recipe stands in for it too
        # (mixer_notes says so), as it does for a state block's
        attn += [replace(x, what=f"state mixer stand-in: {x.what}") for x in attn]
    attn_grad = lead or bool(w.attn_in & adapted)
    items: list[Saved] = []
    if spec.parallel_attention_mlp:
        # Attention and MLP read the same residual: one norm (Phi, Falcon-7B), or two norms of
        # the same input (GPT-NeoX, Falcon-40B's ln_attn / ln_mlp) that share its saved copy.
        if layer.norms >= 4 * h:
            items += _gated(_norm(spec, ctx, "attention norm", w.attn_in), lead)
            mlp_norm = _norm(spec, ctx, "MLP norm", w.mlp_in)
            items += _gated([x for x in mlp_norm if x.role is not Role.NORM_INPUT], lead)
        else:
            items += _gated(_norm(spec, ctx, "norm", w.attn_in | w.mlp_in), lead)
        items += _gated_attention(attn, attn_grad, w)
        mlp_input_grad = lead
        mlp_grad = lead or bool((w.mlp_in | w.expert_in) & adapted)
        out_grad = lead or attn_grad or mlp_grad or bool((w.attn_out | w.mlp_out) & adapted)
    elif traits.post_norms is PostNorms.AFTER and layer.mixer is not Mixer.STATE:
        # (OLMo Hybrid's DeltaNet blocks are pre-norm: OlmoHybridLinearAttentionDecoderLayer)
        # No norm before either branch: q/k/v and gate/up read the residual stream itself.
        items.append(Saved("block input (q/k/v input)", h, Dt.RES, w.attn_in, tp=False, cast=True))
        items += _gated_attention(attn, attn_grad, w)
        attn_grad = attn_grad or bool(w.attn_out & adapted)
        items += _gated(_norm(spec, ctx, "post-attention norm", frozenset()), attn_grad)
        items.append(Saved("residual (gate/up input)", h, Dt.RES, w.mlp_in, tp=False, cast=True))
        mlp_input_grad = attn_grad
        mlp_grad = attn_grad or bool((w.mlp_in | w.expert_in) & adapted)
        out_grad = mlp_grad or bool((w.mlp_out | w.expert_out) & adapted)
        items += _gated(_norm(spec, ctx, "post-MLP norm", frozenset()), out_grad)
    elif traits.post_ln:
        # q/k/v read the block's input (the previous block's output LayerNorm, or the
        # embedding's); each LayerNorm keeps its input and statistics after its residual add,
        # and the output LayerNorm's output is counted by its reader (next block, MLM head).
        items.append(Saved("block input (q/k/v input)", h, Dt.RES, w.attn_in, tp=False, cast=True))
        items += _gated_attention(attn, attn_grad, w)
        attn_grad = attn_grad or bool(w.attn_out & adapted)
        items += _gated(_residual_dropout(p_res, h, 1), attn_grad)
        items += _gated(_norm(spec, ctx, "attention output norm", w.mlp_in), attn_grad)
        mlp_input_grad = attn_grad
        mlp_grad = attn_grad or bool(w.mlp_in & adapted)
        out_grad = mlp_grad or bool(w.mlp_out & adapted)
        items += _gated(_norm_read_elsewhere(spec, ctx, "output norm"), out_grad)
    else:
        if attn:  # a block with no token mixer (Mixer.NONE) has no attention norm either
            items += _gated(_norm(spec, ctx, "attention norm", w.attn_in), lead)
        items += _gated_attention(attn, attn_grad, w)
        attn_grad = attn_grad or bool(w.attn_out & adapted)
        items += _gated(_residual_dropout(p_res, h, 1), attn_grad)
        if cross_len:
            items += _norm(spec, ctx, "cross-attention norm", frozenset({"q"}))
            # no window in cross-attention
            cross = Ctx(cross_len, ctx.eager, ctx.compile, mixer_kernels=ctx.mixer_kernels)
            # k and v are projections of the encoder's tokens: per decoder token they weigh
            # encoder length / decoder length
            ratio = cross_len / ctx.s
            items += [
                replace(x, width=x.width * ratio) if x.role in _KV else x
                for x in _attention(
                    spec, cross, w, p_attn=p_attn, q_width=q_width, kv_width=q_width
                )
                if x.width
            ]
            items += _residual_dropout(p_res, h, 1)
        # only MoE blocks route (dense blocks: DeepSeek's first_k_dense_replace, Llama 4's
        # interleave, Qwen2-MoE's mlp_only_layers); under autocast the router keeps its own cast
        # (Gemma 4's router reads the residual through a norm of its own)
        routes = layer.experts and not traits.experts_beside_mlp
        router = frozenset({"router"}) if routes else frozenset()
        if has_mlp:  # Nemotron-H's attention-only and state-only blocks: one norm, one mixer
            items += _gated(_norm(spec, ctx, "MLP norm", w.mlp_in | router), attn_grad)
        mlp_input_grad = attn_grad
        mlp_grad = attn_grad or bool((w.mlp_in | w.expert_in) & adapted)
        out_grad = mlp_grad or bool((w.mlp_out | w.expert_out) & adapted)
        if traits.post_norms is PostNorms.BOTH:
            items += _gated(_norm(spec, ctx, "post-attention norm", frozenset()), attn_grad)
            items += _gated(_norm(spec, ctx, "post-MLP norm", frozenset()), out_grad)
    beside = bool(layer.experts) and spec.moe is not None and traits.experts_beside_mlp
    if beside:
        # Gemma 4: the router and the experts read the residual beside the dense MLP, so each
        # branch keeps what it keeps when a gradient reaches it (an adapter on gate_proj alone
        # leaves the experts' branch grad-free)
        routed = _moe(spec, ctx, w)
        items += _gated(routed, mlp_input_grad or bool((w.expert_in | w.expert_out) & adapted))
        mlp_grad = mlp_input_grad or bool(w.mlp_in & adapted)
    mlp: list[Saved]
    if not has_mlp:
        mlp = []
    elif layer.experts and spec.moe is not None and not beside:
        mlp = _moe(spec, ctx, w)
    elif spec.mlp.value == "gated":
        i = spec.intermediate_size
        py = traits.activation is Activation.PY_GELU and not ctx.native_gelu
        mlp = _gated_mlp(ctx, i, w.mlp_in, w.mlp_out, py)
        if not mlp_input_grad:
            mlp = _partial_gated_mlp(mlp, w, adapted)
        if traits.t5_stack and p_res > 0:
            mlp += [Saved("activation dropout mask", i, Dt.MASK)]
        if beside:  # post_feedforward_layernorm_1
            mlp += _norm(spec, ctx, "dense MLP post-norm", frozenset())
    else:
        mlp = _plain_mlp(spec, ctx, w.mlp_out, p_res)
    items += _gated(mlp, mlp_grad)
    items += _gated(_residual_dropout(p_res, h, 1), out_grad)
    items += _per_layer_input(spec, ctx, layer, out_grad, adapted, lead)
    return items


def head(spec: ModelSpec, ctx: Ctx, *, frozen_embedding: bool = False) -> tuple[Saved, ...]:
    """Per-token tensors outside the blocks, except the logits (``loss.py``)."""
    key = (id(spec), -1, ctx, 0, frozenset({"embedding"}) if frozen_embedding else None)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is spec and hit[1] is None:
        return hit[2]
    items = tuple(_head(spec, ctx, frozen_embedding))
    _MEMO[key] = (spec, None, items)
    return items


def _head(spec: ModelSpec, ctx: Ctx, frozen_embedding: bool = False) -> list[Saved]:
    h = spec.hidden_size
    p_res, _ = dropout(spec)
    grad = not frozen_embedding  # a frozen embedding's output does not require grad
    items = [Saved("input ids", 1, Dt.I64, frozenset({"embedding"}), tp=False)]
    post_ln = spec.traits.post_ln
    if spec.parameters.position_embedding and not post_ln:
        # BERT slices its position ids from a buffer (BertEmbeddings.position_ids): no new tensor
        items.append(Saved("position ids", 1, Dt.I64, frozenset({"embedding"}), tp=False))
    items += _gated(_residual_dropout(p_res, h, 1), grad)
    items += _gated(_per_layer_projection(spec), grad)
    if spec.traits.embedding_norm:
        items += _gated(_norm(spec, ctx, "embedding norm", frozenset()), grad)
    if post_ln:
        # its output is block 0's input, counted there
        items += _gated(_norm_read_elsewhere(spec, ctx, "embedding norm"), grad)
        return items + _mlm_head(spec, ctx)
    if spec.structure.value == "encoder-decoder":
        # Decoder ids, the encoder's final norm, and its output, which every cross-attention's
        # k and v projections read.
        items.append(
            Saved(
                "decoder input ids",
                1,
                Dt.I64,
                frozenset({"embedding"}),
                tp=False,
                decoder_side=True,
            )
        )
        items += _norm(spec, ctx, "encoder final norm", frozenset({"k", "v"}))
    if spec.parameters.final_norm:
        final = _norm(spec, ctx, "final norm", frozenset({"lm_head"}))
        items += [replace(x, decoder_side=True) for x in final]
    items.append(Saved("labels (shifted)", 1, Dt.I64, tp=False, decoder_side=True))
    return items


# The transform's Linear: in the catalog's names its weight trains with the blocks' "dense"
# (PEFT's target "dense" adapts it too).
_MLM_DENSE = frozenset({"dense"})


def _mlm_head(spec: ModelSpec, ctx: Ctx) -> list[Saved]:
    """BERT's MLM head (modeling_bert.py BertPredictionHeadTransform, BertLMPredictionHead):
    dense → GELU → LayerNorm → decoder over the last block's output LayerNorm. Its loss reads
    the labels as given (no shift; the exact trace passes the ids themselves)."""
    h = spec.hidden_size
    return [
        Saved(
            "last output norm output",
            h,
            Dt.RES,
            _MLM_DENSE,
            tp=False,
            cast=True,
            role=Role.NORM_OUTPUT,
        ),
        Saved("transform GELU input", h, Dt.ACT, tp=False),
        *_norm(spec, ctx, "transform norm", frozenset({"lm_head"})),
    ]


def expands_kv(request: PlanRequest) -> bool:
    """Whether GQA K/V reach a fused SDPA kernel copied to every head, which keeps the copies:
    torchtune's MultiHeadAttention (expand + reshape) and transformers' SDPA path before 2025
    (repeat_kv; flash-attention 2 takes grouped K/V). torch.compile keeps the copies too: they are
    inputs of SDPA's backward, and the min-cut partitioner never recomputes a tensor the backward
    must materialise (partitioners.py should_ban_recomputation; LitGPT's Block traced through it,
    ``exact._compiled``: k and v saved at every head's width)."""
    if request.framework in {Framework.TORCHTUNE, Framework.LITGPT}:
        return True  # torchtune expand + reshape; LitGPT "training: flash attention requires it"
    return request.framework is Framework.HF_LEGACY and request.attention is Attention.SDPA


def mask_share(spec: ModelSpec, s: int, sdpa: bool) -> float:
    """Share of blocks that pass SDPA an explicit sliding-window mask (see ``Ctx.masked``)."""
    window = spec.sliding_window
    if not sdpa or window is None or s < window or spec.num_layers == 0:
        return 0.0
    return min(1.0, spec.sliding_window_layers / spec.num_layers)


def rope_bytes(spec: ModelSpec, s: int, res_bytes: int) -> int:
    """cos and sin tables, one per sequence position, shared by all blocks."""
    if spec.position_encoding.value != "rope":
        return 0
    tables = spec.traits.rope_tables
    if tables is RopeTables.COMPLEX:
        # Llama4TextRotaryEmbedding returns one complex64 table, freqs_cis [s, d/2] (8 B each)
        return s * rotary_dim(spec) * 4
    if tables is RopeTables.FP32:
        res_bytes = FP32_BYTES  # Olmo2RotaryEmbedding returns fp32 cos / sin (no cast to x's dtype)
    # Gemma 3 builds one table pair per layer type (sliding: local base, global: rope_theta).
    mixed = tables is RopeTables.PER_LAYER_TYPE and 0 < spec.sliding_window_layers < spec.num_layers
    return (2 if mixed else 1) * 2 * s * rotary_dim(spec) * res_bytes


def batch_shared(
    spec: ModelSpec,
    s: int,
    dec_s: int,
    dtype_bytes: tuple[float, float],
    *,
    sdpa: bool,
    recomputed: bool,
    embeddings_train: bool,
) -> float:
    """Bytes a micro-batch keeps whatever its batch size: (1, s) ids and (s, s) tables that
    broadcast over its sequences. ``dtype_bytes``: (compute, weights / residual stream);
    ``embeddings_train``: the embeddings (T5's relative position bias with them) get gradients.
    """
    if spec.traits.post_ln:
        # token-type ids gathered from BertEmbeddings' (1, max_positions) buffer, then expanded
        return 8.0 * s * embeddings_train
    if not spec.traits.t5_stack:
        return 0.0
    if recomputed:
        return _t5_checkpointed_bias(spec, s, dec_s, dtype_bytes)
    dec = t5_stacks(spec)[1]
    kept = 0.0
    if embeddings_train:
        # T5Attention.compute_bias (first block of each stack; the others reuse its
        # position_bias): the bias Embedding keeps its int64 (s, s) bucket indices
        kept += 8.0 * (s * s + dec_s * dec_s * bool(dec))
    if sdpa:
        kept += _t5_sdpa_masks(spec, s, dec_s, dtype_bytes[0], embeddings_train)
    return kept


def _t5_sdpa_masks(spec: ModelSpec, s: int, dec_s: int, act: float, bias_grad: bool) -> float:
    """sdpa_attention.create_position_bias_mask hands SDPA a fresh contiguous (1, a, s, s)
    additive mask in every block; the decoder's goes through torch.where, which keeps its bool
    causal condition when the bias requires grad. A fused kernel keeps the mask, in the compute
    dtype (autocast casts it): with a learned bias that requires grad the only one that takes it
    is CUDA's memory-efficient kernel (derivatives.yaml: _scaled_dot_product_efficient_attention
    differentiates attn_bias; flash takes no mask, CPU flash no mask gradient), which pads its
    rows to 8 (attention.cpp preprocess_mask). Cross-attention's zero bias, (1, a, dec, s), is
    made once per stack."""
    enc, dec = t5_stacks(spec)
    a = spec.num_heads
    kept = enc * a * s * _mem_eff_row(s) * act
    if dec:
        kept += dec * (a * dec_s * _mem_eff_row(dec_s) * act + dec_s * dec_s * bias_grad)
        kept += a * dec_s * _mem_eff_row(s) * act
    return kept


def _t5_checkpointed_bias(
    spec: ModelSpec, s: int, dec_s: int, dtype_bytes: tuple[float, float]
) -> float:
    """Full checkpointing: T5Stack hands block 0's position_bias (the bias Embedding's output,
    in the weights' dtype) to every later block as an input, and under gradient checkpointing
    the decoder's zero cross-attention bias requires grad (T5Attention.forward), so the later
    blocks' checkpoints keep both."""
    act, weights = dtype_bytes
    enc, dec = t5_stacks(spec)
    a = spec.num_heads
    kept = a * s * s * weights * (enc > 1)
    if dec > 1:
        kept += a * dec_s * dec_s * weights + a * dec_s * s * act
    return kept


def _mem_eff_row(n: int) -> int:
    """attention.cpp preprocess_mask: a mask whose strides are not multiples of 8 is padded."""
    return -(-n // 8) * 8


def t5_stacks(spec: ModelSpec) -> tuple[int, int]:
    """(encoder blocks, decoder blocks) of an encoder-decoder."""
    blocks = len(spec.parameters.layers)
    if spec.structure is not Structure.ENCODER_DECODER:
        return blocks, 0
    return spec.num_encoder_layers, blocks - spec.num_encoder_layers


def rotary_dim(spec: ModelSpec) -> int:
    """Head dims RoPE rotates: the cos/sin tables cover only these (partial_rotary_factor in
    Phi / StableLM / Persimmon, rotary_pct in GPT-NeoX; MLA's decoupled RoPE head)."""
    if spec.mla is not None:
        return spec.mla.qk_rope_head_dim
    raw = spec.raw_config
    params = raw.get("rope_parameters")
    factor = raw.get("partial_rotary_factor", raw.get("rotary_pct"))
    if factor is None and isinstance(params, dict):
        factor = params.get("partial_rotary_factor")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and 0 < factor < 1:
        return int(spec.head_dim * factor)
    return spec.head_dim


def framework_model(request: PlanRequest) -> PlanRequest:
    """The request with the model its framework builds.

    transformers before 5 kept a T5 v1.1 / mT5 LM head of its own when the config unties it
    (``tie_word_embeddings: false``: mT0, Flan-T5 v1.1; the checkpoints store ``lm_head.weight``),
    + vocabulary × d_model parameters; transformers 5 ties every T5 head (its T5Config forces
    ``tie_word_embeddings=True``), which is what the catalog counts.

    LitGPT's GPT has an ``lm_head`` Linear of its own, tied only under ``tie_embeddings``, and
    its checkpoint conversion copies the embedding into it when the HF checkpoint has no head
    (``convert_hf_checkpoint``: ``state_dict["lm_head.weight"] = state_dict["transformer.wte
    .weight"]``): a tied model (Gemma, Llama 3.2) gets + vocabulary × hidden parameters.
    """
    spec = request.model
    if spec.parameters.lm_head:
        return request
    untied_t5 = spec.raw_config.get("tie_word_embeddings", True) is False
    legacy_t5 = request.framework is Framework.HF_LEGACY and spec.traits.t5_stack and untied_t5
    own_head = stacks.profile(request).unties_head and spec.structure is Structure.DECODER
    if not (legacy_t5 or own_head):
        return request
    head = spec.vocab_size * spec.hidden_size
    model = replace(spec, parameters=replace(spec.parameters, lm_head=head), tied_embeddings=False)
    return replace(request, model=model)
