"""A compiled kernel over the GPU's shared memory: the message states the two numbers that decide.

Triton checks a compiled kernel against the GPU before launching it and raises OutOfResources
(triton/runtime/errors.py): "out of resource: shared memory, Required: N, Hardware limit: M.
Reducing block sizes or `num_stages` may help." — N the bytes the kernel's config needs, M the
GPU's shared memory per block (the driver's max_shared_mem; AMD's LDS). Older releases printed
it as ``triton.code_gen.OutOfResources`` without separators ("shared memoryRequired: N
Hardware limit: M"); forks say "Hardware limitation"; Inductor's autotuning wraps it ("No valid
triton configs. OutOfMemoryError: out of resource: triton_mm Required: …") with the kernel's
name where the resource was. ptxas refuses a CUDA kernel whose static shared memory is over the
target's ("uses too much shared data (0xc400 bytes, 0xc000 max)"). A kernel that needs more than
48 KiB of dynamic shared memory must opt in with cudaFuncSetAttribute(kernel,
cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (the driver's cuFuncSetAttribute with
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); CUDA's runtime API documents that this value
plus the kernel's static shared memory "cannot exceed the device attribute
cudaDevAttrMaxSharedMemoryPerBlockOptin", and an incorrect value returns cudaErrorInvalidValue
("invalid argument"). Checkers that print the failed call's text (FlashInfer's
FLASHINFER_CUDA_CALL: "CUDA Error: invalid argument (1) <file>: line N at function
cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size)") so show
a kernel built for a GPU with more shared memory than this one (Hopper's kernels on sm_120).
Faiss checks its GPU IVFPQ index against the device before building it (faiss/gpu/
GpuIndexIVFPQ.cu, verifySettings_ / verifyPQSettings_: FAISS_THROW_IF_NOT_FMT(requiredSmemSize
<= getMaxSharedMemPerBlock(device), "Device %d has %zu bytes of shared memory, while %d bits per
code and %d sub-quantizers requires %zu bytes. Consider useFloat16LookupTables and/or reduce
parameters")): the search kernel keeps one lookup table per sub-quantizer in shared memory
(table size × sub-quantizers × 2^bits), so too many sub-quantizers for the block's shared
memory — the index's parameters, not the data — refuse the index.
IREE checks twice. Its compiler's LLVMGPU pass (LLVMGPUCheckIRBeforeLLVMConversion) sums a
dispatch's workgroup (shared) memory allocations against iree-llvmgpu-shared-mem-allocation-limit
(163 KiB by default, A100's opt-in figure) and refuses the function: "'func.func' op exceeded GPU
memory limit of M bytes for function. Got N bytes". Its runtime's CUDA and HIP drivers compare each
exported function's shared memory with the device's before setting the attribute
(native_executable.c): "requested shared memory size of N [bytes] larger than allowed size of M
[bytes]" (older CUDA HAL: "Requested shared memory size of N larger than allowed size of M").

The reading is certain only when the message states both numbers and the first exceeds the
second; the phrase alone (a truncated paste) is the usual reading. The same exception class
reports other resources ("threads"): those are not this cause.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import quoted
from gpuwarden.health.explain.votes import Vote

CAUSE = "kernel-shared-memory-exceeded"
# A message mentions one (lower case).
WORDS = (
    "out of resource",
    "too much shared data",
    "maxdynamicsharedmemorysize",
    "max_dynamic_shared_size_bytes",
    "bytes of shared memory, while",
    "requested shared memory size of",
    "exceeded gpu memory limit of",
)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): both numbers and Required > limit state the
# cause; the phrase without its numbers is the usual reading; numbers that contradict the phrase
# (Required ≤ limit: a mangled paste) leave it one candidate.
STATED = 0.9
PHRASE_ONLY = 0.7
CONTRADICTED = 0.45
# The opt-in refused: the request is over the GPU's limit unless the value was otherwise wrong
# (negative, a non-kernel pointer), so one usual reading without the numbers.
OPT_IN_REFUSED = 0.6

# Bounded: a byte count has at most a few digits (int() refuses thousands).
_NUMBER = r"(0x[0-9a-f]{1,16}|\d{1,20})"
# The resource is "shared memory", or (Inductor) a kernel's name; never another resource.
_TRITON = re.compile(
    r"out of resource:\s*(?P<resource>shared memory|(?!threads|registers)[a-z_][\w.]*)"
    r"(?:[,.]?\s*Required:\s*(?P<required>\d{1,20})[,.]?\s*Hardware limit(?:ation)?:\s*"
    r"(?P<limit>\d{1,20})(?![0-9a-z]))?",
    re.IGNORECASE,
)
# Inductor's wording names the kernel, not the resource: Triton's hint says it is the config's.
_TRITON_HINT = re.compile(r"Reducing block sizes or `?num_stages`?", re.IGNORECASE)
_PTXAS = re.compile(
    r"uses too much shared data\s*\(\s*" + _NUMBER + r"\s*bytes,\s*" + _NUMBER + r"\s*max\s*\)"
    r"|uses too much shared data",
    re.IGNORECASE,
)
# Faiss's IVFPQ check states the device's bytes first, then the bytes its parameters need.
_FAISS_IVFPQ = re.compile(
    r"Device \d{1,4} has (\d{1,20}) bytes of shared memory, while \d{1,3} bits per code and "
    r"\d{1,5} sub-quantizers requires (\d{1,20}) bytes",
    re.IGNORECASE,
)
# IREE's compiler states the limit first, its runtime the request first (module docstring).
_IREE_COMPILER = re.compile(
    r"exceeded GPU memory limit of (\d{1,20}) bytes for function\.?\s*Got (\d{1,20}) bytes",
    re.IGNORECASE,
)
_IREE_RUNTIME = re.compile(
    r"requested shared memory size of (\d{1,20})(?: bytes)? larger than allowed size of "
    r"(\d{1,20})",
    re.IGNORECASE,
)
# Faiss's own advice ("Consider useFloat16LookupTables and/or reduce parameters"): faiss's cloner
# passes GpuClonerOptions.useFloat16 to the IVFPQ index as useFloat16LookupTables (GpuCloner.cpp),
# and the limit it checks is cudaDeviceProp.sharedMemPerBlock (utils/DeviceUtils.cu), the
# default 48 KiB of every NVIDIA GPU, which a bigger GPU does not raise.
_FAISS_IVFPQ_FIXES = (
    "faiss's float16 lookup tables, as its message advises: GpuIndexIVFPQConfig."
    "useFloat16LookupTables = True, or GpuClonerOptions.useFloat16 = True when cloning a CPU "
    "index to the GPU (half the bytes per table)",
    "fewer sub-quantizers (M) or bits per code for the GPU index: its tables take 4 bytes (2 in "
    "float16) × M × 2^bits of shared memory against the block's default 48 KiB, which a bigger "
    "GPU does not raise",
)
# The failed call's text beside its invalid-value error, in either order, within one message.
_OPT_IN_CALL = (
    r"\bcu(?:da)?FuncSetAttribute\s*\([^()]{0,200}?"
    r"(?:cudaFuncAttributeMaxDynamicSharedMemorySize|CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)"
)
_INVALID_VALUE = r"(?:invalid argument|cudaErrorInvalidValue|CUDA_ERROR_INVALID_VALUE)"
_OPT_IN_REFUSED = re.compile(
    _INVALID_VALUE
    + r".{0,300}?"
    + _OPT_IN_CALL
    + "|"
    + _OPT_IN_CALL
    + r".{0,200}?"
    + _INVALID_VALUE,
    re.IGNORECASE,
)

_MEANINGS = {
    STATED: "the kernel needs more shared memory per block than the GPU (or target) offers",
    PHRASE_ONLY: "over the GPU's shared memory per block (the numbers are not in the text)",
    CONTRADICTED: "the numbers in the text do not show it over the limit",
}
_DECIDES = (
    "the whole message: Required (bytes the kernel's config needs) against the Hardware limit "
    "(the GPU's shared memory per block)"
)


def _bytes(number: str) -> int:
    return int(number, 16) if number[:2].lower() == "0x" else int(number)


def _weight(required: str | None, limit: str | None) -> float:
    if required is None or limit is None:
        return PHRASE_ONLY
    return STATED if _bytes(required) > _bytes(limit) else CONTRADICTED


def _triton_vote(flat: str) -> Vote | None:
    match = _TRITON.search(flat)
    if match is None:
        return None
    named = match["resource"].lower() == "shared memory"
    if not named and (match["required"] is None or _TRITON_HINT.search(flat) is None):
        return None
    weight = _weight(match["required"], match["limit"])
    if not named:
        weight = min(weight, PHRASE_ONLY)  # the resource is inferred from the hint
    meaning = "Triton's pre-launch check: " + (
        _MEANINGS[weight] if named else "Inductor names the kernel; the config is over a limit"
    )
    return Vote(CAUSE, weight, quoted(match[0], meaning), _DECIDES)


def _ptxas_vote(flat: str) -> Vote | None:
    match = _PTXAS.search(flat)
    if match is None:
        return None
    weight = _weight(match[1], match[2])
    meaning = "ptxas, the kernel's static shared memory: " + _MEANINGS[weight]
    return Vote(CAUSE, weight, quoted(match[0], meaning), _DECIDES)


def _faiss_ivfpq_vote(flat: str) -> Vote | None:
    match = _FAISS_IVFPQ.search(flat)
    if match is None:
        return None
    weight = _weight(required=match[2], limit=match[1])
    meaning = "faiss's GPU IVFPQ lookup tables (one per sub-quantizer): " + _MEANINGS[weight]
    return Vote(CAUSE, weight, quoted(match[0], meaning), _DECIDES, _FAISS_IVFPQ_FIXES)


def _iree_vote(flat: str) -> Vote | None:
    compiler = _IREE_COMPILER.search(flat)
    if compiler is not None:
        weight = _weight(required=compiler[2], limit=compiler[1])
        meaning = "IREE's compiler, a dispatch's workgroup memory: " + _MEANINGS[weight]
        return Vote(CAUSE, weight, quoted(compiler[0], meaning), _DECIDES)
    runtime = _IREE_RUNTIME.search(flat)
    if runtime is None:
        return None
    weight = _weight(required=runtime[1], limit=runtime[2])
    meaning = "IREE's runtime, an executable's function against the device: " + _MEANINGS[weight]
    return Vote(CAUSE, weight, quoted(runtime[0], meaning), _DECIDES)


def _opt_in_vote(flat: str) -> Vote | None:
    match = _OPT_IN_REFUSED.search(flat)
    if match is None:
        return None
    meaning = (
        "the kernel's opt-in to more dynamic shared memory was refused: over the GPU's "
        "shared memory per block (the numbers are not in the text)"
    )
    return Vote(CAUSE, OPT_IN_REFUSED, quoted(match[0], meaning), _DECIDES)


def shared_memory_votes(flat: str) -> list[Vote]:
    """The votes for ``kernel-shared-memory-exceeded`` in a flattened paste (one per tool)."""
    found = (
        _triton_vote(flat),
        _ptxas_vote(flat),
        _faiss_ivfpq_vote(flat),
        _iree_vote(flat),
        _opt_in_vote(flat),
    )
    return [vote for vote in found if vote is not None]
