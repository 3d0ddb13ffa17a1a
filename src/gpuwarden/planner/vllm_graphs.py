"""vLLM's CUDA graphs: which batch sizes a release captures, what the captured graphs hold, and
whether the KV budget leaves room for them (memory.md §2.9).

Which sizes, per release (vLLM's source):

* V0 (``vllm/worker/model_runner.py`` ``_BATCH_SIZES_TO_CAPTURE`` = 1, 2, 4, then multiples of
  8; ``capture_model`` keeps the sizes up to the smallest one ≥ ``max_num_seqs``): one full decode
  graph per size, captured largest first into one shared pool (``graph_memory_pool``). Each
  ``CUDAGraphRunner`` keeps its output hidden states (``output_buffers``).
* V1 (``vllm/v1/worker/gpu_model_runner.py`` ``capture_model``; sizes from
  ``compilation_config.cudagraph_capture_sizes``): piecewise graphs (attention left eager) for
  1, 2, 4, then multiples of 8 up to 512, none above ``max_num_batched_tokens``. From 0.11 the
  default ``cudagraph_mode`` is FULL_AND_PIECEWISE: the piecewise sizes go up to
  ``max_cudagraph_capture_size = min(2 × max_num_seqs, 512)`` and full decode graphs are captured
  for the sizes up to ``max_num_seqs`` (logs: "PIECEWISE=51, FULL=35" at 256 sequences; vllm#34005
  "Registering 5814 cuda graph addresses" = (51 + 51) captures × 57 all-reduces of Qwen3-1.7B).
  Piecewise outputs are kept as weak references (the pool reuses them).

Where the memory sits: V0 and V1 capture after the KV pool is allocated, so the graphs land on
top of ``gpu_memory_utilization × total`` (the log's "Graph capturing finished in N secs, took X
GiB" is the free-memory drop over the capture, PR #10027). vllm PR #30515 ("Account for CUDA
graphs during memory profiling", ``profile_cudagraph_memory``) captures them during the profile
and subtracts the estimate from the KV budget ("Estimated CUDA graph memory: X GiB total"); on by
default since 0.21.0, as its own log line says ("CUDA graph memory profiling is enabled (default
since v0.21.0)", ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``). The budget subtracts vLLM's
estimate, not the graphs captured later: ``profile_cudagraph_memory`` captures the first two graphs
of each mode with a small dummy KV cache and extrapolates the second one's cost to the rest,
``max(first capture per mode) + Σ (captures − 1) × max(second capture, 1 MiB)`` (as vllm#45178 and
PR #45197 quote gpu_model_runner.py): the largest size's pool plus a per-capture cost, the shape
modelled here, so the KV pool follows the estimate (a V1 calibration log is one, LMCache#3430).

What a capture holds: the shared pool (the largest size's working set, reused by the smaller ones),
V0's held outputs, the instantiated graph itself (kernel nodes per layer: a constant per captured
size and layer, V0's and V1's apart, fitted) and, where NCCL's all-reduce is captured instead of
vLLM's custom all-reduce, NCCL's per-call state (vllm PR #2192: "NCCL's internal buffer is captured
in the graph"; a constant per captured call, fitted). The constants are fitted on calibration logs
(benchmarks/README.md, "vLLM CUDA graphs"); the other logs there validate them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner.layout import Layout
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.versions import release
from gpuwarden.planner.vllm_profile import V1_DEFAULT
from gpuwarden.planner.working_set import working_set
from gpuwarden.types.hardware import GpuSpec
from gpuwarden.types.plan import PlanRequest
from gpuwarden.units import KIB

SMALL_SIZES = (1, 2, 4)  # then multiples of SIZE_STEP
SIZE_STEP = 8
# V0's list ends at 8 × 32 = 256 (model_runner.py ``[_BATCH_SIZE_ALIGNMENT * i for i in range(1,
# 33)]``), later at 8 × 1024 (config.py ``_set_cudagraph_sizes`` possible_sizes); first release of
# the longer list assumed 0.7.0, not confirmed from a release note
V0_LARGEST_SIZE = 256
V0_LONG_LIST = (0, 7, 0)
V0_LONG_LARGEST_SIZE = 8 * 1024
V1_LARGEST_SIZE = 512  # V1's default capture list ends here
# 0.11: cudagraph_mode FULL_AND_PIECEWISE by default, max_cudagraph_capture_size = min(2 ×
# max_num_seqs, 512) (the release's set_cudagraph_sizes)
V1_FULL_AND_PIECEWISE = (0, 11, 0)
# the list steps by 16 above 256 ("multiples of 8 up to 256 and then multiples of 16 up to
# max_graph_size": PR #30515's config shows it; a 0.11.0 log still captures 67 sizes to 512). First
# release assumed 0.12.0 from those two, not confirmed from a release note.
V1_STEP16_ABOVE_256 = (0, 12, 0)
STEP16_FROM = 256
# PR #30515's CUDA-graph memory profiling, default on from 0.21.0 (its log line)
GRAPH_MEMORY_PROFILED = (0, 21, 0)
# custom_all_reduce.py: world sizes it supports; above 2 only on fully NVLink-connected GPUs; never
# without P2P (GeForce drivers do not expose it over PCIe)
CUSTOM_ALL_REDUCE_SIZES = frozenset({2, 4, 6, 8})
# Fitted on the calibration logs (benchmarks/README.md "vLLM CUDA graphs"), per captured size and
# layer, the instantiated graph's nodes, per engine: V0 captures one graph of the whole decode per
# size; V1's piecewise graphs leave attention out (vLLM's splitting ops) and its FULL graphs run the
# decode through the compiled model's fused kernels: fewer nodes per layer.
# V0: vllm PR #11349 (Llama-3.2-1B, 35 sizes × 16 layers: 0.21 GiB) leaves 337 KiB after the pool
# and held outputs (h285). V1: vllm#34005 (Qwen3-1.7B, 102 captures × 28 layers: 0.63 GiB) leaves
# 227 KiB (h285); LMCache#3430 (Qwen3-8B, 0.21.0, "PIECEWISE=51 (largest=512), FULL=35
# (largest=256)", "Estimated CUDA graph memory: 0.52 GiB total") 163 KiB after the 44 MiB pool,
# read through vLLM's estimator (the largest capture, then the second capture's cost × the others:
# pool + 85 × 36 layers × c); 2ab / (a + b) of the two misses both by ∓16 % (h288).
V0_PER_CAPTURE_LAYER_BYTES = 337 * KIB
V1_PER_CAPTURE_LAYER_BYTES = 190 * KIB
# per captured NCCL all-reduce: vllm PR #2192's NCCL-minus-custom memory, Llama 33B TP 2 (998 MB
# over 35 × 121 calls) and Llama 7B TP 2 (494 MB over 35 × 65 calls), pooled: 1492 MiB / 6510
PER_NCCL_CALL_BYTES = 235 * KIB


@dataclass(frozen=True, slots=True)
class GraphCaptures:
    """The graphs one vLLM release captures for a request."""

    piecewise: tuple[int, ...]  # V1 piecewise sizes (token counts)
    full: tuple[int, ...]  # full graphs: V0's decode graphs, V1's FULL decode graphs
    in_budget: bool  # captured during the profile and subtracted from the KV budget
    holds_outputs: bool  # V0: each graph keeps its output hidden states
    per_capture_layer_bytes: int  # the instantiated graph's nodes, per captured size and layer
    source: str

    @property
    def count(self) -> int:
        return len(self.piecewise) + len(self.full)

    @property
    def largest(self) -> int:
        return max((*self.piecewise, *self.full), default=0)


@dataclass(frozen=True, slots=True)
class GraphMemory:
    """What the captured graphs of one GPU hold."""

    captures: GraphCaptures
    pool: int  # the largest size's working set, shared by every capture
    outputs: int  # V0's held output hidden states
    nodes: int  # the instantiated graphs, per captured size and layer
    collectives: int  # NCCL's state per captured all-reduce (0 with the custom all-reduce)
    custom_all_reduce: bool | None  # None: one GPU, nothing to reduce

    @property
    def bytes(self) -> int:
        return self.pool + self.outputs + self.nodes + self.collectives


def _size_list(largest: int, step16: bool) -> tuple[int, ...]:
    """1, 2, 4, then multiples of 8 (of 16 above 256 where ``step16``) up to ``largest``."""
    sizes = [s for s in SMALL_SIZES if s <= largest]
    size = SIZE_STEP
    while size <= largest:
        sizes.append(size)
        size += 2 * SIZE_STEP if step16 and size >= STEP16_FROM else SIZE_STEP
    return tuple(sizes)


def _smallest_listed(n: int, cap: int) -> int:
    """V0's last captured size: the smallest listed size ≥ ``n`` (``_get_graph_batch_size``),
    the list's last (``cap``) above it."""
    return next((s for s in SMALL_SIZES if s >= n), min(cap, SIZE_STEP * -(-n // SIZE_STEP)))


def capture_sizes(version: str, max_num_seqs: int, max_num_batched_tokens: int) -> GraphCaptures:
    """The sizes vLLM ``version`` captures (ValueError when it is not a version number)."""
    parts = release(version)
    if parts is None:
        raise ValueError(f"not a version number: {version!r}")
    if parts < V1_DEFAULT:
        cap = V0_LONG_LARGEST_SIZE if parts >= V0_LONG_LIST else V0_LARGEST_SIZE
        return GraphCaptures(
            (),
            _size_list(_smallest_listed(max_num_seqs, cap), step16=False),
            in_budget=False,
            holds_outputs=True,
            per_capture_layer_bytes=V0_PER_CAPTURE_LAYER_BYTES,
            source="vllm/worker/model_runner.py capture_model (_BATCH_SIZES_TO_CAPTURE)",
        )
    step16 = parts >= V1_STEP16_ABOVE_256
    in_budget = parts >= GRAPH_MEMORY_PROFILED
    if parts < V1_FULL_AND_PIECEWISE:
        largest = min(V1_LARGEST_SIZE, max_num_batched_tokens)
        return GraphCaptures(
            _size_list(largest, step16),
            (),
            in_budget,
            holds_outputs=False,
            per_capture_layer_bytes=V1_PER_CAPTURE_LAYER_BYTES,
            source="vllm/v1/worker/gpu_model_runner.py capture_model, piecewise",
        )
    largest = min(2 * max_num_seqs, V1_LARGEST_SIZE, max_num_batched_tokens)
    piecewise = _size_list(largest, step16)
    return GraphCaptures(
        piecewise,
        tuple(s for s in piecewise if s <= max_num_seqs),
        in_budget,
        holds_outputs=False,
        per_capture_layer_bytes=V1_PER_CAPTURE_LAYER_BYTES,
        source="vllm/v1/worker/gpu_model_runner.py capture_model, FULL_AND_PIECEWISE",
    )


def custom_all_reduce(gpu: GpuSpec | None, tp: int) -> bool:
    """Whether vLLM reduces with its own kernel (custom_all_reduce.py), or NCCL is captured:
    supported world sizes, P2P (GeForce cards have it only over an NVLink bridge), and full
    NVLink above two GPUs. Without a GPU, a data-centre node is assumed."""
    if tp not in CUSTOM_ALL_REDUCE_SIZES:
        return False
    if gpu is None:
        return True
    nvlink = gpu.nvlink_bytes_per_s is not None
    geforce = any("GeForce" in name for name in gpu.smi_names)
    if geforce and not nvlink:
        return False
    fully_connected = nvlink and "PCIE" not in gpu.variant.upper() and not geforce
    return tp == 2 or fully_connected


def graph_memory(request: PlanRequest, rc: Recipe, lay: Layout) -> GraphMemory | None:
    """The CUDA graphs' memory on one GPU; None under ``--enforce-eager``."""
    if request.enforce_eager:
        return None
    captures = capture_sizes(
        request.vllm_version, request.max_num_seqs, request.max_num_batched_tokens
    )
    spec = request.model
    layers = -(-spec.num_layers // lay.pp)
    largest = captures.largest
    pool = working_set(request, rc, lay, largest, 1) if largest else 0
    outputs = (
        int(sum(captures.full) * spec.hidden_size * rc.act_bytes) if captures.holds_outputs else 0
    )
    nodes = captures.count * layers * captures.per_capture_layer_bytes
    reduced = lay.tp > 1
    custom = custom_all_reduce(request.gpu, lay.tp) if reduced else None
    # two all-reduces per block (attention and MLP outputs) and one for the vocab-parallel
    # embedding: vllm#34005's 5814 registered addresses = 102 captures × (2 × 28 + 1)
    calls = 2 * layers + 1
    collectives = captures.count * calls * PER_NCCL_CALL_BYTES if reduced and not custom else 0
    return GraphMemory(captures, pool, outputs, nodes, collectives, custom)
