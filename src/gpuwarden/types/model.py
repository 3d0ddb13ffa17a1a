"""A model's architecture, normalised from whatever config format it came in.

The catalog builds these from HF ``config.json`` files; the planner only ever reads these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class NormKind(StrEnum):
    RMS = "rmsnorm"
    LAYER = "layernorm"


class MlpKind(StrEnum):
    GATED = "gated"  # SwiGLU / GeGLU: gate, up, down (3 matrices)
    PLAIN = "plain"  # fc1 → activation → fc2 (2 matrices)


class Mixer(StrEnum):
    """What mixes tokens in a block: what it caches during generation and keeps for backward."""

    ATTENTION = "attention"  # softmax attention: a KV cache per token
    STATE = "state"  # a hybrid's linear-attention / state-space mixer (ModelSpec.state)
    HYBRID = "hybrid"  # attention and a state mixer side by side (Falcon-H1): both
    NONE = "none"  # no token mixer (Nemotron-H's MLP-only and MoE-only blocks)


class StateKind(StrEnum):
    """A hybrid's state mixer, as its modeling file names it (StateSpec.kind)."""

    GATED_DELTANET = "gated-DeltaNet"  # Qwen3-Next / Qwen3.5, OLMo Hybrid
    KIMI_DELTA = "Kimi delta attention"  # Kimi Linear
    MAMBA2 = "Mamba-2"  # Nemotron-H, Granite 4.0-H, Bamba, Falcon-H1, Mamba-2
    MAMBA = "Mamba"  # Mamba-1: Mamba, Falcon-Mamba, Jamba
    SHORT_CONV = "short-convolution"  # LFM2's Lfm2ShortConv


class Structure(StrEnum):
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_DECODER = "encoder-decoder"


class PositionKind(StrEnum):
    """How a model encodes token positions (only LEARNED costs parameters)."""

    ROPE = "rope"  # rotary, applied to q/k (Llama, Falcon, GPT-NeoX, DeepSeek ...)
    LEARNED = "learned"  # absolute position table (GPT-2, StarCoder, BERT)
    ALIBI = "alibi"  # linear attention bias (BLOOM, Falcon with alibi=True)
    RELATIVE = "relative"  # bucketed relative bias in the first block (T5)


@dataclass(frozen=True, slots=True)
class MoeSpec:
    """Mixture-of-experts layout (Mixtral, DeepSeek-V3, Qwen-MoE ...)."""

    num_experts: int  # routed experts per MoE layer
    experts_per_token: int  # top-k
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # per shared expert
    first_dense_layers: int = 0  # leading layers with a dense MLP (DeepSeek first_k_dense_replace)
    layer_frequency: int = 1  # every n-th layer (after the dense ones) is an MoE layer


@dataclass(frozen=True, slots=True)
class MlaSpec:
    """DeepSeek multi-head latent attention: the KV cache holds a compressed latent per token."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the lightning indexer's key, cached per
    # token in every layer beside the latent (index_head_dim elements); 0: no indexer
    index_head_dim: int = 0
    # blocks that build an indexer and cache its key (GLM-5's "shared" blocks reuse another
    # block's top-k and cache none); None: every block
    indexed_layers: int | None = None


@dataclass(frozen=True, slots=True)
class KvGroup:
    """Blocks that cache K and V of one shape per token: ``layers`` blocks of ``num_kv_heads``
    heads, keys ``head_dim`` wide and values ``v_head_dim`` wide (None: as the keys), over the
    last ``window`` tokens (None: every token)."""

    layers: int
    num_kv_heads: int
    head_dim: int
    window: int | None = None
    v_head_dim: int | None = None

    @property
    def value_dim(self) -> int:
        """The values' head width (``v_head_dim``; None: as wide as the keys)."""
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    @property
    def elements_per_token(self) -> int:
        """K and V of one block and one token, all heads."""
        return self.num_kv_heads * (self.head_dim + self.value_dim)


class ScanNorms(StrEnum):
    """The norms a Mamba-1 mixer runs over x_proj's dt, B and C."""

    NONE = "none"  # Mamba (modeling_mamba.py)
    WEIGHTED = "weighted"  # Jamba's dt / B / C RMSNorms with weights
    WEIGHTLESS = "weightless"  # Falcon-Mamba's rms_forward, no weights


@dataclass(frozen=True, slots=True)
class DeltaNetShape:
    """A gated DeltaNet's heads: ``key_heads`` query/key heads of ``key_head_dim``, each serving
    StateSpec.num_heads / key_heads value heads of ``value_head_dim``."""

    key_heads: int
    key_head_dim: int
    value_head_dim: int


@dataclass(frozen=True, slots=True)
class Mamba2Shape:
    """A Mamba-2 mixer beyond its cache: StateSpec.num_heads heads of ``head_dim``, B and C of
    ``groups`` × ``d_state`` channels each, the SSD scan over chunks of ``chunk_tokens``."""

    head_dim: int
    groups: int
    d_state: int
    chunk_tokens: int
    gated_norm: bool = True  # the gated RMSNorm after the scan (else y · SiLU(z): Falcon-H1)
    scaled_input: bool = False  # in_proj reads a scaled copy of the block input (Falcon-H1)


@dataclass(frozen=True, slots=True)
class Mamba1Shape:
    """A Mamba-1 mixer beyond its cache: each of its StateSpec.conv_channels channels scans a
    ``d_state`` state; x_proj makes dt (``dt_rank`` wide), B and C."""

    d_state: int
    dt_rank: int
    norms: ScanNorms = ScanNorms.NONE


@dataclass(frozen=True, slots=True)
class StateSpec:
    """Blocks whose token mixer keeps a fixed-size state per sequence instead of a KV cache that
    grows per token: the linear-attention / state-space layers of hybrids (gated DeltaNet, Mamba-2,
    short convolutions, lightning attention). Only the other blocks cache K and V.

    The sizes are the mixer's, per sequence and block, in elements; the dtype and whether a cache
    keeps ``conv_kernel`` or ``conv_kernel - 1`` columns are the serving stack's choice (planner).
    """

    kind: StateKind
    num_layers: int  # blocks of this kind among ModelSpec.num_layers
    conv_channels: int  # channels of the causal depthwise convolution(s) feeding the mixer, summed
    conv_kernel: int  # that convolution's kernel width (0: no convolution)
    recurrent_state_elements: int  # the mixer's state (heads · d_k · d_v; Mamba-2 heads · d · n)
    num_heads: int  # heads the state and the convolution split over under tensor parallelism
    # blocks with neither attention nor a state mixer (Nemotron-H's MLP-only and MoE-only blocks):
    # they cache nothing
    mixerless_layers: int = 0
    # the state blocks also run attention and cache K and V (Falcon-H1's parallel hybrid blocks)
    beside_attention: bool = False
    # the mixer's inner sizes a training recipe reads; None for short convolutions (the conv
    # sizes say all) and for a StateSpec built without them
    mixer_shape: DeltaNetShape | Mamba2Shape | Mamba1Shape | None = None


class QkNorm(StrEnum):
    """Norms on q and k before RoPE."""

    NONE = "none"
    PER_HEAD = "per-head"  # RMSNorm over each head (Qwen3 q_norm / k_norm)
    WHOLE = "whole"  # RMSNorm over the whole projection (OLMo 2)
    LAYER_PER_HEAD = "layernorm-per-head"  # LayerNorm with bias over each head (Persimmon)
    L2_ROPE_LAYERS = "l2-rope-layers"  # weightless fp32 L2 norm in RoPE layers (Llama 4)


class PostNorms(StrEnum):
    """Norms on the attention and MLP branches' outputs."""

    NONE = "none"
    AFTER = "after"  # after only, no norm before the branches (OLMo 2)
    BOTH = "both"  # before and after each branch (Gemma 2/3, Peri-LN)


class OutputGate(StrEnum):
    """A sigmoid gate on the attention output before o_proj."""

    NONE = "none"
    PER_ELEMENT = "per-element"  # heads × head_dim gate values (Qwen3-Next, AFMoE)
    PER_HEAD = "per-head"  # one gate value per head (Laguna's default)


class Router(StrEnum):
    """How a MoE block turns router logits into top-k weights."""

    SOFTMAX = "softmax"  # Mixtral: fp32 softmax, renormalised fp32 top-k weights
    QWEN = "qwen"  # top-k weights cast to the compute dtype, renormalised under norm_topk_prob
    DEEPSEEK_V2 = "deepseek-v2"  # fp32 router on an fp32 input; group-limited when configured
    DEEPSEEK_V3 = "deepseek-v3"  # fp32 sigmoid + correction bias, group-limited always


class ExpertMlp(StrEnum):
    """What a routed expert computes."""

    GATED = "gated"  # act(gate) * up → down, over the top-k pairs
    PLAIN = "plain"  # up → act → down (Nemotron-H: relu², optional latent projections)
    CLAMPED_SWIGLU = "clamped-swiglu"  # gpt-oss's clamped SwiGLU with biases
    EVERY_EXPERT = "every-expert"  # every token through every expert, pre-scaled (Llama 4)


class Activation(StrEnum):
    """The MLP activation where the config's ``hidden_act`` name does not say how it saves."""

    FROM_CONFIG = "from-config"  # hidden_act / activation_function as the config names it
    PY_GELU = "gelu-python"  # tanh-GELU written in Python (GPT-2 gelu_new): four tensors kept
    RELU2 = "relu2"  # relu(x)²: keeps the ReLU output, and the square feeds the down projection
    XIELU = "xielu"  # Apertus' xIELU (two learned scalars per block)


class EagerSoftmax(StrEnum):
    """What eager attention's softmax keeps."""

    FP32 = "fp32"  # softmax in fp32, then cast (Llama)
    COMPUTE = "compute"  # in the compute dtype; fp32 under autocast (GPT-2, BERT, Falcon)
    COMPUTE_ONLY = "compute-only"  # in the compute dtype, no cast (T5)
    SINK = "sink"  # one sink logit per row, compute dtype (gpt-oss)


class RopeTables(StrEnum):
    """The cos/sin tables a forward builds."""

    SHARED = "shared"  # one pair for all blocks, in the compute dtype
    PER_LAYER_TYPE = "per-layer-type"  # sliding and global blocks each (Gemma 3)
    FP32 = "fp32"  # one pair kept in fp32 (OLMo 2)
    COMPLEX = "complex"  # one complex64 table (Llama 4)


@dataclass(frozen=True, slots=True)
class Dropout:
    """Config keys of the residual and attention dropout, and transformers' default for both."""

    residual: tuple[str, ...] = ("hidden_dropout",)
    attention: tuple[str, ...] = ("attention_dropout",)
    default: float = 0.0


@dataclass(frozen=True, slots=True)
class BlockTraits:
    """How a family's blocks compute, where it changes what they keep for backward, cache or
    allocate: one field per fact the planner's recipes branch on. The defaults are Llama's
    (modeling_llama.py); catalog/traits.py fills them in per model_type with each fact's source.
    """

    qk_norm: QkNorm = QkNorm.NONE
    post_norms: PostNorms = PostNorms.NONE
    f32_norm_scale: bool = False  # RMSNorm scales by its weight in fp32, casts after (Gemma)
    # RMSNorm takes torch.pow(mean_sq, -0.5), whose backward keeps its input and its output: two
    # fp32 values per row, not one rstd (Gemma 4's Gemma4RMSNorm)
    norm_pow_rstd: bool = False
    v_norm: bool = False  # a scale-less RMSNorm on V before attention (Gemma 4's v_norm)
    # per-layer embeddings, when the block has a per_layer_input_gate Linear: the model projects
    # and norms its embedding into one small input per block, which each block gates into its
    # residual (Gemma 4's hidden_size_per_layer_input)
    per_layer_inputs: bool = False
    # the routed experts run beside the dense MLP on every token, each branch behind its own
    # norms, and the router reads its own RMS-normed, scaled copy of the residual (Gemma 4's
    # enable_moe_block, Gemma4TextRouter)
    experts_beside_mlp: bool = False
    output_gate: OutputGate = OutputGate.NONE
    # the gate is softplus of an fp32 copy of its projection, cast back (Laguna), not a sigmoid
    output_gate_softplus: bool = False
    router: Router = Router.SOFTMAX
    expert_mlp: ExpertMlp = ExpertMlp.GATED
    shared_expert_first: bool = False  # shared expert runs before the routed ones (Qwen2-MoE)
    shared_expert_gate: bool = False  # sigmoid(shared_expert_gate(x)) · shared expert output
    activation: Activation = Activation.FROM_CONFIG
    eager_only: bool = False  # no SDPA / flash path in transformers
    eager_softmax: EagerSoftmax = EagerSoftmax.FP32
    soft_caps: bool = False  # tanh soft-capping of scores and logits (Gemma 2)
    # merging heads copies the SDPA output: q laid out (b, a, s, d), as when torch.cat builds it
    # for a partial RoPE (Phi, NeoX, Persimmon), Bloom, Falcon
    sdpa_out_copy: bool = False
    post_ln: bool = False  # LayerNorm after each residual add (BERT)
    embedding_norm: bool = False  # a norm on the embedding output (BLOOM)
    falcon_attention: bool = False  # Falcon's K/V handling (multi-query / new decoder arch)
    t5_stack: bool = False  # T5LayerNorm, compute-dtype softmax, relative bias, wo cast
    loss_on_logits: bool = False  # cross-entropy on the logits' own dtype (no .float())
    rope_tables: RopeTables = RopeTables.SHARED
    vllm_rope_fp32: bool = False  # vLLM's model file builds its rotary table in fp32
    dropout: Dropout = Dropout()
    # PEFT's default target_modules for the type (None: PEFT has no entry)
    peft_targets: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class LinearShape:
    """One ``nn.Linear`` of a layer: quantization and LoRA act on these.

    ``name`` is the HF module's own name, as PEFT matches ``target_modules`` against it ("q_proj",
    "c_attn", "query_key_value"); routed experts, which transformers ≥ 5 stores as one 3-D parameter
    per projection, are "experts.<parameter>". Names can repeat inside a block (GPT-2 has a
    ``c_proj`` in attention and in the MLP): ``part`` tells them apart.
    """

    name: str  # HF module name, e.g. "q_proj", "gate_proj", "experts.gate_up_proj"
    in_features: int
    out_features: int
    count: int = 1  # copies per layer (routed experts)
    bias: bool = False
    expert: bool = False  # part of the routed experts (divided by expert parallelism)
    part: str = ""  # "attention", "cross_attention", "mlp", "shared_experts" or "experts"

    @property
    def parameters(self) -> int:
        return self.count * (
            self.in_features * self.out_features + (self.out_features if self.bias else 0)
        )


@dataclass(frozen=True, slots=True)
class LayerParameters:
    """Parameter counts of one transformer block, by part."""

    attention: int  # projections incl. biases (and cross-attention for decoder blocks of enc-dec)
    mlp: int  # dense MLP, or the shared experts of an MoE layer
    experts: int  # routed experts, all of them
    router: int
    norms: int
    linears: tuple[LinearShape, ...] = ()
    other: int = 0  # e.g. relative position bias
    mixer: Mixer = Mixer.ATTENTION

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.experts + self.router + self.norms + self.other

    @property
    def linear_parameters(self) -> int:
        return sum(lin.parameters for lin in self.linears)


@dataclass(frozen=True, slots=True)
class ParameterBreakdown:
    """Exact parameter count (tied weights once), as HF's ``named_parameters()`` sums it."""

    embedding: int  # token embedding
    position_embedding: int  # learned absolute positions (GPT-2, BERT); 0 for RoPE/ALiBi
    lm_head: int  # output projection; 0 when tied to the embedding
    final_norm: int
    layers: tuple[LayerParameters, ...]
    other: int = 0  # pooler, token-type embeddings, ...

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.position_embedding
            + self.lm_head
            + self.final_norm
            + self.other
            + sum(layer.total for layer in self.layers)
        )

    @property
    def linear_parameters(self) -> int:
        """Parameters held in the blocks' ``nn.Linear`` weights (what int8/int4/NF4 quantize)."""
        return sum(layer.linear_parameters for layer in self.layers)

    @property
    def expert_parameters(self) -> int:
        return sum(layer.experts for layer in self.layers)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture facts the planner needs. Field names are HF-neutral.

    Layer counts: ``num_layers`` is the stack a token runs through to produce output — the decoder
    of a decoder-only or encoder-decoder model, the encoder of an encoder-only model (BERT).
    Encoder-decoder models (T5) also set ``num_encoder_layers``; their ``parameters.layers`` hold
    the encoder blocks first, then the decoder blocks (``encoder_layer_parameters`` and
    ``layer_parameters`` split them), and decoder blocks count their cross-attention in
    ``attention``.

    ``head_dim`` is the query/key head width (Gemma 256, T5 ``d_kv``; DeepSeek MLA: nope + rope
    dims). ``sliding_window_layers`` counts the blocks that attend (and cache KV) only over the
    last ``sliding_window`` tokens.
    """

    name: str
    model_type: str  # HF model_type, e.g. "llama", "gpt2", "deepseek_v3"
    structure: Structure
    hidden_size: int
    num_layers: int  # transformer blocks that run per token (decoder; encoder for encoder-only)
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    norm: NormKind
    mlp: MlpKind
    parameters: ParameterBreakdown
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # how many layers use the window (all, half for Gemma-2 ...)
    parallel_attention_mlp: bool = False  # Falcon / Phi-2 / GPT-J style block
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    num_encoder_layers: int = 0  # encoder-decoder models: encoder blocks (num_layers = decoder)
    checkpoint_dtype: str | None = None  # torch_dtype of the published weights
    source: str = ""  # file or catalog entry this came from
    raw_config: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    position_encoding: PositionKind = PositionKind.ROPE
    # hybrids: the blocks that keep a fixed-size state instead of a KV cache (None: every block
    # of the main stack is an attention block)
    state: StateSpec | None = None
    # blocks whose K/V shapes or windows differ by kind (Gemma 4: sliding blocks 256 wide, full
    # blocks 512; KV-shared blocks in no group). Empty: every attention block caches
    # num_kv_heads × head_dim for K and for V, windowed as sliding_window(_layers) say.
    kv_groups: tuple[KvGroup, ...] = ()
    # how the blocks compute (catalog/traits.py per model_type; default: Llama's)
    traits: BlockTraits = BlockTraits()
    # A multimodal checkpoint's vision tower (and projector) that the causal LM transformers
    # builds does NOT hold, so ``parameters`` leaves it out: vLLM and SGLang build the
    # *ForConditionalGeneration architecture and load it beside the language model (Qwen3.5:
    # AutoModelForCausalLM is Qwen3_5ForCausalLM, text only). 0: no tower, or one already in
    # ``parameters`` (Gemma 3: AutoModelForCausalLM builds Gemma3ForConditionalGeneration).
    engine_tower_parameters: int = 0

    @property
    def returns_cache(self) -> bool:
        """Whether an HF forward returns its KV cache: config ``use_cache`` (true unless a config
        says otherwise; training turns it off only under gradient checkpointing)."""
        return (
            self.structure is not Structure.ENCODER
            and self.raw_config.get("use_cache") is not False
        )

    @property
    def encoder_layer_parameters(self) -> tuple[LayerParameters, ...]:
        """Encoder blocks of an encoder-decoder model (empty otherwise)."""
        return self.parameters.layers[: self.num_encoder_layers]

    @property
    def layer_parameters(self) -> tuple[LayerParameters, ...]:
        """The ``num_layers`` blocks of the main stack (decoder, or encoder for encoder-only)."""
        return self.parameters.layers[self.num_encoder_layers :]

    @property
    def active_parameters(self) -> int:
        """Parameters one token uses: MoE layers count ``experts_per_token`` routed experts."""
        if self.moe is None:
            return self.total_parameters
        per_expert_share = sum(
            layer.experts // self.moe.num_experts * self.moe.experts_per_token
            for layer in self.parameters.layers
        )
        return self.total_parameters - self.parameters.expert_parameters + per_expert_share

    @property
    def attention_layers(self) -> int:
        """Blocks of the main stack that cache K and V (a hybrid's state and mixerless blocks
        do not)."""
        if self.kv_groups:
            return sum(group.layers for group in self.kv_groups)
        if self.state is None:
            return self.num_layers
        state_only = 0 if self.state.beside_attention else self.state.num_layers
        return self.num_layers - state_only - self.state.mixerless_layers

    @property
    def kv_width(self) -> int:
        """Width of the K (or V) projection output: n_kv · head_dim."""
        return self.num_kv_heads * self.head_dim

    @property
    def total_parameters(self) -> int:
        return self.parameters.total
