"""CUDA error numbers → causes, for messages that print the number without the text
(``THCudaCheck FAIL ... error=802``, ``cuda runtime error (35)``, ``CUDA error 804``).

Numbers from ``cudaError_t`` (cuda_runtime_api.h, CUDA ≥ 10.1) and the numbering of CUDA ≤ 10.0
where it differed (the legacy codes: 4 launch failure, 6 launch timeout, 7 out of resources,
30 unknown, 38 no device, 39 ECC, 48 no kernel image, 59 assert, 60 too many peers, 64 peer
access unsupported, 77 illegal address). A number is
weaker evidence than the message text: its weight stays below the text's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwarden.health.explain.votes import ReadingFixes


@dataclass(frozen=True, slots=True)
class CudaError:
    numbers: tuple[int, ...]
    name: str
    votes: tuple[tuple[str, float], ...]
    decides: str | None = None  # when the votes are split: what to capture to decide
    fixes: ReadingFixes = ()  # the number's own fixes per cause, before the cause's generic ones
    # the CUDA release that gave the number this meaning, where an older one gave it another: a
    # paste naming only older releases is not read so
    since: tuple[int, int] | None = None


# cudaErrorStubLibrary / CUDA_ERROR_STUB_LIBRARY (34, CUDA ≥ 11.1; the runtime API's and the driver
# API's error types): "the CUDA driver that the application has loaded is a stub library" — the
# toolkit's stubs/libcuda.so, there for linking only, loaded in place of the driver's libcuda:
# the stubs folder on LD_LIBRARY_PATH or in the binary's rpath ahead of the driver's library, or
# no driver installed at all for the loader to find first.
STUB_LIBRARY_DECIDES = (
    "`ldconfig -p | grep libcuda` (the driver's libcuda.so.1, e.g. /usr/lib/x86_64-linux-gnu) "
    "against `echo $LD_LIBRARY_PATH` and the binary's RUNPATH (`readelf -d BINARY | grep -i "
    "path`): a …/stubs folder there is loaded first; `nvidia-smi` fails = no driver at all"
)
STUB_LIBRARY_FIXES: ReadingFixes = (
    (
        "library-conflict",
        (
            "take the toolkit's stubs folder (…/lib64/stubs, …/targets/*/lib/stubs) out of "
            "LD_LIBRARY_PATH and the binary's rpath: its libcuda.so is for linking only, the "
            "driver's libcuda.so.1 must be the one loaded",
        ),
    ),
)

CUDA_ERRORS: tuple[CudaError, ...] = (
    CudaError(
        (2,), "cudaErrorMemoryAllocation", (("oom-too-big", 0.4), ("oom-other-process", 0.35))
    ),
    CudaError((3,), "cudaErrorInitializationError", (("driver-not-loaded", 0.5),)),
    CudaError(
        (4, 719), "cudaErrorLaunchFailure", (("launch-failure", 0.5), ("gpu-fallen-off-bus", 0.2))
    ),
    # 6 and 7: the numbers of CUDA ≤ 10.0 (in ≥ 10.1 they are deprecated profiler errors)
    CudaError((6, 702), "cudaErrorLaunchTimeout", (("launch-timeout", 0.6),)),
    CudaError((7, 701), "cudaErrorLaunchOutOfResources", (("launch-out-of-resources", 0.6),)),
    # 9 in both numberings: "a kernel launch is requesting resources that can never be satisfied
    # by the current device" (more shared memory per block, too many threads or blocks; the
    # runtime API's cudaError_t) — its text reads launch-out-of-resources as the usual reading
    # (signatures.py), the number alone below it
    CudaError((9,), "cudaErrorInvalidConfiguration", (("launch-out-of-resources", 0.45),)),
    CudaError((30, 999), "cudaErrorUnknown", (("driver-not-loaded", 0.4), ("launch-failure", 0.3))),
    # 10: its number in CUDA ≤ 10.0
    CudaError((10, 101), "cudaErrorInvalidDevice", (("device-ordinal-invalid", 0.6),)),
    # 34 in CUDA ≤ 10.0 was cudaErrorNotReady (a query's "not yet"), seldom printed as a failure
    CudaError(
        (34,),
        "cudaErrorStubLibrary",
        (("library-conflict", 0.6), ("driver-not-loaded", 0.3)),
        STUB_LIBRARY_DECIDES,
        STUB_LIBRARY_FIXES,
        since=(11, 1),
    ),
    CudaError((35,), "cudaErrorInsufficientDriver", (("driver-too-old", 0.85),)),
    CudaError(
        (38, 100),
        "cudaErrorNoDevice",
        (("driver-not-loaded", 0.4), ("container-driver-capabilities", 0.3)),
    ),
    CudaError((39, 214), "cudaErrorECCUncorrectable", (("ecc-uncorrectable", 0.85),)),
    CudaError(
        (46,),
        "cudaErrorDevicesUnavailable",
        (("mig-no-instances", 0.45), ("compute-mode-exclusive", 0.35)),
    ),
    CudaError((48, 209), "cudaErrorNoKernelImageForDevice", (("gpu-arch-unsupported", 0.85),)),
    CudaError((59, 710), "cudaErrorAssert", (("device-assert", 0.85),)),
    CudaError((77, 700), "cudaErrorIllegalAddress", (("illegal-memory-access", 0.6),)),
    # 60 and 64: the numbers of CUDA <= 10.0
    CudaError((60, 711), "cudaErrorTooManyPeers", (("gpu-p2p-unsupported", 0.6),)),
    CudaError((64, 217), "cudaErrorPeerAccessUnsupported", (("gpu-p2p-unsupported", 0.6),)),
    CudaError((222,), "cudaErrorUnsupportedPtxVersion", (("driver-too-old", 0.75),)),
    CudaError((802,), "cudaErrorSystemNotReady", (("fabric-manager-down", 0.85),)),
    CudaError(
        (803,),
        "cudaErrorSystemDriverMismatch",
        # the CUDA runtime API's meaning: the display driver and the CUDA driver (libcuda) are
        # different versions; a compat libcuda the driver cannot serve is one way to get there
        (("nvml-driver-mismatch", 0.45), ("forward-compat-unsupported", 0.35)),
    ),
    CudaError(
        (804,), "cudaErrorCompatNotSupportedOnDevice", (("forward-compat-unsupported", 0.85),)
    ),
)
BY_NUMBER: dict[int, CudaError] = {n: e for e in CUDA_ERRORS for n in e.numbers}

# Where CUDA prints a bare number: THC's "error=802", "cuda runtime error (35)", "CUDA error 804",
# PyTorch's "Error 804:", cudaGetDeviceCount "returned 35", TF's "CUDA_ERROR_... (code 35)".
# OpenMM's CUDA platform prints a driver API result it has no name for as "CUDA error (700)"
# (CudaContext::getErrorString, "Error invoking kernel: CUDA error (700)"): a CUresult, read only
# with three digits, where the driver's numbers and the runtime's (CUDA ≥ 10.1) are the same.
# GPU PhysX prints a failed driver API call as "<cuFunction> failed with error N"
# (PxgCudaUtils.h, "SynchronizeStreams cuEventRecord failed with error 700"): a CUresult. Only a
# driver API name (cu + a capital letter, matched case-sensitively) is read: the libraries'
# calls (cublas…, cudnn…, cufft…, curand…) count in their own status numbers.
# PhysX 5 reports the CUDA context's last driver API result as "PhysX Internal CUDA error.
# Simulation can not continue! Error code N!" (NpScene::simulateOrCollide, physx/source/physx/
# src/NpScene.cpp, PxI32 of getCudaContext()->getLastError(), and the GPU solver's stream
# synchronisations): a CUresult, read only with three digits like OpenMM's.
# LAMMPS' GPU package (Geryon's CU_SAFE_CALL, nvd_macros.h) prints a failed driver API call as
# "Cuda driver error N in call at file …": a CUresult too, read only with three digits — below
# 100 the driver counts otherwise (its 4 is CUDA_ERROR_DEINITIALIZED, the runtime's legacy 4 a
# launch failure).
# PaddlePaddle's enforce writes a failed runtime call as "CUDA error(N), <cudaGetErrorString>."
# (no space before the parenthesis, a comma after it: paddle/phi/core/enforce.h): a runtime
# number, as CUDA's own. Paddle 1.6 wrote it as "<cudaCall> failed in paddle::platform::<Fn>,
# error code : N, Please see detail in …" (paddle/fluid/platform/gpu_info.cc, the cudaError_t
# of the call): a runtime number too.
# Numba raises a failed driver API call as CudaAPIError(retcode, "Call to <fn> results in <name>")
# (numba/cuda/cudadrv/driver.py, _check_ctypes_error; the name is UNKNOWN_CUDA_ERROR when its
# ERROR_MAP lacks the code), shown as "CudaAPIError(N, '…')" (repr, e.g. in Dask's worker log) or
# "CudaAPIError: [N] …" (str): a CUresult, read only with three digits like OpenMM's, and only
# where Numba had no name for it — a named result is read by its name, the number beside it would
# count the same error twice.
# A number printed as "CUresult=N" (TornadoVM's "cuGraphLaunch failed. CUresult=700") is named by
# its type: cuda.h's CUresult, a driver API result, read only with three digits like OpenMM's.
NUMBER = re.compile(
    r"(?:cuda runtime error\s*\(|THCudaCheck FAIL.{0,200}?error=|CUDA error(?: code)?\s*[:=]?\s*|"
    r"CudaAPIError\(\s*(?=\d{3}\s*,\s*['\"]Call to \w+ results in UNKNOWN_CUDA_ERROR)|"
    r"CudaAPIError:?\s*\[(?=\d{3}\]\s*Call to \w+ results in UNKNOWN_CUDA_ERROR)|"
    r"\bcuda\w+ failed in paddle::[\w:]+,\s*error code\s*:\s*|"
    r"CUDA error \((?=\d{3}\))|CUDA error\((?=\d{1,3}\),)|"
    r"(?-i:\bcu[A-Z]\w*)(?:\(\))? failed with error\s+(?=\d{3}\b)|"
    r"PhysX Internal CUDA error\. Simulation can not continue! Error code\s+(?=\d{3}!)|"
    r"cudaGetDeviceCount\(?\)? returned\s*|CUDA (?:runtime )?Error\s+|"
    r"CUDA driver error\s+(?=\d{3}\b)|(?-i:\bCUresult)\s*[=:]\s*(?=\d{3}\b)|"
    r"\bcuda\w*\s*\(?code\s*)(?P<number>\d{1,3})\b",
    re.IGNORECASE,
)
# PyTorch's cudaGetDeviceCount() warning prints "… might have already set an error? Error N: "
# then cudaGetErrorString(N) (c10/cuda/CUDAFunctions.cpp). The string states the cause and
# the signatures read it; where the paste ends before it (an issue title cut at GitHub's 256
# characters), the number is all that is left of the message.
CUT_TORCH_NUMBER = re.compile(
    r"might have already set an error\?\s*Error\s+(?P<number>\d{1,3})\b(?=:?[^:]{0,24}$)",
    re.IGNORECASE,
)
# ONNX Runtime's CUDA execution provider prints a failed runtime call as "CUDA failure N: <its
# string> ; GPU=… ; hostname=… ; expr=…" (core/providers/cuda/cuda_call.cc, CudaCall with the
# library name "CUDA"; CNTK's CudaCall before it), NCCL as "Cuda failure N '<its string>'". The
# string states the cause and the signatures read it; where the paste has none after the number
# (an issue title "CUDA failure 700"), the number is all that is left. The cuBLAS and cuDNN calls
# say "CUBLAS failure N" / "CUDNN failure N" in their own numbering, which this does not read.
CUT_FAILURE_NUMBER = re.compile(r"\bCUDA failure\s+(?P<number>\d{1,3})\b(?!\s*[:'])", re.IGNORECASE)
# The forms above where only the number of a message is left.
CUT_NUMBERS = (CUT_TORCH_NUMBER, CUT_FAILURE_NUMBER)
