"""An operation CUDA does not allow while a stream is being captured into a CUDA graph.

While a stream captures, its work is recorded, not run; CUDA refuses what cannot be recorded or
would reach outside the graph (CUDA runtime API, cudaError_t 900-908, the driver's
CUDA_ERROR_STREAM_CAPTURE_* / CUDA_ERROR_CAPTURED_EVENT; HIP mirrors them): a synchronisation
(900 "operation not permitted when stream is capturing"), an allocation outside the graph's pool,
a query of an event recorded in the capture (907), the legacy stream (906), a fork not joined
back (904), a dependency on uncaptured work (905), merging two captures (902), ending it on
another stream (903) or thread (908). Any of them invalidates the capture: later calls report 901
"operation failed due to a previous error during capture", and PyTorch's allocator asserts on
``cudaStreamCaptureStatusInvalidated``. PyTorch refuses the RNG's seed query itself ("Cannot call
CUDAGeneratorImpl::current_seed during CUDA graph capture").

The message names the cause, so the reading is certain — unless the same paste shows another
failure (out of memory, an illegal memory access, a device assert) that the capture error only
echoes: that failure keeps its own cause and the capture error is one candidate.
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import first_tier, reading_vote
from gpuwarden.health.explain.votes import Vote

CAUSE = "cuda-graph-capture-unsupported"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = ("captur", "current_seed", "legacy stream", "unjoined")

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): CUDA's or PyTorch's capture error states the
# cause; a framework's own "not allowed during capture" wording is the usual reading; next to
# another failure the capture error is that failure's echo.
STATED = 0.9
WORDED = 0.7
ECHO = 0.4

# cudaGetErrorString's texts for 900-908 (HIP prints the same), their enum names (runtime,
# driver, HIP), and PyTorch's checks that name the capture.
_STATED = re.compile(
    r"operation not permitted when stream is capturing|"
    r"operation failed due to a previous error during capture|"
    r"operation would result in a merge of (?:separate|two independent) capture sequences|"
    r"capture was not (?:ended in the same stream as it began|initiated in this stream)|"
    r"capturing stream has unjoined work|"
    r"dependency created on uncaptured work in another stream|"
    r"operation would make the legacy stream depend on a capturing blocking stream|"
    r"operation not permitted on an event last recorded in a capturing stream|"
    r"attempt to terminate a thread-local capture sequence from another thread|"
    r"(?:cuda|hip)ErrorStreamCapture(?:Unsupported|Invalidated|Merge|Unmatched|Unjoined|"
    r"Isolation|Implicit|WrongThread)|cudaErrorCapturedEvent|"
    r"CUDA_ERROR_STREAM_CAPTURE_(?:UNSUPPORTED|INVALIDATED|MERGE|UNMATCHED|UNJOINED|ISOLATION|"
    r"IMPLICIT|WRONG_THREAD)|CUDA_ERROR_CAPTURED_EVENT|"
    r"cudaStreamCaptureStatusInvalidated|"
    r"Cannot call CUDAGeneratorImpl::\w+ during CUDA graph capture",
    re.IGNORECASE,
)
# A library's own refusal: "... is not allowed during CUDA graph capture", "not supported while
# stream capturing", "graph capture is not supported" -- a graph's or a stream's capture, since
# "screen capture not supported" or nsys's "GPU metrics capture is not supported" are not this.
_WORDED = re.compile(
    r"not (?:allowed|permitted|supported) (?:during|while|when|in) (?:a )?(?:cuda ?graph|stream) "
    r"captur|not (?:allowed|permitted|supported) (?:during|while|when) (?:the )?stream is "
    r"captur|(?:graphs?|stream) captur\w* (?:is )?not (?:allowed|permitted|supported)",
    re.IGNORECASE,
)
# Another failure the capture error may only echo: it keeps its own cause.
_OTHER_FAILURE = re.compile(
    r"out of memory|OutOfMemoryError|illegal memory access|illegal address|"
    r"device-side assert(?:ion)? triggered|misaligned address",
    re.IGNORECASE,
)

_MEANINGS = {
    STATED: "CUDA refused an operation while the stream was being captured into a CUDA graph",
    WORDED: "the library refused an operation during CUDA graph capture",
    ECHO: "a capture error beside another failure, which it may only echo",
}
DECIDES = (
    "the first capture error in the log and the call above it in the traceback (a "
    "synchronisation, .item()/.cpu(), an allocation, an RNG state query, a side stream or a "
    "collective); a rerun without CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph, "
    "torch.compile without mode='reduce-overhead'): if it then runs, the captured op was the cause"
)


def capture_votes(flat: str) -> list[Vote]:
    """The vote for ``cuda-graph-capture-unsupported`` in a flattened paste (at most one)."""
    found = first_tier(flat, ((_STATED, STATED), (_WORDED, WORDED)))
    if found is not None and _OTHER_FAILURE.search(flat) is not None:
        found = found[0], ECHO
    return reading_vote(CAUSE, found, _MEANINGS, DECIDES)
