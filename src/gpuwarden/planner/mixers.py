"""What a hybrid's state blocks keep per token in training: the token mixers that replace
attention (gated DeltaNet, Mamba-2, Mamba-1, LFM2's short convolution), from their input
projections' outputs to their output projection's input. The rest of such a block (norms, MLP,
residuals) is families.py's.

Each recipe is planned two ways: transformers' torch fallbacks (traced with saved-tensor hooks on
CPU) or, with ``ctx.mixer_kernels``, the GPU kernels' own ``save_for_backward`` (read from their
source). The mixers' sizes are the catalog's (``StateSpec`` and its ``mixer_shape``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwarden.planner.layout import ceil_div
from gpuwarden.planner.state import mixer_kernels
from gpuwarden.planner.tensors import Ctx, Dt, Saved, Wiring
from gpuwarden.types.model import (
    DeltaNetShape,
    LayerParameters,
    Mamba1Shape,
    Mamba2Shape,
    Mixer,
    ModelSpec,
    ScanNorms,
    StateKind,
    StateSpec,
)
from gpuwarden.types.plan import PlanRequest

# the chunk length of the gated-delta-rule scan (torch_chunk_gated_delta_rule chunk_size; fla 64)
GDN_CHUNK = 64


_STATE_MIXERS = frozenset({Mixer.STATE, Mixer.HYBRID})


def state_block(spec: ModelSpec, layer: LayerParameters) -> bool:
    """A hybrid's block whose token mixer keeps a state (gated DeltaNet, Mamba, short
    convolutions), alone or beside attention, as the catalog marks it (``layer.mixer``)."""
    return spec.state is not None and layer.mixer in _STATE_MIXERS


def modelled_mixer(spec: ModelSpec) -> bool:
    """Whether the state blocks' own recipe is modelled (else the attention recipe stands in):
    a gated DeltaNet, a Mamba-2 mixer (``_mamba2_dims``), a traced Mamba-1 mixer
    (``_mamba1_dims``) or LFM2's short convolution, as the catalog's StateSpec.mixer_shape
    describes them."""
    state_layers = [layer for layer in set(spec.layer_parameters) if state_block(spec, layer)]
    if _deltanet(spec) is not None:
        return bool(state_layers)
    return any(
        _mamba2_dims(spec, layer) is not None
        or _mamba1_dims(spec, layer) is not None
        or _short_conv(spec, layer) is not None
        for layer in state_layers
    )


def _deltanet(spec: ModelSpec) -> tuple[StateSpec, DeltaNetShape] | None:
    state = spec.state
    if state is None or state.kind != StateKind.GATED_DELTANET:
        return None
    shape = state.mixer_shape
    return (state, shape) if isinstance(shape, DeltaNetShape) else None


# the GPU kernels each modelled state mixer's training forward calls when installed
_MIXER_KERNELS = {
    StateKind.GATED_DELTANET: ("fla", "causal-conv1d"),
    StateKind.MAMBA2: ("mamba-ssm", "causal-conv1d"),
    StateKind.MAMBA: ("mamba-ssm", "causal-conv1d"),
    StateKind.SHORT_CONV: ("causal-conv1d",),
}


def mixer_notes(request: PlanRequest) -> dict[str, str]:
    """The plan's word on how a hybrid's state blocks' activations were planned."""
    state = request.model.state
    if state is None:
        return {}
    if not modelled_mixer(request.model):
        return {
            "state_blocks": f"the {state.num_layers} {state.kind} blocks' mixer internals are "
            "approximated: their saved tensors are planned as the attention recipe's"
        }
    kernels = _MIXER_KERNELS[state.kind]  # modelled_mixer: one of the kinds it lists
    several = len(kernels) > 1
    whose, noun = ("kernels'", "kernels") if several else ("kernel's", "kernel")
    how = (
        f"the {' and '.join(kernels)} {whose} saved tensors, read from their source"
        if mixer_kernels(request)
        else f"transformers' torch fallbacks (no {' / '.join(kernels)} {noun}), traced"
    )
    return {"state_blocks": f"{state.num_layers} {state.kind} blocks planned with {how}"}


def gated_deltanet(state: StateSpec, net: DeltaNetShape, ctx: Ctx, w: Wiring) -> list[Saved]:
    """What Qwen3NextGatedDeltaNet (modeling_qwen3_next.py; Qwen3.5's is the same mixer) keeps
    per token, from its input projections' outputs to out_proj's input.

    Without ``ctx.mixer_kernels`` it plans transformers' torch fallbacks, traced with saved-tensor
    hooks on CPU (torch 2.13, transformers 5.24: causal_conv1d_fn's reference conv + SiLU and
    torch_chunk_gated_delta_rule, which repeats q/k to the value heads and runs in fp32 over
    chunks of 64). Otherwise the GPU kernels: causal-conv1d's CausalConv1dFn keeps the conv input
    only (SiLU fused), and fla's ChunkGatedDeltaRuleFunction (fla/ops/gated_delta_rule/chunk.py
    ``ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, initial_state, cu_seqlens)``)
    keeps the l2-normalised q and k at the key heads, v, the cumulated gate, beta and the
    chunk-local WY matrix A (in k's dtype), recomputing the rest in backward (read, not traced).
    The gated RMSNorm after the scan is transformers' own in both.
    """
    key_heads, dk, dv = net.key_heads, net.key_head_dim, net.value_head_dim
    heads = state.num_heads  # value heads
    conv = state.conv_channels  # 2 · key_dim + value_dim
    value = heads * dv
    norm = [
        Saved("gated norm fp32 input and gate", 2 * value, Dt.F32),
        Saved("gated norm SiLU(gate) (fp32)", value, Dt.F32),
        Saved("gated norm rstd", heads, Dt.F32),
        Saved("gated norm output and product", 2 * value, Dt.ACT),
        Saved("out_proj input", value, Dt.ACT, w.attn_out),
    ]
    gates = [
        Saved("softplus input, decay product (fp32)", 2 * heads, Dt.F32),
        Saved("beta = sigmoid(b)", heads, Dt.ACT),
    ]
    if ctx.mixer_kernels:
        return [
            Saved("conv input (causal-conv1d)", conv, Dt.ACT),
            Saved("q, k l2-normalised (fla)", 2 * key_heads * dk, Dt.ACT),
            Saved("q, k rstd (fla)", 2 * key_heads, Dt.F32),
            Saved("v (fla)", value, Dt.ACT),
            Saved("cumulated gate g (fla)", heads, Dt.F32),
            Saved("WY matrix A (fla)", heads * GDN_CHUNK, Dt.ACT),
            *gates,
            *norm,
        ]
    key = heads * dk  # q and k repeated to the value heads
    # torch_chunk_gated_delta_rule pads the sequence to a multiple of the chunk (F.pad) before
    # everything below the l2 norms: those tensors cover the padded length
    pad = ceil_div(ctx.s, GDN_CHUNK) * GDN_CHUNK / ctx.s
    padded = [
        Saved("padded k, v (fp32)", key + value, Dt.F32),
        Saved("beta (fp32), cumulated decay exps", 4 * heads, Dt.F32),
        Saved("chunk-local decay, attention and UT matrices", 5 * heads * GDN_CHUNK, Dt.F32),
        Saved("UT solves: new values, decayed keys", value + key, Dt.F32),
        Saved("decayed q, k and the scan's k slices", 4 * key, Dt.F32),
        Saved("v_new per chunk", value, Dt.F32),
        Saved("state entering each chunk", state.recurrent_state_elements / GDN_CHUNK, Dt.F32),
    ]
    return [
        Saved("conv input", conv, Dt.ACT),
        Saved("conv output (SiLU input)", conv, Dt.ACT),
        Saved("q, k fp32 (l2norm inputs) and their rstd", 2 * key + 2 * heads, Dt.F32),
        *[replace(x, width=x.width * pad) for x in padded],
        *gates,
        *norm,
    ]


# --- Mamba-2 (Nemotron-H, Granite 4.0-H, Bamba, Falcon-H1, Zamba2, Mamba-2) ----------------------


@dataclass(frozen=True, slots=True)
class Mamba2Dims:
    """One Mamba-2 mixer's sizes: ``heads`` × ``head_dim`` is its inner width; B and C have
    ``groups`` × ``d_state`` channels each; the SSD scan runs over chunks of ``chunk`` tokens."""

    heads: int
    head_dim: int
    groups: int
    d_state: int
    chunk: int
    kernel: int
    gated_norm: bool = True  # the gated RMSNorm after the scan (else y · SiLU(z))
    scaled_input_width: int = 0  # width of a scaled copy of the block input that in_proj reads

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv(self) -> int:
        return self.inner + 2 * self.groups * self.d_state


def _mamba2_dims(spec: ModelSpec, layer: LayerParameters) -> Mamba2Dims | None:
    """A Mamba-2 block's mixer sizes from its StateSpec and Mamba2Shape; None without them (the
    attention recipe then stands in, and the plan says so)."""
    state = spec.state
    if state is None or state.kind != StateKind.MAMBA2 or not state_block(spec, layer):
        return None
    scan = state.mixer_shape
    if not isinstance(scan, Mamba2Shape):
        return None
    return Mamba2Dims(
        state.num_heads,
        scan.head_dim,
        scan.groups,
        scan.d_state,
        scan.chunk_tokens,
        state.conv_kernel,
        gated_norm=scan.gated_norm,
        scaled_input_width=spec.hidden_size if scan.scaled_input else 0,
    )


def mamba2(dims: Mamba2Dims, ctx: Ctx, w: Wiring) -> list[Saved]:
    """What a Mamba-2 mixer (modeling_nemotron_h.py NemotronHMamba2Mixer; Bamba's, Granite
    4.0-H's, Mamba2's and Zamba2's are the same code) keeps per token in training, from in_proj's
    output to out_proj's input.

    With ``ctx.mixer_kernels`` the training forward is mamba-ssm's MambaSplitConv1dScanCombinedFn
    (mamba_ssm/ops/triton/ssd_combined.py, state-spaces/mamba 01b717ae: ``ctx.save_for_backward(
    zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, initial_states, seq_idx,
    rmsnorm_weight, rstd, outproj_weight, outproj_bias)``): in_proj's output, the scan's output
    before the gated RMSNorm and the norm's rstd per group; backward recomputes the causal conv,
    the norm's output and out_proj's input (read, not traced). Without, transformers' torch
    fallbacks, traced with saved-tensor hooks on CPU (torch 2.13, transformers 5.24:
    causal_conv1d_fn's F.conv1d + SiLU, then mamba2_chunk_scan in fp32 over chunks, B and C
    repeated to the heads, then NemotronHRMSNormGated in fp32).
    """
    heads, inner, conv, chunk = dims.heads, dims.inner, dims.conv, dims.chunk
    n_heads = heads * dims.d_state  # B or C repeated to the heads
    projected = Saved("in_proj output (z, xBC, dt)", inner + conv + heads, Dt.ACT)
    scaled = [Saved("in_proj input × ssm_in_multiplier", dims.scaled_input_width, Dt.ACT, _IN_PROJ)]
    head = scaled if dims.scaled_input_width else []
    rstd = [Saved("gated norm rstd", dims.groups, Dt.F32)] if dims.gated_norm else []
    if ctx.mixer_kernels:
        return [
            *head,
            replace(projected, what="in_proj output zxbcdt (mamba-ssm)"),
            Saved("scan output out_x (mamba-ssm)", inner, Dt.ACT),
            *rstd,
        ]
    s = ctx.s
    chunks = ceil_div(s, chunk)
    pad = chunks * chunk / s  # reshape_into_chunks pads the sequence to whole chunks
    padded = [
        Saved("x padded for the D skip (fp32)", inner, Dt.F32),
        Saved("L = exp(segment sum), C·Bᵀ, masked scores", 3 * heads * chunk, Dt.F32),
        Saved("B, C operands of C·Bᵀ, C of C·states", 3 * n_heads, Dt.F32),
        Saved("B chunked, B·decay", 2 * n_heads, Dt.F32),
        Saved("discretised x (diagonal output, chunk states)", 2 * inner, Dt.F32),
        Saved("decay exps (chunk states, outputs)", 2 * heads, Dt.F32),
        Saved("C·states (off-diagonal output)", inner, Dt.F32),
    ]
    return [
        *head,
        # conv1d keeps its input, a channels-first view of in_proj's output: the whole of it
        projected,
        # F.conv1d pads both sides by kernel − 1; the SiLU input is a slice of that output
        Saved("conv output (SiLU input)", conv * (s + dims.kernel - 1) / s, Dt.ACT),
        Saved("dt + dt_bias, softplus output", 2 * heads, Dt.ACT),
        Saved("x, dt fp32 (discretisation), dt fp32 (A·dt)", inner + 2 * heads, Dt.F32),
        *[replace(x, width=x.width * pad) for x in padded],
        # the states entering each chunk: the recurrence's input (chunks + 1) and output
        Saved("chunk states", (2 * chunks + 1) * heads * dims.head_dim * dims.d_state / s, Dt.F32),
        Saved("chunk-to-chunk decay", heads * (chunks + 1) ** 2 / s, Dt.F32),
        *(_gated_rms_norm(inner) if dims.gated_norm else _silu_gate(inner)),
        *rstd,
        Saved("out_proj input", inner, Dt.ACT, w.attn_out),
    ]


_IN_PROJ = frozenset({"in_proj"})


def _gated_rms_norm(inner: int) -> list[Saved]:
    """NemotronHRMSNormGated in fp32 (norm_before_gate=False): y · SiLU(z), then per group."""
    return [
        Saved("gated norm: scan output, gate, SiLU(gate), product, normalised", 5 * inner, Dt.F32)
    ]


def _silu_gate(inner: int) -> list[Saved]:
    """Falcon-H1 without mamba_rms_norm: the fp32 scan output times SiLU of the bf16 gate."""
    return [
        Saved("scan output (fp32)", inner, Dt.F32),
        Saved("SiLU(gate)", inner, Dt.ACT),
    ]


# --- Mamba-1 (Jamba, Mamba) and short convolutions (LFM2) ----------------------------------------

# selective_scan_cuda.fwd keeps the scan's state at the end of each chunk of this many tokens
# (mamba-ssm csrc/selective_scan/selective_scan.cpp: x (batch, dim, n_chunks, 2·dstate) in A's
# dtype, n_chunks = (seqlen + 2048 − 1) / 2048)
SELECTIVE_SCAN_CHUNK = 2048


@dataclass(frozen=True, slots=True)
class Mamba1Dims:
    """One Mamba-1 mixer's sizes: ``inner`` channels, each with its own ``d_state`` scan; x_proj
    makes dt (``dt_rank`` wide), B and C; ``weighted_norms``: RMSNorms with weights over dt, B
    and C (Jamba's)."""

    inner: int
    d_state: int
    dt_rank: int
    kernel: int
    weighted_norms: bool


# the dt / B / C norms whose recipe is traced (none: Mamba's; JambaMambaMixer's RMSNorms);
# FalconMambaMixer's weightless norms are not traced: attention stands in for them
_TRACED_SCAN_NORMS = frozenset({ScanNorms.NONE, ScanNorms.WEIGHTED})


def _mamba1_dims(spec: ModelSpec, layer: LayerParameters) -> Mamba1Dims | None:
    """A Mamba-1 block's mixer sizes from its StateSpec (conv channels = inner) and
    Mamba1Shape; None without them or for untraced norms (the attention recipe then stands in,
    and the plan says so)."""
    state = spec.state
    if state is None or state.kind != StateKind.MAMBA or not state_block(spec, layer):
        return None
    scan = state.mixer_shape
    if not isinstance(scan, Mamba1Shape) or scan.norms not in _TRACED_SCAN_NORMS:
        return None
    return Mamba1Dims(
        state.conv_channels,
        scan.d_state,
        scan.dt_rank,
        state.conv_kernel,
        weighted_norms=scan.norms is ScanNorms.WEIGHTED,
    )


def mamba1(dims: Mamba1Dims, ctx: Ctx, w: Wiring) -> list[Saved]:
    """What a Mamba-1 mixer (modeling_mamba.py MambaMixer, modeling_jamba.py JambaMambaMixer)
    keeps per token in training, from in_proj's output to out_proj's input.

    Without ``ctx.mixer_kernels``: transformers' torch fallbacks, traced with saved-tensor hooks
    on CPU (torch 2.13, transformers 5.24: causal_conv1d_fn's F.conv1d + SiLU, then
    mamba_selective_scan's step-by-step recurrence, which keeps the discretised A and B·u for
    every token and channel, each step's fp32 state and its bf16 copy for the C matmul: about
    14 · inner · d_state bytes per token in bf16). With the kernels: MambaMixer's training forward
    is mamba-ssm's MambaInnerFn (mamba_ssm/ops/selective_scan_interface.py, state-spaces/mamba
    01887ed7: checkpoint_lvl 1 ``ctx.save_for_backward(xz, ..., x_dbl, ..., conv1d_out=None,
    delta=None, A, B, C, D, delta_bias, scan_intermediates, out, ...)``, the conv and delta
    recomputed in backward); JambaMambaMixer calls causal-conv1d's CausalConv1dFn (keeps its
    input; causal_conv1d_interface.py, Dao-AILab/causal-conv1d 17f4f2fe) and SelectiveScanFn
    (``save_for_backward(u, delta, A, B, C, D, z, delta_bias, x, out)``, contiguous copies of
    the strided z, B and C) (read, not traced).
    """
    inner, n, rank, s = dims.inner, dims.d_state, dims.dt_rank, ctx.s
    scan_states = Saved(
        "scan state per 2048-token chunk (mamba-ssm, fp32)",
        2 * n * inner * ceil_div(s, SELECTIVE_SCAN_CHUNK) / s,
        Dt.F32,
    )
    norms = _mamba1_norms(dims) if dims.weighted_norms else []
    if ctx.mixer_kernels and not dims.weighted_norms:
        return [
            Saved("in_proj output xz, contiguous copy (mamba-ssm)", 2 * inner, Dt.ACT),
            Saved("x_proj output x_dbl (mamba-ssm)", rank + 2 * n, Dt.ACT),
            Saved("B, C contiguous (mamba-ssm)", 2 * n, Dt.ACT),
            Saved("scan output before the gate (mamba-ssm)", inner, Dt.ACT),
            scan_states,
        ]
    if ctx.mixer_kernels:
        return [
            # the conv input (CausalConv1dFn) is a channels-first view of in_proj's output
            Saved("in_proj output (x, z)", 2 * inner, Dt.ACT),
            Saved("conv output (x_proj input, scan u)", inner, Dt.ACT),
            Saved("z, B, C contiguous (selective scan)", inner + 2 * n, Dt.ACT),
            Saved("delta (dt_proj output), scan output before the gate", 2 * inner, Dt.ACT),
            scan_states,
            *norms,
            Saved("out_proj input", inner, Dt.ACT, w.attn_out),
        ]
    own = [*norms, Saved("C normed (per-step matmul operand)", n, Dt.ACT)]
    if not dims.weighted_norms:  # dt_proj reads a slice of x_proj's output: all of it stays
        own = [Saved("x_proj output (dt, B, C)", rank + 2 * n, Dt.ACT)]
    states = inner * n
    return [
        Saved("in_proj output (x, z)", 2 * inner, Dt.ACT),
        # F.conv1d pads both sides by kernel − 1; SiLU reads a slice of that output
        Saved("conv output (SiLU input)", inner * (s + dims.kernel - 1) / s, Dt.ACT),
        Saved("SiLU(conv) for x_proj, the scan and the D skip; SiLU(z)", 4 * inner, Dt.ACT),
        Saved("dt + bias (softplus input), u fp32", 2 * inner, Dt.F32),
        Saved("B fp32", n, Dt.F32),
        Saved("discretised A and B (fp32)", 2 * states, Dt.F32),
        # the recurrence: each step's fp32 state feeds the next, its bf16 copy the C matmul
        Saved("state after each step (fp32)", states * (s - 1) / s, Dt.F32),
        Saved("state after each step (bf16 copy)", states * (s + 1) / s, Dt.ACT),
        # per sequence: exp(A_log), A (broadcast) and D in fp32
        Saved("A, exp(A_log), D (fp32, per sequence)", (2 * states + inner) / s, Dt.F32),
        *own,
        Saved("out_proj input", inner, Dt.ACT, w.attn_out),
    ]


def _mamba1_norms(dims: Mamba1Dims) -> list[Saved]:
    """JambaMambaMixer's RMSNorms over dt, B and C (JambaRMSNorm: fp32 input, rstd, the bf16
    normalised value times the weight) and dt_proj's matmul input (the normed dt)."""
    width = dims.dt_rank + 2 * dims.d_state
    return [
        Saved("dt, B, C RMSNorm fp32 inputs", width, Dt.F32),
        Saved("dt, B, C RMSNorm rstd", 3, Dt.F32),
        Saved("dt, B, C normalised (bf16, weight operand)", width, Dt.ACT),
        Saved("dt normed (dt_proj matmul input)", dims.dt_rank, Dt.ACT),
    ]


def short_convolution(hidden: int, kernel: int, ctx: Ctx, w: Wiring) -> list[Saved]:
    """What LFM2's short convolution (modeling_lfm2.py Lfm2ShortConv; Lfm2MoeShortConv is the
    same code) keeps per token: in_proj's output (B, C and x are views of it; B·x keeps B and x),
    the gated conv input B·x, the conv output (C·conv keeps it) and out_proj's input.

    Without ``ctx.mixer_kernels`` causal_conv1d_fn is F.conv1d padded by kernel − 1 on both
    sides, and the product keeps a slice of that padded output (traced, torch 2.13 /
    transformers 5.24); with them causal-conv1d's CausalConv1dFn keeps its input only
    (causal_conv1d_interface.py ``ctx.save_for_backward(x, weight, bias, seq_idx,
    initial_states)``, read), and the product keeps the unpadded output.
    """
    pad = 1.0 if ctx.mixer_kernels else (ctx.s + kernel - 1) / ctx.s
    return [
        Saved("in_proj output (B, C, x)", 3 * hidden, Dt.ACT),
        Saved("B·x (conv input)", hidden, Dt.ACT),
        Saved("conv output (C·conv operand)", hidden * pad, Dt.ACT),
        Saved("out_proj input", hidden, Dt.ACT, w.attn_out),
    ]


def _short_conv(spec: ModelSpec, layer: LayerParameters) -> StateSpec | None:
    """LFM2's short-convolution StateSpec for one of its blocks, None for any other block."""
    state = spec.state
    if state is None or state.kind != StateKind.SHORT_CONV or not state_block(spec, layer):
        return None
    return state if state.conv_channels > 0 and state.conv_kernel > 0 else None


def state_recipe(
    spec: ModelSpec, layer: LayerParameters, ctx: Ctx, w: Wiring
) -> list[Saved] | None:
    """A state block's own mixer recipe (gated DeltaNet, Mamba-2, Mamba-1, LFM2's short
    convolution), None when not modelled."""
    if not state_block(spec, layer):
        return None
    deltanet = _deltanet(spec)
    if deltanet is not None:
        return gated_deltanet(*deltanet, ctx, w)
    dims = _mamba2_dims(spec, layer)
    if dims is not None:
        return mamba2(dims, ctx, w)
    mamba = _mamba1_dims(spec, layer)
    if mamba is not None:
        return mamba1(mamba, ctx, w)
    conv = _short_conv(spec, layer)
    return short_convolution(conv.conv_channels, conv.conv_kernel, ctx, w) if conv else None
