"""The numbers of an out-of-memory message, for every wording since PyTorch 1.0.

* PyTorch 1.0–1.3: ``Tried to allocate X (GPU 0; T total capacity; A already allocated;
  F free; C cached)`` — "cached" is reserved − allocated.
* PyTorch 1.4–2.0: ``…; F free; R reserved in total by PyTorch)``, later with the
  ``max_split_size_mb`` hint.
* PyTorch 2.1+: ``Tried to allocate X. GPU 0 has a total capacity of T of which F is free.
  Process N has P memory in use. Including non-PyTorch memory, this process has S memory in
  use. Of the allocated memory A is allocated by PyTorch, and U is reserved by PyTorch but
  unallocated.`` (2.1 printed "capacty"); reserved = A + U. The ``Process N`` entries come from
  NVML: in a container NVML names this process by its host PID, so a listed process may be
  this one (no "this process has" line then).
* PyTorch with ``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`` (ComfyUI's default):
  ``Allocation on device N would exceed allowed memory. (out of memory) Currently allocated :
  A Requested : X Device limit : T Free (according to CUDA): F PyTorch limit ...`` — "Device
  limit" is cudaMemGetInfo's total; this allocator keeps no cache, so no reserved figure.
* TensorFlow: ``OOM when allocating tensor with shape[...] and type float`` (the bytes follow
  from shape and dtype), the BFC allocator's ``ran out of memory trying to allocate X`` and its
  ``Limit:``/``InUse:`` statistics.
* JAX/XLA: ``RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes`` and the
  BufferAssignment statistics (``total allocation``); the StreamExecutor's ``failed to allocate
  17.79G (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY`` (TensorFlow and XLA).
  Where a size is followed by its exact count (``2.99GiB (3206250496B)``) the count is read.
* PyTorch on Apple silicon (aten/src/ATen/mps/MPSAllocator.mm): ``MPS backend out of memory
  (MPS allocated: A, other allocations: O, max allowed: L). Tried to allocate X on private
  pool.`` — A is the allocator's heaps, O the rest of the process's Metal memory, L the
  high-watermark limit (the request failed because A + O + X > L: L is the total that matters).
  Releases before the KiB/MiB/GiB labels printed the same binary sizes as KB/MB/GB.
* llama.cpp / ggml (ggml-cuda.cu, ggml-alloc.c): ``allocating 14136.04 MiB on device 0:
  cudaMalloc failed: out of memory`` then ``failed to allocate CUDA0 buffer of size 14822711296``
  (ROCm0 on HIP builds): the exact count is the request.
* TensorRT-LLM's executor: ``Executor creation failed due to insufficient GPU memory. The
  following component could not be created: KV cache Total GPU memory (GiB): T Free GPU memory
  before component creation attempt (GiB): F``.
* CuPy's memory pool (cupy/cuda/memory.pyx, OutOfMemoryError): ``Out of memory allocating
  1,677,721,600 bytes (allocated so far: 590,233,600 bytes).``, with ``, limit set to: L bytes``
  when a pool limit (set_limit, CUPY_GPU_MEMORY_LIMIT) refused the request before CUDA was asked.
  Without a limit the pool raises only after cudaMalloc failed, it returned its cached free
  blocks to CUDA and collected garbage, and cudaMalloc failed again: the count is what its live
  arrays still hold, not a cache.
* vLLM: the KV-cache budget messages.

``OomReading.kind`` says which was read: "pytorch", "tensorflow", "xla", "cupy", "vllm", or one
whose numbers decide no cause (``NUMBERS_ONLY``: "stream-executor", "ggml", "tensorrt-llm"; the
causes are judged as for a message without numbers).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from gpuwarden.health.explain.sizes import (
    SIZE,
    decimal_number,
    parse_binary_size,
    parse_size,
    whole_number,
)
from gpuwarden.types.health import OomFacts

_I = re.IGNORECASE
# A size read from its first digit only: tried from every digit of a run (and every group after
# a thousands comma), SIZE's search took time as the square of the run's length (a 10^5-digit
# run in a paste: minutes). A number never starts inside another.
_SIZE = rf"(?<!\d)(?<!\d,){SIZE}"
# An OOM message contains one of these (lower case); the readers run only then.
OOM_WORDS = (
    "out of memory", "oom when", "resource_exhausted", "resource exhausted", "ran out of memory",
    "resourceexhaustederror",
    "kv cache", "cache blocks", "gpu blocks", "free memory on device", "memory profiling",
    "total allocation", "reduce memory use", "tried to allocate", "to serve at least one request",
    # PyTorch's exception name without the words (cudaMallocAsync's "torch.OutOfMemoryError:
    # Allocation on device"), TensorRT's "Error Code 2: OutOfMemory"
    "outofmemory",
    # CUDA's own error name alone (the StreamExecutor's "failed to allocate 106.88M (112066560
    # bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"), TensorRT-LLM's executor
    "out_of_memory", "insufficient gpu memory",
    # HAMi-core's refusals in a vGPU slice (oom.py): "Device N OOM ...", "cuMemoryAllocate failed"
    "hami-core error", "4pdvgpu error", "cumemoryallocate failed",
)  # fmt: skip
# Readings whose numbers decide no cause: the causes are judged as for a message without numbers.
NUMBERS_ONLY = frozenset({"stream-executor", "ggml", "tensorrt-llm"})
_WINDOW = 1500  # characters after an OOM anchor that belong to its message

# The head "CUDA out of memory." or, when a paste starts below it, the sizes clause itself: the
# caching allocator's "Tried to allocate X (GPU N; ..." / "Tried to allocate X. GPU N has a total
# capacity" is printed by no other tool. Ascend's torch_npu ports the allocator and its message
# (torch_npu/csrc/core/npu/NPUCachingAllocator.cpp, the AT_ERROR after free_cached_blocks: "NPU out
# of memory. Tried to allocate X (NPU N; T total capacity; A already allocated; C current active;
# F free; R reserved in total by PyTorch)"): the same fields, read the same way ("current active"
# is the allocator's active bytes, not read).
TORCH_ANCHOR = re.compile(
    r"\b(?:CUDA|HIP|XPU|NPU)\s+out of memory\.?\s*Tried to allocate|"
    rf"Tried to allocate\s*{_SIZE}\s*(?:\(\s*[GN]PU\s*\d+\s*;|\.\s*GPU\s*\d+\s*has a total capac)",
    _I,
)
_TORCH_FIELDS = {
    "tried": rf"Tried to allocate\s*(?P<v>{_SIZE})",
    "total": rf"total capac\w*\s*of\s*(?P<v>{_SIZE})|(?P<w>{_SIZE})\s*total\s*capac\w*",
    "allocated": rf"Of the allocated memory\s*(?P<v>{_SIZE})\s*is allocated by|"
    rf"(?P<w>{_SIZE})\s*already allocated",
    "free": rf"of which\s*(?P<v>{_SIZE})\s*is free|(?P<w>{_SIZE})\s*free\b",
    "reserved": rf"(?P<v>{_SIZE})\s*reserved in total by",
    "cached": rf"(?P<v>{_SIZE})\s*cached\)",
    "unallocated": rf"(?P<v>{_SIZE})\s*is reserved by \w+ but unallocated",
    "this_process": rf"this process has\s*(?P<v>{_SIZE})\s*memory in use",
}
_TORCH = {key: re.compile(pattern, _I) for key, pattern in _TORCH_FIELDS.items()}
_PROCESS = re.compile(rf"Process\s*(?P<pid>\d+)\s*has\s*(?P<v>{_SIZE})\s*memory in use", _I)
_TORCH_DEVICE = re.compile(
    r"\((?P<kind>[GN]PU)\s*(?P<a>\d+)\s*;|\bGPU\s*(?P<b>\d*)\s*has a total capac", _I
)
# c10/cuda/CUDAMallocAsyncAllocator.cpp: the fields in the order it prints them, each optional
# (a paste may stop early); pastes drop the "(out of memory)" or the column alignment.
TORCH_ASYNC = re.compile(
    r"Allocation on device\s*(?P<device>\d+)\s*would exceed allowed memory\.?\s*"
    r"(?:\(out of memory\)\s*)?"
    rf"(?:Currently allocated\s*:\s*(?P<allocated>{_SIZE})\s*)?"
    rf"(?:Requested\s*:\s*(?P<tried>{_SIZE})\s*)?"
    rf"(?:Device limit\s*:\s*(?P<total>{_SIZE})\s*)?"
    rf"(?:Free \(according to CUDA\)\s*:\s*(?P<free>{_SIZE}))?",
    _I,
)

# PyTorch on Apple silicon: the fields in the order MPSAllocator.mm prints them; "max allowed" is
# absent when the high watermark is off (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0).
TORCH_MPS = re.compile(
    rf"MPS backend out of memory\s*\(\s*MPS allocated:\s*(?P<allocated>{_SIZE})\s*,\s*"
    rf"other allocations:\s*(?P<other>{_SIZE})\s*(?:,\s*max allowed:\s*(?P<total>{_SIZE})\s*)?\)"
    rf"(?:\s*\.?\s*Tried to allocate\s*(?P<tried>{_SIZE}))?",
    _I,
)

# llama.cpp / ggml: the backend's rounded MiB line, then the allocator's exact count. A host
# buffer ("CUDA_Host") is host memory and has no device number: not read.
GGML_DEVICE_ALLOC = re.compile(
    r"allocating\s*[\d.]+\s*MiB\s*on device\s*(?P<device>\d+)\s*:\s*\w*Malloc\w* failed:\s*"
    r"out of memory",
    _I,
)
GGML_BUFFER = re.compile(
    r"failed to allocate\s*(?P<device>[A-Za-z]+\d+)\s*buffer of size\s*(?P<n>\d+)", _I
)

# TensorRT-LLM's executor: the device's total and free memory (GiB) printed below its head.
TRTLLM_EXECUTOR = re.compile(r"Executor creation failed due to insufficient GPU memory", _I)
_TRTLLM_TOTAL = re.compile(r"Total GPU memory \(GiB\):\s*(?P<v>\d+(?:\.\d+)?)", _I)
_TRTLLM_FREE = re.compile(
    r"Free GPU memory before component creation attempt \(GiB\):\s*(?P<v>\d+(?:\.\d+)?)", _I
)

# TensorFlow
# TensorFlow ≤ 1.4 printed the shape only; later releases add "and type float on <device>".
TF_TENSOR = re.compile(
    r"OOM when allocating tensor (?:with|of) shape\s*\[(?P<shape>[^\]]*)\]"
    r"(?:\s*(?:and|,)\s*type\s*(?P<dtype>\w+))?",
    _I,
)
TF_RAN_OUT = re.compile(
    rf"Allocator\s*\((?P<allocator>\w+)\)\s*ran out of memory trying to allocate\s*(?P<v>{_SIZE})"
    r"(?:\s*\(rounded to (?P<rounded>\d+)\))?",
    _I,
)
# tf.errors.ResourceExhaustedError is TensorFlow's class for any exhausted resource (quota, disk);
# with TensorFlow's own "OOM" beside it, it is the GPU allocator's error even when the paste
# leaves out the "when allocating tensor ..." part (users write "ResourceExhaustedError: OOM").
TF_OOM_ERROR = re.compile(r"ResourceExhaustedError\b[^\n]{0,80}?\bOOM\b", _I)
TF_NOT_A_FAILURE = re.compile(r"The caller indicates that this is not a failure", _I)
_TF_DEVICE = re.compile(r"(?P<d>/job:[\w:/]*?device:GPU:\d+|/device:GPU:\d+|\bGPU_\d+_bfc)", _I)
_TF_LIMIT = re.compile(r"\bLimit:\s*(?P<n>\d+)|memory_limit_:\s*(?P<m>\d+)", _I)
_TF_IN_USE = re.compile(r"\bInUse:\s*(?P<n>\d+)", _I)
# sizeof per TensorFlow dtype name (tensorflow/core/framework/types.proto)
DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8,
    "float64": 8, "int8": 1, "uint8": 1, "qint8": 1, "quint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "int": 4, "uint32": 4, "qint32": 4, "int64": 8, "uint64": 8, "bool": 1,
    "complex64": 8, "complex128": 16,
}  # fmt: skip


# JAX / XLA
# XLA and the StreamExecutor print a rounded size then, in parentheses, the exact count
# ("2.99GiB (3206250496B)", "17.79G (19104890880 bytes)"): the count is what was asked for.
def _exact(name: str) -> str:
    return rf"(?:\s*\(\s*(?P<{name}>\d+)\s*(?:B|bytes)\s*\))?"


XLA_TRIED = re.compile(
    rf"Out of memory (?:while trying to allocate|allocating)\s*(?P<v>{_SIZE}){_exact('v_bytes')}|"
    rf"Failed to allocate request for\s*(?P<w>{_SIZE}){_exact('w_bytes')}",
    _I,
)
# The StreamExecutor (TensorFlow, XLA) reserving device memory: "failed to allocate 17.79G
# (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"; its size has no "B", so only the
# count is read. It names no framework and no other number: its causes are the generic ones.
STREAM_EXECUTOR = re.compile(
    r"failed to allocate\s*[\d.]+\s*[KMGT]?\s*\(\s*(?P<n>\d+)\s*bytes\s*\)\s*"
    r"from device:\s*CUDA_ERROR_OUT_OF_MEMORY",
    _I,
)
# CuPy's pool: its counts print with thousands separators (the "allocated so far" clause is what
# tells it from XLA's "Out of memory allocating N bytes").
CUPY_POOL = re.compile(
    r"Out of memory allocating\s*(?P<tried>\d[\d,]*)\s*bytes\s*"
    r"\(\s*allocated so far:\s*(?P<held>\d[\d,]*)\s*bytes"
    r"(?:,\s*limit set to:\s*(?P<limit>\d[\d,]*)\s*bytes)?",
    _I,
)
XLA_TOTAL = re.compile(rf"total allocation:\s*(?P<v>{_SIZE})", _I)
XLA_REMAT = re.compile(rf"Can'?t reduce memory use below\s*(?P<v>{_SIZE})", _I)
JAX_MARK = re.compile(r"\bjax\b|jaxlib|\bXla\w*Error|BufferAssignment|XLA_PYTHON", _I)
# TensorFlow's name, its allocator's words, or the context it appends to an op's error
# ("[[{{node StatefulPartitionedCall}}]] [Op:__inference_train_function_50056]").
TF_MARK = re.compile(
    r"tensorflow|ResourceExhaustedError|OOM when allocating|_bfc\b|\{\{node\s|\[Op:\w+\]", _I
)

# vLLM
VLLM_NO_BLOCKS = re.compile(r"No available memory for the cache blocks", _I)
VLLM_SEQ = re.compile(
    r"max seq len \((?P<seq>\d+)\) is larger than the maximum number of tokens that can be "
    r"stored in KV cache \((?P<kv>\d+)\)",
    _I,
)
VLLM_NEEDED = re.compile(
    rf"(?P<need>{_SIZE})\s*KV cache is needed,? which is larger than the available KV cache "
    rf"memory\s*\((?P<avail>{_SIZE})\)",
    _I,
)
# vLLM V1's check (kv_cache_utils.check_enough_kv_cache_memory, 0.8+): its head states the cause
# even where the sizes clause after it is cut or hard-wrapped mid-word by a terminal ("KV cach
# e is needed"). The engine's own spelling was "models's" until a later release fixed it.
VLLM_ONE_REQUEST = re.compile(
    r"To serve at least one request with the models?'s max seq len\s*\((?P<seq>\d+)\)", _I
)
VLLM_NEGATIVE = re.compile(
    # one way through a run of blanks: "\s*:?\s*" splits it n ways, each tried (n² on a long run)
    rf"(?:Available KV cache memory|memory reserved for KV Cache is)\s*(?::\s*)?(?P<v>-\s*{_SIZE})",
    _I,
)
VLLM_ZERO_BLOCKS = re.compile(r"#\s*GPU blocks:\s*0\b", _I)  # vLLM < 0.6's start-up log
VLLM_FREE = re.compile(
    r"Free memory on device\s*(?:\S+\s*)?\((?P<free>[\d.]+)\s*/\s*(?P<total>[\d.]+)\s*GiB\)\s*"
    r"on startup is less than desired GPU memory utilization\s*\((?P<util>[\d.]+),\s*"
    r"(?P<want>[\d.]+)\s*GiB\)",
    _I,
)
VLLM_PROFILING = re.compile(r"Error in memory profiling.{0,300}?not properly cleaned up", _I)


@dataclass(frozen=True, slots=True)
class TfExtra:
    """What TensorFlow's message adds: the tensor, the BFC limit, the op."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    limit_bytes: int | None = None
    in_use_bytes: int | None = None
    not_a_failure: bool = False  # BFC's "the caller indicates that this is not a failure"


@dataclass(frozen=True, slots=True)
class XlaExtra:
    total_allocation_bytes: int | None = None
    remat_floor_bytes: int | None = None  # "Can't reduce memory use below X"


@dataclass(frozen=True, slots=True)
class VllmExtra:
    no_cache_blocks: bool = False
    one_request_does_not_fit: bool = False  # V1's "To serve at least one request ..." head
    max_seq_len: int | None = None
    kv_tokens: int | None = None
    kv_needed_bytes: int | None = None
    kv_available_bytes: int | None = None
    negative_kv_bytes: int | None = None
    startup_free_bytes: int | None = None
    startup_total_bytes: int | None = None
    requested_utilization: float | None = None
    requested_bytes: int | None = None
    profiling_not_clean: bool = False

    @property
    def any(self) -> bool:
        return any(getattr(self, name) not in (None, False) for name in self.__slots__)


@dataclass(frozen=True, slots=True)
class OomReading:
    kind: str  # which message was read: "pytorch", "tensorflow", "xla", "cupy", "vllm", …
    facts: OomFacts
    tf: TfExtra = field(default_factory=TfExtra)
    xla: XlaExtra = field(default_factory=XlaExtra)
    vllm: VllmExtra = field(default_factory=VllmExtra)
    pool_limit_bytes: int | None = None  # CuPy's "limit set to"


def _size(match: re.Match[str] | None, *groups: str) -> int | None:
    if match is None:
        return None
    for name in groups or ("v", "w"):
        value = match.groupdict().get(name)
        if value:
            return parse_size(value.replace(" ", ""))
    return None


def _torch_message(window: str) -> OomFacts:
    found = {key: _size(pattern.search(window)) for key, pattern in _TORCH.items()}
    allocated = found["allocated"]
    reserved = found["reserved"]
    if reserved is None and allocated is not None:
        extra = found["unallocated"] if found["unallocated"] is not None else found["cached"]
        reserved = None if extra is None else allocated + extra
    processes = tuple(
        (pid, size)
        for m in _PROCESS.finditer(window)
        if (pid := whole_number(m["pid"])) is not None and (size := parse_size(m["v"])) is not None
    )
    device = _TORCH_DEVICE.search(window)
    number = None if device is None else (device["a"] or device["b"])
    return OomFacts(
        framework="pytorch",
        tried_bytes=found["tried"],
        total_bytes=found["total"],
        allocated_bytes=allocated,
        reserved_bytes=reserved,
        free_bytes=found["free"],
        this_process_bytes=found["this_process"],
        other_processes=processes,
        device=None if device is None else f"{(device['kind'] or 'GPU').upper()} {number}".strip(),
    )


def _known(facts: OomFacts) -> int:
    return sum(
        value is not None
        for value in (
            facts.tried_bytes,
            facts.total_bytes,
            facts.allocated_bytes,
            facts.reserved_bytes,
            facts.free_bytes,
        )
    )


def read_torch(flat: str) -> OomFacts | None:
    """The most complete PyTorch OOM message of the text (the last of equals: the final error
    of a traceback)."""
    anchors = [m.start() for m in TORCH_ANCHOR.finditer(flat)][-20:]
    best: OomFacts | None = None
    for i, start in enumerate(anchors):
        end = anchors[i + 1] if i + 1 < len(anchors) else len(flat)
        facts = _torch_message(flat[start : min(end, start + _WINDOW)])
        if best is None or _known(facts) >= _known(best):
            best = facts
    return best


def read_torch_async(flat: str) -> OomFacts | None:
    """The cudaMallocAsync backend's message (the last of the text), if any."""
    messages = list(TORCH_ASYNC.finditer(flat))
    if not messages:
        return None
    found = messages[-1]  # the final error of a traceback
    return OomFacts(
        framework="pytorch",
        tried_bytes=_size(found, "tried"),
        total_bytes=_size(found, "total"),
        allocated_bytes=_size(found, "allocated"),
        free_bytes=_size(found, "free"),
        device=f"GPU {found['device']}",
    )


def read_torch_mps(flat: str) -> OomFacts | None:
    """PyTorch's MPS allocator message (the last of the text), if any. No free or reserved
    figure: the allocator prints neither."""
    messages = list(TORCH_MPS.finditer(flat))
    if not messages:
        return None
    found = messages[-1]
    allocated = _binary(found["allocated"])
    other = _binary(found["other"])
    return OomFacts(
        framework="pytorch",
        tried_bytes=_binary(found["tried"]),
        total_bytes=_binary(found["total"]),
        allocated_bytes=allocated,
        this_process_bytes=None if allocated is None or other is None else allocated + other,
        device="MPS",
    )


def _binary(text: str | None) -> int | None:
    return None if text is None else parse_binary_size(text.replace(" ", ""))


def read_ggml(flat: str) -> OomReading | None:
    """llama.cpp's device buffer that did not fit: the exact count of the last one."""
    buffers = [m for m in GGML_BUFFER.finditer(flat) if whole_number(m["n"]) is not None]
    if not buffers or GGML_DEVICE_ALLOC.search(flat) is None:
        return None
    found = buffers[-1]
    return OomReading(
        kind="ggml",
        facts=OomFacts(
            framework="ggml", tried_bytes=whole_number(found["n"]), device=found["device"]
        ),
    )


def read_tensorrt_llm(flat: str) -> OomReading | None:
    head = TRTLLM_EXECUTOR.search(flat)
    if head is None:
        return None
    window = flat[head.end() : head.end() + _WINDOW]
    total = _TRTLLM_TOTAL.search(window)
    free = _TRTLLM_FREE.search(window)
    return OomReading(
        kind="tensorrt-llm",
        facts=OomFacts(
            framework="tensorrt-llm",
            total_bytes=None if total is None else _gib(total["v"]),
            free_bytes=None if free is None else _gib(free["v"]),
        ),
    )


def _shape(text: str) -> tuple[int, ...] | None:
    dims = [whole_number(d.strip()) for d in text.split(",") if d.strip()]
    if None in dims:
        return None
    return tuple(d for d in dims if d is not None)


def read_tensorflow(flat: str) -> OomReading | None:
    tensor = TF_TENSOR.search(flat)
    ran_out = TF_RAN_OUT.search(flat)
    if tensor is None and ran_out is None and TF_OOM_ERROR.search(flat) is None:
        return None
    shape = None if tensor is None else _shape(tensor["shape"])
    dtype = None if tensor is None or tensor["dtype"] is None else tensor["dtype"].lower()
    tried = _size(ran_out)
    if ran_out is not None and (rounded := whole_number(ran_out["rounded"])) is not None:
        tried = rounded
    if tried is None and shape is not None and dtype in DTYPE_BYTES:
        tried = math.prod(shape) * DTYPE_BYTES[dtype]
    limit = _TF_LIMIT.search(flat)
    in_use = _TF_IN_USE.search(flat)
    device = _TF_DEVICE.search(flat)
    return OomReading(
        kind="tensorflow",
        facts=OomFacts(
            framework="tensorflow",
            tried_bytes=tried,
            device=None if device is None else device["d"],
        ),
        tf=TfExtra(
            shape=shape,
            dtype=dtype,
            limit_bytes=None if limit is None else whole_number(limit["n"] or limit["m"]),
            in_use_bytes=None if in_use is None else whole_number(in_use["n"]),
            not_a_failure=tensor is None and TF_NOT_A_FAILURE.search(flat) is not None,
        ),
    )


def _tried_bytes(match: re.Match[str] | None) -> int | None:
    """The exact count where the message prints one beside the rounded size, else the size."""
    if match is None:
        return None
    for name in ("v_bytes", "w_bytes"):
        if (count := whole_number(match[name])) is not None:
            return count
    return _size(match)


def read_xla(flat: str) -> OomReading | None:
    tried = XLA_TRIED.search(flat)
    total = XLA_TOTAL.search(flat)
    remat = XLA_REMAT.search(flat)
    if tried is None and total is None and remat is None:
        return None
    framework = (
        "jax" if JAX_MARK.search(flat) else ("tensorflow" if TF_MARK.search(flat) else "unknown")
    )
    return OomReading(
        kind="xla",
        facts=OomFacts(framework=framework, tried_bytes=_tried_bytes(tried)),
        xla=XlaExtra(total_allocation_bytes=_size(total), remat_floor_bytes=_size(remat)),
    )


def _count(text: str | None) -> int | None:
    """``"1,677,721,600"`` → 1677721600."""
    return None if text is None else whole_number(text.replace(",", ""))


def read_cupy(flat: str) -> OomReading | None:
    found = CUPY_POOL.search(flat)
    if found is None:
        return None
    return OomReading(
        kind="cupy",
        facts=OomFacts(
            framework="cupy",
            tried_bytes=_count(found["tried"]),
            allocated_bytes=_count(found["held"]),
        ),
        pool_limit_bytes=_count(found["limit"]),
    )


def _gib(text: str) -> int | None:
    return parse_size(f"{text} GiB")


def read_vllm(flat: str) -> OomReading | None:
    seq = VLLM_SEQ.search(flat)
    one_request = VLLM_ONE_REQUEST.search(flat)
    seq_len = seq or one_request  # either names max_model_len
    needed = VLLM_NEEDED.search(flat)
    negative = VLLM_NEGATIVE.search(flat)
    free = VLLM_FREE.search(flat)
    extra = VllmExtra(
        no_cache_blocks=VLLM_NO_BLOCKS.search(flat) is not None
        or VLLM_ZERO_BLOCKS.search(flat) is not None,
        one_request_does_not_fit=one_request is not None,
        max_seq_len=None if seq_len is None else whole_number(seq_len["seq"]),
        kv_tokens=None if seq is None else whole_number(seq["kv"]),
        kv_needed_bytes=_size(needed, "need"),
        kv_available_bytes=_size(needed, "avail"),
        negative_kv_bytes=_size(negative),
        startup_free_bytes=None if free is None else _gib(free["free"]),
        startup_total_bytes=None if free is None else _gib(free["total"]),
        requested_utilization=None if free is None else decimal_number(free["util"]),
        requested_bytes=None if free is None else _gib(free["want"]),
        profiling_not_clean=VLLM_PROFILING.search(flat) is not None,
    )
    if not extra.any:
        return None
    return OomReading(
        kind="vllm",
        facts=OomFacts(
            framework="vllm",
            total_bytes=extra.startup_total_bytes,
            free_bytes=extra.startup_free_bytes,
        ),
        vllm=extra,
    )


def read_stream_executor(flat: str) -> OomReading | None:
    found = STREAM_EXECUTOR.search(flat)
    if found is None:
        return None
    framework = "tensorflow" if TF_MARK.search(flat) else "unknown"
    return OomReading(
        kind="stream-executor",
        facts=OomFacts(framework=framework, tried_bytes=whole_number(found["n"])),
    )


def read_oom(flat: str) -> OomReading | None:
    """The OOM message of the text, if any, with its numbers. A PyTorch message wins over the
    serving engine's (vLLM runs on PyTorch: its torch OOM states the device's numbers)."""
    torch = read_torch(flat) or read_torch_async(flat) or read_torch_mps(flat)
    if torch is not None:
        vllm = read_vllm(flat)
        return OomReading("pytorch", torch, vllm=vllm.vllm if vllm is not None else VllmExtra())
    readers = (
        read_vllm, read_tensorflow, read_cupy, read_xla, read_stream_executor, read_ggml,
        read_tensorrt_llm,
    )  # fmt: skip
    for reader in readers:
        reading = reader(flat)
        if reading is not None:
            return reading
    return None
