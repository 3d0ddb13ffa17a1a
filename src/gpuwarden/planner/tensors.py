"""The vocabulary of the activation recipes: a saved tensor, the block context, the wiring.

A ``Saved`` item is one tensor autograd keeps per token of a micro-batch. A tensor that only a
Linear's weight gradient needs names that Linear in ``consumers``: it is kept only when that weight
trains or carries an adapter reading the same storage (LoRA). ``families.py`` lists the items of
each model family; ``activations.py`` prices them for one job. Code that picks items out of a
recipe tests their ``role`` (or a flag), never ``what``, which is display text for reports and
trace comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuwarden.types.model import LayerParameters, LinearShape, ModelSpec


class Dt(StrEnum):
    ACT = "act"  # compute dtype (bf16 under mixed precision)
    RES = "res"  # residual stream / norm input dtype (fp32 under autocast)
    F32 = "f32"
    I64 = "i64"
    MASK = "mask"  # dropout mask: torch.bool on CUDA


class Role(StrEnum):
    """What a saved tensor is, for the code that picks items out of a recipe."""

    # q, k, v as the attention of ``families._attention`` keeps them (MLA's carry no role: the
    # fused-qkv and cross-attention selections never apply to them)
    Q = "q"  # the query the attention kernel keeps
    K = "k"  # the key it keeps (one head or all heads, a copy or a view)
    V = "v"  # the value it keeps
    ATTENTION_OUTPUT = "attention output"  # a fused (SDPA) attention kernel's output
    NORM_INPUT = "norm input"  # a norm's input as it keeps it (its fp32 copy, or as is)
    NORM_OUTPUT = "norm output"  # a norm's output, which the Linears after it read
    GATE_OUTPUT = "gate output"  # a gated MLP's gate projection output, the activation's input
    UP_OUTPUT = "up output"  # a gated MLP's up projection output, the product's other factor
    ACTIVATION_OUTPUT = "activation output"  # act(gate), the product's first factor
    # What the routed experts' dispatch saves per routed (token, expert) pair. In backward their
    # gradients exist only per dispatch call (one expert's tokens when the experts loop), so the
    # block's gradient working set takes them from working_set.moe_gradient_bytes instead of
    # doubling the widest of them (activations.py).
    ROUTED_DISPATCH = "routed dispatch"
    # a head item that is the same tensor as the first block's input (Gemma 4's embedding output,
    # read by the per-layer projection): full checkpointing keeps it as that block's input already
    FIRST_BLOCK_INPUT = "first block input"


@dataclass(frozen=True, slots=True)
class Saved:
    what: str  # display text only: reports and exact-trace comparisons print it
    width: float  # elements per token
    dtype: Dt
    consumers: frozenset[str] | None = None  # kept only for these Linears' weight gradients
    tp: bool = True  # split over tensor-parallel ranks (False: replicated unless SP)
    norm: bool = False  # kept only when the norm's own weight trains (x̂ for ∂L/∂γ)
    cast: bool = False  # under autocast each consumer keeps its own bf16 cast of this input
    quadratic: bool = False  # grows with s² per sequence (eager attention): dropped by selective
    low_precision_only: bool = False  # a cast that does not exist when activations are fp32
    # an fp32 copy of a residual-stream tensor: with an fp32 residual stream (fp32 weights, or
    # autocast) .to(float32) returns the tensor itself, already counted
    residual_cast: bool = False
    autocast_f32: bool = False  # autocast runs the op in fp32: its fp32 result + the bf16 cast
    role: Role | None = None  # what it is, where a selection needs to know (None: no one asks)
    # outside the blocks of an encoder-decoder: one per decoder (label) token, not per input token
    decoder_side: bool = False


@dataclass(frozen=True, slots=True)
class Ctx:
    s: int  # full sequence length (eager attention keeps a·s² per sequence)
    eager: bool
    compile: bool
    # Share of blocks whose SDPA call gets an explicit mask (a sliding window the sequence
    # reaches): torch converts it to an additive mask per call, the memory-efficient kernel keeps
    # it, and HF expands GQA K/V with repeat_kv because CUDA SDPA cannot mask and group at once
    # (transformers integrations/sdpa_attention.py use_gqa_in_sdpa).
    masked: float = 0.0
    # One sequence per micro-batch: eager attention's expand+reshape and matmul's reshape of a
    # (1, heads, s, d) view stay views, so one K/V head (MQA) or a fused qkv output is kept as is.
    single: bool = False
    # GQA K/V copied to every head before a fused SDPA kernel (torchtune; transformers' SDPA path
    # before 2025), which keeps the copies for backward.
    expand_kv: bool = False
    # transformers builds a KV cache in this forward (use_cache, no checkpointing): attention
    # reads the cache's concatenated copies of k and v
    cached: bool = False
    # one Linear projects q, k and v (LitGPT's attn.attn / qkv): a v that is a view of its output
    # keeps the whole fused output alive, as for Phi-3's qkv_proj
    fused_qkv: bool = False
    # the MLP's GELU is torch's own kernel (LitGPT: F.gelu(approximate="tanh")), which keeps its
    # input only, where transformers' Python gelu_new (phi, GPT-2) keeps four tensors
    native_gelu: bool = False
    # the stack hands SDPA q laid out (b, heads, s, d) (StackProfile.heads_first_q), so merging
    # the heads copies SDPA's output: the output projection's input is a tensor of its own, as
    # the model's own code makes it for BlockTraits.sdpa_out_copy
    heads_first_q: bool = False
    # Megatron-core (stacks.py): each norm is one kernel (Transformer Engine's LayerNormLinear /
    # TENorm, apex's FusedLayerNorm) that keeps its input as it comes (the 16-bit residual stream)
    # and fp32 rsigma (and mu): no fp32 copy of the input, no x̂
    fused_norms: bool = False
    # Megatron-core's bias-SwiGLU / GeGLU fusion keeps the fc1 output (gate and up) only and
    # recomputes the activation in backward: no activation output of its own
    fused_glu: bool = False
    # q, k and v are torch.split views of one fused QKV output whatever the number of KV heads
    # (Megatron's SplitAlongDim): v, a view, keeps the whole output alive under GQA too
    qkv_views: bool = False
    # a hybrid's state mixers run their kernels (fla, causal-conv1d, mamba-ssm), not transformers'
    # torch fallbacks (planner/state.py mixer_kernels: --[no-]mixer-kernels, else not eager)
    mixer_kernels: bool = True


def _p(spec: ModelSpec, default: float, *keys: str) -> float:
    for key in keys:
        value = spec.raw_config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return default


def dropout(spec: ModelSpec) -> tuple[float, float]:
    """(residual/embedding dropout, attention dropout) in training: the config keys the family
    reads them from and transformers' default (BlockTraits.dropout)."""
    keys = spec.traits.dropout
    return _p(spec, keys.default, *keys.residual), _p(spec, keys.default, *keys.attention)


# --- the Linears a block feeds from each tensor --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Wiring:
    attn_in: frozenset[str]  # read the attention norm's output (q/k/v, fused qkv, MLA down-proj)
    attn_out: frozenset[str]  # the output projection
    mlp_in: frozenset[str]  # read the MLP norm's output (gate/up, fc1)
    mlp_out: frozenset[str]  # down / fc2
    expert_in: frozenset[str]
    expert_out: frozenset[str]


def _split(linears: tuple[LinearShape, ...], h: int) -> tuple[frozenset[str], frozenset[str]]:
    if not linears:
        return frozenset(), frozenset()
    out = linears[-1].name
    ins = frozenset(lin.name for lin in linears[:-1] if lin.in_features == h) or frozenset(
        lin.name for lin in linears[:1]
    )
    return ins, frozenset({out})


def wiring(layer: LayerParameters, h: int) -> Wiring:
    def part(*names: str) -> tuple[LinearShape, ...]:
        return tuple(lin for lin in layer.linears if lin.part in names and not lin.expert)

    attn = part("attention")
    mlp = part("mlp", "shared_experts")
    experts = tuple(lin for lin in layer.linears if lin.expert)
    if not attn and not mlp:  # a catalog without `part`: Linears in block order
        plain = tuple(lin for lin in layer.linears if not lin.expert)
        split = next((i for i, lin in enumerate(plain) if lin.out_features == h), 0) + 1
        attn, mlp = plain[:split], plain[split:]
    a_in, a_out = _split(attn, h)
    m_in, m_out = _split(mlp, h)
    e_in, e_out = _split(experts, h)
    return Wiring(a_in, a_out, m_in, m_out, e_in, e_out)
