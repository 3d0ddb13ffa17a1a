"""Step time estimate for ``--fit``: a roofline over FLOPs, bytes moved and communication.

Compute: ≈ 6·P_active·tokens for training (4·P with a frozen base), + 12·L·h·s per token of
attention, × 4/3 under full recomputation (Narayanan et al. 2021, §5.1), at the GPU's dense
TFLOPS for the compute dtype × an assumed MFU. Memory: weights read per micro-batch pass,
states and gradients touched once per step. Communication: ring all-reduce moves 2(N−1)/N of the
buffer, all-gather and reduce-scatter (N−1)/N, over NVLink inside a node and the network across
nodes. An estimate for ranking, not a benchmark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwarden.planner.layout import layout, total_parameters
from gpuwarden.planner.precision import recipe
from gpuwarden.types.hardware import GpuSpec, InstanceSpec
from gpuwarden.types.plan import Checkpointing, MemoryPlan, Mode, PlanRequest

MFU = 0.40  # assumed model-FLOPs utilization of a well-tuned dense transformer step
PCIE_BYTES_PER_S = 25e9  # effective all-reduce bandwidth over PCIe Gen4 x16
DEFAULT_NETWORK_BYTES_PER_S = 100e9 / 8  # 100 Gbps per node when the instance is unknown
# An instance's network: "8x 400 Gb/s NDR" (links × Gbit/s each), else "3200 Gbps EFAv2". A number
# is read from the first digit of its run, whole: a later digit of the run meets the same end,
# where the first one failed (tried from each, a long run of digits was searched quadratically)
_LINKS_TIMES_GBIT = re.compile(r"(?<!\d)(\d++)\s*+x\s*+(\d++)\s*+Gb")
_GBIT = re.compile(r"(?<!\d)(\d++)\s*+Gb")

ASSUMPTIONS = (
    f"step time: roofline at {MFU:.0%} MFU of the datasheet dense TFLOPS; communication not "
    "overlapped; an estimate for ranking",
)


@dataclass(frozen=True, slots=True)
class StepTime:
    seconds: float
    tokens_per_second: float
    bottleneck: str  # "compute", "memory" or "communication"


def network_bytes_per_s(instance: InstanceSpec | None) -> float:
    """Per node, from the instance's network text ("3200 Gbps EFAv2", "8x 400 Gb/s NDR")."""
    if instance is None:
        return DEFAULT_NETWORK_BYTES_PER_S
    text = instance.network.replace(",", "")
    m = _LINKS_TIMES_GBIT.search(text)
    if m:
        return int(m.group(1)) * int(m.group(2)) * 1e9 / 8
    m = _GBIT.search(text)
    return int(m.group(1)) * 1e9 / 8 if m else DEFAULT_NETWORK_BYTES_PER_S


def _link(gpu: GpuSpec, ranks: int, per_node: int, network: float) -> float:
    """Per-GPU bandwidth of a collective over ``ranks`` GPUs (bytes/s, one direction)."""
    if ranks > per_node:
        return network / per_node
    if gpu.nvlink_bytes_per_s and "PCIE" not in gpu.variant.upper():
        return gpu.nvlink_bytes_per_s / 2
    return PCIE_BYTES_PER_S


def step_time(plan: MemoryPlan, instance: InstanceSpec | None = None) -> StepTime | None:
    r: PlanRequest = plan.request
    gpu = r.gpu
    if gpu is None:
        return None
    rc = recipe(r)
    tflops = gpu.tflops(rc.compute) or gpu.tflops("bf16") or gpu.tflops("fp16")
    if tflops is None:
        return None
    spec = r.model
    lay = layout(r)
    active = spec.active_parameters
    rate = tflops * 1e12 * MFU
    if r.mode is Mode.INFER:
        prompt = r.batch * r.prompt_tokens
        prefill = 2 * active * prompt / (rate * r.num_gpus)
        # a hybrid's state blocks read their whole state every decode step
        per_token_bytes = (
            plan.component("parameters")
            + plan.component("kv_cache") / 2
            + plan.component("recurrent_state")
        )
        decode_mem = per_token_bytes / gpu.memory_bandwidth_bytes_per_s
        decode_flops = 2 * active * r.batch / (rate * r.num_gpus)
        decode = max(decode_mem, decode_flops)
        seconds = prefill + r.new_tokens * decode
        tokens = r.batch * max(1, r.new_tokens)
        neck = "memory" if decode_mem >= decode_flops else "compute"
        return StepTime(seconds, tokens / seconds if seconds else 0.0, neck)

    micro_tokens = r.micro_batch * r.seq_len
    tokens = micro_tokens * r.grad_accum * lay.dp
    per_param = 6.0 if r.mode is Mode.TRAIN else 4.0
    flops = per_param * active * tokens
    flops += 12 * spec.num_layers * spec.hidden_size * r.seq_len * tokens
    if r.checkpointing is Checkpointing.FULL:
        flops *= 4 / 3
    compute = flops / (rate * r.num_gpus)
    if r.pp > 1:
        compute *= 1 + (r.pp - 1) / max(1, r.grad_accum)  # 1F1B bubble
    weights = plan.component("parameters")
    moved = (
        3 * weights * r.grad_accum
        + plan.component("optimizer_states")
        + 2 * plan.component("gradients")
    )
    moved += 2 * plan.component("activations") * r.grad_accum
    memory = moved / gpu.memory_bandwidth_bytes_per_s

    network = network_bytes_per_s(instance)
    per_node = min(r.gpus_per_node, instance.gpu_count if instance else r.gpus_per_node)
    comm = 0.0
    grad_bytes = plan.trainable_parameters * 2 / (r.tp * r.pp)
    n = lay.dp * lay.cp
    if n > 1:
        link = _link(gpu, r.num_gpus, per_node, network)
        if lay.param_shard > 1:
            comm += 3 * (n - 1) / n * total_parameters(spec) * 2 / (r.tp * r.pp) / link
        else:
            comm += 2 * (n - 1) / n * grad_bytes / link
    if r.tp > 1:
        link = _link(gpu, r.tp, per_node, network)
        per_layer = micro_tokens * spec.hidden_size * rc.act_bytes
        volume = 4 * spec.num_layers / r.pp * per_layer * r.grad_accum
        comm += 2 * (r.tp - 1) / r.tp * volume / link
    seconds = max(compute, memory) + comm
    parts = {"compute": compute, "memory": memory, "communication": comm}
    return StepTime(
        seconds, tokens / seconds if seconds else 0.0, max(parts, key=parts.__getitem__)
    )
