"""What torchtune holds on the GPU while its model is initialised: the plan's load phase.

Sharded load (``full_finetune_distributed`` / ``lora_finetune_distributed``):
``training.load_from_full_model_state_dict`` (torchtune/training/_distributed.py, read at
pytorch/torchtune @0696355d). Every rank holds the full state dict on the CPU; for each parameter
``full_tensor.to(sharded_meta_param.dtype).to(device)`` puts its whole tensor on the GPU, then
``distribute_tensor`` keeps this rank's ``Shard(0)`` chunk, a tensor of its own; an NF4Tensor
parameter (QLoRA) is first quantized whole on the GPU (``to_nf4(full_tensor, ...)``) and a
``new_zeros`` chunk of it keeps the rank's rows. The shards collect in ``sharded_sd`` until
``model.load_state_dict(sharded_sd, assign=True)``, and the loop rebinds ``full_tensor`` per
parameter: one full tensor at a time next to the shards. ``cpu_offload`` moves each shard to the
host (``sharded_tensor.cpu()``), but the full tensor still goes to ``device`` first.

NF4 quantization (torchao ``NF4Tensor.from_tensor``, torchao/dtypes/nf4tensor.py read at
pytorch/ao @0598012 and in the 2024 copy find_string id 92747206): the single-device recipe
builds the model on the GPU, so each ``LoRALinear`` makes its ``nn.Linear`` weight there and
``to_nf4``s it, and ``model.load_state_dict`` copies each checkpoint weight into its NF4Tensor
through ``copy_``, which runs ``NF4Tensor.from_tensor(copy_in.to(original.device), ...)`` and
copies the new NF4Tensor's inner tensors in. ``convert_to_norm_float_weight`` holds, next to
its 16-bit input: ``scaled_blocks = blocks / scales`` (every element, in the input dtype), the
uint8 index of every element (``quantized_blocks = torch.empty(numel, dtype=torch.uint8)``) and,
per chunk of ``CHUNK_SIZE = 1024**2`` elements, ``(value - nf4).abs()`` against the 16-entry
lookup table (two chunk × 16 tensors in the input dtype alive at once); then
``quantized_blocks[::2] << 4 | quantized_blocks[1::2]`` makes two numel / 2 uint8 tensors (the
shifted halves and the packed result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuwarden.planner.layout import distinct_layers
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import PositionKind

if TYPE_CHECKING:
    from gpuwarden.types.plan import PlanRequest

NF4_CHUNK_ELEMENTS = 1024**2  # torchao nf4tensor.CHUNK_SIZE
NF4_LEVELS = 16  # entries of the NF4 lookup table each element is compared with
# quantized_blocks: per element, the uint8 index of its nearest NF4 level (of NF4_LEVELS)
NF4_LEVEL_INDEX_BYTES = 1


def nf4_quantize_bytes(elements: float, input_bytes: float) -> float:
    """Peak bytes of one ``NF4Tensor.from_tensor`` call on a weight of ``elements``: its 16-bit
    input on the GPU, the scaled blocks, the per-element indices, and the larger of one chunk's
    two comparison tensors and the two packing halves (the packed result among them)."""
    chunk = min(elements, NF4_CHUNK_ELEMENTS)
    comparison = 2 * chunk * NF4_LEVELS * input_bytes
    packing = 2 * (elements / 2) * NF4_LEVEL_INDEX_BYTES
    indices = elements * NF4_LEVEL_INDEX_BYTES
    return 2 * elements * input_bytes + indices + max(comparison, packing)


def linear_tensors(request: PlanRequest) -> list[float]:
    """Elements of each distinct block Linear's weight tensor (routed experts: one 3-D tensor
    per projection, as torchtune's GroupedExperts holds them)."""
    return [
        float(lin.count * lin.in_features * lin.out_features)
        for layer, _ in distinct_layers(request.model)
        for lin in layer.linears
    ]


def full_tensor_bytes(
    request: PlanRequest, load_bytes: float, quantized: list[float], torchao_nf4: bool
) -> float:
    """The largest transient of loading one parameter whole: its full tensor in the load dtype,
    or, for a weight torchao quantizes (``quantized``: elements of each), ``nf4_quantize_bytes``
    of it (``to_nf4`` on the full tensor before it is chunked)."""
    p = request.model.parameters
    plain = [float(p.embedding), float(p.lm_head), *linear_tensors(request)]
    largest = max(plain, default=0.0) * load_bytes
    if not torchao_nf4:
        return largest
    packing = max((nf4_quantize_bytes(n, load_bytes) for n in quantized), default=0.0)
    return max(largest, packing)


ROPE_TABLE_BYTES = FP32_BYTES  # theta is built with .float(), cos / sin keep its dtype
ROPE_TABLE_SOURCE = (
    "torchtune RotaryPositionalEmbeddings / Llama3ScaledRoPE build_rope_cache (position_"
    "embeddings.py @01306df8): one float32 [max_seq_len, head_dim // 2, 2] cos/sin buffer, "
    "shared by every layer (the builders make one rope and pass it to each attention)"
)


def rope_table_bytes(request: PlanRequest) -> float:
    """torchtune's RoPE cache: ``torch.stack([cos(idx_theta), sin(idx_theta)], dim=-1)`` over
    ``max_seq_len`` positions (the builders' default is the model's context, read here as
    ``max_position_embeddings``) and ``head_dim // 2`` frequencies, in float32; one table for
    the model, since the builders build one rope before the layer loop."""
    spec = request.model
    if spec.position_encoding is not PositionKind.ROPE or spec.max_position_embeddings is None:
        return 0.0
    return float(spec.max_position_embeddings * (spec.head_dim // 2) * 2 * ROPE_TABLE_BYTES)


def rope_table_detail(request: PlanRequest) -> str:
    spec = request.model
    return (
        f"torchtune RoPE cache: float32 cos/sin, {spec.max_position_embeddings or 0:,} positions "
        f"× {spec.head_dim // 2} frequencies × 2"
    )
