"""Building CUDA code (a PyTorch C++/CUDA extension, a setup.py or make of .cu files) without a
usable CUDA toolkit: none found, another CUDA major version than PyTorch's, or a host compiler
nvcc does not support.

Each case has a fixed message. torch.utils.cpp_extension refuses a toolkit of another CUDA major
version than the one PyTorch was built with ("The detected CUDA version (X) mismatches the version
that was used to compile PyTorch (Y)"; since PyTorch 2.0 a minor difference is only a warning that
"most likely … shouldn't be a problem"), and a build with no toolkit ("CUDA_HOME environment
variable is not set"; DeepSpeed's op builder: "CUDA_HOME does not exist, unable to compile CUDA
op(s)"). nvcc's crt/host_config.h stops on a gcc, clang or Visual Studio newer than
the toolkit supports ("#error -- unsupported GNU version! gcc versions later than N are not
supported!"; CUDA 7 and before: "… gcc 4.9 and up are not supported!"; NVIDIA's installation
guide lists the supported host compilers per release). The directive's start "#error --
unsupported GNU version!" is the header's in every release, so it reads alone when the rest of
the line is cut. A shell
or setuptools that finds no nvcc at the path the build uses ("nvcc: not found", "command '…/nvcc'
failed: No such file or directory") says the toolkit is not where the build looks — not
installed, or CUDA_HOME set wrongly (a PATH-style ":/usr/local/cuda"). The same holds for the
host compiler not finding a header the toolkit ships in its include directory (cuda_runtime_api.h,
cuda_runtime.h, cuda.h, cuda_fp16.h, cublas_v2.h …): gcc's "fatal error: X.h: No such file or
directory", MSVC's C1083 "Cannot open include file: 'X.h': No such file or directory", clang's
"'X.h' file not found". cuDNN's and NCCL's headers are not the toolkit's and are not read here.
The toolkit's libcu++ headers (<cuda/std/complex>, <cuda/atomic> …, of CCCL) moved with CUDA 13.0
from include/cuda/ to include/cccl/cuda/, which nvcc searches and a host-only compile does not:
CCCL's 3.0 migration guide names "<cuda/...> … headers missing" with GCC or MSVC alone, mended by
linking CCCL::CCCL (CMake 3.31 adds it to CUDA targets); libcu++'s release table dates each header
to a toolkit, so an older toolkit lacks it too. CUB's and Thrust's headers are not read: a name
CUB dropped (cub/iterator/tex_ref_input_iterator.cuh) misses for the code, not the toolkit.
nvcc refuses a C++ dialect it predates with its option parser's "nvcc fatal : Value 'c++17' is
not defined for option 'std'": the CUDA Programming Guide lists the -std values nvcc takes, and
C++17 came with CUDA 11.0 (CMake's NVIDIA-CUDA.cmake: "NVCC 11 supports cuda_std_17"); a later
standard likewise with a later release. PyTorch's extension builder passes -std=c++17, so an older
nvcc on the PATH (a distribution's /usr/bin/nvcc) cannot build them.

An extension whose setup.py compiles its CUDA sources only when it finds CUDA at build time
(detectron2, PyTorch3D, DCNv2: CUDA_HOME set and torch.cuda.is_available(), or FORCE_CUDA=1)
otherwise builds CPU-only and stops at the first GPU op with its own "Not compiled with GPU
support". detectron2's installation guide ("Common Installation Issues") reads it as "CUDA is not
found when building detectron2": the usual reading, not a stated one — a build on a machine (or in
a `docker build`) that sees no GPU ends the same way. TripoSR's isosurface.py prints
"torchmcubes was not compiled with CUDA support, use CPU version instead." when torchmcubes lacks
its mcubes_cuda (the AttributeError "module 'torchmcubes_module' has no attribute 'mcubes_cuda'"
it catches); TripoSR's README (Troubleshooting) reads both as torchmcubes "compiled without CUDA
support": a local CUDA of another major version than PyTorch's, or an old setuptools. A CMake
build whose CUDA is optional asks CMake's check_language(CUDA) (Modules/CheckLanguage.cmake),
which prints "Looking for a CUDA compiler" and, finding none it can enable, "- NOTFOUND": the
project then builds without its CUDA code — the same usual reading, unless the build then fails
for a reason of its own (a missing package, a C++ error that names no CUDA), which the CPU-only
build of any project with an optional CUDA meets as well. PyTorch's own CMake package
(cmake/Caffe2Config.cmake.in) stops a build against a CUDA PyTorch when it finds no CUDA toolkit:
"Your installed Caffe2 version uses CUDA but I cannot find the CUDA libraries. Please set the
proper CUDA prefixes and / or install CUDA." — a toolkit not where the build looks.

On Windows the host compiler is Visual Studio's cl.exe, which is on the PATH only in a Developer
Command Prompt (or after vcvars64.bat): nvcc stops with "nvcc fatal : Cannot find compiler
'cl.exe' in PATH" when it finds none, and setuptools — which torch.utils.cpp_extension builds with
— with "Microsoft Visual C++ 14.0 (or greater) is required" when no Visual C++ build tools are
installed. That setuptools message is about any C extension (not only CUDA ones), so it reads as
this cause only beside PyTorch's extension builder or nvcc; cpp_extension's warning "Error checking
compiler version for cl" alone (it could not run cl.exe) is the usual reading, the build's own
error decides.

Numba compiles its CUDA kernels at run time with the toolkit's NVVM library: numba/cuda/cudadrv/
nvvm.py raises NvvmSupportError("libNVVM cannot be found. Do `conda install cudatoolkit`" with the
loader's error; older releases "… Try setting environment variable NUMBAPRO_NVVM …") when it finds
no libNVVM where it looks (a conda cudatoolkit, CUDA_HOME, the system's toolkit): a JIT build
without a usable toolkit, the same usual reading as a missing nvcc.

XLA's GPU compiler (JAX, TensorFlow) likewise needs two pieces of the toolkit at run time:
libdevice, linked into every module that calls a math function (xla/service/gpu/
llvm_gpu_backend/nvptx_backend.cc: "libdevice not found at %s", the path "./libdevice.10.bc" when
it found no CUDA directory at all), and the ptxas binary it runs on the PTX (its nvptx_compiler.cc
stops with "ptxas returned an error during compilation of ptx to sass: 'Internal: Failed to launch
ptxas'" when none can be started). When the ptxas it ran is older than the PTX it emits, XLA
quotes ptxas's own refusal ("ptxas exited with non-zero error code N, output: … Unsupported
.version 6.0; current version is '5.0'", asm_compiler.cc): that ptxas is the toolkit's binary,
not the driver's JIT — unless XLA then says "Relying on driver to perform ptx compilation", a
fallback that only warns. Before that XLA warns of each piece it cannot find: GetLibdeviceDir
(xla/service/gpu/llvm_gpu_backend/default/nvptx_libdevice_path.cc; nvptx_compiler.cc in older
releases) logs "Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice. This may result in
compilation or runtime failures, if the program we try to run uses routines from libdevice."
when no candidate CUDA root holds nvvm/libdevice, and WarnIfBadPtxasVersion (asm_compiler.cc)
logs "Couldn't get ptxas version string: " with GetPtxasVersionString's status, "Couldn't invoke
<ptxas> --version", when the binary cannot be started (from 2023 GetToolVersionImpl wraps that
status as "Couldn't get ptxas/nvlink version string: INTERNAL: Couldn't invoke <ptxas>
--version", logged after "Couldn't get ptxas version : FAILED_PRECONDITION: " or raised).
Warnings, read below the failures: the missing libdevice fails every kernel that calls a math
function, the missing ptxas only where XLA does not fall back to the driver.

Not this: "No CUDA runtime is found, using CUDA_HOME=…" (the toolkit was found; no GPU is visible
at build time, as in `docker build`), nvcc failing on a source file ("failed with exit status 2":
the compiler's own error is above it) or refusing a GPU architecture newer than the toolkit
(gpu-arch-unsupported).
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import first_tier, quoted, reading_vote
from gpuwarden.health.explain.votes import Vote

CAUSE = "extension-build-toolkit"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = (
    "cuda",
    "nvcc",
    "version",
    "cl.exe",
    "visual c++",
    "gpu support",
    "compiler version for cl",
    *("cublas", "cusparse", "curand", "cufft", "cusolver", "nvrtc"),
    "libnvvm",
    *("libdevice", "ptxas"),
)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): PyTorch's or nvcc's own refusal states the
# cause; a missing nvcc at the build's path is the usual reading (the toolkit is absent or
# CUDA_HOME points elsewhere).
STATED = 0.9
NOT_FOUND = 0.75
HEADER_NOT_FOUND = 0.7
BUILT_WITHOUT_CUDA = 0.65

# host_config.h's clause after "unsupported GNU version!": the newest gcc (clang) it takes since
# CUDA 8, the oldest gcc it refuses before
_HOST_COMPILER_CLAUSE = (
    r"(?:(?:gcc|clang) versions? later than \d+ are not supported|"
    r"gcc \d+(?:\.\d+)* and up are not supported)"
)
# torch.utils.cpp_extension (CUDA_MISMATCH_MESSAGE, _join_cuda_home), DeepSpeed's op builder
# (MissingCUDAException), apex's and flash-attn's setup.py checks, and nvcc's host_config.h for
# gcc, clang and MSVC. flash-attn's setup.py reads the nvcc of CUDA_HOME and refuses one older
# than it needs ("FlashAttention is only supported on CUDA 11.6 and above. Note: make sure nvcc
# has a supported version by running nvcc -V."; 11, 11.4, 11.7 in other releases); the same
# words followed by "devices" or "platform" are other programs' checks of the GPU, not the build.
_STATED = re.compile(
    r"detected CUDA version \(\d+(?:\.\d+)*\) mismatches the version that was used to compile\s+"
    r"PyTorch|"
    r"CUDA_HOME environment variable is not set|"
    r"CUDA_HOME does not exist, unable to compile CUDA op|"
    r"Cuda extensions are being compiled with a version of Cuda that does not match the "
    r"version used to compile Pytorch binaries|"
    rf"unsupported (?:GNU|clang) version! {_HOST_COMPILER_CLAUSE}|"
    # the directive alone (the line cut after it); followed by its clause, the clause's match
    # above is the evidence
    rf"#error -- unsupported (?:GNU|clang) version!(?! {_HOST_COMPILER_CLAUSE})|"
    r"unsupported Microsoft Visual Studio version!|"
    r"nvcc cannot find a supported version of Microsoft Visual Studio|"
    r"\bFlashAttention is only supported on CUDA\b(?!\s+(?:devices|platform))",
    re.IGNORECASE,
)
# The build's nvcc is not there: sh's and bash's "not found", setuptools' spawn error,
# setup.py's own locate_cuda(); CMake's Visual Studio generator finds no CUDA toolset
# (CMakeDetermineCompilerId.cmake: "No CUDA toolset found.", the toolkit's MSBuild integration
# missing from that Visual Studio: a toolkit installed before it, or without that component);
# PyTorch's CMake package finds no toolkit for a CUDA PyTorch (cmake/Caffe2Config.cmake.in).
_NOT_FOUND = re.compile(
    r"\bnvcc: (?:command )?not found|"
    r"command '[^']*nvcc(?:\.exe)?' failed: No such file or directory|"
    r"The nvcc binary could not be located|"
    r"\bNo CUDA toolset found\b|"
    r"\bYour installed Caffe2 version uses CUDA but I cannot find the CUDA libraries",
    re.IGNORECASE,
)
# A header of the toolkit's include directory the host compiler cannot open (gcc, MSVC, clang):
# the name stands alone or after a "/", never inside a longer name ("my_cuda.h").
_HEADER_NOT_FOUND = re.compile(
    r"(?<![\w.])(?:cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cublas_v2|cublasLt|"
    r"cusparse|curand|cufft|cusolverDn|nvrtc)\.h'?:?\s*"
    r"(?:No such file or directory|file not found)",
    re.IGNORECASE,
)
# A libcu++ header (no extension: "cuda/std/complex", "cuda/atomic") the host compiler cannot open,
# named as included, never after a "/" (a project's own cuda/ folder).
_CCCL_HEADER_NOT_FOUND = re.compile(
    r"(?<![\w./])cuda/(?:std/)?[a-z_]+'?:?\s*(?:No such file or directory|file not found)",
    re.IGNORECASE,
)
_CCCL_MEANING = (
    "the host compiler finds no libcu++ header of the CUDA toolkit: since CUDA 13.0 they live in "
    "include/cccl, which only nvcc searches by default (a target without CCCL::CCCL, CMake "
    "before 3.31), or a toolkit older than the header"
)
_CCCL_DECIDES = (
    "`ls $CUDA_HOME/include/cccl/cuda $CUDA_HOME/include/cuda` (where the toolkit keeps them) and "
    "`nvcc --version`; the failing command's -I paths (CMake: link CCCL::CCCL, or CMake >= 3.31)"
)

# The extension's own error at a GPU op it was built without (AT_ERROR in detectron2's and
# PyTorch3D's C++ sources; kaolin's KAOLIN_NO_CUDA_ERROR in csrc/check.h, raised where the op's
# source was compiled without WITH_CUDA: "In <op>: Kaolin built without CUDA, cannot run with GPU
# tensors", in 2021's releases "<op> not built with CUDA" after the op's C identifier).
# TripoSR's message and the AttributeError it catches when torchmcubes lacks its CUDA part.
_BUILT_WITHOUT_CUDA = re.compile(
    r"\bNot compiled with GPU support\b|\bKaolin built without CUDA\b|"
    r"\btorchmcubes was not compiled with CUDA support\b|"
    r"module 'torchmcubes_module' has no attribute 'mcubes_cuda'|"
    # the identifier split at its underscores, each part possessive: \w*_\w+ tried every split
    # of a long word (quadratic: 40 KB of one identifier took seconds)
    r"\b[A-Za-z][A-Za-z0-9]*+(?:_++[A-Za-z0-9]++)++ not built with CUDA\b",
    re.IGNORECASE,
)

# CMake's check_language(CUDA) finding no CUDA compiler: the project asks because its CUDA is
# optional, and builds on without it. A CPU-only build that then fails for a reason of its own
# (a missing package, a C++ error) prints the check too, so the line is read only where no build
# failure follows it, or the first that follows names CUDA ("CUDA not found, please build
# explicitly with -DENABLE_CUDA=OFF").
_CMAKE_NO_CUDA_COMPILER = re.compile(r"\bLooking for a CUDA compiler - NOTFOUND\b", re.IGNORECASE)
# The build's own failures, not pip's summary of them ("error: subprocess-exited-with-error",
# "ERROR: Failed building wheel"): CMake's, gcc's and clang's "file:line:col: error:", MSVC's
# and its linker's numbered errors, ld's.
_BUILD_FAILURE = re.compile(
    r"\bCMake Error\b|:\d+(?::\d+)?:\s*(?:fatal )?error:|\berror (?:C|LNK)\d{4}\b|"
    r"\bundefined reference to\b|\bld: cannot find\b",
    re.IGNORECASE,
)
# CUDA inside CMake's identifiers too (CMAKE_CUDA_COMPILER, CUDA_TOOLKIT_ROOT_DIR), or nvcc
_NAMES_CUDA = re.compile(r"CUDA|\bnvcc\b", re.IGNORECASE)
# How much of a failure's text is its message (CMake's message() and the compiler's line)
_FAILURE_SPAN = 200

# nvcc's option parser refusing a C++ standard of -std it does not know: the toolkit predates it
_DIALECT_TOO_NEW = re.compile(
    r"Value 'c\+\+\d\d' is not defined for option '-?-?std'", re.IGNORECASE
)
_DIALECT_MEANING = (
    "the build's nvcc does not know the C++ standard the build asks for: a toolkit older than "
    "the build needs (C++17 came with CUDA 11.0) is first on the PATH"
)
_DIALECT_DECIDES = (
    "`which nvcc` and `nvcc --version` in the shell that builds, against "
    '`python -c "import torch; print(torch.version.cuda)"`; point CUDA_HOME and PATH at that '
    "toolkit (/usr/local/cuda-X.Y) instead of a distribution's older nvcc"
)

# Numba's NvvmSupportError (numba/cuda/cudadrv/nvvm.py): its CUDA JIT found no libNVVM.
_NVVM_NOT_FOUND = re.compile(r"\blibNVVM cannot be found\b", re.IGNORECASE)
_NVVM_MEANING = (
    "Numba's CUDA JIT finds no libNVVM (the CUDA toolkit's compiler library) where it looks: no "
    "toolkit installed (conda's cudatoolkit, pip's nvidia-cuda-nvcc), or not where Numba searches"
)
_NVVM_DECIDES = (
    "`numba -s` (its CUDA section: the NVVM and libdevice it finds) and `echo $CUDA_HOME`; "
    "`conda list cudatoolkit` or `pip list | grep nvidia-cuda-nvcc` in the same environment"
)

# XLA's GPU compiler finds no libdevice, or cannot start ptxas (nvptx_backend.cc,
# nvptx_compiler.cc); its ptxas refuses the PTX's ISA version (asm_compiler.cc) — a fatal
# error only where XLA does not fall back to the driver.
_XLA_TOOLKIT_MISSING = re.compile(
    r"\blibdevice not found at\b|ptxas returned an error during compilation of ptx to sass:\s*"
    r"'?Internal:\s*Failed to launch ptxas",
    re.IGNORECASE,
)
_XLA_PTXAS_TOO_OLD = re.compile(
    r"ptxas exited with non-zero error code -?\d+, output:.{0,400}?Unsupported \.version "
    r"\d+\.\d+;\s*current version is",
    re.IGNORECASE,
)
_DRIVER_FALLBACK = re.compile(r"Relying on driver to perform ptx compilation", re.IGNORECASE)
# XLA's warnings before it compiles (their wordings, see the module's docstring): no libdevice
# directory under any CUDA root it tried, and a ptxas it could not start for its version (the
# binary as XLA names it: "ptxas" from the PATH, or a path ending in bin/ptxas)
_XLA_LIBDEVICE_DIR_MISSING = re.compile(
    r"Can't find libdevice directory \$\{CUDA_DIR\}/nvvm/libdevice", re.IGNORECASE
)
_XLA_PTXAS_NOT_INVOKED = re.compile(
    r"Couldn't get ptxas(?:/nvlink)? version string:\s*INTERNAL:\s*Couldn't invoke "
    r"(?:[\w.~:+-]{0,100}[/\\]){0,20}ptxas(?:\.exe)? --version",
    re.IGNORECASE,
)
XLA_WARNED = 0.6
_XLA_MEANINGS = {
    NOT_FOUND: "XLA's GPU compiler (JAX, TensorFlow) finds no toolkit piece it needs at run "
    "time — libdevice (nvvm/libdevice/libdevice.10.bc) or the ptxas binary: no CUDA toolkit "
    "(pip's nvidia-cuda-nvcc), or not where XLA looks (PATH, --xla_gpu_cuda_data_dir)",
    STATED: "the ptxas XLA ran is older than the PTX it emits: a toolkit's ptxas binary on the "
    "PATH (or under --xla_gpu_cuda_data_dir) predates the CUDA XLA generates code for",
    XLA_WARNED: "XLA warns that it finds no toolkit piece it needs to compile GPU kernels — no "
    "nvvm/libdevice under any CUDA directory it tried, or no ptxas it can start: no CUDA "
    "toolkit there (pip's nvidia-cuda-nvcc, conda's cuda-nvcc), or not where XLA looks",
}
_XLA_DECIDES = (
    "`which ptxas` and `ptxas --version`, where libdevice.10.bc is, against "
    "XLA_FLAGS=--xla_gpu_cuda_data_dir; `pip list | grep nvidia-cuda-nvcc` in the same environment"
)

# Windows: nvcc finds no cl.exe; setuptools finds no Visual C++ build tools (with PyTorch's
# extension builder or nvcc in the paste: any C extension build says the same); PyTorch's
# extension builder could not run cl.exe (a warning: the build's error follows).
_NO_CL = re.compile(r"Cannot find compiler '?cl\.exe'? in PATH", re.IGNORECASE)
_NO_MSVC = re.compile(r"Microsoft Visual C\+\+ 14\.0 (?:or greater )?is required", re.IGNORECASE)
# the build is a CUDA extension's: PyTorch's extension builder or nvcc named in it (a "CUDA"
# anywhere is not: an environment dump beside pip building some other C extension)
_EXTENSION_BUILD = re.compile(r"cpp_extension|\bnvcc\b", re.IGNORECASE)
_CL_NOT_RUN = re.compile(r"Error checking compiler version for cl: \[WinError 2\]", re.IGNORECASE)
WINDOWS_USUAL = 0.6

_WINDOWS_MEANINGS = {
    STATED: "the build finds no Visual C++ host compiler (cl.exe): Visual Studio's C++ build "
    "tools are not installed, or the build does not run in their environment",
    WINDOWS_USUAL: "PyTorch's extension builder could not run cl.exe: usually Visual Studio's "
    "C++ tools are not on the PATH",
}
WINDOWS_DECIDES = (
    '`where cl` in the console that builds (none = open an "x64 Native Tools Command Prompt" '
    "or run vcvars64.bat first; nothing to open = install Visual Studio or its Build Tools with "
    'the "Desktop development with C++" workload); the Visual Studio version against the '
    "CUDA toolkit's supported MSVC versions"
)

_MEANINGS = {
    STATED: "the build's CUDA toolkit does not fit: none found, another CUDA version than "
    "PyTorch's, or a host compiler nvcc does not support",
    NOT_FOUND: "the build finds no nvcc (under Visual Studio: no CUDA toolset; with PyTorch's "
    "CMake package: no CUDA libraries) where it looks: no CUDA toolkit there (or CUDA_HOME set "
    "wrongly, or the toolkit's Visual Studio integration missing)",
    HEADER_NOT_FOUND: "the build finds no CUDA toolkit headers where it looks: no toolkit (or only "
    "its runtime) there, or CUDA_HOME set wrongly",
    BUILT_WITHOUT_CUDA: "the extension was built without its CUDA code: usually its build found no "
    "CUDA toolkit (CUDA_HOME) or no visible GPU",
}
DECIDES = (
    "`nvcc --version` and `echo $CUDA_HOME` (the toolkit the build uses) against "
    '`python -c "import torch; print(torch.version.cuda)"` (the CUDA PyTorch was built with); '
    "`gcc --version` against the toolkit's supported host compilers"
)


def _windows_compiler(flat: str) -> tuple[str, float] | None:
    """The phrase that says a Windows build has no Visual C++ host compiler, with its weight."""
    found = _NO_CL.search(flat)
    if found is None:
        no_msvc = _NO_MSVC.search(flat)
        if no_msvc is not None and _EXTENSION_BUILD.search(flat) is not None:
            found = no_msvc
    if found is not None:
        return found[0], STATED
    not_run = _CL_NOT_RUN.search(flat)
    return None if not_run is None else (not_run[0], WINDOWS_USUAL)


def _xla_toolkit(flat: str) -> tuple[str, float] | None:
    """The phrase that says XLA's GPU compiler lacks a usable toolkit piece, with its weight."""
    too_old = _XLA_PTXAS_TOO_OLD.search(flat)
    if too_old is not None and _DRIVER_FALLBACK.search(flat) is None:
        return too_old[0], STATED
    missing = _XLA_TOOLKIT_MISSING.search(flat)
    if missing is not None:
        return missing[0], NOT_FOUND
    # only warnings: libdevice has no fallback (a kernel calling a math function fails without
    # it), ptxas has one, the driver's JIT, which XLA announces when it takes it
    warned = _XLA_LIBDEVICE_DIR_MISSING.search(flat)
    if warned is None and _DRIVER_FALLBACK.search(flat) is None:
        warned = _XLA_PTXAS_NOT_INVOKED.search(flat)
    return None if warned is None else (warned[0], XLA_WARNED)


def _cmake_without_cuda(flat: str) -> tuple[str, float] | None:
    """CMake's check finding no CUDA compiler, with its weight, unless the build then failed for
    a reason that is not CUDA."""
    check = _CMAKE_NO_CUDA_COMPILER.search(flat)
    if check is None:
        return None
    failure = _BUILD_FAILURE.search(flat, check.end())
    if failure is not None and not _NAMES_CUDA.search(
        flat, failure.start(), failure.end() + _FAILURE_SPAN
    ):
        return None
    return check[0], BUILT_WITHOUT_CUDA


def build_toolkit_votes(flat: str) -> list[Vote]:
    """The vote for ``extension-build-toolkit`` in a flattened paste (at most one)."""
    found = first_tier(
        flat,
        (
            (_STATED, STATED),
            (_NOT_FOUND, NOT_FOUND),
            (_HEADER_NOT_FOUND, HEADER_NOT_FOUND),
            (_BUILT_WITHOUT_CUDA, BUILT_WITHOUT_CUDA),
        ),
    ) or _cmake_without_cuda(flat)
    if found is not None:
        return reading_vote(CAUSE, found, _MEANINGS, DECIDES)
    dialect = _DIALECT_TOO_NEW.search(flat)
    if dialect is not None:
        return [Vote(CAUSE, STATED, quoted(dialect[0], _DIALECT_MEANING), _DIALECT_DECIDES)]
    cccl = _CCCL_HEADER_NOT_FOUND.search(flat)
    if cccl is not None:
        return [Vote(CAUSE, HEADER_NOT_FOUND, quoted(cccl[0], _CCCL_MEANING), _CCCL_DECIDES)]
    nvvm = _NVVM_NOT_FOUND.search(flat)
    if nvvm is not None:
        return [Vote(CAUSE, NOT_FOUND, quoted(nvvm[0], _NVVM_MEANING), _NVVM_DECIDES)]
    xla = _xla_toolkit(flat)
    if xla is not None:
        return reading_vote(CAUSE, xla, _XLA_MEANINGS, _XLA_DECIDES)
    return reading_vote(CAUSE, _windows_compiler(flat), _WINDOWS_MEANINGS, WINDOWS_DECIDES)
