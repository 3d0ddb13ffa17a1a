"""Out-of-memory causes from TensorFlow's, XLA's and vLLM's messages, and the dispatch: which
judge reads which message (PyTorch's arithmetic is ``oom_torch``'s).

* TensorFlow: a request above the BFC allocator's ``Limit`` is too big for what TF was given; a
  request that fits the limit failed on fragmentation; an allocation that fails while the
  model's variables are created means the GPU was already taken.
* XLA/JAX: BufferAssignment's "total allocation" is the compiled program's need; without it the
  failure is the framework's pool (XLA preallocates 75 % of the GPU).
* vLLM: its KV-cache budget messages name the cause outright.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.oom_parse import (
    JAX_MARK,
    NUMBERS_ONLY,
    TF_MARK,
    OomReading,
    TfExtra,
    VllmExtra,
    XlaExtra,
)
from gpuwarden.health.explain.oom_torch import DECIDES_OOM, torch_votes, undecided
from gpuwarden.health.explain.sizes import size, whole_number
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import OomFacts

_CONTEXT_CREATION = re.compile(
    r"cuDevicePrimaryCtxRetain|failed initializing StreamExecutor|_lazy_init|_cuda_init|"
    r"cuCtxCreate|context creation|cudaSetDevice|CreateContext",
    re.IGNORECASE,
)
# PaddlePaddle's CUDA allocator (paddle/fluid/memory/allocation/cuda_allocator.cc,
# CUDAAllocator::AllocateImpl) raises ResourceExhausted when cudaMalloc fails: "Out of memory
# error on GPU N. Cannot allocate X memory on GPU N, [A memory has been allocated and] available
# memory is only F." — F is cudaMemGetInfo's free memory. It prints no total, so its numbers
# cannot tell a too-big job from another process: the causes stay undecided.
_PADDLE_ALLOCATOR_OOM = re.compile(
    r"\bOut of memory error on GPU\s*\d+\.\s*Cannot allocate\s*[\d.]+\s*[KMGT]?B memory on GPU",
    re.IGNORECASE,
)
_DECIDES_PADDLE = (
    "`nvidia-smi --query-gpu=memory.total,memory.used --format=csv` and "
    "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` at the failure: the GPU's "
    "total against the request, and the other processes holding it"
)
# Caffe's CUDA_CHECK (include/caffe/util/device_alternate.hpp) is glog's CHECK_EQ(error,
# cudaSuccess) << " " << cudaGetErrorString(error), printed as "Check failed: error == cudaSuccess
# (2 vs. 0)  out of memory": 2 is cudaErrorMemoryAllocation and the text CUDA's own string for it
# (SyncedMemory's cudaMalloc in Caffe and its forks, OpenPose's among them). Code that copies the
# macro may name its variable otherwise; only the number 2 with CUDA's string is read.
_GLOG_CUDA_CHECK_OOM = r"Check failed: \w+ == cudaSuccess \(2 vs\. 0\)\s*out of memory"
_GENERIC_GPU_OOM = re.compile(
    rf"{_GLOG_CUDA_CHECK_OOM}|"
    r"CUDA error:?\s*out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
    r"\bCUDA\b[^.]{0,60}\bout of memory|\bGPU\b[^.]{0,40}\bout of memory|"
    # PyTorch's exception (cudaMallocAsync's bare "torch.OutOfMemoryError: Allocation on
    # device"), never Triton's "OutOfMemoryError: out of resource: shared memory" (a kernel
    # config above the SM's shared-memory limit)
    r"OutOfMemoryError(?!:?\s*out of resource)|"
    r"RESOURCE_EXHAUSTED|"
    # a device allocation that failed in CUDA itself, as libraries report it (TensorRT-LLM's
    # "CUDA runtime error in ::cudaMallocAsync(ptr, n, ...): out of memory", TensorRT's
    # "Error Code 1: Cuda Runtime (out of memory)")
    r"\b(?:cudaMalloc\w*|cuMemAlloc\w*|cuMemCreate)\b.{0,80}?\bout of memory|"
    # ICICLE's CUDA check (icicle/include/gpu-utils/error_handler.cuh, check behind CHK_LOG /
    # CHK_STICKY) prints "CUDA Runtime Error by: <the call's source text> at: <file>:<line>" and
    # cudaGetErrorString on the next line: the failed call is a device allocation, its string
    # CUDA's own out-of-memory
    r"CUDA Runtime Error by: (?:cudaMalloc\w*|cuMemAlloc\w*)\b.{0,300}? at: \S+:\d+ out of memory|"
    # Mitsuba 2's GPU allocator (enoki, src/cuda/jit.cu: cuda_malloc) throws "cuda_malloc(): out
    # of memory!" when cudaMalloc still fails after it synchronised and released its cached
    # blocks; Mitsuba 2's FAQ: the rendering or autodiff graph exhausted the GPU's memory
    r"\bcuda_malloc\(\): out of memory|"
    # HugeCTR's CUDA check (HugeCTR/include/common.hpp, CK_CUDA_THROW_) throws "Runtime error: "
    # + cudaGetErrorString + " <file>:<line>" (cudaMalloc in general_buffer.hpp's init, for one):
    # CUDA's "out of memory" before a source file and line, never a host runtime's bare "runtime
    # error: out of memory"
    r"\bRuntime error: out of memory \S+\.(?:hpp|cuh?|cpp|cc|h):\d+|"
    # CUDA-Q's cuStateVec simulator checks its CUDA calls with HANDLE_CUDA_ERROR
    # (runtime/nvqir/custatevec: "[custatevec] %" + cudaGetErrorString + " in <function> (line
    # N)"): "%out of memory" is CUDA's string for cudaErrorMemoryAllocation, the state vector's
    # cudaMalloc (addQubitsToState) failing
    r"\[custatevec\] %out of memory\b|"
    # PennyLane Lightning's GPU devices check CUDA calls with PL_CUDA_IS_SUCCESS, which aborts
    # with cudaGetErrorString (core/src/utils/cuda_utils/cuda_helpers.hpp; Util::Abort prints
    # "[<file>][Line:N][Method:<function>]: Error in PennyLane Lightning: <message>"): "out of
    # memory" there is a device allocation (DataBuffer's cudaMalloc) that CUDA refused
    r"\bError in PennyLane Lightning: out of memory\b|"
    rf"{_PADDLE_ALLOCATOR_OOM.pattern}|"
    r"Cuda Runtime \(out of memory\)",
    re.IGNORECASE,
)
# An out-of-memory raised by CUDA itself (not by a framework's allocator, whose messages carry
# numbers and are read in oom_parse) ...
_CUDA_LEVEL_OOM = re.compile(
    rf"{_GLOG_CUDA_CHECK_OOM}|"
    r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUDA error:?\s*out of memory",
    re.IGNORECASE,
)
# The memory that ran out is the host's: TensorFlow names the device and allocator of the
# failed tensor ("device:CPU:0 by allocator cpu"), CUDA's page-locked host allocations ("could not
# allocate pinned host memory", "N bytes on host: CUDA_ERROR_OUT_OF_MEMORY"), PyTorch's CPU
# allocator (c10 CPUAllocator / alloc_cpu.cpp). No GPU's memory, so none of the GPU OOM causes —
# unless the paste also holds a GPU allocator's own message.
_HOST_MEMORY_OOM = re.compile(
    r"device:CPU:\d+ by allocator \w+|by allocator (?:cpu|\w*host\w*)\b|"
    r"pinned host memory|bytes on host\b|DefaultCPUAllocator",
    re.IGNORECASE,
)
_GPU_MEMORY_OOM = re.compile(
    r"device:GPU:\d|\bGPU_\d+_bfc\b|CUDA out of memory\.\s*Tried to allocate|"
    r"Tried to allocate [\d.]+ ?\w+ \(GPU|GPU \d+ has a total capacity",
    re.IGNORECASE,
)
# ... unless it is the framework reserving its own pool at start-up (TensorFlow's stream
# executor: "failed to alloc(ate) N bytes ... from device / unified memory: CUDA_ERROR_...").
_POOL_RESERVATION = re.compile(r"failed to alloc(?:ate)?\s+[\d.]+", re.IGNORECASE)
_PROGRESS = re.compile(
    r"\b(?:epoch|step|iter(?:ation)?)\s*+[:=#\[(]?\s*+(?P<n>\d+)|\b(?P<m>\d+)/\d+\s*\[\d+:\d\d",
    re.IGNORECASE,
)
# HAMi-core, the CUDA hook that holds a HAMi (or Volcano vGPU) container to its slice of a shared
# GPU (src/allocator/allocator.c): oom_check refuses an allocation that would take the container's
# processes past the slice's limit (nvidia.com/gpumem, CUDA_DEVICE_MEMORY_LIMIT) and logs "Device N
# OOM <usage + request> / <limit>"; only when that check passed does it call the driver, and
# "cuMemoryAllocate failed res=2" is the driver's own CUDA_ERROR_OUT_OF_MEMORY (2): the container
# was within its slice, the physical GPU was full.
_SLICE_LIMIT_OOM = re.compile(r"\bDevice \d+ OOM \d+ / \d+")
_SLICE_DRIVER_OOM = re.compile(r"\bcuMemoryAllocate failed res=2\b")
_DECIDES_SLICE = (
    "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` on the node (every pod on the "
    "GPU), the pod's nvidia.com/gpumem against the job's peak, and HAMi's deviceMemoryScaling "
    "(above 1 the slices add up to more than the GPU holds)"
)
_DECIDES_XLA = (
    "`nvidia-smi --query-gpu=memory.total,memory.used --format=csv`: JAX takes 75 % of the GPU by "
    "default; if the program's total allocation is below memory.total, "
    "XLA_PYTHON_CLIENT_MEM_FRACTION=.9 lets it fit"
)


def _tf_votes(facts: OomFacts, tf: TfExtra, flat: str) -> list[Vote]:
    tried = facts.tried_bytes
    tensor = ""
    if tf.shape is not None and tf.dtype is not None:
        tensor = f"tensor [{','.join(map(str, tf.shape))}] of {tf.dtype}"
        tensor += f" = {size(tried)}" if tried is not None else ""
    elif tried is not None:
        tensor = f"a request of {size(tried)}"
    if tf.limit_bytes is not None and tf.in_use_bytes is not None and tried is not None:
        need = tf.in_use_bytes + tried
        if need > tf.limit_bytes:
            return [
                Vote(
                    "oom-too-big",
                    0.7,
                    f"InUse {size(tf.in_use_bytes)} + {tensor} = "
                    f"{size(need)} > the allocator's Limit {size(tf.limit_bytes)}",
                ),
                Vote(
                    "oom-other-process",
                    0.25,
                    "a Limit far below the GPU's memory means something else held it at start-up",
                    decides="nvidia-smi memory.total against the allocator's Limit",
                ),
            ]
        return [
            Vote(
                "oom-fragmentation",
                0.6,
                f"InUse {size(tf.in_use_bytes)} + {tensor} fits "
                f"the Limit {size(tf.limit_bytes)}: the BFC allocator's free space is split",
            )
        ]
    if _initialising(flat):
        return [
            Vote(
                "oom-other-process",
                0.75,
                f"{tensor or 'an allocation'} failed while the "
                "model's variables were being created: the GPU was already taken",
            ),
            Vote(
                "oom-too-big",
                0.3,
                "the model's variables alone may not fit",
                decides="`nvidia-smi` before the job starts (memory.used on that GPU)",
            ),
        ]
    what = f"{tensor} did not fit" if tensor else "TensorFlow ran out of GPU memory"
    return [
        Vote("oom-too-big", 0.5, what, decides=DECIDES_OOM),
        Vote("oom-other-process", 0.3, what, decides=DECIDES_OOM),
        Vote("oom-framework-pool", 0.25, what, decides=DECIDES_OOM),
    ]


_INIT = re.compile(
    r"Initializer|/Assign\b|\[Op:(?:RandomUniform|RandomStandardNormal|TruncatedNormal|Fill|"
    r"AssignVariableOp|VarHandleOp)\]",
    re.IGNORECASE,
)


def _initialising(flat: str) -> bool:
    return _INIT.search(flat) is not None


def _xla_votes(facts: OomFacts, xla: XlaExtra) -> list[Vote]:
    tried = "" if facts.tried_bytes is None else f"a request of {size(facts.tried_bytes)} failed; "
    if xla.total_allocation_bytes is not None:
        return [
            Vote(
                "oom-too-big",
                0.75,
                f"{tried}BufferAssignment: the compiled program needs "
                f"{size(xla.total_allocation_bytes)} of buffers at once",
            ),
            Vote(
                "oom-framework-pool",
                0.3,
                "XLA's preallocated pool is 75 % of the GPU",
                decides=_DECIDES_XLA,
            ),
        ]
    if xla.remat_floor_bytes is not None:
        return [
            Vote(
                "oom-too-big",
                0.8,
                f"XLA could not rematerialise the program below {size(xla.remat_floor_bytes)}",
            )
        ]
    what = f"{tried}XLA ran out of its memory pool"
    return [
        Vote("oom-framework-pool", 0.5, what, decides=_DECIDES_XLA),
        Vote("oom-too-big", 0.45, what, decides=_DECIDES_XLA),
        Vote("oom-other-process", 0.3, what, decides=_DECIDES_XLA),
    ]


_DECIDES_CUPY = (
    "`nvidia-smi --query-gpu=memory.total,memory.used --format=csv` and "
    "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` while it runs: held + "
    "requested above memory.total = the arrays do not fit; below it = another process (or "
    "another library's pool in this one) holds the rest"
)
_DECIDES_CUPY_LIMIT = (
    "cupy.get_default_memory_pool().get_limit() and CUPY_GPU_MEMORY_LIMIT: raise or unset the "
    "limit if the GPU has the room"
)


def _cupy_votes(reading: OomReading) -> list[Vote]:
    """CuPy's pool: a limit it was given refused the request, or CUDA did after the pool had
    returned its cache (memory.pyx retries after free_all_blocks and gc before raising)."""
    facts = reading.facts
    tried = "" if facts.tried_bytes is None else f"a request of {size(facts.tried_bytes)} "
    held = "" if facts.allocated_bytes is None else f" with {size(facts.allocated_bytes)} held"
    if reading.pool_limit_bytes is not None:
        what = f"{tried}passed CuPy's pool limit of {size(reading.pool_limit_bytes)}{held}"
        return [Vote("oom-framework-pool", 0.85, what, decides=_DECIDES_CUPY_LIMIT)]
    what = f"{tried}failed{held} by CuPy's arrays, after the pool returned its cache to CUDA"
    return [
        Vote("oom-too-big", 0.5, what, decides=_DECIDES_CUPY),
        Vote("oom-other-process", 0.35, what, decides=_DECIDES_CUPY),
    ]


def _vllm_votes(v: VllmExtra) -> list[Vote]:
    votes: list[Vote] = []
    if v.startup_free_bytes is not None and v.startup_total_bytes is not None:
        used = v.startup_total_bytes - v.startup_free_bytes
        votes.append(
            Vote(
                "oom-other-process",
                0.85,
                f"{size(used)} of {size(v.startup_total_bytes)} "
                f"was already in use when the engine started; it wanted "
                f"{v.requested_utilization} of the GPU",
            )
        )
    if v.profiling_not_clean:
        votes.append(
            Vote(
                "oom-other-process",
                0.7,
                "free memory changed during vLLM's profiling: "
                "another process released (or took) GPU memory",
            )
        )
    if v.max_seq_len is not None and v.kv_tokens is not None:
        votes.append(
            Vote(
                "oom-kv-cache",
                0.95,
                f"one sequence of max_model_len {v.max_seq_len} "
                f"tokens > the {v.kv_tokens} tokens the KV cache holds",
            )
        )
    if v.kv_needed_bytes is not None and v.kv_available_bytes is not None:
        votes.append(
            Vote(
                "oom-kv-cache",
                0.95,
                f"{size(v.kv_needed_bytes)} of KV cache needed for "
                f"one max-length sequence > {size(v.kv_available_bytes)} available",
            )
        )
    elif v.one_request_does_not_fit:
        votes.append(
            Vote(
                "oom-kv-cache",
                0.9,
                f"vLLM: the KV cache cannot hold one request of max_model_len {v.max_seq_len} "
                "tokens (the sizes after the message were not readable)",
            )
        )
    if v.negative_kv_bytes is not None:
        votes.append(
            Vote(
                "oom-kv-cache",
                0.9,
                f"the KV budget is negative "
                f"({size(v.negative_kv_bytes)}): weights and activations already exceed "
                "gpu_memory_utilization",
            )
        )
    if v.no_cache_blocks:
        votes.append(Vote("oom-kv-cache", 0.9, "no memory left for a single KV cache block"))
    return votes


def _leak_votes(flat: str, oom_at: int) -> list[Vote]:
    read = (whole_number(m["n"] or m["m"]) for m in _PROGRESS.finditer(flat, 0, max(oom_at, 0)))
    steps = [step for step in read if step is not None]
    if not steps or max(steps) < 2:
        return []
    return [
        Vote(
            "oom-leak",
            0.3,
            f"the OOM came after training ran (progress up to {max(steps)} before it)",
        )
    ]


def _beside_a_framework_pool(flat: str) -> bool:
    """CUDA itself ran out of memory (loading a kernel image, making a cuDNN/cuBLAS handle, a
    second program's context) while JAX/XLA or TensorFlow, which map most of the GPU into their
    own pool at start, are in the text."""
    if _CUDA_LEVEL_OOM.search(flat) is None or _POOL_RESERVATION.search(flat) is not None:
        return False
    return JAX_MARK.search(flat) is not None or TF_MARK.search(flat) is not None


def _pool_votes(what: str) -> list[Vote]:
    decides = (
        "rerun with XLA_PYTHON_CLIENT_PREALLOCATE=false (JAX) or allow_growth / "
        "TF_FORCE_GPU_ALLOW_GROWTH=true (TensorFlow): if it then runs, the pool was the cause; "
        "`nvidia-smi` for other processes"
    )
    return [
        Vote(
            "oom-framework-pool",
            0.6,
            f"\"{what}\" from CUDA itself, outside the framework's allocator: the framework's "
            "preallocated pool leaves CUDA and cuDNN almost nothing",
            decides=decides,
        ),
        Vote("oom-other-process", 0.35, f'"{what}": another process may hold it', decides=decides),
        Vote("oom-too-big", 0.25, f'"{what}": the program may not fit', decides=decides),
    ]


def _slice_votes(flat: str) -> list[Vote]:
    """HAMi-core's refusals: the driver's out-of-memory inside the slice's limit means memory
    outside the container's accounting (another pod on the GPU, slices oversubscribed); the
    slice's own refusal is a need above the limit, its reason undecided."""
    driver = _SLICE_DRIVER_OOM.search(flat)
    if driver is not None:
        what = f'"{driver[0]}" (CUDA_ERROR_OUT_OF_MEMORY) after HAMi-core\'s limit check passed'
        return [
            Vote(
                "oom-other-process",
                0.6,
                f"{what}: the GPU was full while this container was within its slice",
                decides=_DECIDES_SLICE,
            ),
            Vote(
                "oom-too-big",
                0.3,
                f"{what}: the slice may be larger than the GPU's free memory",
                decides=_DECIDES_SLICE,
            ),
        ]
    limit = _SLICE_LIMIT_OOM.search(flat)
    if limit is None:
        return []
    return [
        Vote(
            cause,
            weight,
            f"\"{limit[0]}\": the container's processes would pass its slice's limit",
            decides=_DECIDES_SLICE,
        )
        for cause, weight in (
            ("oom-too-big", 0.45),
            ("oom-other-process", 0.35),
            ("oom-fragmentation", 0.2),
        )
    ]


def _generic_votes(flat: str) -> list[Vote]:
    """An out-of-memory error without the allocator's numbers ("CUDA error: out of memory")."""
    slice_votes = _slice_votes(flat)
    if slice_votes:
        return slice_votes
    generic = _GENERIC_GPU_OOM.search(flat)
    if generic is None:
        return []
    if _CONTEXT_CREATION.search(flat) is None:
        if _beside_a_framework_pool(flat):
            return _pool_votes(generic[0])
        if _PADDLE_ALLOCATOR_OOM.match(generic[0]):
            return undecided(
                f'"{generic[0]}": Paddle\'s allocator prints the request and the free memory, '
                "not the GPU's total",
                decides=_DECIDES_PADDLE,
            )
        return undecided(f'"{generic[0]}" without the allocator\'s numbers')
    return [
        Vote(
            "oom-other-process",
            0.7,
            f'"{generic[0]}" while creating the CUDA context: the GPU was already full before '
            "this process allocated anything",
        ),
        Vote(
            "oom-too-big",
            0.25,
            "out of memory at start-up",
            decides="`nvidia-smi` before the job starts",
        ),
    ]


def _judge(reading: OomReading, flat: str) -> list[Vote]:
    if reading.kind == "pytorch":
        return torch_votes(reading.facts)
    if reading.kind == "tensorflow":
        return _tf_votes(reading.facts, reading.tf, flat)
    if reading.kind == "xla":
        return _xla_votes(reading.facts, reading.xla)
    if reading.kind == "cupy":
        return _cupy_votes(reading)
    return []  # vLLM: its own votes below


def oom_votes(reading: OomReading | None, flat: str) -> list[Vote]:
    """The OOM causes this text supports, with the arithmetic as evidence."""
    if _HOST_MEMORY_OOM.search(flat) is not None and _GPU_MEMORY_OOM.search(flat) is None:
        return []  # the host's RAM ran out, not a GPU's
    if reading is None or reading.kind in NUMBERS_ONLY:
        votes = _generic_votes(flat)
    elif reading.tf.not_a_failure:
        return []  # BFC's warning that a faster algorithm did not fit: not an error
    else:
        votes = [*_judge(reading, flat), *_vllm_votes(reading.vllm)]
    if votes and any(v.cause != "oom-kv-cache" for v in votes):
        anchor = _GENERIC_GPU_OOM.search(flat)
        votes += _leak_votes(flat, anchor.start() if anchor else len(flat))
    return votes
