"""Peak transient bytes of one block's forward without autograd: inference, evaluation and
generation during training (memory.md §2.9).

Mixture-of-experts blocks hold what their dispatch holds, which depends on the engine:

* vLLM's fused MoE (``fused_moe.py``: ``intermediate_cache1`` [M, top_k, 2N], ``cache2``
  [M·top_k, N], ``cache3`` [M, top_k, K]): per routed (token, expert) pair 2·i + i + h and the
  input h, top-k pairs per token;
* transformers 5.x's default ``grouped_mm`` experts (``integrations/moe.py``
  ``grouped_mm_experts_forward``): the tokens gathered per pair (h) live through the whole call;
  the gated ``act(gate) * up`` holds h + 2·i + i + i, and after the down projection the routing
  weights and the un-permutation hold four h-wide copies (fp32 where the router's weights are);
  biased experts gather each pair's biases too; three int64 index vectors per pair (the sort's
  values and permutation, the inverse permutation);
* transformers 5.24's ``Llama4TextMoe`` runs every expert on every token: ``hidden.repeat(E)``
  scaled by the (mostly zero) sigmoid scores, then two ``bmm`` over all E experts, so its pairs
  are E per token (the routing only zeroes the inputs). vLLM's Llama 4 uses its fused MoE, top-k.

Shared experts (Qwen2-MoE ``shared_expert``, DeepSeek ``shared_experts``, Llama 4
``shared_expert``) are a dense gated MLP of ``num_shared × shared_intermediate`` run beside the
routed ones: whichever runs first leaves its output alive while the other runs (transformers:
Qwen2-MoE runs the shared expert first; DeepSeek and Llama 4 after the routed experts, Llama 4
with its E-fold repeated input and outputs still alive). Gemma 4's MoE block
(``Gemma4TextDecoderLayer``, ``enable_moe_block``) runs its dense MLP first, then its own router
and the experts: the dense output and its post-norm stay alive through them, with
Gemma4TextRouter's fp32 top-k weights (softmax in fp32, renormalised, times per_expert_scale),
so the experts' weighted output is fp32 too. Its four RMSNorms' fp32 temporaries (the input's
copy and pow or x̂, 8·h bytes) never reach that peak: the experts hold 12·h per routed pair.

Each term is checked against the traced module (tests/planner/test_moe_working_set.py).

In training, a dense gated MLP's backward (``gated_mlp_gradient_bytes``) peaks at the gated
product's gradients, and the routed experts' backward (``moe_gradient_bytes``) holds them per
dispatch call: all top-k pairs in one grouped_mm call (transformers 5.x), one expert's tokens at
a time where the experts run in a loop (transformers 4.x, LitGPT); checked against the traced
step in tests/planner/test_moe_backward.py and tests/planner/test_fsdp_backward_peak.py.
"""

from __future__ import annotations

from gpuwarden.planner.layout import Layout, distinct_layers
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import ExpertMlp, ModelSpec, MoeSpec, Router
from gpuwarden.types.plan import Attention, Engine, Framework, PlanRequest

# int64 routing indices: top-k expert ids, and grouped_mm's sorted ids and permutations
ROUTING_INDEX_BYTES = 8
# The model facts these terms branch on are ModelSpec.traits (catalog/traits.py): expert_mlp
# EVERY_EXPERT (Llama 4: every expert on every token), shared_expert_first (Qwen2MoeSparseMoeBlock
# runs the shared expert before the routed ones, its output alive through them; DeepSeek-V2/V3
# and Llama 4 run it after), the DeepSeek routers (top-k weights stay fp32: DeepseekV2TopkRouter's
# softmax in fp32, never cast back, so grouped_mm's weighted output and its un-permuted copy are
# fp32).
FP32_ROUTING_WEIGHTS = frozenset({Router.DEEPSEEK_V2, Router.DEEPSEEK_V3})
# i-wide tensors an experts class's _apply_gate holds at once beside the gate_up output: the
# default act(gate) and the product; GptOssExperts' clamped SwiGLU: clamp(gate), clamp(up),
# glu = gate·sigmoid(α·gate), up + 1 and the product
GATE_HELD = {ExpertMlp.CLAMPED_SWIGLU: 5}
GROUPED_MM_INDICES = 3  # sorted expert ids, their permutation, the inverse permutation
# Stacks whose MoE block runs each expert on its own tokens, one expert at a time: transformers
# 4.x (MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / Qwen3MoeSparseMoeBlock.forward: `for
# expert_idx in range(num_experts)`, torch.where of the expert's tokens, expert_layer(
# hidden_states[top_x]) * routing_weights[top_x, idx], index_add_) and LitGPT's LLaMAMoE (`for
# mask, expert in zip(masks, self.experts)`). transformers 5.x runs all routed pairs in one
# grouped_mm call (integrations/moe.py grouped_mm_experts_forward).
LOOPED_EXPERTS = frozenset({Framework.HF_LEGACY, Framework.LITGPT})
# The gated product act(gate) * up in backward: the product's gradient and both factors'
# (MulBackward), i-wide each, alive at once beside the saved gate/up output
GATED_PRODUCT_GRADS = 3
# experts whose gate is not the default act(gate) * up (gpt-oss's clamped SwiGLU, Nemotron-H's
# ungated up → relu² → down) or that run every expert on every token (Llama 4): their gradient
# working set is not modelled per dispatch
OWN_EXPERT_GATE = frozenset({ExpertMlp.CLAMPED_SWIGLU, ExpertMlp.EVERY_EXPERT, ExpertMlp.PLAIN})


def working_set(request: PlanRequest, rc: Recipe, lay: Layout, tokens: int, context: int) -> int:
    """Peak transient bytes of one block's forward over ``tokens`` tokens (no autograd)."""
    spec = request.model
    b = rc.act_bytes
    h = spec.hidden_size
    t = lay.tp
    q = spec.num_heads * spec.head_dim / t
    kv = spec.kv_width / t
    attention = tokens * (q + 2 * kv + q) * b
    if request.attention is Attention.EAGER:
        attention += tokens * context * spec.num_heads / t * (FP32_BYTES + b)
    mlp = _dense_mlp(spec, spec.intermediate_size / t, b) * tokens
    if spec.moe is not None:
        moe = moe_block_bytes(request, b, t) * tokens
        mlp = max(mlp, moe) if _has_dense_blocks(spec) else moe
    return int(2 * tokens * h * b + max(attention, mlp))


def _dense_mlp(spec: ModelSpec, width: float, b: int) -> float:
    """Bytes per token of a dense MLP of ``width``: gated holds act(gate), up and their product."""
    return (3 if spec.mlp.value == "gated" else 2) * width * b


def _has_dense_blocks(spec: ModelSpec) -> bool:
    return any(layer.experts == 0 for layer in spec.parameters.layers)


def hf_dispatch(request: PlanRequest) -> bool:
    """Whether transformers 5.x's experts run the block (not a serving engine, not another
    framework)."""
    return request.framework is Framework.HF and request.serving_engine is Engine.HF


def _routed(request: PlanRequest, moe: MoeSpec, b: int, t: int) -> float:
    """Bytes per token of the routed experts' dispatch and the router's fp32 scores."""
    h = request.model.hidden_size
    i = moe.expert_intermediate_size / t
    router = moe.num_experts * FP32_BYTES
    if not hf_dispatch(request):
        return router + moe.experts_per_token * (2 * h + 3 * i) * b
    traits = request.model.traits
    if traits.expert_mlp is ExpertMlp.EVERY_EXPERT:
        # repeat(E) and its scaled copy, then gate_up, act(gate), product, down output
        pair = max(2 * h, h + 4 * i, 2 * h + 3 * i) * b
        return router + moe.num_experts * pair
    # the gathered inputs and the gate_up output while gating; with biased experts, each pair's
    # gathered biases (2·i, then h)
    biases = _experts_have_biases(request.model)
    gate = h + 2 * i + GATE_HELD.get(traits.expert_mlp, 2) * i + (2 * i if biases else 0)
    # the weighted output and its un-permuted copy take the routing weights' dtype
    fp32_weights = traits.router in FP32_ROUTING_WEIGHTS or traits.experts_beside_mlp
    weighted = FP32_BYTES if fp32_weights else b
    out = (2 * h + (h if biases else 0)) * b + 2 * h * weighted
    return router + moe.experts_per_token * (
        max(gate * b, out) + GROUPED_MM_INDICES * ROUTING_INDEX_BYTES
    )


def _experts_have_biases(spec: ModelSpec) -> bool:
    return any(
        lin.expert and lin.bias for layer, _ in distinct_layers(spec) for lin in layer.linears
    )


def moe_block_bytes(request: PlanRequest, b: int, t: int = 1) -> float:
    """Peak bytes per token of an MoE block's MLP (``b``-byte activations, TP degree ``t``): the
    routed experts and the shared ones, with whatever the one that ran first left alive while
    the other runs; 0 for a dense model."""
    moe = request.model.moe
    if moe is None:
        return 0.0
    routed = _routed(request, moe, b, t)
    if not moe.num_shared_experts:
        return routed
    h = request.model.hidden_size * b
    shared = _dense_mlp(request.model, moe.num_shared_experts * moe.shared_intermediate_size / t, b)
    if not hf_dispatch(request):
        return max(routed, shared) + h  # either order: one's output beside the other
    if request.model.traits.experts_beside_mlp:
        return max(shared, routed + _beside_mlp_alive(moe, h))
    if request.model.traits.shared_expert_first:
        return max(shared, routed + h)
    # after the routed experts: their output (Llama 4: its repeated input and E outputs) alive
    every = request.model.traits.expert_mlp is ExpertMlp.EVERY_EXPERT
    return max(routed, (2 * moe.num_experts if every else 1) * h + shared)


def _beside_mlp_alive(moe: MoeSpec, h: float) -> float:
    """Bytes per token Gemma4TextDecoderLayer holds through its routed experts (``h``: one
    hidden-wide tensor's bytes): the dense MLP ran first and its output (still bound to
    ``hidden_states``) and post_feedforward_layernorm_1's output stay alive, and so do
    Gemma4TextRouter's fp32 top-k weights and int64 top-k indices."""
    return 2 * h + moe.experts_per_token * (FP32_BYTES + ROUTING_INDEX_BYTES)


def gated_mlp_gradient_bytes(
    spec: ModelSpec, b: int, t: int = 1, product_grads: int = GATED_PRODUCT_GRADS
) -> float | None:
    """Peak bytes per token a dense gated MLP's backward holds beside the block's saved tensors
    (``b``-byte activations, TP degree ``t``), or None for an ungated MLP (the caller's
    widest-tensor rule). ``product_grads``: the i-wide gradients the gated product's backward
    allocates (a kernel that writes the factors' gradients in place makes one, liger.py).

    The peak is the gated product ``act(gate) * up``: the frozen or trainable down projection
    has just produced the product's gradient and MulBackward produces both factors' gradients,
    i-wide each, while the block's saved tensors (gate, up, act(gate)) are all still alive; the
    norms' gradients come later. Traced in tests/planner/test_fsdp_backward_peak.py (a CPU run
    of transformers' MistralDecoderLayer recomputed under reentrant checkpointing)."""
    if spec.mlp.value != "gated":
        return None
    return product_grads * spec.intermediate_size / t * b


def moe_gradient_bytes(
    request: PlanRequest, b: int, t: int = 1, product_grads: int = GATED_PRODUCT_GRADS
) -> float | None:
    """Peak bytes per token the routed experts' backward holds beside the block's saved tensors
    (``b``-byte activations, TP degree ``t``), or None where it is not modelled (the caller
    doubles the widest saved tensor instead).

    The peak is the gated product's backward: its gradient and its two factors' gradients for
    the pairs one dispatch call runs. transformers 5.x's grouped_mm runs all top-k pairs of every
    token at once; a stack that loops over experts (``LOOPED_EXPERTS``) runs one expert's share,
    k/E of the pairs under balanced routing (an expert given more tokens holds more). Traced in
    tests/planner/test_moe_backward.py."""
    moe = request.model.moe
    if moe is None or request.model.traits.expert_mlp in OWN_EXPERT_GATE:
        return None
    pairs = float(moe.experts_per_token)
    if request.framework in LOOPED_EXPERTS:
        pairs /= moe.num_experts
    return product_grads * moe.expert_intermediate_size / t * b * pairs
