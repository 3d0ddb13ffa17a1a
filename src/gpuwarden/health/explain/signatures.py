"""Tell-tales: the stable parts of the messages that name a cause, as data.

Each signature is a regular expression over the flattened paste (``text.read_paste``: one line,
decorations stripped, matched case-insensitively), the causes it votes for with a weight, and
what the phrase means. Weights: ≥ 0.85 the message states the cause; 0.55–0.85 the cause is
the usual reading; below, one candidate among several (the votes then carry ``decides``).
Sources: the messages as the tools print them — CUDA runtime/driver error strings
(cuda_runtime_api.h, cuda.h), NVML and nvidia-smi, the NVIDIA kernel module (NVRM), NCCL
(src/misc/shmutils.cc, src/transport/net_ib.cc, src/bootstrap.cc), PyTorch (torch/cuda,
c10d ProcessGroupNCCL.cpp, socket.cpp, TCPStore, DataLoader), TensorFlow, JAX, vLLM,
Docker/nvidia-container-cli, the NVIDIA k8s device plugin and the Kubernetes scheduler.
OOM messages with numbers, NCCL watchdog timeouts and CUDA error numbers have parsers of
their own (``oom``, ``nccl``, ``cuda_errors``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.health.explain.causes import BY_CODE
from gpuwarden.health.explain.cuda_errors import STUB_LIBRARY_DECIDES, STUB_LIBRARY_FIXES
from gpuwarden.health.explain.votes import ReadingFixes

# Where a message came from changes its reading: "no NVIDIA driver" inside a container is the
# runtime's doing, on a host the driver's. Word edges are ASCII-only: in "在Apollo的docker中"
# Python's \b sees no edge between the CJK letters and "docker".
_START = r"(?<![a-z0-9_])"
_END = r"(?![a-z0-9_])"
CONTAINER = (
    _START + r"(?:docker|podman|container|singularity|apptainer|enroot)" + _END + "|"
    r"nvidia-docker|--gpus" + _END + r"|--runtime[= ]nvidia|root@[0-9a-f]{12}" + _END
)
KUBERNETES = (
    _START + r"(?:kubectl|kubernetes|k8s|kubelet|pods?)" + _END + r"|daemonset|runtimeclass"
)
DISTRIBUTED = (
    _START + r"(?:nccl|c10d|gloo)" + _END + r"|torch\.distributed|processgroup|torchrun|deepspeed|"
    r"rendezvous"
)
# A container that was started without GPU access: the NGC images' entrypoint says so, or the
# paste shows the `docker run` without --gpus / the nvidia runtime. Its CUDA then finds no
# libcuda and reports error 35 ("driver version is insufficient") or no device.
NGC_NO_DRIVER = r"NVIDIA Driver was not detected\.?\s*GPU functionality will not be available"
DOCKER_RUN_WITHOUT_GPUS = (
    r"^(?!.*(?:--gpus|--runtime[= ]?nvidia|nvidia-docker|--device[= ]?nvidia\.com|"
    r"NVIDIA_VISIBLE_DEVICES)).*" + _START + r"docker run" + _END
)
NO_GPU_IN_CONTAINER = NGC_NO_DRIVER + "|" + DOCKER_RUN_WITHOUT_GPUS
# A machine the paste says has no NVIDIA GPU: macOS (no CUDA since CUDA 10.2; PyTorch's macOS
# wheels are CPU/MPS builds) or a laptop/PC the reporter says has none.
NO_NVIDIA_GPU = (
    _START + r"(?:mac|macos|mac ?os ?x|osx|macbook\w*|darwin)" + _END + r"|"
    r"/Library/Frameworks/Python\.framework|\bApple M\d\b|"
    r"non[- ]?(?:nvidia[- ]|cuda[- ])?gpu\b|"
    r"(?:without|no|(?:do|does)(?: not|n['’]?t) have)\s+(?:an?\s+)?"
    r"(?:nvidia\s+|cuda[- ]capable\s+|dedicated\s+)?gpu\b"
)
TORCH_STORE = (
    r"c10d|tcpstore|master_port|master_addr|rendezvous|rdzv|torch\.distributed|torchrun|\b29500\b"
)

# torch.cuda.is_available() is False, as said or as an application's own check says it:
# stable-diffusion-webui (and its forks) asserts it before starting, "Torch is not able to use
# GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS" (modules/launch_utils.py,
# prepare_environment: `assert torch.cuda.is_available(), 'Torch is not able to use GPU; …'`).
# Unsloth's import check raises when it is False: "Unsloth: No NVIDIA GPU found? Unsloth
# currently only supports GPUs!" (unsloth/__init__.py through 2025), "Unsloth currently only works
# on NVIDIA, AMD and Intel GPUs" (unsloth_zoo/device_type.py since). yolov5's and ultralytics'
# select_device refuse a device when torch.cuda.is_available() is False or fewer devices are seen
# than asked for (utils/torch_utils.py, ultralytics/utils/torch_utils.py): for device 0 alone
# only is_available() can fail. PyTorch's AMP turns itself off with a warning when
# amp_definitely_not_available() (torch/cuda/amp/common.py: no CUDA and no torch_xla):
# GradScaler's "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."
# (torch/cuda/amp/grad_scaler.py, later torch/amp/grad_scaler.py) and autocast's "User provided
# device_type of 'cuda', but CUDA is not available. Disabling" (torch/amp/autocast_mode.py).
_SELECT_DEVICE = r"Invalid CUDA '(?:--device |device=)"
_IS_AVAILABLE_FALSE = (
    r"is_available\(\)\W{0,4}(?:returns?\s+|is\s+|==?\s*|->\s*|→\s*)?False\b|"
    r"Torch is not able to use GPU|"
    r"GradScaler is enabled, but CUDA is not available|"
    r"User provided device_type of .cuda., but CUDA is not available|"
    r"Unsloth: No NVIDIA GPU found\?|Unsloth currently only (?:supports GPUs|works on NVIDIA)|"
    + _SELECT_DEVICE
    + r"0' requested"
)
# ultralytics prints the two values under its message: is_available() True leaves the count
_SELECT_DEVICE_AVAILABLE = (
    _SELECT_DEVICE + r"[^']{1,64}' requested\..{0,400}?torch\.cuda\.is_available\(\):\s*True\b"
)
_SELECT_DEVICE_DECIDES = (
    "torch.cuda.is_available() and torch.cuda.device_count() (ultralytics prints both under the "
    "message) against the devices asked for: is_available() False = a CPU build or no driver "
    "(`nvidia-smi`); a count below them = an index past the last GPU (yolov5 sets "
    "CUDA_VISIBLE_DEVICES to the devices asked for, so one past the last hides every GPU)"
)
# nvidia-smi ships with the driver's user-space utilities. The shell says it is absent as
# "nvidia-smi: command not found" when it searched PATH, and as "bash: /usr/bin/nvidia-smi: No
# such file or directory" when given (or having hashed) a path that no longer exists.
_NO_NVIDIA_SMI = (
    r"NVIDIA-SMI couldn'?t find libnvidia-ml\.so|nvidia-smi:?\s*(?:command )?not found|"
    r"/nvidia-smi:\s*No such file or directory"
)
# PyTorch's warning for a GPU whose architecture its build lacks (torch/cuda/__init__.py,
# incompatible_device_warn), its first line
_TORCH_ARCH_NOT_COMPATIBLE = r"sm_\d+a? is not compatible with the current PyTorch installation"
# PyTorch's own "no driver" (torch/cuda/__init__.py: _check_driver, and its lazy init's
# "CUDA driver initialization failed, you might not have a CUDA gpu").
_NO_DRIVER_FOUND = r"Found no NVIDIA driver on your system|CUDA driver initialization failed"
_NCCL_DEBUG = (
    "NCCL_DEBUG=INFO: its WARN lines name the transport (SHM, NET/Socket, NET/IB) and the "
    "call that failed"
)
# NCCL's shmutils.cc: a rank could not open the segment a peer made
_SHM_ATTACH = r"Error while attaching to shared memory segment"
_XID_DECIDES = (
    "CUDA_LAUNCH_BLOCKING=1 (the failing kernel) and `dmesg -T | grep -iE 'xid|nvrm'` on the node "
    "(13/31 = an application fault, 48/63/64/94/95 = memory errors, 79 = GPU lost)"
)
_LAUNCH_TIMEOUT = (
    r"the launch timed out and was terminated|cudaErrorLaunchTimeout|CUDA_ERROR_LAUNCH_TIMEOUT"
)
# PyTorch's warning when its CUDA initialisation failed (torch/cuda/__init__.py warns
# "CUDA initialization: <reason>" and is_available() returns False).
_TORCH_CUDA_INIT_FAILED = r"CUDA initialization:"
# JAX's CUDA plugin (jax_plugins.xla_cuda12/13) failed in its initialize(): xla_bridge's
# discover_pjrt_plugins logs "Jax plugin configuration error: Exception when calling
# jax_plugins.xla_cudaN.initialize()" with the traceback, and the plugin registers no backend.
_JAX_CUDA_PLUGIN_FAILED = r"Jax plugin configuration error|jax_plugins[./\\]xla_cuda\d+"
_OTHER_KERNEL_FAULT = (
    r"an illegal (?:memory access|instruction) was encountered|cudaErrorIllegal(?:Address|"
    r"Instruction)|CUDA_ERROR_ILLEGAL_(?:ADDRESS|INSTRUCTION)|misaligned address"
)
# cuBLAS/cuDNN reporting that a kernel failed (often an earlier asynchronous fault).
_LIBRARY_EXECUTION_FAILED = (
    r"CUBLAS_STATUS_EXECUTION_FAILED|CUBLAS_STATUS_INTERNAL_ERROR|CUDNN_STATUS_EXECUTION_FAILED"
)
# A PyTorch (or Lua Torch) paste that shows no TensorFlow/JAX: PyTorch keeps no preallocated
# pool (its caching allocator grows on demand), so a cuDNN/cuBLAS handle or workspace that cannot
# be allocated means the GPU is full (this job's tensors, cached blocks included, or another
# process), or a cuDNN that does not fit the build — never a framework's pool. TensorFlow
# ("Could not create cudnn handle", "failed to create cublas handle", stream_executor) and
# JAX/XLA preallocate most of the GPU (allow_growth, XLA_PYTHON_CLIENT_PREALLOCATE).
_TORCH = (
    _START + r"(?:torch|pytorch|aten|c10)" + _END + r"|torch[/._]|cuDNN error:\s*CUDNN_STATUS|"
    r"when calling `?cublasCreate"
)
_TF_OR_JAX = (
    r"tensorflow|stream_executor|" + _START + r"(?:keras|jax|jaxlib|xla|tf)" + _END + r"|"
    r"Could not create cudnn handle|failed to create cublas handle|allow_growth|"
    r"Failed to get convolution algorithm|cuda_dnn\.cc"
)
TORCH_NOT_TF = r"^(?!.*(?:" + _TF_OR_JAX + r")).*(?:" + _TORCH + r")"
_DECIDES_TORCH_CUDNN = (
    "`torch.cuda.memory_summary()` and `nvidia-smi` (memory.used, other processes) when it "
    "fails; a smaller batch (it then runs: memory); a tiny convolution at start on an empty GPU "
    "(it fails too: the cuDNN or the build — `torch.backends.cudnn.version()`, "
    "`python -m torch.utils.collect_env`)"
)
# A verbs memory registration (ibv_reg_mr, ibv_reg_dmabuf_mr) that failed in a program other than
# NCCL: registering GPU memory needs GPUDirect RDMA (the nvidia-peermem module, or DMA-BUF) and
# fits only in the GPU's BAR1 aperture (NVIDIA's GPUDirect RDMA guide); host memory needs the
# memlock limit. Neither is NCCL's transport between the NICs.
_REGISTRATION_OUTSIDE_NCCL = r"^(?!.*(?:nccl|NET/IB)).*ibv_reg_"
# An IB stack without DMA-BUF registration of GPU memory (NCCL's ibvwrap WARN): GPUDirect RDMA's
# registration path, not the transport between the NICs (gpudirect.py reads it).
_NOT_TRANSPORT = (
    _REGISTRATION_OUTSIDE_NCCL + r"|ibv_reg_dmabuf_mr failed with error Operation not supported"
)
# Between two words of an NVRM message wrapped over lines that each begin "NVRM:".
_NVRM_GAP = r"\s+(?:NVRM:\s+)?"
# torch.distributed.elastic / torch.distributed.launch: a worker ended by SIGKILL. DeepSpeed's
# launcher (deepspeed/launcher/launch.py, sigkill_handler) logs "<cmd> exits with return code =
# N" with the worker's Popen.returncode, which is -N for a worker ended by signal N.
_SIGKILLED_RANK = (
    r"exitcode\s*:\s*-9\s*\(pid|failed \(exitcode\s*:\s*-9\)|"
    r"Signal 9 \(SIGKILL\) received by PID|died with <Signals\.SIGKILL: 9>|"
    r"exits with return code = -9\b"
)
# What a paste needs to mention before a signal-ended rank's signatures are tried (literal,
# lower case): the launchers' exit-code words, with the signal's own names.
_EXIT_CODE_WORDS = ("exitcode", "return code")
_KILLED_RANK_WORDS = (*_EXIT_CODE_WORDS, "signal 9", "sigkill")
_CRASHED_RANK_WORDS = (*_EXIT_CODE_WORDS, "signal 6", "signal 11", "sigabrt", "sigsegv")
# What shows whether an NVSwitch fabric is set up (Fabric Manager user guide: the GPUs register
# with the fabric once FM has configured the NVSwitches; after an FM restart they need a reset).
_FABRIC_DECIDES = (
    "`nvidia-smi -q | grep -A2 -i fabric` (State Completed, Status Success) and "
    "`systemctl status nvidia-fabricmanager`; after Fabric Manager restarts, the GPUs need a "
    "reset; NCCL_NVLS_ENABLE=0 confirms (NCCL then avoids NVLink SHARP)"
)
# CUDA error 46 (cudaErrorDevicesUnavailable) by name or by cudaGetErrorString's string, which
# older CUDA releases word "all CUDA-capable devices are busy or unavailable" (cuda-memcheck's
# "cudaErrorDevicesUnavailable (error 46) due to ...") and current ones "CUDA-capable device(s)
# is/are busy or unavailable" (CuPy's CUDARuntimeError prints cudaGetErrorName ": "
# cudaGetErrorString: "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy ...").
_CUDA_ERROR_46 = (
    r"all CUDA-capable devices are busy or unavailable|"
    r"CUDA-capable device\(s\) is/are busy or unavailable|cudaErrorDevicesUnavailable"
)
# The driver's CUDA library could not be opened: dlerror's words, or FFmpeg's (nv-codec-headers'
# dynlink_loader.h LOAD_LIBRARY logs "Cannot load %s" with CUDA_LIBNAME — libcuda.so.1, or
# nvcuda.dll on Windows — when dlopen / LoadLibrary fails, before hwcontext_cuda's "Could not
# dynamically load CUDA", which alone may also mean a missing symbol and so is not matched).
_LIBCUDA_NOT_OPENED = (
    r"libcuda\.so(?:\.1)?:?\s*cannot open shared object file|"
    r"Cannot load (?:libcuda\.so(?:\.1)?|nvcuda\.dll)\b"
)

_NO_DEVICE_DECIDES = (
    "`nvidia-smi` on the host and in the container; `echo $CUDA_VISIBLE_DEVICES "
    "$NVIDIA_VISIBLE_DEVICES`"
)


# The nvidia module's init (kernel-open/nvidia/nv.c, nvidia_init_module) when its PCI probe took
# no GPU: it prints this and returns -ENODEV, so the module does not stay loaded (R3xx drivers
# said "graphics adapters ... initialized!").
_NO_GPU_INITIALISED = (
    r"None of the NVIDIA (?:devices|graphics adapters) were" + _NVRM_GAP + r"initiali[sz]ed"
)
# nvidia-smi when it cannot open the driver's control device (no nvidia module loaded)
_SMI_NO_DRIVER = r"NVIDIA-SMI has failed because it couldn'?t communicate with the NVIDIA driver"
# nv-pci.c, nv_pci_validate_bars: a BAR the firmware (BIOS, a VM's OVMF) left unusable — 0M, or
# outside a window the kernel could map — fails the GPU's probe
_BAR_INVALID = r"This PCI I/O region assigned to your NVIDIA" + _NVRM_GAP + r"device is invalid"
# The display driver installs nvcuda.dll on Windows: TensorFlow's DSO loader ("Could not load
# dynamic library 'nvcuda.dll'; dlerror: nvcuda.dll not found") and Python's ctypes ("Could not
# find module '…nvcuda.dll'") say it is not there.
_NVCUDA_NOT_FOUND = r"nvcuda\.dll:?\s*not found|Could not find module '[^']{0,260}nvcuda\.dll'"
# A paste that shows no NVIDIA driver where the program ran: nvidia-smi cannot reach one or is
# not installed, the framework found none, the driver's CUDA library is missing.
NO_DRIVER_SHOWN = "|".join(
    (_SMI_NO_DRIVER, _NO_NVIDIA_SMI, _NO_DRIVER_FOUND, _LIBCUDA_NOT_OPENED, _NVCUDA_NOT_FOUND)
)


# modprobe refusing an nvidia module's signature, or nvidia-installer saying Secure Boot did
_UNSIGNED_MODULE = (
    r"could not insert '?nvidia[\w-]*'?:\s*(?:Key was rejected by service|Required key not "
    r"available)|Secure boot is enabled on this system, so this is likely because it was not "
    r"signed by a key that is trusted by the kernel"
)


# NVIDIA's video engines, as FFmpeg and the Video Codec SDK word their failures.
# FFmpeg's nvenc.c: nvenc_load_libraries compares the driver's NvEncodeAPIGetMaxSupportedVersion
# with the nv-codec-headers version it was built with ("Driver does not support the required
# nvenc API version. Required: X.Y Found: X.Y"); the SDK's NvEncoder.cpp (LoadNvEncApi, used by
# VPF / PyNvVideoCodec) makes the same check in its own words.
_NVENC_API_NEWER_THAN_DRIVER = (
    r"Driver does not support the required nvenc API version|"
    r"Current Driver Version does not support this NvEncodeAPI version"
)
# nvenc_print_driver_requirement: after that version check, and also after libnvidia-encode
# failed to load (nvenc_load_functions), so alone it does not say which
_NVENC_MINIMUM_DRIVER = r"The minimum required Nvidia driver for nvenc is"
# nvenc_open_session through nvenc_print_error: NV_ENC_ERR_NO_ENCODE_DEVICE (1) and
# NV_ENC_ERR_UNSUPPORTED_DEVICE (2), nvEncodeAPI.h's "no encode capable device" / "device not
# supported"
_NVENC_DEVICE_REFUSED = (
    r"OpenEncodeSessionEx failed:\s*(?:unsupported device\s*\(2\)|no encode device\s*\(1\))"
)
# nvenc_setup_device: no GPU passed nvenc_check_device (a session refused for any reason, or a
# capability check failed) — "No NVENC capable devices found" until FFmpeg 4.4, then "No capable
# devices found"; never CUDA's own "No CUDA capable devices found"
_NVENC_NO_CAPABLE_DEVICE = r"No (?:NVENC )?capable devices found"
# nvenc_check_capabilities: a capability the GPU's encoder reports it lacks; on a device the
# caller provides (a CUDA / D3D11 frames context) nvenc_setup_device sums the failure up
_NVENC_CAPABILITY_MISSING = r"\b(?:10 bit encode|YUV444P) not supported"
_NVENC_PROVIDED_DEVICE_LACKS = r"Provided device doesn.t support required NVENC features"
# the decoder's caps (cuvidGetDecoderCaps' bIsSupported = 0): FFmpeg's cuviddec.c
# (cuvid_test_capabilities: "Codec %s is not supported.", "Bit depth %d is not supported."),
# nvdec.c (nvdec_test_capabilities) and the SDK's NvDecoder.cpp, as VPF prints it
_NVDEC_CAPABILITY_MISSING = (
    r"Codec \w+_cuvid is not supported|Bit depth \d+ is not supported|"
    r"Hardware is lacking required capabilities|Codec not supported on this GPU"
)
_VIDEO_ENGINE_DECIDES = (
    "the GPU's name (`nvidia-smi -L`) in NVIDIA's Video Encode and Decode GPU Support Matrix "
    "for the codec and format, and the line the encoder printed before this one"
)
# NV_ENC_ERR_OUT_OF_MEMORY (10) from the session open: the GPU's memory is full, or a GeForce
# board already has its documented number of concurrent encode sessions open
_NVENC_SESSION_REFUSED = r"OpenEncodeSessionEx failed:\s*out of memory\s*\(10\)"
# nv-codec-headers' dynlink_loader.h LOAD_LIBRARY ("Cannot load %s", NVENC_LIBNAME /
# NVCUVID_LIBNAME), the SDK's NvEncoder.cpp (LoadNvEncApi, when the library does not open) and
# dlerror's wording (GStreamer's nvcodec, PyNvVideoCodec, decord): the container runtime mounts
# them only with the `video` driver capability
_VIDEO_LIBRARY_NOT_OPENED = (
    r"Cannot load (?:libnvidia-encode|libnvcuvid)\.so(?:\.1)?\b|"
    r"NVENC library file is not found|"
    r"(?:libnvidia-encode|libnvcuvid)\.so(?:\.1)?:?\s*cannot open shared object file"
)
# A kernel's assertion fired: the CUDA error it leaves, and the kernel's own printf (file:line,
# the condition) that precedes it. The CUDA C++ Programming Guide (Assertion) documents that
# printf as "<filename>:<line number>:<function>: block: [blockId.x,blockId.x,blockIdx.z],
# thread: [threadIdx.x,threadIdx.y,threadIdx.z] Assertion `<expression>` failed."; a templated
# kernel's <function> spells out every template argument (RAFT's and cuVS's run to hundreds of
# characters), so the block and thread coordinates, the device's own words, also name it.
_DEVICE_ASSERT_TRIGGERED = r"device-side assert(?:ion)? triggered|cudaErrorAssert|CUDA_ERROR_ASSERT"
_KERNEL_ASSERTION_FAILED = (
    r"\.cuh?:\d+:.{0,300}?Assertion\s*`[^`]{1,200}`\s*failed|"
    r"block:\s*\[\d+,\s*\d+,\s*\d+\],\s*thread:\s*\[\d+,\s*\d+,\s*\d+\]\s*"
    r"Assertion\s*`[^`]{1,200}`\s*failed"
)
# ATen's index_select kernels (aten/src/ATen/native/cuda/Indexing.cu, THC/THCTensorIndex.cu
# before it: indexSelectSmallIndex / indexSelectLargeIndex) assert CUDA_KERNEL_ASSERT(srcIndex <
# srcSelectDimSize): an index past the indexed dimension, an embedding's token or position id
# past its table. The condition is these kernels' own, so it names the assertion where a title
# or a cut paste quotes it without the rest.
_INDEX_SELECT_BOUND = r"\bsrcIndex\s*<\s*srcSelectDimSize\b"


# How each library documents installing its CUDA build: a reading that names the library is
# fixed by these first, before the cause's generic (PyTorch) ones.
# PyG's wheel index (pytorch-geometric.readthedocs.io, installation; pyg-lib's README): one page
# per torch version and CUDA, data.pyg.org/whl/torch-${TORCH}+${CUDA}.html
_PYG_CUDA_BUILD = (
    "install the extension's CUDA wheel for the installed torch: `pip install torch-scatter "
    "torch-sparse torch-cluster -f https://data.pyg.org/whl/torch-${TORCH}+${CUDA}.html` with "
    "${TORCH} = torch.__version__ without its suffix (2.4.0) and ${CUDA} = its CUDA (cu121, "
    "not cpu); `pip uninstall` the CPU build first (pip keeps an installed one)",
)
# k2's install docs: pre-compiled CUDA wheels for Linux, one list per torch version; a source
# build takes K2_WITH_CUDA
_K2_CUDA_BUILD = (
    "install k2's CUDA wheel for the installed torch and its CUDA (k2-fsa.github.io/k2, "
    '"Pre-compiled CUDA wheels (Linux)"; its macOS and Windows wheels are CPU-only), or build '
    "k2 with -DK2_WITH_CUDA=ON",
)
# qsim's GPU docs (docs/cirq_interface.md, "GPU support"; pybind_interface/decide/decide.cpp):
# its PyPI wheels are built on runners without CUDA, so GPU use needs qsim compiled locally with
# the CUDA toolkit, and cuStateVec (gpu_mode=1) with cuQuantum found at build time
_QSIM_CUDA_BUILD = (
    "build qsim from source on the GPU machine with nvcc on PATH (and CUQUANTUM_ROOT set to the "
    "cuQuantum install for gpu_mode=1), then check that qsimcirq.qsim_gpu (qsimcirq."
    "qsim_custatevec) is not None",
)
# The prefixes the CUDA libraries' exported C functions begin with (ncclCommRegister, cudnnCreate,
# cublasLtMatmul, nvJitLinkCreate, cuptiActivityEnable, cudaMalloc), for the loaders' "missing
# symbol" messages
_CUDA_LIBRARY_PREFIX = (
    r"(?:nccl|cudnn|cublas|cusparse|cufft|curand|cusolver|nvjitlink|cupti|cudart|cuda)"
)
# sherpa-onnx's install docs: the pip wheels are CPU-only; the CUDA build is a source build with
# SHERPA_ONNX_ENABLE_GPU (through SHERPA_ONNX_CMAKE_ARGS for setup.py) or a -gpu release archive
_SHERPA_ONNX_CUDA_BUILD = (
    "install sherpa-onnx's CUDA build (its pip wheels are CPU-only): "
    'SHERPA_ONNX_CMAKE_ARGS="-DSHERPA_ONNX_ENABLE_GPU=ON" python3 setup.py install, cmake '
    "-DSHERPA_ONNX_ENABLE_GPU=ON, or a -gpu archive from its releases, with the CUDA toolkit its "
    "onnxruntime was built for",
)
# ONNX Runtime's CUDA execution provider docs: the GPU package (onnxruntime-gpu,
# Microsoft.ML.OnnxRuntime.Gpu, the -gpu release archives); both Python packages installed
# shadow each other
_ORT_CUDA_BUILD = (
    "install ONNX Runtime's GPU package alone: `pip uninstall onnxruntime onnxruntime-gpu` then "
    "`pip install onnxruntime-gpu` (its CUDA and cuDNN majors those of the machine); C#: "
    "Microsoft.ML.OnnxRuntime.Gpu; C/C++: the onnxruntime-…-gpu release archive",
)
# OpenCV's DNN CUDA backend (modules/dnn/CMakeLists.txt: OPENCV_DNN_CUDA needs CUDA, cuBLAS and
# cuDNN): the opencv-python wheels are built without it
_OPENCV_DNN_CUDA_BUILD = (
    "build OpenCV with the DNN CUDA backend: cmake -DWITH_CUDA=ON -DWITH_CUDNN=ON "
    "-DOPENCV_DNN_CUDA=ON (the opencv-python wheels have none), and `pip uninstall "
    "opencv-python opencv-contrib-python` so that they do not shadow the build",
)
# JAX's installation guide: the CUDA plugin and the CUDA libraries it was built against come as
# pip extras of jax
_JAX_CUDA_BUILD = (
    'install JAX with its CUDA plugin and pinned CUDA libraries: `pip install -U "jax[cuda12]"` '
    '(or "jax[cuda13]", the CUDA major the driver supports), with no LD_LIBRARY_PATH entry '
    "shadowing the nvidia-* wheels",
)
# DGL's install page: the CUDA wheels come from its own index, one per torch and CUDA version;
# PyPI's plain dgl up to 1.x is the CPU build
_DGL_CUDA_BUILD = (
    "install DGL's CUDA build for the installed torch: `pip install dgl -f "
    "https://data.dgl.ai/wheels/torch-${TORCH}/${CUDA}/repo.html` (${TORCH} = 2.4, ${CUDA} = "
    "cu121 …); conda: the dglteam channel's cuNNN label",
)
# MXNet's GPU guide: the GPU build is its own pip package, mxnet-cuXXX for the CUDA version;
# the plain mxnet package is the CPU build and must go first
_MXNET_CUDA_BUILD = (
    "install MXNet's GPU package for the machine's CUDA: `pip uninstall mxnet` then `pip install "
    "mxnet-cu112` (mxnet-cuXXX, XXX = the CUDA version the driver supports)",
)
# spconv's README (PyPI project page): its CPU build is the plain `spconv` package (pulling the
# CPU `cumm`), the CUDA builds are spconv-cuXXX (with cumm-cuXXX); before a reinstall every
# spconv/cumm/spconv-cuxxx/cumm-cuxxx must be uninstalled
_SPCONV_CUDA_BUILD = (
    "uninstall every spconv / cumm package (`pip list | grep -E 'spconv|cumm'`: spconv, cumm, "
    "spconv-cuXXX, cumm-cuXXX), then `pip install spconv-cuXXX` for the CUDA of the installed "
    "torch (spconv-cu118 for torch+cu118); the plain spconv and cumm packages are CPU builds",
)
# Horovod's GPU install docs: the GPU operations are chosen when pip builds it
_HOROVOD_CUDA_BUILD = (
    "reinstall Horovod built with its GPU operations: `HOROVOD_GPU_OPERATIONS=NCCL pip install "
    "--no-cache-dir --force-reinstall horovod` on a machine with the CUDA toolkit and NCCL "
    "(`horovodrun --check-build` lists NCCL among the available tensor operations)",
)
# habitat-sim's BUILD_FROM_SOURCE.md: CUDA is a build option (setup.py --with-cuda; WITH_CUDA /
# HABITAT_WITH_CUDA=ON for pip install .); its conda packages are built without it
_HABITAT_CUDA_BUILD = (
    "build habitat-sim with CUDA: `python setup.py install --with-cuda` (pip install . with "
    "WITH_CUDA=ON, HABITAT_WITH_CUDA=ON in newer releases), the CUDA toolkit on the build "
    "machine",
)
# CTranslate2: its PyPI wheels for Linux x86-64 and Windows include CUDA support (release 1.15,
# CUDA 11 from 2.0, 12 from 4.0); those for macOS and Linux aarch64 do not. A source build takes
# -DWITH_CUDA=ON (its installation docs, "Build options").
_CTRANSLATE2_CUDA_BUILD = (
    "install CTranslate2's PyPI wheel on Linux x86-64 or Windows (those include CUDA; the macOS "
    "and Linux aarch64 wheels do not), of a release built for the CUDA major installed, or build "
    "it with cmake -DWITH_CUDA=ON -DWITH_CUDNN=ON",
)
# xFormers' README: its wheels are built for one PyTorch release and come from the same index
_XFORMERS_FOR_TORCH = (
    "install the xformers wheel built for the installed torch, from torch's own index: `pip "
    "install -U xformers --index-url https://download.pytorch.org/whl/cuXXX` (the cuXXX of "
    "torch.version.cuda), or pin the xformers release made for that torch version",
)
# TensorFlow's pip install guide: on Linux the CUDA libraries it was built for come as the
# and-cuda extra; otherwise the tested CUDA/cuDNN pair (tensorflow.org/install/source#gpu)
_TF_CUDA_LIBRARIES = (
    "install TensorFlow with the CUDA libraries it was built for: `pip install "
    "tensorflow[and-cuda]` (Linux), or the CUDA/cuDNN pair tensorflow.org/install/source#gpu "
    "lists for its version on the loader's path",
)


@dataclass(frozen=True, slots=True)
class Signature:
    pattern: str  # regular expression over the flattened paste, case-insensitive
    votes: tuple[tuple[str, float], ...]  # cause code → weight (0..1)
    meaning: str  # what the phrase says, for the evidence line
    context: str | None = None  # the signature applies only when this also occurs
    unless: str | None = None  # ... and never when this occurs
    decides: str | None = None  # when the votes are split: what to capture to decide
    # literals (lower case) one of which any match contains, for a pattern whose alternatives
    # do not all begin with one (anchors.py derives them otherwise)
    needs: tuple[str, ...] = ()
    # the reading's own fixes per cause, before the cause's generic ones (the library the
    # message names documents its CUDA build)
    fixes: ReadingFixes = ()


def _built_without_cuda(
    message: str, build: str, cpu_fix: str, cuda_build: tuple[str, ...] = ()
) -> tuple[Signature, Signature]:
    """The two readings of a framework's own "built without CUDA" message: a CPU-only build —
    fixed first by ``cuda_build``, how that library documents installing its CUDA build (PyG's
    CUDA wheel, not torch's); on a machine the text says has no NVIDIA GPU, one candidate only —
    no CUDA build can run there, so installing one is not the fix."""
    stated = Signature(
        message,
        (("cpu-only-build", 0.95),),
        f"the installed {build} is a CPU-only build",
        unless=NO_NVIDIA_GPU,
        fixes=(("cpu-only-build", cuda_build),) if cuda_build else (),
    )
    without_gpu = Signature(
        message,
        (("cpu-only-build", 0.45),),
        f"the installed {build} is a CPU-only build, on a machine the text says has no NVIDIA "
        "GPU (a Mac, a laptop without one): a CUDA build cannot help there",
        context=NO_NVIDIA_GPU,
        decides="whether the machine has an NVIDIA GPU at all (`nvidia-smi`; none on a Mac): "
        f"without one, {cpu_fix}",
    )
    return stated, without_gpu


# The resources NVIDIA's KubeVirt device plugin advertises (NVIDIA/kubevirt-gpu-device-plugin,
# pkg/device_plugin/device_plugin.go): a vGPU as nvidia.com/ and its mdev type's name with each
# run of whitespace made "_" (readVgpuIDFromFileFunc: "GRID T4-1Q" → GRID_T4-1Q, "NVIDIA
# L40S-8Q" → NVIDIA_L40S-8Q; the README: "advertises it as a nvidia.com/<profile-name>
# resource"), NVIDIA's vGPU types being <board>-<frame buffer GB><series A, B, C or Q>, MIG-backed
# ones <board>-<slices>-<GB>C(ME); a GPU bound to vfio-pci as nvidia.com/ and its pci.ids name
# upper-cased, whitespace, "/" and "." made "_" and other characters dropped (getDeviceName:
# "GP102GL [Tesla P40]" → GP102GL_TESLA_P40), so beginning with the chip (GK..GB and 3 digits).
# A GPU's audio or USB function is not a GPU, nor is an NVSwitch an HGX board passes through
# beside its GPUs (pci.ids: "GA100 [A100 NVSwitch]", "GH100 [H100 NVSwitch]" → GH100_H100_NVSWITCH;
# a VM asks for it apart from the GPUs); nvidia.com/ also names NVIDIA's network resources
# (rdma_shared_device_a, hostdev), which neither form matches.
KUBEVIRT_GPU_RESOURCE = (
    r"nvidia\.com/(?:(?:GRID|NVIDIA)_[A-Z0-9]{1,16}(?:_[A-Z0-9]{1,16}){0,4}"
    r"-\d{1,3}(?:-\d{1,3})?[ABCQ](?:ME)?|(?:GK|GM|GP|GV|TU|GA|AD|GH|GB)\d{3}[A-Z]{0,3}_"
    r"(?![A-Z0-9_]{0,60}(?:AUDIO|USB|SERIAL_BUS|NVSWITCH))[A-Z0-9_]{1,60})\b"
)

SIGNATURES: tuple[Signature, ...] = (
    # --- version chain -----------------------------------------------------------------------
    # MegEngine's loader of the driver API (resolve_library_func) logs at debug level, for the
    # first driver functions libcuda lacks, "failed to load cuda func: <name>.(May caused by
    # currently driver is too old, if you find cuda is not available … try upgrade driver …)":
    # a guess it leaves to the user, printed by runs that go on to work, not the driver's refusal
    # (the first signature leaves its words to the second).
    Signature(
        r"(?<!currently )driver (?:on your system )?is too old",
        (("driver-too-old", 0.95),),
        "PyTorch found a driver older than the CUDA it was built with",
        needs=("is too old",),
    ),
    Signature(
        r"failed to load cuda func:\s*\w+\.?\s*\(May caused by currently driver is too old",
        (("driver-too-old", 0.45),),
        "MegEngine's debug note that libcuda lacks a driver function it looked up: an older "
        "driver may be why, if CUDA then fails",
        decides="whether CUDA works (`megengine.get_device_count('gpu')` above 0, the program "
        "runs on): only if it does not is the driver too old for MegEngine's CUDA",
    ),
    Signature(
        r"CUDA driver version is insufficient for CUDA runtime version",
        (("driver-too-old", 0.9),),
        "CUDA error 35: the runtime needs a newer driver",
        unless=KUBERNETES + "|" + NO_GPU_IN_CONTAINER,
    ),
    Signature(
        r"CUDA driver version is insufficient for CUDA runtime version",
        (("container-runtime-not-nvidia", 0.8), ("driver-too-old", 0.35)),
        "CUDA error 35 in a container started without GPU access: no libcuda was injected, so "
        "the runtime finds no driver at all",
        context=NO_GPU_IN_CONTAINER,
        unless=KUBERNETES,
        decides="how the container was started (`docker run --gpus all`, `--runtime=nvidia`) "
        "and `nvidia-smi` inside it",
    ),
    Signature(
        NGC_NO_DRIVER,
        (("container-runtime-not-nvidia", 0.85), ("container-toolkit-missing", 0.35)),
        "the NGC image's entrypoint found no NVIDIA driver inside the container: it was started "
        "without the NVIDIA runtime (no --gpus, no runtimeClassName: nvidia)",
        decides="the `docker run` line (--gpus all) or the pod's runtimeClassName; `docker info "
        "| grep -i runtimes` on the host",
    ),
    Signature(
        r"This container was built for NVIDIA Driver Release\s*[\d.]+\s*or later,?\s*but\s*"
        r"version\s*[\d.]+\s*was detected and compatibility mode is UNAVAILABLE",
        (("driver-too-old", 0.95),),
        "the NGC image needs a newer host driver than the one found, and CUDA forward "
        "compatibility is not available on this GPU/driver",
        needs=("this container was built for",),
    ),
    Signature(
        r"CUDA driver version is insufficient for CUDA runtime version",
        (("container-runtime-not-nvidia", 0.7), ("driver-too-old", 0.5)),
        "CUDA error 35 inside a pod: often the pod ran under plain runc with a stub libcuda",
        context=KUBERNETES,
        decides="`nvidia-smi` in the pod (missing = the runtime injected nothing) and the pod's "
        "runtimeClassName",
    ),
    # Mojo's DeviceContext (MAX's AsyncRT runtime) compares the installed driver with the
    # minimum its CUDA needs before it creates a context and refuses an older one: "MAX doesn't
    # support your current NVIDIA GPU driver. MAX requires a minimum driver version of 580 and
    # CUDA version 13.0. Your driver version is 570.211.01" (quoted by Modular's engineers in
    # modular/modular#6519, "a Mojo program will produce this error" when the minimum driver is
    # not installed; forum thread "max-doesnt-support-your-current-nvidia-gpu-driver").
    Signature(
        r"MAX doesn.t support your current NVIDIA GPU driver|"
        r"MAX requires a minimum driver version of \d+",
        (("driver-too-old", 0.9),),
        "Mojo / MAX's own driver check: the installed driver is below the minimum its CUDA needs",
    ),
    # cuda-python's error enum as CUTLASS's CuTe DSL prints it ("CUDAError InsufficientDriver")
    Signature(
        r"cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER|CUDAError:?\s+InsufficientDriver",
        (("driver-too-old", 0.9),),
        "the CUDA error name for a driver older than the runtime",
    ),
    # cudaErrorCallRequiresNewerDriver (36), whose cudaGetErrorString is "API call is not
    # supported in the installed CUDA driver": "the API call requires a newer CUDA driver than
    # the one currently installed. Users should install an updated NVIDIA CUDA driver to allow
    # the API call to succeed" (the CUDA runtime API's cudaError reference). Under minor-version
    # compatibility a runtime newer than the driver starts, and only its newer calls fail so
    # (cudaMallocAsync needs an 11.2 driver). The usual reading, not the stated one: a profiler
    # hooking the calls (Nsight Compute) or a library's lookup of a driver entry point by the
    # wrong version return the same error on a current driver: Warp before 1.8.1 prints it after
    # "Failed to get driver entry point 'cuDeviceGetUuid'" on R580 and newer drivers (IsaacLab
    # issue #3477, fixed in Warp 1.8.1), so beside a failed entry point lookup it is not read
    Signature(
        r"API call is not supported in the installed CUDA driver|cudaErrorCallRequiresNewerDriver",
        (("driver-too-old", 0.7),),
        "CUDA error 36: the program called a CUDA runtime API the installed driver is too old for",
        unless=r"driver entry point",
        decides="`nvidia-smi`'s 'CUDA Version' (the newest CUDA the driver serves) against the "
        "CUDA the program was built with (`torch.version.cuda`, the wheel's cuXXX): a driver "
        "serving at least that CUDA points at the program's own lookup or a profiler instead",
    ),
    Signature(
        r"unsatisfied condition:?\s*cuda\s*>=?\s*[\d.]+|"
        r"please update your driver to a newer version",
        (("driver-too-old", 0.95),),
        "nvidia-container-cli: the image's CUDA needs a newer host driver",
    ),
    Signature(
        r"provided PTX was compiled with an unsupported toolchain|UNSUPPORTED_PTX_VERSION|"
        r"cudaErrorUnsupportedPtxVersion",
        (("driver-too-old", 0.8),),
        "the PTX was built by a newer CUDA than the driver's JIT compiler knows",
    ),
    Signature(
        # OptiX 7+'s optixInit (optix_stubs.h, optixInitWithHandle) loads the driver's OptiX
        # library (libnvoptix.so.1, nvoptix.dll) and asks it for the function table of the SDK's
        # OPTIX_ABI_VERSION: OPTIX_ERROR_UNSUPPORTED_ABI_VERSION (7801, "Unsupported ABI version")
        # is a driver whose OptiX predates the SDK the program was built with (Cycles,
        # device_optix.cpp: "the installed driver does not support ABI version"). The bare number
        # counts only after optixInit, as OWL's and the OptiX samples' OPTIX_CHECK print it
        # ("Optix call (optixInit()) failed with code 7801"); 7804, the library not found at
        # all, says nothing of the driver's age
        r"OPTIX_ERROR_UNSUPPORTED_ABI_VERSION|"
        r"optixInit\w*\(\)\W{0,3}(?:failed|returned)\D{0,30}\b7801\b|"
        r"OptiX initialization failed because the installed driver does not support ABI version",
        (("driver-too-old", 0.9),),
        "OptiX's optixInit: the driver's OptiX library does not support the ABI of the OptiX SDK "
        "the program was built with",
    ),
    Signature(
        r"system has unsupported display driver\s*/\s*cuda driver combination|"
        r"cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        (("nvml-driver-mismatch", 0.5), ("forward-compat-unsupported", 0.4)),
        "CUDA error 803: the libcuda in use does not match the kernel module",
        decides="`ls /usr/local/cuda/compat` and LD_LIBRARY_PATH (a compat libcuda) against "
        "`cat /proc/driver/nvidia/version`",
    ),
    Signature(
        # CUDA's error string (error 209 / 48) is also quoted short in prose and issue titles,
        # down to "CUDA error: no kernel image" (PyTorch's prefix, the string cut after three
        # words; the whole string is quoted by the first form); no other CUDA error string
        # begins with those words. The Rust CUDA crates (RustaCUDA, cust: error.rs) map
        # CUDA_ERROR_NO_BINARY_FOR_GPU to CudaError::NoBinaryForGpu, printed by its derived Debug
        # ("Cuda(NoBinaryForGpu)" from rust-gpu-tools' GPUError); HIP's hipErrorNoBinaryForGpu is
        # another error (no \b inside the word)
        r"no kernel image is available(?: for execution on the device)?|"
        r"CUDA error:\s*no kernel image\b(?!\s+is available)|"
        r"cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU|\bNoBinaryForGpu\b",
        (("gpu-arch-unsupported", 0.95),),
        "the binary has no kernel for this GPU's architecture",
    ),
    Signature(
        # Genesis' Quadrants runtime loads its CUDA-graph helper kernels (graph_do_while's
        # condition, qd.checkpoint's gate, the launch state) from prebuilt fatbins that hold SASS
        # for a list of SM architectures only, no PTX to JIT for another (the comment above
        # GraphManager::ensure_condition_kernel_loaded), and on a failed cuModuleLoadData says
        # "Failed to load … kernel fatbin (CUDA error N). This SM (M) may not be included in the
        # fatbin" (Genesis-Embodied-AI/quadrants, quadrants/runtime/cuda/graph_manager.cpp and
        # graph_manager_checkpoint.cpp, QD_ERROR_IF). It prints that for any N, so only the
        # image's own errors are read: 200 (CUDA_ERROR_INVALID_IMAGE, cuda.h: "the device kernel
        # image is invalid") and 209 (CUDA_ERROR_NO_BINARY_FOR_GPU). GeneLab's README documents the
        # case: Genesis' fatbins omit SM 90 and H100s abort with "(CUDA error 200). This SM (90)
        # may not be included in the fatbin" (QD_GRAPH=0 avoids the path). The program hedges
        # ("may"), hence the usual reading, not the certainty of "no kernel image".
        r"kernel fatbins? \(CUDA error (?:200|209)\)\.?\s*This SM \(\d{2,3}\) may not be "
        r"included in the fatbins?",
        (("gpu-arch-unsupported", 0.8),),
        "Genesis' Quadrants runtime could not load its prebuilt helper kernels, whose fatbin "
        "holds code for a list of GPU architectures: this GPU's is likely not among them",
        decides="the GPU's compute capability (`nvidia-smi --query-gpu=compute_cap "
        "--format=csv`) against the SMs of the installed Genesis/Quadrants release's fatbins",
        fixes=(
            (
                "gpu-arch-unsupported",
                (
                    "run with QD_GRAPH=0 (Quadrants' CUDA-graph dispatch off: the prebuilt "
                    "helper kernels are not loaded; slower on contact-heavy scenes) until a "
                    "Genesis/Quadrants release whose fatbins include this GPU's SM",
                ),
            ),
        ),
    ),
    Signature(
        # TensorFlow's GPU device setup (core/common_runtime/gpu/gpu_device.cc) warns when its
        # build holds no CUDA kernel binaries (SASS) for the GPU's compute capability and the
        # driver must JIT-compile its PTX instead: the build lacks this GPU's architecture (a GPU
        # newer than the release, e.g. 12.0), so start is slow and a kernel without PTX fails —
        # a warning, not yet a failure, hence not the certainty of "no kernel image"
        r"TensorFlow was not built with CUDA kernel binaries compatible with compute "
        r"capability \d+\.\d+",
        (("gpu-arch-unsupported", 0.7),),
        "TensorFlow's build has no compiled kernels for this GPU's compute capability: the "
        "driver JIT-compiles its PTX (slow), and kernels without PTX for it fail",
        decides="whether the job then runs (slowly at first) or fails with "
        "CUDA_ERROR_INVALID_PTX / INVALID_HANDLE: a TensorFlow build (or NVIDIA's TensorFlow "
        "container) that includes this architecture removes both",
    ),
    Signature(
        # ggml's CUDA backend (ggml/src/ggml-cuda/common.cuh, ggml_cuda_highest_compiled_arch)
        # aborts when its build holds no architecture at or below the one a kernel path needs:
        # the CMAKE_CUDA_ARCHITECTURES of the build lack this GPU's, as "no kernel image" says
        r"ggml was not compiled with any CUDA arch <= ?\d+",
        (("gpu-arch-unsupported", 0.9),),
        "ggml's CUDA build holds no architecture at or below the one this GPU's kernels need "
        "(its CMAKE_CUDA_ARCHITECTURES)",
    ),
    Signature(
        # ggml's kernels stub out the paths an architecture lacks with NO_DEVICE_CODE
        # (ggml/src/ggml-cuda/common.cuh, no_device_code: "%s:%d: ERROR: CUDA kernel %s has no
        # device code compatible with CUDA arch %d. ggml-cuda.cu was compiled for: %s", then
        # __trap()): the GPU ran a kernel compiled without code for its architecture — a build
        # whose arch list lacks the GPU's (its lowest PTX JIT-compiled instead), or a kernel
        # (WMMA flash attention) that needs a newer GPU than this one
        r"CUDA kernel \w+ has no device code compatible with CUDA arch \d+",
        (("gpu-arch-unsupported", 0.8),),
        "a ggml kernel has no code for this GPU's architecture (its build's arch list, or a "
        "kernel that needs a newer GPU)",
        decides="the GPU's compute capability (`nvidia-smi --query-gpu=compute_cap "
        "--format=csv`) against the build's arch list ('compiled for:'); a GPU among them "
        "needs the feature off (flash attention) on this GPU",
    ),
    Signature(
        # candle loads each kernel by name from its PTX module (candle-core, cuda_backend:
        # CudaError::Load, "{cuda} when loading {module_name}"), and candle-kernels compiles a
        # kernel only for the architectures its types need (cast.cu, unary.cu: bf16 under
        # `#if __CUDA_ARCH__ >= 800`, f16 under 530): a kernel absent from the module is one the
        # GPU's architecture (or the CUDA_COMPUTE_CAP the PTX was built for) does not get
        r"CUDA_ERROR_NOT_FOUND,\s*\"named symbol not found\"\)\s*when loading \w+",
        (("gpu-arch-unsupported", 0.7),),
        "candle's kernel module has no such kernel for this GPU's architecture (a bf16 or f16 "
        "kernel compiled only for newer GPUs)",
        decides="the GPU's compute capability (`nvidia-smi --query-gpu=compute_cap "
        "--format=csv`) against the kernel's dtype (bf16 kernels need 8.0 in older candle) "
        "and CUDA_COMPUTE_CAP at build time; another dtype (f32, f16) on this GPU",
        needs=("when loading",),
    ),
    Signature(
        # SageAttention (sageattention/core.py, sageattn's dispatch) names the GPU's arch as
        # "sm" + major + minor and raises this when it holds no kernel path for that arch
        # (Pascal, Turing): its build has no kernels for this GPU; another attention backend
        # (or a GPU it supports) is the fix, hence not the certainty of CUDA's own error
        r"Unsupported CUDA architecture: sm\d{2,3}a?\b",
        (("gpu-arch-unsupported", 0.7),),
        "the attention library's kernels have no path for this GPU's architecture "
        "(SageAttention supports only the architectures it dispatches on)",
    ),
    # Kokkos' CUDA backend (core/src/Cuda/Kokkos_Cuda_Instance.cpp, CudaInternal::initialize)
    # launches a probe kernel that writes the __CUDA_ARCH__ it was compiled for: a result of 0
    # (the kernel never ran) is "likely mismatch of architecture", a compiled arch the device
    # cannot run is "running kernels compiled for compute capability X on device with compute
    # capability Y". Either way the build's Kokkos_ARCH_* is not this GPU's (kokkos#1944: the
    # probe fails to launch on a device the build has no code for); a probe that never ran can
    # also be PTX newer than the driver can compile, hence the second, low candidate
    Signature(
        r"Kokkos::Cuda::initialize ERROR:?\s*(?:likely mismatch of architecture|"
        r"running kernels compiled for compute capability)",
        (("gpu-arch-unsupported", 0.7), ("driver-too-old", 0.2)),
        "Kokkos' probe kernel cannot run on this GPU: the build targets another architecture "
        "(its Kokkos_ARCH_* setting)",
        decides="the GPU's compute capability (`nvidia-smi --query-gpu=compute_cap "
        "--format=csv`) against the build's Kokkos_ARCH_* (the last two digits are the "
        "capability: VOLTA70 = 7.0), and the driver's CUDA against the toolkit that built it",
    ),
    Signature(
        _TORCH_ARCH_NOT_COMPATIBLE,
        (("gpu-arch-unsupported", 0.95),),
        "PyTorch's build does not include this GPU's sm_ architecture",
        needs=("is not compatible",),
    ),
    # The same warning without its first line: torch/cuda/__init__.py's incompatible_device_warn
    # ends "If you want to use the <GPU> GPU with PyTorch, please check the instructions at
    # https://pytorch.org/get-started/locally/", and Python's warnings module prints the call
    # under it, "warnings.warn(incompatible_device_warn.format(device_name, …))"; PyTorch warns
    # so only for a GPU whose architecture the build's arch list lacks
    Signature(
        r"If you want to use the .{1,120}? GPU with PyTorch, please check the instructions at|"
        r"incompatible_device_warn\.format",
        (("gpu-arch-unsupported", 0.95),),
        "PyTorch's warning that its build does not include this GPU's sm_ architecture (the "
        "warning's last line, or the call that printed it)",
        unless=_TORCH_ARCH_NOT_COMPATIBLE,
        needs=("gpu with pytorch, please check the instructions", "incompatible_device_warn"),
    ),
    # The ZED SDK's sl::ERROR_CODE NO_GPU_COMPATIBLE, printed by its toString as "NO GPU
    # COMPATIBLE" (newer releases add " : An NVIDIA GPU (Kepler or newer) is required to run this
    # software") and by older releases and wrappers as the enum's name (ERROR_CODE_NO_GPU_
    # COMPATIBLE): documented as "No GPU found or CUDA capability of the device is not supported"
    # (the ERROR_CODE table pyzed's sl.pyx copies from the SDK, whose __str__ is the SDK's
    # toString). A GPU CUDA cannot list gets the SDK's other code, NO_GPU_DETECTED ("No GPU found.
    # CUDA is unable to list it. Can be a driver/reboot issue.", the same table), so the
    # capability is the first reading and a GPU CUDA cannot list the second. Capitals only: the
    # SDK prints its codes so, and "no GPU compatible with ..." in prose is no code. An underscore
    # may come before (the enum's ERROR_CODE_ prefix), none after (a longer identifier).
    Signature(
        r"(?-i:(?<![A-Za-z0-9])NO[ _]GPU[ _]COMPATIBLE(?!\w))",
        (("gpu-arch-unsupported", 0.6), ("driver-not-loaded", 0.25)),
        "the ZED SDK finds no GPU whose compute capability its build supports",
        decides="whether `nvidia-smi` lists the GPU at all (not: the driver, not the SDK) and "
        "its compute capability (`nvidia-smi --query-gpu=compute_cap --format=csv`) against the "
        "GPUs the ZED SDK build for this CUDA version supports (an older GPU may need the SDK "
        "built for an older CUDA)",
        needs=("no gpu compatible", "no_gpu_compatible"),
    ),
    Signature(
        r"no longer supports this GPU because it is too old|minimum cuda capability (?:that we )?"
        r"support(?:ed)?|minimum required Cuda capability is|CUDNN_STATUS_ARCH_MISMATCH",
        (("gpu-arch-unsupported", 0.9),),
        "the GPU's compute capability is below what the build supports",
    ),
    # The same gate stated as "<feature> is only supported on <architecture>": Triton's compiler
    # asserts "mma -> mma layout conversion is only supported on Ampere" (lib/Analysis/
    # Allocation.cpp) when a kernel meant for Ampere's MMA layout is compiled for an older GPU
    # (vLLM's prefix-caching kernel on a V100, vllm#8024).
    Signature(
        r"only supports? (?:(?:Ampere|Hopper) GPUs|GPUs with compute capability)|"
        r"requires? (?:an? )?(?:Ampere|Hopper|sm_?\d+) (?:GPU|or newer)|"
        r"(?:is|are) only supported on (?:NVIDIA )?(?:Ampere|Ada|Hopper|Blackwell)\b",
        (("gpu-arch-unsupported", 0.75),),
        "a library (FlashAttention, Triton, a custom kernel) needs a newer GPU architecture",
        needs=("only support", "require"),
    ),
    # A feature's own gate on the GPU's compute capability, stated against the minimum: FP8
    # (Transformer Engine: "Device compute capability 8.9 or higher required for FP8
    # execution"; torch._scaled_mm: "is only supported on CUDA devices with compute capability
    # >= 9.0 or 8.9"; Triton's fp8e4nv: "is only supported on compute capability >= 90"),
    # applications' checks ("FP8 models require a GPU with Compute Capability 8.9 or higher").
    # The message states the GPU is below the feature's minimum; the fix is another data type
    # or kernel, or another GPU.
    Signature(
        r"compute capability (?:of )?\d+(?:\.\d+)? or higher (?:is )?required|"
        r"requires? an? (?:\w+ )?GPU with compute capability (?:of )?\d+(?:\.\d+)? or higher|"
        r"only supported on (?:CUDA devices with )?compute capability\s*>=?\s*\d+",
        (("gpu-arch-unsupported", 0.85),),
        "a feature (FP8/FP4 math, a kernel) needs a higher compute capability than this GPU's",
        needs=("compute capability",),
    ),
    # The memory-efficient attention of xFormers and PyTorch's SDPA (xformers/csrc/attention/
    # cuda/fmha/attention_forward_generic.cu, aten/src/ATen/native/transformers/cuda/
    # attention.cu) picks its kernel with dispatch_cutlassF<dtype>(launchKernel, compute
    # capability) among the kernels built for the inputs' dtype and the GPU's capability, then
    # TORCH_CHECK(kernel_launched, "cutlassF: no kernel found to launch!"). Its own test of
    # whether a kernel exists, has_cutlassF_kernel_for(dtype, cc, maxShmem, dim_k), names what
    # decides: the dtype at this capability first (xFormers' own operator check says "bf16 is
    # only supported on A100+ GPUs", i.e. sm_80), then the head size and shared memory; the
    # launcher also skips a kernel for dropout, a bias or misaligned strides. The bare line
    # names neither dtype nor GPU: the usual reading, not a certainty. Code that names the line
    # as what it avoids ("# To prevent \"cutlassF: no kernel found to launch!\" error") quotes it:
    # signature_votes reads only a mention the prose before it does not name as fixed or avoided.
    Signature(
        r"cutlassF: no kernel found to launch",
        (("gpu-arch-unsupported", 0.6),),
        "the memory-efficient attention (xFormers, PyTorch's SDPA) has no kernel for the "
        "inputs' dtype on this GPU's architecture (bfloat16 below sm_80 the usual case)",
        decides="the inputs' dtype and the GPU's compute capability (`python -c \"import "
        'torch; print(torch.cuda.get_device_capability())"`): bfloat16 needs 8.0 or newer; '
        "float16/float32 failing the same points at the head size or the build",
        fixes=(
            (
                "gpu-arch-unsupported",
                (
                    "below compute capability 8.0 run the model in float16 (torch_dtype="
                    "torch.float16) instead of bfloat16, or turn the memory-efficient kernel "
                    "off (torch.backends.cuda.enable_mem_efficient_sdp(False); "
                    'attn_implementation="eager" in transformers)',
                ),
            ),
        ),
    ),
    # xFormers' dispatcher lists why each attention operator refused the inputs; "requires
    # device with capability > (8, 0) but your GPU has capability (7, 5) (too old)" is the GPU's
    # architecture for that operator. Others in the list may have refused for the dtype or for
    # not being built, and a refusal for "(too new)" only means another operator must serve, so
    # it is the usual reading, not certain.
    Signature(
        r"requires device with capability [<>=]{1,2} \(\d+, \d+\) but your GPU has capability "
        r"\(\d+, \d+\) \(too old\)",
        (("gpu-arch-unsupported", 0.6),),
        "xFormers: an attention operator needs a newer GPU architecture than this one",
        decides="`python -m xformers.info` (which operators are built) and the inputs' dtype "
        "(fp16/bf16 kernels refuse float32)",
        needs=("too old",),
    ),
    # Triton's compiler choosing an MMA version for the GPU it runs on (lib/Dialect/TritonGPU/
    # Transforms/AccelerateMatmul.cpp, getMMAVersionSafe: `assert(false && "computeCapability
    # not supported")` for a capability its table does not list): the Triton release predates
    # the GPU (Triton 3.2 lists none from 11.0 up; Blackwell RTX is 12.0).
    Signature(
        r"computeCapability not supported",
        (("gpu-arch-unsupported", 0.8),),
        "Triton's compiler has no MMA version for this GPU's compute capability: the Triton "
        "release is older than the GPU",
        decides='`pip show triton` against the GPU: python -c "import torch; '
        'print(torch.cuda.get_device_capability())"',
    ),
    # nvcc refusing a virtual architecture it does not know ("nvcc fatal : Unsupported gpu
    # architecture 'compute_120'"): the toolkit predates the GPU the build targets (CUDA 12.8 is
    # the first with compute_120) — or a build script asks for one a newer toolkit dropped
    # (compute_35 since CUDA 12). Either way the build cannot make code for that architecture;
    # which side is stale, `nvcc --version` decides.
    Signature(
        r"Unsupported gpu architecture '?compute_\d+[af]?'?",
        (("gpu-arch-unsupported", 0.7),),
        "nvcc does not know the target architecture: the CUDA toolkit and the GPU (or the "
        "build's arch list) are from different generations",
        decides="`nvcc --version` against the compute_ it names (compute_120 needs CUDA ≥ "
        "12.8); the build's CMAKE_CUDA_ARCHITECTURES / TORCH_CUDA_ARCH_LIST",
        needs=("unsupported gpu architecture",),
    ),
    # vLLM's start-up checks of the GPU (bfloat16 needs compute capability 8.0; its kernels
    # need 7.0) state the GPU's capability against the minimum outright.
    Signature(
        r"bfloat16 is only supported on GPUs with compute capability of at least|"
        r"GPUs with compute capability below \d+\.\d+ are not supported",
        (("gpu-arch-unsupported", 0.9),),
        "the GPU's compute capability is below the minimum the engine or data type needs",
    ),
    # PyTorch's own gates, stated against this GPU: torch.compile's inductor backend refuses a
    # GPU below compute capability 7.0 ("Found <name> which is too old to be supported by the
    # triton GPU compiler … but your device is of CUDA capability 6.0", torch/_dynamo/exc.py
    # GPUTooOldForTriton), and CUDA autocast refuses bfloat16 where torch.cuda.is_bf16_supported()
    # is False ("Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
    # torch/amp/autocast_mode.py): no native bf16 before compute capability 8.0.
    Signature(
        r"too old to be supported by the triton GPU compiler|"
        r"Current CUDA Device does not support bfloat16",
        (("gpu-arch-unsupported", 0.9),),
        "PyTorch refuses this GPU for the feature asked for: torch.compile's Triton backend needs "
        "compute capability 7.0, bfloat16 autocast 8.0 (compile=False or float16 instead)",
        needs=("too old to be supported", "does not support bfloat16"),
    ),
    # The serving engines' own gates on the GPU's compute capability state it against the
    # minimum: vLLM's quantization configs ("The quantization method awq is not supported for
    # the current GPU. Minimum capability: 75. Current capability: 70.", and compressed-tensors'
    # schemes, printed as a tuple: "('Quantization scheme is not supported for ', 'the current
    # GPU. Min capability: 80. ', ...)"), TGI's flash-attention import ("GPU with CUDA
    # capability 7 0 is not supported") and TensorRT-LLM's kernel runners (TLLM_CHECK
    # "Assertion failed: Unsupported architecture" / "Unsupported Arch" for an SM it has no
    # kernels for).
    Signature(
        r"is not supported for\W{0,6}the current GPU\W{0,6}Min(?:imum)? capability|"
        r"GPU with CUDA capability \d+\W\d+ is not supported|"
        r"Assertion failed:\s*Unsupported (?:GPU )?arch(?:itecture)?\b|"
        r"Unsupported GPU architecture\b(?!\s*'?compute_)",
        (("gpu-arch-unsupported", 0.9),),
        "the serving engine's kernels (a quantization method, flash attention, a fused "
        "attention runner) need a newer compute capability than this GPU's",
    ),
    # TensorRT's BERT attention plugin (plugin/bertQKVToContextPlugin/qkvToContextPlugin.cpp):
    # variable sequence length runs only on its fused MHA kernels, so the constructor asserts
    # the GPU's SM is in their list ("requesting maxSeqlen not compatible with GPU arch"); the
    # var-seqlen plugin also asks for an INT8 or FP16 network in the same assertion, so an FP32
    # network on a listed GPU says these words too — the usual reading, not certain.
    Signature(
        r"requesting maxSeqlen not compatible with GPU arch",
        (("gpu-arch-unsupported", 0.75),),
        "TensorRT's BERT attention plugin has no fused kernels for this GPU's architecture "
        "(variable sequence length needs them)",
        decides="the GPU's compute capability (`nvidia-smi --query-gpu=compute_cap "
        "--format=csv`) against the SMs the assertion lists, and the network's precision "
        "(the plugin's fused kernels take INT8 or FP16 only)",
        needs=("requesting maxseqlen",),
    ),
    # ptxas refusing an instruction for the target it compiles for (Triton and JIT-compiled
    # kernels target the GPU they run on): the GPU lacks the feature, bf16 below sm_80 the
    # usual one. An ahead-of-time build that lists an older target than the GPU says the same,
    # so it is the usual reading, not certain.
    Signature(
        r"Feature '[^']{1,40}' requires \.target sm_\d+ or higher",
        (("gpu-arch-unsupported", 0.75),),
        "ptxas: an instruction (bf16, an MMA shape) the target architecture does not have",
        decides='python -c "import torch; print(torch.cuda.get_device_capability())" against '
        "the sm_ the message requires; TORCH_CUDA_ARCH_LIST when building ahead of time",
    ),
    # ptxas refusing the PTX's ISA version ("Unsupported .version 7.6; current version is
    # '7.4'"): the PTX was generated by a newer CUDA than the ptxas reading it knows (PTX ISA
    # 7.N is CUDA 11.N). When that ptxas is the driver's JIT (numba, CuPy, any PTX loaded through
    # cuModuleLoad / cuLink*: CUDA error 222 with this log) the driver is older than the CUDA
    # that generated the code; a toolkit's own ptxas (nvcc, Triton's TRITON_PTXAS_PATH) older
    # than the code generator prints the same words, so this is the usual reading.
    Signature(
        r"Unsupported \.version \d+\.\d+;\s*current version is '\d+\.\d+'",
        (("driver-too-old", 0.65),),
        "ptxas cannot read PTX of a newer ISA version: the driver's JIT (or the ptxas binary) "
        "is older than the CUDA that generated the PTX",
        decides="the CUDA version `nvidia-smi` reports against the one that generated the PTX; "
        "for a toolkit's ptxas binary (nvcc, TRITON_PTXAS_PATH), `ptxas --version`",
    ),
    # ptxas refusing the target itself ("Value 'sm_121a' is not defined for option
    # 'gpu-name'"): the ptxas (a CUDA toolkit's, or the one Triton bundles) predates the
    # architecture it is asked to compile for — Triton asks for the GPU it runs on. A newer
    # ptxas (TRITON_PTXAS_PATH, a newer CUDA) is the fix; a mistyped -arch says the same words,
    # so it is the usual reading.
    Signature(
        r"Value '(?:sm|compute)_\d+[af]?' is not defined for option '?gpu-name",
        (("gpu-arch-unsupported", 0.8),),
        "ptxas does not know the target architecture: the toolkit (or Triton's bundled ptxas) "
        "is older than the GPU it compiles for",
        decides="`ptxas --version` (or Triton's bundled one) against the GPU's compute "
        'capability: python -c "import torch; print(torch.cuda.get_device_capability())"',
        needs=("is not defined for option",),
    ),
    # nvcc's option parser refusing an architecture its release does not list ("nvcc fatal   :
    # Value 'sm_86' is not defined for option 'gpu-architecture'"; -code=… names option
    # 'gpu-code'): `nvcc --help` lists the values each release allows for --gpu-architecture and
    # --gpu-code (NVCC 10.2's list ends at compute_75 / sm_75, as CMake issue #23293 quotes it),
    # so a toolkit older than the GPU refuses its sm_ (CUDA 11.0 and sm_89) and a newer one an
    # architecture it dropped (CUDA 12.0 and sm_35); cuobjdump's parser prints the same words.
    # As with nvcc's "Unsupported gpu architecture", `nvcc --version` decides which side is
    # stale. A value that names no architecture ('native' before CUDA 11.5) is not this.
    Signature(
        r"Value '(?:sm|compute)_\d+[af]?' is not defined for option '?gpu-(?:architecture|code)",
        (("gpu-arch-unsupported", 0.7),),
        "nvcc does not know the target architecture: the CUDA toolkit and the GPU (or the "
        "build's arch list) are from different generations",
        decides="`nvcc --version` (its allowed values: `nvcc --list-gpu-code`) against the sm_ "
        "it names (sm_86 needs CUDA ≥ 11.1, sm_89 11.8, sm_120 12.8); the build's "
        "-arch / TORCH_CUDA_ARCH_LIST / CMAKE_CUDA_ARCHITECTURES",
        needs=("is not defined for option",),
    ),
    # NVRTC refusing the architecture it is asked to compile for ("nvrtc: error: invalid value
    # for --gpu-architecture (-arch)"): NVRTC supports a fixed list of architectures
    # (nvrtcGetSupportedArchs), and PyTorch's JIT kernels (jiterator, fusers) ask for the GPU
    # they run on, so a framework built with a CUDA older than the GPU (a cu110 wheel on an
    # sm_89 card) or newer than it dropped (Fermi on CUDA 11) fails here. The same fix as ptxas.
    Signature(
        r"invalid value for --gpu-architecture",
        (("gpu-arch-unsupported", 0.8),),
        "NVRTC does not know the target architecture: the CUDA the framework was built with "
        "is older than the GPU (or no longer supports it)",
        decides='python -c "import torch; print(torch.version.cuda, '
        'torch.cuda.get_device_capability())" against the CUDA release that added the GPU',
        needs=("gpu-architecture",),
    ),
    # cuBLAS's own status for a device that lacks a feature the call needs (cuBLAS docs,
    # cublasStatus_t: "usually caused by compute capability lower than 5.0"; cublasGemmEx and
    # the tensor-op paths need 5.0+, some data types more). The GPU decides how sure it is.
    Signature(
        r"CUBLAS_STATUS_ARCH_MISMATCH",
        (("gpu-arch-unsupported", 0.75),),
        "cuBLAS: the call needs a feature this GPU's architecture lacks (compute capability "
        "below 5.0, or a data type the GPU has no math for)",
        decides='python -c "import torch; print(torch.cuda.get_device_capability())" (or '
        "deviceQuery) against the call's needs: cublasGemmEx ≥ 5.0, bf16 ≥ 8.0",
    ),
    # A bf16 GEMM on a GPU without bf16 math: PyTorch ≤ 1.9 said so itself ("BFloat16 gemm in
    # CUDA requires Ampere or later GPU", pytorch#50442); later builds call cuBLAS, which answers
    # CUBLAS_STATUS_NOT_SUPPORTED for the CUDA_R_16BF operands on pre-Ampere GPUs (pytorch#57773).
    # The status alone (fp16 operands) is not this: the bf16 operands in the failed call are.
    Signature(
        r"BFloat16 gemm in CUDA requires Ampere",
        (("gpu-arch-unsupported", 0.9),),
        "bf16 matrix multiplies need an Ampere (compute capability 8.0) or newer GPU",
    ),
    Signature(
        r"CUBLAS_STATUS_NOT_SUPPORTED\b.{0,400}?CUDA_R_16BF",
        (("gpu-arch-unsupported", 0.7),),
        "cuBLAS refused a bf16 GEMM: this GPU has no bf16 math (pre-Ampere)",
        decides='python -c "import torch; print(torch.cuda.get_device_capability(), '
        'torch.cuda.is_bf16_supported())" (bf16 GEMMs need 8.0)',
    ),
    # Hugging Face's TrainingArguments with bf16=True raises this for a pre-Ampere GPU and just
    # as often for a CPU-only torch or no visible GPU: both are candidates, the build decides.
    Signature(
        r"Your setup doesn'?t support bf16/gpu",
        (("gpu-arch-unsupported", 0.5), ("cpu-only-build", 0.45)),
        "bf16 training needs an Ampere or newer GPU and a CUDA build of torch ≥ 1.10",
        decides='python -c "import torch; print(torch.cuda.get_device_capability(), '
        'torch.cuda.is_bf16_supported())"',
    ),
    Signature(
        r"invalid device function|cudaErrorInvalidDeviceFunction",
        (("gpu-arch-unsupported", 0.7), ("library-conflict", 0.25)),
        "CUDA error 98: usually an extension built without this GPU's architecture",
        decides='python -c "import torch; print(torch.cuda.get_arch_list())" and how the '
        "extension was built (TORCH_CUDA_ARCH_LIST)",
    ),
    Signature(
        r"cuDNN version incompatibility|Loaded runtime CuDNN library:?\s*[\d.]+\s*but source was "
        r"compiled with",
        (("library-conflict", 0.95),),
        "the cuDNN loaded at run time is not the one the framework was compiled against",
    ),
    # MegEngine's cuDNN handle asserts that the cuDNN it loaded is the one it was compiled
    # with (dnn/src/cuda/handle.cpp: "cudnn version mismatch: compiled with %d; detected %zu at
    # runtime"): printed only when the two differ.
    Signature(
        r"cudnn version mismatch:\s*compiled with \d+;?\s*detected \d+ at runtime",
        (("library-conflict", 0.95),),
        "MegEngine loaded a cuDNN other than the one it was compiled with",
    ),
    # JAX's own check of the CUDA libraries it loads against the ones jaxlib was built with
    # (jax/_src/xla_bridge.py, _check_cuda_versions; later jax_plugins/cuda): "Found {name}
    # version {version}, but JAX was built against version {build}, which is newer", and since
    # jax 0.4.31 "Outdated {name} installation found.\nVersion JAX was built against: …" — the
    # name is the CUDA runtime, cuDNN, cuFFT, cuSOLVER, cuPTI, cuBLAS, cuSPARSE or NCCL.
    Signature(
        r"Found \w+ version \d+,? but JAX was built against version \d+|"
        r"Outdated \w+ installation found\.?\s*Version JAX was built against:?\s*\d+",
        (("library-conflict", 0.95),),
        "JAX loaded a CUDA library (the runtime, cuDNN, cuBLAS, cuSOLVER …) older than the one "
        "jaxlib was built against",
        decides="`pip list | grep nvidia` and LD_LIBRARY_PATH: the copy JAX loads against the "
        "jax[cudaNN] wheels' pins",
        needs=("but jax was built against", "version jax was built against"),
        fixes=(("library-conflict", _JAX_CUDA_BUILD),),
    ),
    # XLA's PJRT C API check (xla/pjrt/pjrt_api.cc): the CUDA plugin (jax-cudaNN-plugin /
    # jax-cudaNN-pjrt) speaks another PJRT API version than jaxlib — two releases mixed.
    # jax-metal says the same words about Apple's plugin: no NVIDIA library is involved there.
    Signature(
        r"Mismatched PJRT plugin PJRT API version",
        (("library-conflict", 0.75),),
        "JAX's CUDA plugin (jax-cudaNN-plugin / -pjrt) is of another release than jax / jaxlib",
        unless=r"backend 'METAL'|jax-metal",
        decides="`pip list | grep -E 'jax|jaxlib'`: jax, jaxlib and the CUDA plugin of one "
        "release (ENABLE_PJRT_COMPATIBILITY=1 only bridges compatible ones)",
    ),
    # Paddle warns when the cuDNN it finds is older than the one it was built with
    # (gpu_resources.cc / device_context.cc: "The installed Paddle is compiled with CUDNN 7.6,
    # but CUDNN version in your machine is 7.4"). Healthy runs print it too (Paddle 3's wheels
    # warn about 9.9 vs 9.5 and work), so it votes only beside a cuDNN failure, and never when
    # both versions are the same.
    Signature(
        r"compiled with CUDNN (\d+)\s*\.\s*(\d+), but CUDNN version in your machine is\s*"
        r"(?!\1\s*\.\s*\2(?!\d))\d+\s*\.\s*\d+",
        (("library-conflict", 0.7),),
        "Paddle finds an older cuDNN than the one it was built with, and cuDNN failed",
        context=r"CUDNN_STATUS_|cudnn error|CUDNN_STATUS_SUCCESS",
        decides="the cuDNN the process loads (`ldconfig -p | grep cudnn`, LD_LIBRARY_PATH) "
        "against the one Paddle was built with (`paddle.version.cudnn()`)",
        needs=("but cudnn version in your machine",),
    ),
    # The CUDA libraries export C symbols (ncclCommRegister, cudnnCreate, __cudaRegisterFatBinary).
    # A C++ function at global scope, mangled "_Z<length><name>", is a package's own: DeepSpeed's
    # "_Z19cuda_wf6af16_linear…" that its own build left out (DeepSpeed#5333) is no CUDA
    # library's, whatever "cuda" its name holds. (libtorch's namespaced "_ZN3c10…" is read below.)
    Signature(
        r"undefined symbol:?\s*[\"'`]?(?!_Z\d)\w*" + _CUDA_LIBRARY_PREFIX + r"\w*",
        (("library-conflict", 0.9),),
        "a symbol missing from the loaded CUDA library: another version than the one linked",
    ),
    # glibc's loader (elf/dl-lookup.c) when a library was linked against a version of another
    # that exports a symbol the copy it loaded does not: "symbol cublasLtGetStatusString version
    # libcublasLt.so.11 not defined in file libcublasLt.so.11 with link time reference" — two
    # releases of a CUDA library mixed in one process, as "undefined symbol" says above
    Signature(
        r"symbol\s+(?!_Z\d)\w*" + _CUDA_LIBRARY_PREFIX + r"\w*,?\s+version\s+\S+\s+"
        r"not defined in file\s+\S+\s+"
        r"with link time reference",
        (("library-conflict", 0.9),),
        "the loaded CUDA library lacks a versioned symbol another library was linked against: "
        "another release than the one linked",
        needs=("with link time reference",),
    ),
    # Windows' loader (NTSTATUS 0xC0000139 STATUS_ENTRYPOINT_NOT_FOUND, "{Entry Point Not Found}
    # The procedure entry point %hs could not be located in the dynamic link library %hs."):
    # the DLL it found does not export a function another library was linked against — for a
    # CUDA library's function, another release of that library than the one linked, as
    # "undefined symbol" says on Linux (two CUDA installs' cublas64_11.dll and cublasLt on
    # PATH). The driver's own nvcuda.dll is read below. A CUDA library's exports begin with its
    # prefix (after a leading "_" or "__", as nvJitLink's versioned ones): "cuda" inside another
    # word (Unity's BarracudaInit, a "Procurand..." helper) is another DLL's own function.
    Signature(
        r"(?:procedure|program) entry point\s+_{0,2}" + _CUDA_LIBRARY_PREFIX + r"\w*\s+could "
        r"not be located in the dynamic link library(?!\s+\S*nvcuda\.dll)",
        (("library-conflict", 0.9),),
        "Windows' loader found a CUDA library DLL without a function another library needs: "
        "another release than the one linked",
        decides="`where cublas64_*.dll cudnn*.dll cudart64_*.dll` (cmd) against the folder the "
        "program ships its own CUDA libraries in: which copy comes first on PATH",
        needs=("could not be located in the dynamic link library",),
    ),
    # The driver API's entry points live in the driver's libcuda (nvcuda.dll on Windows); a new
    # one, or a new version of one ("cuCtxCreate_v3", "cuGetProcAddress"), comes with a newer
    # driver. libcuda lacking the symbol a runtime or engine asks for = a driver older than it.
    Signature(
        r"(?:libcuda\.so[\d.]*|nvcuda\.dll):?\s*undefined symbol:?\s*cu[A-Za-z]\w*|"
        r"symbol lookup for cu[A-Za-z]\w* failed:?\s*\S*(?:libcuda\.so|nvcuda\.dll)",
        (("driver-too-old", 0.85),),
        "the driver's libcuda lacks a CUDA driver API entry point: it predates the CUDA the "
        "program was built for",
    ),
    # the same on Windows (STATUS_ENTRYPOINT_NOT_FOUND's message, above): the driver's
    # nvcuda.dll lacks a driver API function the program was linked against
    Signature(
        r"(?:procedure|program) entry point\s+cu[A-Za-z]\w*\s+could not be located in the "
        r"dynamic link library\s+\S*nvcuda\.dll",
        (("driver-too-old", 0.85),),
        "the driver's nvcuda.dll lacks a CUDA driver API entry point: it predates the CUDA the "
        "program was built for",
        needs=("could not be located in the dynamic link library",),
    ),
    # CUDA error 34 (CUDA ≥ 11.1): its string (cudaGetErrorString and cuGetErrorString), its
    # names (cuda-python prints CUresult.CUDA_ERROR_STUB_LIBRARY / cudaError_t.cudaErrorStubLibrary)
    # and Numba's CudaAPIError, which prints a driver API result as "[N] <message>": the process
    # loaded the toolkit's stub libcuda, not the driver's (cuda_errors.STUB_LIBRARY_DECIDES)
    Signature(
        r"CUDA driver is a stub library|cudaErrorStubLibrary|CUDA_ERROR_STUB_LIBRARY|"
        r"CudaAPIError:?\s*\[34\]",
        (("library-conflict", 0.7), ("driver-not-loaded", 0.35)),
        "CUDA error 34: the libcuda the process loaded is the toolkit's stub (for linking only), "
        "not the driver's — the stubs folder ahead of the driver's library, or no driver",
        decides=STUB_LIBRARY_DECIDES,
        fixes=STUB_LIBRARY_FIXES,
        needs=("stub library", "stub_library", "stublibrary", "cudaapierror"),
    ),
    Signature(
        r"version\s*`?libcudart\.so\.\d+'? not found|undefined reference to\s*`?\w+@libcudart|"
        r"@libcudart\.so\.\d+",
        (("library-conflict", 0.85),),
        "the binary was linked against another libcudart version",
    ),
    Signature(
        r"lib(?:cudnn|cublas|cublasLt|cudart|nccl|cusparse|cufft|curand|cusolver|nvrtc|nvJitLink)"
        r"[\w.]*\.so[\d.]*:?\s*cannot open shared object file",
        (("library-conflict", 0.8),),
        "a CUDA library the binary needs is not on the loader's path",
        needs=("cannot open shared object",),
    ),
    # cuDNN 9 is a shim (libcudnn.so.9) that loads its sub-libraries (libcudnn_ops, _cnn, _adv,
    # _graph, the engines) itself at run time (cuDNN API reference, "Backend API Overview"); when
    # none of the names it tries opens it says "Unable to load any of {libcudnn_ops.so.9.1.0,
    # libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}", then "Invalid handle. Cannot
    # load symbol cudnnCreateTensorDescriptor": a cuDNN library the shim needs is not on the
    # loader's path, as the signature above reads the dynamic loader's own "cannot open"
    Signature(
        r"Unable to load any of \{libcudnn_\w+\.so[\d.]*",
        (("library-conflict", 0.8),),
        "cuDNN 9's shim found none of its sub-library's files on the loader's path",
        needs=("unable to load any of",),
    ),
    # The same on Windows, where a CUDA library is a DLL named <library>64_<major>.dll: cuDNN 8's
    # own loader of its sub-libraries ("Could not load library cudnn_ops_infer64_8.dll. Error code
    # 126", "Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library
    # path!"), TensorFlow's dso_loader ("Could not load dynamic library 'cudart64_110.dll';
    # dlerror: cudart64_110.dll not found"), PyTorch's DLL loading on import ("[WinError 126] …
    # Error loading "…\cudnn_adv_infer64_8.dll" or one of its dependencies": the DLL or one it
    # needs is not on the search path)
    Signature(
        r"(?:Could not (?:load(?: dynamic)? library|locate)\s*'?|"
        r"Error loading\s*\"?[^\"\n]{0,300}?[\\/])"
        r"(?:cudnn|cublas|cublasLt|cudart|nccl|cusparse|cufft|curand|cusolver|nvrtc|nvJitLink)"
        r"[\w.]*\.dll",
        (("library-conflict", 0.8),),
        "a CUDA library (a DLL) the binary needs is not on the loader's search path",
        # Windows' error 1455: the DLL is there, the paging file too small to map it
        unless=r"WinError 1455|paging file is too small",
        needs=(".dll",),
    ),
    # onnxruntime's own account of a failed LoadLibrary on Windows (DetermineLoadLibraryError,
    # onnxruntime/core/platform/windows/dll_load_error.cc) walks the import tables: "Error
    # loading "…\onnxruntime_providers_cuda.dll" which depends on "cublasLt64_12.dll" which is
    # missing. (Error 126)" — each DLL after "which depends on" failed to load, the last one is
    # absent: a CUDA library in the chain is not on the search path, as above. The chain's own
    # next words ("which is missing", "which depends on") keep prose that mentions a dependency
    # out.
    Signature(
        r"which depends on\s?\"?(?:cudnn|cublas|cublasLt|cudart|nccl|cusparse|cufft|curand|"
        r"cusolver|nvrtc|nvJitLink)[\w.]{0,40}\.dll\"?\s?which (?:is missing|depends on)",
        (("library-conflict", 0.8),),
        "a CUDA library (a DLL) onnxruntime's provider needs is not on the loader's search path",
        needs=("which depends on",),
    ),
    # TensorFlow's and XLA's CUDA runtime stubs (stream_executor/cuda/cudart_stub.cc and its
    # cuda_runtime_*.inc, which jaxlib shares) look each function up in the libcudart their
    # dso_loader opened; with no such library (another CUDA than the build's) or no such symbol
    # in it, cudaGetErrorString returns "cudaGetErrorString symbol not found." in place of the
    # error's text, and every other call cudaErrorSharedObjectSymbolNotFound
    Signature(
        r"cudaGetError(?:String|Name) symbol not found",
        (("library-conflict", 0.8),),
        "the framework's CUDA runtime stub found no usable libcudart: the CUDA runtime it was "
        "built for is not the one installed",
        decides="the CUDA the framework was built for (jaxlib's +cudaNN tag, "
        "`pip list | grep -i -e jax -e nvidia`) against the libcudart the loader finds "
        "(`ldconfig -p | grep cudart`, LD_LIBRARY_PATH)",
    ),
    # TensorFlow's dso_loader names the library file as the platform does: libcudart.so.11.0
    # on Linux, cudart64_101.dll on Windows (the CUDA toolkit's DLLs are <name>64_<version>.dll)
    Signature(
        r"Could not load dynamic library\s*'?(?:lib(?:cudart|cublas|cublasLt|cudnn|cufft|curand|"
        r"cusolver|cusparse|nvinfer)|(?:cudart|cublas|cublasLt|cudnn|cufft|curand|cusolver|"
        r"cusparse|nvinfer)64_)",
        (("library-conflict", 0.7), ("cpu-only-build", 0.25)),
        "TensorFlow could not find a CUDA library of the version it was built for",
        decides="TensorFlow's tested CUDA/cuDNN pair (tensorflow.org/install/source#gpu) "
        "against what is installed; `pip install tensorflow[and-cuda]`",
        fixes=(("library-conflict", _TF_CUDA_LIBRARIES),),
    ),
    # A C++/CUDA extension (flash-attn, xformers, a custom op) links against libtorch's C++ API:
    # a c10::/at::/torch:: symbol it cannot find means it was built against another PyTorch
    # release (or the other C++ ABI) than the one installed. A member function's nested name
    # carries its qualifiers before the namespace (Itanium C++ ABI, <nested-name> ::= N
    # [<CV-qualifiers>: r V K] [<ref-qualifier>: R O] …): c10::Error::what() const is
    # "_ZNK3c105Error4whatEv" (fbgemm_gpu built for another PyTorch, FBGEMM#2938).
    Signature(
        r"undefined symbol:?\s*_ZN[rVK]{0,3}[RO]?(?:\d+c10|\d+at|5torch)\w+",
        (("library-conflict", 0.85),),
        "an extension needs a libtorch (c10/ATen) symbol the installed PyTorch lacks: it was "
        "built against another PyTorch release or C++ ABI",
        needs=("undefined symbol",),
    ),
    # xformers' own check when its C++/CUDA extension does not load: it prints the PyTorch it
    # was built for and the one it found. Different torch versions = a build for another torch
    # (a "+cpu" torch is read by the +cpu signature; the same versions leave the cause open).
    Signature(
        r"xFormers was built for:?\s*PyTorch\s*(\S+)\s*with CUDA\s*\d+\s*"
        r"\(you have\s*(?!\1\))(?![\w.]+\+cpu\))[\w.+]+\)",
        (("library-conflict", 0.85),),
        "xformers' extension was built for another PyTorch than the one installed",
        needs=("xformers was built for",),
        fixes=(("library-conflict", _XFORMERS_FOR_TORCH),),
    ),
    # bitsandbytes loads libbitsandbytes_cpu when it finds no CUDA binary to load: the package
    # has none for this platform/CUDA (Windows before 0.43, an unbuilt checkout), or its CUDA
    # setup did not find libcudart on the loader's path.
    # It also loads the CPU library whenever torch.cuda.is_available() is False (cextension.py
    # asks PyTorch for the CUDA version first): after PyTorch's own "CUDA initialization:"
    # warning (torch/cuda/__init__.py, cudaGetDeviceCount failed) the line is that failure's
    # consequence, and the failure's own reading decides.
    Signature(
        r"The installed version of bitsandbytes was compiled without GPU support",
        (("cpu-only-build", 0.6), ("library-conflict", 0.35)),
        "bitsandbytes loaded its CPU library: no CUDA binary of the package was found or loaded",
        unless=_TORCH_CUDA_INIT_FAILED,
        decides="`python -m bitsandbytes`: which binary it loads and why (no binary for this "
        "platform/CUDA version, or libcudart not found on LD_LIBRARY_PATH)",
    ),
    # TensorRT engines (plans) are tied to the TensorRT release and to the GPU (compute
    # capability) they were built on: the runtime checks both when deserializing
    # (docs.nvidia.com/deeplearning/tensorrt, "Engine compatibility"). A plan from another GPU is
    # a binary without this GPU's kernels; a plan from another release is read as a library
    # mismatch at medium only — the plan is an artifact, not a CUDA library the loader picked.
    Signature(
        r"engine plan file is generated on an incompatible device,?\s*expecting compute\s*"
        r"[\d.]+\s*got compute\s*[\d.]+",
        (("gpu-arch-unsupported", 0.9),),
        "the TensorRT engine was built on a GPU of another compute capability: an engine runs "
        "only on the architecture it was built for (rebuild it on the target GPU)",
        needs=("engine plan file",),
    ),
    Signature(
        r"engine plan file is not compatible with this version of TensorRT,?\s*expecting "
        r"library version\s*[\d.]+\s*got\s*(?!0\.0\.0\b)[\d.]+|"
        r"Serialization assertion\s*\w*VersionRead\s*==\s*\w*[sS]erializationVersion failed",
        (("library-conflict", 0.75),),
        "the TensorRT engine was serialized by another TensorRT release than the one loading it "
        "(rebuild the engine with the runtime's version, or load the matching libnvinfer)",
        decides="the TensorRT that built the engine (its build log) against the one loading it "
        '(`python -c "import tensorrt; print(tensorrt.__version__)"`, `ldd` on the binary for '
        "libnvinfer): a plan is not a CUDA library, so rebuilding it is the fix either way",
        needs=("engine plan file", "serialization assertion"),
    ),
    # A header that reads as version 0.0.0, or no plan magic at all: the bytes are not a plan
    # this TensorRT can read — another release's, or a file truncated or read in text mode.
    Signature(
        r"engine plan file is not compatible with this version of TensorRT,?\s*expecting "
        r"library version\s*[\d.]+\s*got\s*0\.0\.0\b|"
        r"Serialization assertion\s*plan->header\.magicTag\s*==\s*\w*::kPLAN_MAGIC_TAG failed",
        (("library-conflict", 0.35),),
        "TensorRT could not read the plan's header: another release's plan, or a file that is "
        "not a plan (truncated, written or read in text mode)",
        decides="the plan file's size and checksum against the one the builder wrote, and the "
        "TensorRT version that built it (`trtexec --loadEngine` with the same libnvinfer)",
        needs=("engine plan file", "serialization assertion"),
    ),
    Signature(
        _LIBCUDA_NOT_OPENED,
        (("driver-not-loaded", 0.45), ("container-driver-capabilities", 0.3)),
        "the driver's libcuda is not there: no driver, or a container without it",
        unless=CONTAINER,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        _LIBCUDA_NOT_OPENED,
        (("container-driver-capabilities", 0.65), ("container-runtime-not-nvidia", 0.4)),
        "a container without the driver's libcuda: the runtime injected no driver libraries",
        context=CONTAINER,
        decides=_NO_DEVICE_DECIDES,
    ),
    # NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVML's only library-against-driver version error:
    # nvidia-smi prints "Driver/library version mismatch", the NVML bindings (pynvml's
    # NVMLError_LibRmVersionMismatch, Rust's nvml-wrapper) "RM has detected an NVML/RM version
    # mismatch", users "NVML version mismatch"
    Signature(
        r"Driver/library version mismatch|\bNVML(?:/RM)? version mismatch|"
        r"API mismatch:?\s+the client\s+(?:'[^']*'\s+\(pid \d+\)\s+(?:NVRM:\s+)?)?has the version|"
        r"LIB_RM_VERSION_MISMATCH|LibRmVersionMismatch",
        (("nvml-driver-mismatch", 0.95),),
        "the driver libraries and the loaded kernel module are different versions",
    ),
    # TensorFlow's/XLA's stream executor (cuda_diagnostics.cc) compares the version libcuda
    # reports with /proc/driver/nvidia/version after a failed cuInit and says which differ.
    Signature(
        r"kernel version\s*[\d.]+\s*does not match DSO version\s*[\d.]+",
        (("nvml-driver-mismatch", 0.95),),
        "TensorFlow's CUDA diagnostics: libcuda (the DSO) and the loaded kernel module are "
        "different versions",
        needs=("does not match dso version",),
    ),
    Signature(
        r"forward compatibility was attempted on non supported HW|"
        r"COMPAT_NOT_SUPPORTED_ON_DEVICE|cudaErrorCompatNotSupportedOnDevice",
        (("forward-compat-unsupported", 0.95),),
        "CUDA error 804: the forward-compatibility libcuda on a GPU that cannot use it",
        unless=r"libnvidia-container[\w-]*\W+1\.4\.0|container[- ]toolkit\W+1\.4\.0",
    ),
    Signature(
        r"forward compatibility was attempted on non supported HW|"
        r"COMPAT_NOT_SUPPORTED_ON_DEVICE|cudaErrorCompatNotSupportedOnDevice",
        (("container-toolkit-version", 0.8), ("forward-compat-unsupported", 0.5)),
        "CUDA error 804 with libnvidia-container 1.4.0, a release known to cause it",
        context=r"libnvidia-container[\w-]*\W+1\.4\.0|container[- ]toolkit\W+1\.4\.0",
        decides="the same image with the previous toolkit release (or a host driver that "
        "supports the image's CUDA natively)",
    ),
    # PyTorch's own fix is the cause's: a CPU-only torch under a CPU-only extension built for it
    # (PyG, k2) is fixed first, the extension's CUDA wheel needing a CUDA torch
    *_built_without_cuda(
        r"Torch not compiled with CUDA enabled",
        "PyTorch",
        "run the code on the CPU (device='cpu') or on Apple's GPU (device='mps')",
        BY_CODE["cpu-only-build"].fixes,
    ),
    # CTranslate2 (faster-whisper's engine) throws this from str_to_device("cuda") only when it
    # was compiled without CT2_WITH_CUDA (src/devices.cc): its macOS and Linux aarch64 wheels.
    *_built_without_cuda(
        r"This CTranslate2 package was not compiled with CUDA support",
        "CTranslate2",
        "run it on the CPU (device='cpu')",
        _CTRANSLATE2_CUDA_BUILD,
    ),
    # Horovod's PyTorch binding throws this from RecordReadyEvent (horovod/torch/ready_event.cc)
    # for a tensor on a GPU when it was built without HAVE_GPU: the installed Horovod has no
    # CUDA operations (built without HOROVOD_GPU_OPERATIONS, or where its build found no CUDA).
    *_built_without_cuda(
        r"Requested ReadyEvent with GPU device but not compiled with CUDA",
        "Horovod",
        "keep the tensors Horovod reduces on the CPU",
        _HOROVOD_CUDA_BUILD,
    ),
    # DGL's runtime when a graph or tensor goes to a device whose API its build lacks
    # (src/runtime/c_runtime_api.cc, DeviceAPIManager: "Device API <name> is not enabled. Please
    # install the cuda version of dgl."; the name is "gpu" before DGL 1.0, "cuda" after): the
    # installed DGL is its CPU build — PyPI's plain `dgl` wheels up to 1.x have no CUDA.
    *_built_without_cuda(
        r"Device API (?:cuda|gpu) is not enabled\.?\s*Please install the cuda version of dgl",
        "DGL",
        "run it on the CPU (the graph and tensors on the CPU)",
        _DGL_CUDA_BUILD,
    ),
    # qsimcirq's QSimSimulator raises this when its GPU module is None (qsimcirq/
    # qsim_simulator.py; __init__.py loads qsim_cuda / qsim_custatevec only when qsim_decide says
    # the build has them, and decide.cpp decides at compile time: NO_GPU without nvcc, the PyPI
    # wheels): the installed qsim was built without that GPU backend. Later qsimcirq releases
    # append a probe's reason (no driver, driver too old, no device, a library missing, an import
    # error) after "compile qsim locally." — that reason, not the build, is then the cause.
    *_built_without_cuda(
        r"GPU execution requested, but not supported\.\s*If your device has GPU support"
        r"(?: and the NVIDIA cuStateVec(?:Ex)? library is installed)?, you may need to compile "
        r"qsim locally\.(?!\s*(?:No NVIDIA driver|NVIDIA driver too old|No CUDA devices|CUDA "
        r"runtime not installed|cuStateVec(?:Ex)? not installed|GPU support is only available|"
        r"qsimcirq\.qsim_\w+ failed to import))",
        "qsimcirq",
        "simulate on the CPU (QSimOptions(use_gpu=False))",
        _QSIM_CUDA_BUILD,
    ),
    # PyG's compiled extensions (torch_scatter, torch_sparse, torch_cluster, torch_spline_conv)
    # dispatch a CUDA tensor to their kernels only when built with WITH_CUDA; the other branch is
    # AT_ERROR("Not compiled with CUDA support") (csrc/scatter.cpp, scatter_fw, and the same in
    # each op): the installed extension is a CPU build — a PyPI source build without CUDA, or a
    # +cpu wheel. Extensions modelled on them keep the same branch and words. CTranslate2's "was
    # not compiled with CUDA support" has its own reading above.
    *_built_without_cuda(
        r"(?<!was )Not compiled with CUDA support",
        "CUDA extension (PyG's torch-scatter / torch-sparse / torch-cluster or one built so)",
        "keep the graph's tensors on the CPU",
        _PYG_CUDA_BUILD,
    ),
    # habitat-sim asserts its build flag before a GPU-to-GPU sensor transfer (habitat_sim's
    # sensor and simulator code: `assert cuda_enabled, "Must build habitat sim with cuda for
    # gpu2gpu-transfer"`): the installed habitat-sim was built without --with-cuda, as its conda
    # packages (headless, withbullet) are.
    *_built_without_cuda(
        r"Must build habitat[- ]?sim with cuda",
        "habitat-sim",
        "turn gpu2gpu_transfer off in the sensor specs",
        _HABITAT_CUDA_BUILD,
    ),
    # MXNet logs MXNET_GPU_NOT_ENABLED_ERROR ("GPU is not enabled", include/mxnet/base.h: "Error
    # message for using gpu when MXNET_USE_CUDA==0") wherever a GPU context reaches code compiled
    # without CUDA: the installed MXNet is a CPU build. Anchored on MXNetError or LOG(FATAL)'s
    # source-file prefix, since the bare phrase is ordinary English.
    *_built_without_cuda(
        r"(?:MXNetError\W{0,3}|\.(?:cc|cu|h):\d+\]?:?\s?)GPU is not enabled\b",
        "MXNet",
        "run it on the CPU (mx.cpu() context)",
        _MXNET_CUDA_BUILD,
    ),
    # cumm's tensorview (spconv 2's tensor library) allocates device memory only when compiled
    # with TV_CUDA; otherwise TensorStorage throws TV_THROW_INVALID_ARG("don't compiled with
    # cuda") (include/tensorview/tensor.h, after its file(line) prefix): the cumm/spconv loaded is
    # the CPU build — the plain `cumm` package installed beside or instead of cumm-cuXXX.
    *_built_without_cuda(
        r"\bdon['\u2019]?t compiled with cuda\b",
        "spconv / cumm (tensorview)",
        "keep spconv's tensors on the CPU",
        _SPCONV_CUDA_BUILD,
    ),
    # sherpa-onnx asks onnxruntime for its compiled-in providers when told --provider=cuda
    # (sherpa-onnx/csrc/session.cc, GetSessionOptionsImpl) and, when CUDAExecutionProvider is not
    # among them, logs "Please compile with -DSHERPA_ONNX_ENABLE_GPU=ON. [Available providers:
    # ….] Fallback to cpu!": the onnxruntime it links is a CPU build — sherpa-onnx built or
    # installed without its GPU option.
    *_built_without_cuda(
        r"Please compile with -DSHERPA_ONNX_ENABLE_GPU=ON\.",
        "sherpa-onnx (the onnxruntime it links)",
        "keep the provider at cpu",
        _SHERPA_ONNX_CUDA_BUILD,
    ),
    # k2 (icefall's FSA library) built with -DK2_WITH_CUDA=OFF is a CPU-only k2 (its install
    # docs); its CUDA entry points are stubs that log fatally when reached (k2/csrc/fake_cuda.h;
    # device_guard.h, DeviceGuard::GetDevice: "k2 compiled without CUDA support"), and icefall's
    # env_info shows the same build as 'k2-with-cuda': False.
    *_built_without_cuda(
        r"\bk2 compiled without CUDA support",
        "k2",
        "keep k2's FSAs and tensors on the CPU",
        _K2_CUDA_BUILD,
    ),
    # libtorch asked for a CUDA device with no CUDA guard registered in the process
    # (c10/core/impl/DeviceGuardImplInterface.h, getDeviceGuardImpl: "PyTorch is not linked with
    # support for <type> devices"): the loaded libtorch has no CUDA library — a CPU build, or
    # the CUDA library present but never loaded (a C++ or .NET program on Windows that links
    # libtorch and does not load torch_cuda.dll). Bindings that embed libtorch (R's torch,
    # TorchSharp, DJL) print it where Python's torch says "not compiled with CUDA enabled".
    Signature(
        r"PyTorch is not linked with support for cuda devices",
        (("cpu-only-build", 0.7),),
        "libtorch has no CUDA library loaded: a CPU build of libtorch (or its CUDA library not "
        "loaded)",
        decides="which libtorch the program loads: its CUDA variant (a CPU package or +cpu = a "
        "CPU build) and whether libtorch_cuda / torch_cuda.dll is among the loaded libraries",
    ),
    # ONNX Runtime's C API returns this from its CUDA provider-options entry points compiled
    # without USE_CUDA (core/session/provider_bridge_ort.cc: CreateCUDAProviderOptions,
    # UpdateCUDAProviderOptions; provider_stubs.cc / provider_registration.cc, minimal builds:
    # CreateNotEnabledStatus("CUDA")): the loaded onnxruntime library is a build without the CUDA
    # EP. A CUDA build whose provider library fails to load says something else
    # ("OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library"). The usual
    # reading, not a certain one: bindings that load the library themselves (Rust's ort, C#,
    # GenAI) can pick up a CPU onnxruntime beside the GPU package the reporter installed.
    Signature(
        r"CUDA execution provider is not enabled in this build",
        (("cpu-only-build", 0.7),),
        "the onnxruntime library the program loaded was built without the CUDA execution provider",
        decides='which onnxruntime library the process loads: python -c "import onnxruntime as '
        'ort; print(ort.__file__, ort.get_available_providers())" (CUDAExecutionProvider '
        "missing = a CPU build: onnxruntime and onnxruntime-gpu both installed, or only the CPU "
        "one); Rust's ort: ORT_DYLIB_PATH / the downloaded binary's build; C#: the "
        "Microsoft.ML.OnnxRuntime.Gpu package and no CPU Microsoft.ML.OnnxRuntime beside it",
        fixes=(("cpu-only-build", _ORT_CUDA_BUILD),),
    ),
    # OpenCV's DNN module falls back when the CUDA backend was asked for (modules/dnn/src/
    # net_impl.cpp, Net::Impl::setUpNet): this wording is the branch compiled without HAVE_CUDA,
    # so the loaded cv2 / libopencv_dnn has no CUDA backend at all (the opencv-python wheels are
    # built so). A CUDA build that finds no usable device prints "unable to use CUDA backend;
    # switching to CPU" instead, which is not this.
    Signature(
        r"DNN module was not built with CUDA backend; switching to CPU",
        (("cpu-only-build", 0.95),),
        "the OpenCV the program loaded was built without the DNN CUDA backend",
        decides='python -c "import cv2; print(cv2.__file__); print(cv2.getBuildInformation())" '
        "(NVIDIA CUDA and cuDNN YES, and no pip opencv-python shadowing a source build)",
        fixes=(("cpu-only-build", _OPENCV_DNN_CUDA_BUILD),),
    ),
    # Hugging Face optimum's provider check (optimum/onnxruntime/utils.py,
    # validate_provider_availability: "Asked to use {provider} as an ONNX Runtime execution
    # provider, but the available execution providers are {ort.get_available_providers()}").
    # That list holds the providers compiled into the imported onnxruntime, so a CUDA or TensorRT
    # request against a list without CUDAExecutionProvider is the CPU build imported (optimum's
    # GPU guide: onnxruntime instead of onnxruntime-gpu, or both installed). A list that has the
    # CUDA provider (TensorRT missing from a CUDA build) or another vendor's request is not that.
    Signature(
        r"Asked to use (?:CUDA|Tensorrt)ExecutionProvider as an ONNX Runtime execution provider, "
        r"but the available execution providers are \[(?:(?!CUDAExecutionProvider)[^\]])*\]",
        (("cpu-only-build", 0.9),),
        "optimum asked the imported onnxruntime for a CUDA provider it was not built with: the "
        "CPU onnxruntime package",
        decides='python -c "import onnxruntime as ort; print(ort.__file__, '
        'ort.get_available_providers())" and `pip list | grep onnxruntime`: only '
        "onnxruntime-gpu should be installed",
        fixes=(("cpu-only-build", _ORT_CUDA_BUILD),),
    ),
    # PyTorch's dispatcher found no kernel for an operator under the CUDA key
    # (aten/src/ATen/core/dispatch/OperatorEntry.cpp, reportError: "Could not run '<op>' with
    # arguments from the '<key>' backend"). A core aten operator without a CUDA kernel is what a
    # libtorch without its CUDA library gives — the bindings that load libtorch themselves (DJL,
    # TorchSharp, R's torch) meet it where Python's torch stops earlier — but some aten operators
    # have no CUDA kernel in any build, so the build is one candidate, not the answer.
    # Other namespaces (torchvision::, fbgemm::) are extensions with builds of their own.
    Signature(
        r"Could not run .aten::[\w.]+. with arguments from the .CUDA. backend",
        (("cpu-only-build", 0.45),),
        "PyTorch has no CUDA kernel for a core operator: a libtorch without CUDA, or an "
        "operator with no CUDA kernel",
        decides="the backends the message lists after 'is only available for these backends' "
        "and the libtorch the program loads (a CPU package or +cpu = a CPU build)",
    ),
    Signature(
        r"\btorch\W{1,3}\d+\.\d+(?:\.\d+)?\+cpu\b|\b\d+\.\d+\.\d+\+cpu\b",
        (("cpu-only-build", 0.7),),
        "a `+cpu` PyTorch version string",
        needs=("+cpu",),
    ),
    # PyTorch's ROCm build says "No HIP GPUs are available" where its CUDA build says "No CUDA
    # GPUs are available" (c10/cuda/CUDAFunctions.cpp, hipified for ROCm): the installed torch
    # has no CUDA backend. On a machine with an NVIDIA GPU that is the wrong build (installed
    # from the rocm index); on an AMD machine it is ROCm not seeing its GPU, outside explain's
    # vocabulary, so this is the usual reading, not a certain one.
    Signature(
        r"No HIP GPUs are available",
        (("cpu-only-build", 0.65),),
        "PyTorch's ROCm (HIP) build found no AMD GPU: the installed torch has no CUDA backend",
        decides='`python -c "import torch; print(torch.version.hip, torch.version.cuda)"` and '
        "`nvidia-smi`: a HIP build on a machine with an NVIDIA GPU needs the CUDA build instead; "
        "on an AMD machine, `rocminfo` and HIP_VISIBLE_DEVICES",
    ),
    # xla_bridge's _suggest_missing_backends prints this whenever no CUDA backend came up on a
    # machine with an NVIDIA GPU and no backend error was recorded — also when the installed
    # CUDA plugin failed in its initialize() and so registered none: after that failure the
    # line is its consequence, not a CPU-only JAX, and the failure decides.
    Signature(
        r"CUDA-enabled jaxlib is not installed",
        (("cpu-only-build", 0.95),),
        "JAX without its CUDA plugin",
        unless=_JAX_CUDA_PLUGIN_FAILED,
        fixes=(("cpu-only-build", _JAX_CUDA_BUILD),),
    ),
    Signature(
        r"No GPU/TPU found, falling back to CPU",
        (("cpu-only-build", 0.6), ("driver-not-loaded", 0.3)),
        "JAX found no GPU backend",
        decides="`pip list | grep -i jax` (a jax-cuda plugin?) and `nvidia-smi`",
        fixes=(("cpu-only-build", _JAX_CUDA_BUILD),),
    ),
    # OCCA (nekRS, libParanumal) prints this from getModeFromProps (src/occa/internal/modes.cpp)
    # when the mode asked for is not registered: cudaMode::init() is false for an OCCA built
    # without OCCA_CUDA_ENABLED, and also when cuInit fails or finds no device — JAX's fallback
    # above, in OCCA's words.
    Signature(
        r"\[(?:CUDA|Cuda|cuda)\] mode is not enabled, defaulting to \[Serial\] mode",
        (("cpu-only-build", 0.6), ("driver-not-loaded", 0.3)),
        "OCCA has no CUDA mode: built without CUDA, or no driver or device answered",
        decides="OCCA's build (occa info lists the enabled modes; OCCA_CUDA_ENABLED in its "
        "configure output) and `nvidia-smi` (fails = the driver)",
    ),
    Signature(
        _IS_AVAILABLE_FALSE,
        (("cpu-only-build", 0.45), ("driver-not-loaded", 0.3)),
        "torch.cuda.is_available() is False",
        unless=CONTAINER,
        decides='python -c "import torch; print(torch.__version__, torch.version.cuda)" '
        "(None or +cpu = a CPU build) and `nvidia-smi` (fails = the driver)",
    ),
    Signature(
        _IS_AVAILABLE_FALSE,
        (("container-driver-capabilities", 0.75), ("cpu-only-build", 0.3)),
        "torch.cuda.is_available() is False inside a GPU container",
        context=CONTAINER,
        decides="`env | grep NVIDIA` and `nvidia-smi` in the container; "
        "torch.version.cuda (None = a CPU build)",
    ),
    Signature(
        _SELECT_DEVICE + r"(?!0')[^']{1,64}' requested",
        (("device-ordinal-invalid", 0.45), ("cpu-only-build", 0.4)),
        "yolov5/ultralytics refused the CUDA devices asked for: torch.cuda.is_available() is "
        "False, or fewer GPUs are visible than asked for",
        unless=_IS_AVAILABLE_FALSE + "|" + _SELECT_DEVICE_AVAILABLE,
        decides=_SELECT_DEVICE_DECIDES,
    ),
    Signature(
        _SELECT_DEVICE_AVAILABLE,
        (("device-ordinal-invalid", 0.9),),
        "ultralytics refused the CUDA devices asked for with torch.cuda.is_available() True: "
        "fewer GPUs are visible than asked for",
    ),
    # --- driver ------------------------------------------------------------------------------
    Signature(
        _SMI_NO_DRIVER,
        (("driver-not-loaded", 0.95),),
        "nvidia-smi cannot reach the kernel module: it is not loaded",
        unless=_NO_GPU_INITIALISED,
    ),
    # nv.c returns -ENODEV from the module's init when it took no GPU: the module is not loaded
    # because its probe failed, which the probe's own lines name (driver-probe-failed)
    Signature(
        _SMI_NO_DRIVER,
        (("driver-not-loaded", 0.3),),
        "nvidia-smi cannot reach the kernel module: its init failed because it took no GPU",
        context=_NO_GPU_INITIALISED,
        decides='the NVRM lines before "None of the NVIDIA devices were initialized" '
        "(`dmesg | grep -i nvrm`): they say why the probe refused the GPU",
    ),
    Signature(
        r"(?:Failed to initialize NVML|NVML_ERROR)\W+Driver Not Loaded|"
        r"NVML_ERROR_DRIVER_NOT_LOADED",
        (("driver-not-loaded", 0.9),),
        "NVML reports the kernel driver is not loaded",
        needs=("not loaded", "not_loaded"),
        unless=r"nvidia-container-cli",
    ),
    # pynvml / nvidia-ml-py raise NVML's return codes as NVMLError_<CamelCase> subclasses
    # (_extractNVMLErrorsAsClasses) whose str() is nvmlErrorString: NVML_ERROR_DRIVER_NOT_LOADED
    # (nvml.h: "NVIDIA driver is not loaded") prints "NVMLError_DriverNotLoaded: Driver Not
    # Loaded". A Python probe (gpustat, a serving framework's GPU check) may run where no module
    # was ever meant to load, and the text does not say why it is not: medium.
    Signature(
        r"NVMLError_DriverNotLoaded\b",
        (("driver-not-loaded", 0.7),),
        "NVML (through pynvml) finds no loaded NVIDIA kernel driver: the module is not loaded — "
        "not built for the running kernel, never installed, or no NVIDIA GPU to load it for",
        unless=r"nvidia-container-cli",
        decides="`lsmod | grep nvidia`, `dkms status` and `uname -r`; `lspci | grep -i nvidia` "
        "(no NVIDIA GPU: the program's GPU probe should be off)",
    ),
    # uBlue's `ujust configure-nvidia` (ublue-os/config, 40-nvidia.just) prints this when
    # `lsmod | grep -w nvidia` finds no module; the reasons it lists start with Secure Boot
    # without the image's signing key enrolled, which modprobe would name ("Key was rejected")
    Signature(
        r"Nvidia kernel module is not loaded\.\s*You may be using secure boot",
        (("driver-not-loaded", 0.7), ("driver-module-unsigned", 0.35)),
        "uBlue's configure-nvidia found no nvidia module loaded (lsmod)",
        decides='`sudo modprobe nvidia` ("Key was rejected by service": enrol the image\'s key, '
        "`ujust enroll-secure-boot-key`), `rpm-ostree kargs` and `mokutil --sb-state`",
    ),
    # modprobe (kmod) and the older module-init-tools word it differently: "FATAL: Module nvidia
    # not found.", "modprobe: FATAL: nvidia_drm not found in directory ...", "could not find
    # module by name 'nvidia'"; Xorg's nvidia driver says so when it cannot load the module.
    Signature(
        r"(?:modprobe:?\s*)?(?:FATAL|ERROR):?\s*(?:Module\s+)?nvidia[\w-]* not found|"
        r"modprobe:?\s*(?:FATAL|ERROR):?\s*could not (?:insert|find module by name)\s*'?nvidia|"
        r"NVIDIA:?\s*Failed to load the NVIDIA kernel module",
        (("driver-not-loaded", 0.9),),
        "the nvidia module is missing for this kernel or refused to load",
        needs=("not found", "could not", "failed to load the nvidia kernel module"),
        unless=_UNSIGNED_MODULE,
    ),
    # Under Secure Boot (lockdown, module.sig_enforce) the kernel refuses a module no trusted key
    # signed: finit_module fails with EKEYREJECTED ("Key was rejected by service") or ENOKEY
    # ("Required key not available"), which modprobe prints after the module's name;
    # nvidia-installer says it outright. A rebuild is refused again: the key must be enrolled
    Signature(
        _UNSIGNED_MODULE,
        (("driver-module-unsigned", 0.95),),
        "the kernel refused the nvidia module's signature (Secure Boot)",
        needs=("key was rejected", "required key not available", "secure boot is enabled"),
    ),
    # The module did not build for this kernel (DKMS after a kernel upgrade, nvidia-installer):
    # nothing to load. Only when the failing build is nvidia's — DKMS builds other modules too.
    Signature(
        r"Bad return status for module build on kernel:?\s*\S+\s*(?:\(\w+\))?\.?\s*"
        r"Consult /var/lib/dkms/nvidia|"
        r"DKMS module '?nvidia[\w.-]*'? failed to build|"
        r"Building DKMS module '?nvidia[\w.-]*'? for \S+ FAILED|"
        r"dkms autoinstall on \S+ failed for nvidia|"
        r"/var/lib/dkms/nvidia[\w-]*/[\w./-]+:\d+:\d+: error:|"
        r"error occurred while performing the step:?\s*\"(?:Building kernel modules|"
        r"Checking to see whether the nvidia kernel module was successfully built)",
        (("driver-not-loaded", 0.85),),
        "the nvidia kernel module failed to build for this kernel: there is no module to load",
        needs=("failed", "/var/lib/dkms/nvidia", "performing the step"),
        decides="`dkms status`, `uname -r` and the first error in the build's make.log (a "
        "kernel newer than the driver release supports)",
    ),
    Signature(
        _NO_NVIDIA_SMI,
        (("driver-not-loaded", 0.5), ("container-driver-capabilities", 0.3)),
        "nvidia-smi or its NVML library is not installed here",
        unless=CONTAINER,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        _NO_NVIDIA_SMI,
        (("container-driver-capabilities", 0.6), ("container-toolkit-missing", 0.3)),
        "no nvidia-smi in the container: the runtime injected no driver utilities",
        context=CONTAINER,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        # TensorFlow logs this from tsl/cuda/cudart_stub.cc (GetDsoHandle) when it cannot load
        # the CUDA runtime library (DsoLoader::GetCudaRuntimeDsoHandle: libcudart of the CUDA
        # it was built for), whatever the driver's state: a TensorFlow without its CUDA
        # libraries (pip's `tensorflow` on Linux gets them only as `tensorflow[and-cuda]`) or
        # a system CUDA of another major than the build's. The words say "drivers"; the code
        # loads the runtime.
        r"Could not find cuda drivers on your machine",
        (("cpu-only-build", 0.45), ("library-conflict", 0.3)),
        "TensorFlow could not load the CUDA runtime library (libcudart) it was built for",
        decides='python -c "import tensorflow as tf; print(tf.sysconfig.get_build_info())" '
        "(its cuda_version) against `pip list | grep nvidia-cuda-runtime` and "
        "`ldconfig -p | grep libcudart`",
    ),
    Signature(
        _NO_DRIVER_FOUND,
        (("driver-not-loaded", 0.6), ("container-driver-capabilities", 0.3)),
        "the framework found no NVIDIA driver",
        unless=CONTAINER + "|" + KUBERNETES,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        _NO_DRIVER_FOUND,
        (("container-driver-capabilities", 0.75), ("container-runtime-not-nvidia", 0.35)),
        "no NVIDIA driver inside a container: the runtime did not inject the compute libraries",
        context=CONTAINER,
        unless=KUBERNETES,
        decides="`env | grep NVIDIA` in the container (NVIDIA_DRIVER_CAPABILITIES must include "
        "compute)",
    ),
    Signature(
        _NO_DRIVER_FOUND,
        (("container-runtime-not-nvidia", 0.7), ("container-driver-capabilities", 0.4)),
        "no NVIDIA driver inside a pod: it ran without the nvidia runtime",
        context=KUBERNETES,
        decides="the pod's runtimeClassName and containerd's default runtime",
    ),
    Signature(
        r"no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|"
        r"No CUDA GPUs are available",
        (("driver-not-loaded", 0.45), ("container-driver-capabilities", 0.3)),
        "CUDA sees no GPU: no driver, or CUDA_VISIBLE_DEVICES hides them all",
        unless=CONTAINER + "|" + KUBERNETES,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        r"no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|"
        r"No CUDA GPUs are available",
        (("container-driver-capabilities", 0.65), ("container-runtime-not-nvidia", 0.35)),
        "CUDA sees no GPU inside a container: none was passed in (--gpus, "
        "NVIDIA_VISIBLE_DEVICES) or the runtime is not nvidia",
        context=CONTAINER + "|" + KUBERNETES,
        decides=_NO_DEVICE_DECIDES,
    ),
    Signature(
        r"CUDA unknown error\W+this may be due to an incorrectly set up environment|"
        r"failed call to cuInit:?\s*(?:CUDA_ERROR_UNKNOWN|UNKNOWN ERROR)",
        (("driver-not-loaded", 0.45), ("launch-failure", 0.3)),
        "CUDA error 999 at initialisation: a wedged driver (often nvidia_uvm after suspend/resume)",
        decides="`nvidia-smi` and `lsmod | grep nvidia_uvm`; after a suspend: "
        "`sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm`",
    ),
    Signature(
        # the open kernel module's RmInitAdapter() (src/nvidia/arch/nvalloc/unix/src/osinit.c)
        # prints its reason for giving up, then jumps to the "RmInitAdapter failed! (...)"
        # banner: "Cannot initialize GSP firmware RM" when kgspInitRm fails and "<step> failed,
        # bailing out of RmInitAdapter" for the other steps. NV_PRINTF prefixes the function's
        # name ("NVRM: GPU0 RmInitAdapter: Cannot initialize ..."), which a pasted excerpt keeps
        # when the banner after it is cut off; the name is required so a sentence naming the
        # words does not count
        r"RmInitAdapter failed|rm_init_adapter failed|"
        r"RmInitAdapter: Cannot initialize GSP firmware RM|failed, bailing out of RmInitAdapter",
        (("driver-probe-failed", 0.95),),
        "the driver could not initialise the GPU",
    ),
    Signature(
        # the kernel module's own lines (nv.c): "NVRM: No NVIDIA GPU found." and "NVRM: No NVIDIA
        # graphics adapter probed!"; applications print "No NVIDIA GPU found" for their own checks
        # (Unsloth's "No NVIDIA GPU found? Unsloth currently only supports GPUs!"), so that
        # wording counts only with the NVRM prefix
        r"NVRM:\s*No NVIDIA GPUs? found|No NVIDIA graphics adapters? probed|"
        r"No NVIDIA GPUs? probed|"
        r"NVIDIA probe routine (?:was not called|failed) for \d+ device|"
        r"nouveau\W.{0,60}(?:in use|is loaded|currently loaded)|" + _NO_GPU_INITIALISED,
        (("driver-probe-failed", 0.9),),
        "the driver module loaded but did not take the GPU",
    ),
    # nv.c's init prints "No NVIDIA graphics adapter found!" when it counts no NVIDIA GPU it
    # supports on the PCI bus (nvos_count_devices() == 0, before any probe) and returns -ENODEV:
    # none is visible (switched off by a hybrid laptop's integrated-only mode or the BIOS, or
    # absent) or only GPUs this release ignores (its legacy-driver lines come first). The module
    # never took a GPU, which no probe's failure explains: a low candidate only
    Signature(
        r"No NVIDIA graphics adapters? found",
        (("driver-probe-failed", 0.4),),
        "the nvidia module counted no NVIDIA GPU it supports on the PCI bus and did not load",
        decides="`lspci -nn | grep -i nvidia`: no line means the GPU is off the bus (a hybrid "
        "laptop's integrated-only mode, the BIOS) or absent; an NVRM line before this one that "
        "names a legacy driver means the GPU needs that driver branch",
    ),
    Signature(
        _BAR_INVALID,
        (("driver-probe-failed", 0.9),),
        "the GPU's PCI memory region (BAR) as the firmware or hypervisor assigned it is unusable "
        "(0M, or outside a window the kernel maps): the driver's probe refuses the GPU",
        decides="`lspci -vv -s <bus id>` (the Region sizes) and the BAR line after this one; "
        "on bare metal the BIOS's Above 4G decoding, on a VM its 64-bit MMIO window "
        "(OVMF X-PciMmio64Mb); `pci=realloc` on the kernel command line",
    ),
    # NVRM wraps its messages over lines that each start "NVRM:"; the flat text keeps them.
    # nv-pci.c's refusal by the open kernel module ("...is not supported by open nvidia.ko
    # because it does not include the required GPU System Processor (GSP)"): the open modules run
    # only GPUs with a GSP (Turing and later; the driver README's "Open Linux Kernel Modules"), so
    # the same release's proprietary module takes the GPU
    Signature(
        r"not supported by"
        + _NVRM_GAP
        + r"(?:the"
        + _NVRM_GAP
        + r")?open"
        + _NVRM_GAP
        + r"nvidia\.ko",
        (("driver-probe-failed", 0.9),),
        "the open kernel module does not take this GPU: it runs only GPUs with a GSP (Turing "
        "or later)",
        needs=("not supported by",),
        fixes=(
            (
                "driver-probe-failed",
                (
                    "install the proprietary kernel modules of the same driver instead of the "
                    "open ones (the runfile's --kernel-module-type=proprietary, or the "
                    "distribution's package without -open, e.g. nvidia-dkms rather than "
                    "nvidia-open-dkms); `modinfo nvidia | grep license` says which is loaded "
                    "(Dual MIT/GPL: open)",
                ),
            ),
        ),
    ),
    # R515-R525's open module refused GPUs other than data-center ones unless asked ("Open
    # nvidia.ko is only ready for use on Data Center GPUs", then the README's
    # NVreg_OpenRmEnableUnsupportedGpus kernel module parameter)
    Signature(
        r"Open nvidia\.ko is only ready for use on Data Center GPUs",
        (("driver-probe-failed", 0.9),),
        "this release's open kernel module takes only data-center GPUs unless told to",
        fixes=(
            (
                "driver-probe-failed",
                (
                    "load the open module with NVreg_OpenRmEnableUnsupportedGpus=1 (a GeForce or "
                    "workstation GPU of Turing or later), or install the proprietary modules",
                ),
            ),
        ),
    ),
    # nv-pci.c's refusal by a driver release whose list does not hold the GPU ("...is not
    # supported by the NVIDIA 575.64.03 driver release"): a newer branch, or a legacy branch for
    # an old GPU, takes it
    Signature(
        r"not supported by"
        + _NVRM_GAP
        + r"the(?:"
        + _NVRM_GAP
        + r"(?:NVIDIA|Linux|[\d.]+)){1,3}"
        + _NVRM_GAP
        + r"driver"
        + _NVRM_GAP
        + r"release",
        (("driver-probe-failed", 0.9),),
        "the module loaded but this driver release does not list the GPU",
        needs=("not supported by",),
        fixes=(
            (
                "driver-probe-failed",
                (
                    "install a driver branch whose supported-products list (the README's "
                    "Appendix A) holds this GPU: a newer branch for a newer GPU, the legacy "
                    "branch for an older one",
                ),
            ),
        ),
    ),
    # The GSP firmware ships with the driver packages under /lib/firmware/nvidia/<version>/: a
    # module that finds none for its own version is older or newer than the installed packages.
    Signature(
        r"Direct firmware load for nvidia/[\d.]+/gsp\w*\.bin failed|"
        r"RmFetchGspRmImages:?\s*No firmware image found",
        (("nvml-driver-mismatch", 0.7),),
        "no GSP firmware for the loaded module's version: the module and the installed driver "
        "packages are different versions",
        needs=("direct firmware load", "no firmware image found"),
        decides="`modinfo -F version nvidia` against the installed packages and "
        "`ls /lib/firmware/nvidia/`",
    ),
    Signature(
        r"(?:^|\W)No devices were found\b",
        (("driver-probe-failed", 0.7), ("container-driver-capabilities", 0.2)),
        "nvidia-smi reached the driver but it has no GPU",
        needs=("no devices were found",),
        decides="`dmesg | grep -iE 'nvrm|nouveau'` and `lspci | grep -i nvidia`",
    ),
    Signature(
        r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY",
        (("fabric-manager-down", 0.9),),
        "CUDA error 802: the NVSwitch fabric is not set up (Fabric Manager)",
    ),
    Signature(
        # nv-fabricmanager's start-up check (FM user guide: Fabric Manager and the driver must
        # be of the exact same version; otherwise FM exits and the fabric is never set up)
        r"fabric manager NVIDIA GPU driver interface version \S+ (?:don|doesn|do not|does not)"
        r"\W{0,3}t? match with driver version",
        (("fabric-manager-down", 0.9),),
        "Fabric Manager is not of the driver's exact version: it refuses to start",
        needs=("fabric manager nvidia gpu driver interface version",),
    ),
    Signature(
        # NCCL's NVLS transport (src/transport/nvls.cc) binding NVLink SHARP multicast memory:
        # NCCL's own message names the Fabric Manager or the NVSwitches
        r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory|"
        r"error in the Fabric Manager or NVSwitches",
        (("fabric-manager-down", 0.8),),
        "NCCL could not bind NVLink SHARP multicast memory (usually the Fabric Manager or the "
        "NVSwitches are not set up)",
        decides=_FABRIC_DECIDES,
    ),
    Signature(
        # the same NVLS transport failing at a CUDA multicast call, from NCCL releases whose
        # message does not yet name the Fabric Manager
        r"nvls\.cc:\d+ NCCL WARN Cuda failure",
        (("fabric-manager-down", 0.5),),
        "a CUDA multicast call of NCCL's NVLS (NVSwitch) transport failed",
        decides=_FABRIC_DECIDES,
    ),
    Signature(
        r"fabric ?manager\W.{0,80}(?:not running|failed|inactive|not active|not started|"
        r"is not up)|"
        r"(?:lack of|missing|without|no|not installed)\W{1,3}(?:the\W)?(?:nvidia-)?fabric ?manager",
        (("fabric-manager-down", 0.85),),
        "the Fabric Manager service is not running (or not installed)",
        needs=("fabric",),
    ),
    Signature(
        _CUDA_ERROR_46 + r"|CUDA_ERROR_DEVICES_UNAVAILABLE",
        (("mig-no-instances", 0.5), ("compute-mode-exclusive", 0.4)),
        "CUDA error 46: no device this process may use (MIG without instances, or an "
        "exclusive-mode GPU that another process holds)",
        decides="`nvidia-smi -q | grep -iE 'mig mode|compute mode' -A1` and `nvidia-smi -L`",
    ),
    Signature(
        _CUDA_ERROR_46,
        (("mig-no-instances", 0.85),),
        "CUDA error 46 on a GPU with MIG enabled",
        context=r"\bMIG\b",
    ),
    Signature(
        _CUDA_ERROR_46,
        (("compute-mode-exclusive", 0.85),),
        "CUDA error 46 on a GPU in an exclusive compute mode",
        # nvidia-smi's table prints the mode in its "Compute M." column: "E. Process"
        context=r"exclusive[_ ]process|compute[_ ]mode|\bE\. ?(?:Process|Thread)\b",
    ),
    # --- hardware ----------------------------------------------------------------------------
    Signature(
        r"fallen off (?:of )?the bus|GPU is lost|GPU_IS_LOST|GpuIsLost",
        (("gpu-fallen-off-bus", 0.95),),
        "the GPU stopped answering on PCIe",
    ),
    Signature(
        r"Unable to determine the device handle for (?:GPU\s*)?[\w:.]+:?\s*Unknown Error",
        (("gpu-fallen-off-bus", 0.55), ("driver-probe-failed", 0.3)),
        "nvidia-smi cannot reach one GPU",
        decides="`dmesg -T | grep -iE 'xid|fallen|nvrm'` on the node",
    ),
    Signature(
        r"uncorrectable ECC error|ECC_UNCORRECTABLE|cudaErrorECCUncorrectable|"
        r"uncorrectable memory error",
        (("ecc-uncorrectable", 0.95),),
        "an uncorrectable memory (ECC) error on the GPU",
    ),
    Signature(
        r"double[- ]bit (?:ECC )?error|row ?remap(?:ping)? failure|"
        r"Remapping Failure (?:Occurred)?\s*:\s*Yes",
        (("ecc-uncorrectable", 0.8),),
        "a counter of uncorrectable memory errors",
        needs=("bit", "remap"),
    ),
    # --- NVIDIA's video engines (NVENC / NVDEC) ---------------------------------------------
    Signature(
        _NVENC_API_NEWER_THAN_DRIVER,
        (("nvenc-driver-too-old", 0.95),),
        "the driver is older than the NVENC API version the encoder was built against",
    ),
    Signature(
        _NVENC_MINIMUM_DRIVER,
        (("nvenc-driver-too-old", 0.5), ("container-no-video-capability", 0.35)),
        "FFmpeg names the driver NVENC needs: after a version check, or after libnvidia-encode "
        "failed to load",
        unless=_VIDEO_LIBRARY_NOT_OPENED + "|" + _NVENC_API_NEWER_THAN_DRIVER,
        decides='the line before it: "Driver does not support the required nvenc API version" '
        '(the driver) or "Cannot load libnvidia-encode.so.1" (the library); `nvidia-smi`',
    ),
    Signature(
        _NVENC_DEVICE_REFUSED,
        (("video-engine-unsupported", 0.9),),
        "the encoder API refused the device: the GPU has no NVENC",
    ),
    Signature(
        _NVENC_CAPABILITY_MISSING,
        (("video-engine-unsupported", 0.85),),
        "the GPU's encoder reports it lacks the format asked for",
    ),
    Signature(
        _NVENC_PROVIDED_DEVICE_LACKS,
        (("video-engine-unsupported", 0.7),),
        "the GPU given to the encoder lacks an NVENC feature the settings ask for",
        decides=_VIDEO_ENGINE_DECIDES,
    ),
    Signature(
        _NVENC_NO_CAPABLE_DEVICE,
        (("video-engine-unsupported", 0.6), ("nvenc-session-limit", 0.3)),
        "no GPU passed FFmpeg's NVENC checks (a session refused, or a capability missing)",
        unless=_NVENC_DEVICE_REFUSED,  # the refusal above states the reason
        decides=_VIDEO_ENGINE_DECIDES,
    ),
    Signature(
        _NVDEC_CAPABILITY_MISSING,
        (("video-engine-unsupported", 0.7),),
        "the GPU's decoder reports it cannot decode this codec or format",
        decides=_VIDEO_ENGINE_DECIDES,
    ),
    Signature(
        _NVENC_SESSION_REFUSED,
        (("nvenc-session-limit", 0.6),),
        "the encoder refused one more session: a GeForce board at its concurrent-session limit, "
        "or the GPU's memory full",
    ),
    Signature(
        _VIDEO_LIBRARY_NOT_OPENED,
        (("container-no-video-capability", 0.85),),
        "a container without the driver's video libraries: NVIDIA_DRIVER_CAPABILITIES lacks "
        "`video`",
        context=CONTAINER,
    ),
    Signature(
        _VIDEO_LIBRARY_NOT_OPENED,
        (("container-no-video-capability", 0.6),),
        "the driver's video library (libnvidia-encode / libnvcuvid) is not there",
        unless=CONTAINER,
    ),
    # --- application -------------------------------------------------------------------------
    Signature(
        _DEVICE_ASSERT_TRIGGERED,
        (("device-assert", 0.95),),
        "a CUDA kernel's assertion fired (an out-of-range index)",
    ),
    Signature(
        _KERNEL_ASSERTION_FAILED,
        (("device-assert", 0.95),),
        "the failed assertion in a CUDA kernel names the condition",
        needs=("assertion",),
    ),
    Signature(
        _INDEX_SELECT_BOUND,
        (("device-assert", 0.9),),
        "ATen's index_select kernel asserts its index below the indexed dimension's size: an "
        "index past the table (a token or position id past an embedding)",
        unless=f"{_DEVICE_ASSERT_TRIGGERED}|{_KERNEL_ASSERTION_FAILED}",
        needs=("srcselectdimsize",),
    ),
    # XGBoost's bounds check inside its kernels (src/common/span.h, KERNEL_CHECK behind
    # SPAN_CHECK: printf("Kernel error:\nIn: %s, \tline: %d\n\t%s\n\tExpecting: %s\n", file,
    # line, function, condition), then asm("trap;")): a Span index or offset out of range in a
    # kernel — a device-side assertion by another name; the trap surfaces as the launch failure
    # that may follow it in the paste.
    Signature(
        r"Kernel error:\s*In:\s*\S+\.(?:h|hpp|cuh?)[,:]\s*(?:line:\s*)?\d+.{0,400}?"
        r"Expecting:\s*\S",
        (("device-assert", 0.9),),
        "XGBoost's in-kernel bounds check failed (an index or offset outside a Span) and trapped",
        needs=("kernel error:",),
    ),
    # Blender Cycles names a CUresult by cuew's string table (cuewErrorString:
    # CUDA_ERROR_ILLEGAL_ADDRESS -> "Illegal address") inside its own formats: cuda_assert's
    # "CUDA error: <name> in <call>, line N", "CUDA error at <call>: <name>", and the device
    # queue's "<name> in CUDA queue <operation> (<kernels>)". "Illegal address" alone is other
    # programs' word too (Modbus, X authority), so it is read only inside those formats.
    # cudaGetErrorString's "an illegal memory access was encountered" is long enough that an
    # issue title quoting it after a path is cut inside its last word ("…was encounte"): the
    # cut string is still only CUDA's.
    Signature(
        r"an illegal memory access was encountered|an illegal memory access was encount\w*|"
        r"cudaErrorIllegalAddress|"
        r"CUDA_ERROR_ILLEGAL_ADDRESS|CUDA error:\s*Illegal address in\b|"
        r"CUDA error at [^:\n]{1,80}:\s*Illegal address\b|Illegal address in CUDA queue\b",
        (("illegal-memory-access", 0.65), ("ecc-uncorrectable", 0.15)),
        "a kernel read or wrote outside its memory",
        decides=_XID_DECIDES,
    ),
    Signature(
        r"misaligned address|cudaErrorMisalignedAddress|CUDA_ERROR_MISALIGNED_ADDRESS",
        (("illegal-memory-access", 0.6),),
        "a kernel accessed memory at an address not aligned for its type",
        decides=_XID_DECIDES,
    ),
    # compute-sanitizer's memcheck (and cuda-memcheck before it) names each bad access by the
    # memory space ("Invalid __global__ write of size 4 bytes ... is out of bounds" or "... is
    # misaligned"): the tool checks every address in software, so the fault is the kernel's code
    # in the frame it names, never a memory error of the board.
    Signature(
        r"Invalid __(?:global|shared|local)__ (?:read|write|atomic)",
        (("illegal-memory-access", 0.9),),
        "compute-sanitizer caught a kernel reading or writing outside its allocations (the "
        "kernel and thread it names)",
    ),
    # The same hardware exceptions as cuda-gdb and the sanitizer name them (CUDA_EXCEPTION_14
    # "Warp Illegal Address", _5 "Warp Out-of-range Address", _6 "Warp Misaligned Address"):
    # what the runtime reports as cudaErrorIllegalAddress / cudaErrorMisalignedAddress.
    Signature(
        r"Warp (?:Illegal|Out-of-range|Misaligned) Address",
        (("illegal-memory-access", 0.65),),
        "a warp of a kernel accessed an address it must not (the debugger's name of the fault)",
        decides=_XID_DECIDES,
    ),
    Signature(
        r"an illegal instruction was encountered|cudaErrorIllegalInstruction|"
        r"CUDA_ERROR_ILLEGAL_INSTRUCTION",
        (("illegal-memory-access", 0.5), ("launch-failure", 0.3)),
        "a kernel executed an illegal instruction",
        decides=_XID_DECIDES,
    ),
    Signature(
        r"unspecified launch failure|cudaErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED",
        (("launch-failure", 0.55), ("gpu-fallen-off-bus", 0.2), ("ecc-uncorrectable", 0.15)),
        "CUDA error 719: a kernel failed and the driver gives no reason",
        decides=_XID_DECIDES,
    ),
    # CUDA error 702 exists only where kernel timeouts are on (cudaDevAttrKernelExecTimeout: a GPU
    # that drives a display): the message states the cause. Beside another kernel fault in the
    # same paste (an illegal address or instruction) the text cannot say which came first.
    Signature(
        _LAUNCH_TIMEOUT,
        (("launch-timeout", 0.9),),
        "CUDA error 702: the display watchdog killed a kernel that ran too long (the GPU drives "
        "a display; Windows TDR, or an X server on Linux)",
        unless=_OTHER_KERNEL_FAULT,
    ),
    Signature(
        _LAUNCH_TIMEOUT,
        (("launch-timeout", 0.6),),
        "CUDA error 702 (the display watchdog) beside another kernel fault in the same paste",
        context=_OTHER_KERNEL_FAULT,
        decides="CUDA_LAUNCH_BLOCKING=1 (which error comes first) and whether the GPU drives a "
        "display (deviceQuery: 'Run time limit on kernels')",
    ),
    # CUDA error 701: the launch asks for more per-block resources (registers × threads, shared
    # memory, parameter space) than the GPU has; nothing ran, the configuration is the cause.
    # PyCUDA (src/cpp/cuda.hpp's error table) and the Go and Rust bindings spell the same
    # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES "launch out of resources".
    Signature(
        r"too many resources requested for launch|cudaErrorLaunchOutOfResources|"
        r"(?:CUDA|hip)_?ERROR_LAUNCH_OUT_OF_RESOURCES|hipErrorLaunchOutOfResources|"
        r"\blaunch out of resources\b",
        (("launch-out-of-resources", 0.9),),
        "CUDA error 701: the kernel's launch asks for more registers, shared memory or threads per "
        "block than this GPU has",
        needs=(
            "too many resources",
            "launchoutofresources",
            "launch_out_of_resources",
            "launch out of resources",
        ),
    ),
    # CUDA error 9 (cudaErrorInvalidConfiguration, cuda_runtime_api.h): "a kernel launch is
    # requesting resources that can never be satisfied by the current device" — more shared
    # memory per block, or more threads or blocks, than it has (701's documentation calls the two
    # similar). A grid of 0 blocks (an empty input reaching the kernel) returns it too, so it is
    # the usual reading, not the stated one.
    Signature(
        r"invalid configuration argument|cudaErrorInvalidConfiguration|"
        r"hipErrorInvalidConfiguration",
        (("launch-out-of-resources", 0.6),),
        "CUDA error 9: the launch asks for what this GPU can never give — more threads per block "
        "or shared memory than it has, or more blocks than a grid dimension holds (65535 in y "
        "and z); an empty input's grid of 0 blocks gives it too",
        decides="CUDA_LAUNCH_BLOCKING=1 (the kernel whose launch fails), then its grid and block "
        "sizes against the GPU's limits (deviceQuery) and the input's shape (0 elements, or a "
        "batch dimension past 65535)",
    ),
    Signature(
        _LIBRARY_EXECUTION_FAILED,
        (("illegal-memory-access", 0.4), ("device-assert", 0.25), ("gpu-arch-unsupported", 0.2)),
        "a cuBLAS/cuDNN kernel failed (bad inputs, an earlier asynchronous error, or the build)",
        decides="CUDA_LAUNCH_BLOCKING=1 (the first failing kernel) or one run on CPU",
    ),
    # cuBLAS/cuDNN report a kernel fault that happened before their call (CUDA errors are
    # sticky and asynchronous): an out-of-range index in the same paste (PyTorch's index
    # kernels assert "index out of bounds") is that earlier fault.
    Signature(
        r"\bindex out of (?:bounds|range)",
        (("device-assert", 0.6),),
        "an out-of-range index before the library call: cuBLAS/cuDNN fail on the fault it left",
        context=_LIBRARY_EXECUTION_FAILED,
        decides="CUDA_LAUNCH_BLOCKING=1 (the first failing kernel) or one run on CPU",
    ),
    # cuFFT's catch-all status. The usual reading: cuFFT has no kernels for the GPU — unlike
    # cuBLAS it does not run on a later minor of its major (pytorch#88038: CUDA 11.7's cuFFT on
    # an RTX 4090, sm_89, fixed by 11.8); next, plan creation without workspace when the GPU is
    # nearly full (pytorch#119420). arch_cuda decides when the GPU and the CUDA are named.
    Signature(
        r"CUFFT_INTERNAL_ERROR",
        (("gpu-arch-unsupported", 0.45), ("oom-too-big", 0.3)),
        "cuFFT failed inside: a cuFFT older than the GPU (CUDA ≤ 11.7 on Ada/Hopper), or no "
        "memory left for the FFT plan's workspace",
        decides='python -c "import torch; print(torch.version.cuda, '
        'torch.cuda.get_device_name())" (Ada/Hopper need cuFFT from CUDA ≥ 11.8) and '
        "`nvidia-smi` memory.used when it fails",
    ),
    # cuRAND: "kernel launch failure" — its generator kernel could not run: most often a build
    # with no code for the GPU (CUDA 7.5 on Pascal, NVIDIA/caffe#270), else an earlier fault.
    Signature(
        r"CURAND_STATUS_LAUNCH_FAILURE",
        (("gpu-arch-unsupported", 0.45), ("launch-failure", 0.3)),
        "cuRAND could not launch its kernel: a CUDA older than the GPU, or an earlier fault",
        decides="the GPU (`nvidia-smi -L`) against the CUDA the program was built with "
        "(`ldd` on it: libcurand.so.N); CUDA_LAUNCH_BLOCKING=1",
    ),
    Signature(
        r"failed to create cublas handle:?\s*CUBLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)",
        (("oom-framework-pool", 0.6),),
        "TensorFlow's stream executor could not make a cuBLAS handle: TensorFlow maps nearly all "
        "GPU memory at start, leaving cuBLAS none",
        decides="rerun with TF_FORCE_GPU_ALLOW_GROWTH=true (it works: the pool was the cause) "
        "and check `nvidia-smi` for other processes",
    ),
    Signature(
        r"CUBLAS_STATUS_ALLOC_FAILED|CUBLAS_STATUS_NOT_INITIALIZED|CUDNN_STATUS_ALLOC_FAILED",
        (("oom-too-big", 0.45), ("oom-other-process", 0.35)),
        "cuBLAS/cuDNN could not allocate its workspace or handle: the GPU is (nearly) full",
        decides="`nvidia-smi` (memory.used, other processes) when it fails",
    ),
    # TensorRT's builder when the memory an engine build asks for is not there: a fatal build
    # failure (not the tactic skips TensorRT recovers from by trying other tactics).
    Signature(
        r"Requested amount of GPU memory\s*\(\d+ bytes\)\s*could not be allocated",
        (("oom-too-big", 0.65), ("oom-other-process", 0.3)),
        "TensorRT's builder could not get the memory the engine build asked for: the build's "
        "largest shapes (max batch, input and output lengths) do not fit beside the weights",
        context=r"Engine building failed|Failed to build (?:the )?(?:TensorRT )?engine|"
        r"Engine could not be created",
        decides="the requested bytes against `nvidia-smi` memory.total/used while the build "
        "runs; rebuild with smaller max_batch_size / max_input_len / max_seq_len",
    ),
    Signature(
        # TensorFlow's convolution (core/kernels/conv_ops*.cc) raises "Failed to get convolution
        # algorithm. This is probably because cuDNN failed to initialize, ..." when cuDNN
        # gives it no algorithm: the same cuDNN start-up failure, also quoted cut after its
        # first sentence; the ROCm build's sentence names MIOpen instead
        r"Could not create cudnn handle|cuDNN failed to initialize|CUDNN_STATUS_INTERNAL_ERROR|"
        r"CUDNN_STATUS_NOT_INITIALIZED|"
        r"Failed to get convolution algorithm(?!\.?\s*This is probably because MIOpen)",
        (("oom-framework-pool", 0.5), ("library-conflict", 0.3), ("oom-other-process", 0.25)),
        "cuDNN could not start: no memory left for it (a framework took the GPU), or the wrong "
        "cuDNN",
        unless=TORCH_NOT_TF,
        decides="`nvidia-smi` while it fails; the 'Loaded runtime CuDNN library' line in the log; "
        "TF_FORCE_GPU_ALLOW_GROWTH=true to confirm",
    ),
    # The same statuses under PyTorch (aten/src/ATen/cudnn/Handle.cpp: cudnnCreate): the handle
    # or a call's internal allocation failed — cudnnCreate allocates outside PyTorch's caching
    # allocator, so memory the allocator has cached is not free to it; else a cuDNN the build
    # does not load right (pytorch#53458, #5942).
    Signature(
        r"CUDNN_STATUS_NOT_INITIALIZED|CUDNN_STATUS_INTERNAL_ERROR|cuDNN failed to initialize",
        (("oom-too-big", 0.45), ("oom-other-process", 0.3), ("library-conflict", 0.3)),
        "cuDNN could not make its handle or allocate inside a call: the GPU is (nearly) full — "
        "this job's tensors and cached blocks, or another process — or a cuDNN the build does "
        "not fit (PyTorch keeps no preallocated pool)",
        context=TORCH_NOT_TF,
        decides=_DECIDES_TORCH_CUDNN,
    ),
    # PyTorch's convolution search (aten/src/ATen/native/cudnn/Conv_v7.cpp try_all; Conv_v8.cpp
    # for the cuDNN v8 API: "GET/FIND was unable to find an engine") tries each algorithm and
    # skips those whose workspace allocation runs out of memory; this is raised when none ran.
    # Most often the GPU was nearly full; else a cuDNN that does not fit the build (a system
    # libcudnn shadowing the wheel's), or a shape/dtype no engine supports (bf16 before sm_80).
    Signature(
        r"Unable to find a valid cuDNN algorithm to run convolution",
        (("oom-too-big", 0.45), ("oom-other-process", 0.25), ("library-conflict", 0.2)),
        "no cuDNN convolution algorithm ran: usually none got its workspace (the GPU nearly "
        "full), else a cuDNN or a shape/dtype it does not support",
        decides=_DECIDES_TORCH_CUDNN,
    ),
    Signature(
        r"(?:GET|FIND) was unable to find an engine to execute this computation",
        (("oom-too-big", 0.4), ("library-conflict", 0.3), ("oom-other-process", 0.25)),
        "no cuDNN engine ran: the GPU nearly full (no workspace), a cuDNN that does not fit "
        "the build (a system libcudnn before the wheel's), or a dtype/shape no engine supports",
        decides=_DECIDES_TORCH_CUDNN + "; the dtype (bf16 needs sm_80)",
        needs=("was unable to find an engine",),
    ),
    Signature(
        r"Profiling failure on cuDNN engine",
        (("oom-framework-pool", 0.8),),
        "XLA's cuDNN autotuning ran out of memory (the framework's pool holds it)",
    ),
    # XLA's convolution autotuner (gpu_conv_algorithm_picker) when no algorithm ran: usually the
    # preallocated pool left cuDNN no workspace, sometimes a cuDNN the build did not expect.
    Signature(
        r"Failed to determine best cudnn convolution algorithm",
        (("oom-framework-pool", 0.6), ("library-conflict", 0.3)),
        "XLA's cuDNN convolution autotuning found no algorithm that ran: usually no memory left "
        "beside the framework's pool",
        decides="rerun with XLA_PYTHON_CLIENT_PREALLOCATE=false (or TF allow_growth / a lower "
        "memory fraction): if it then runs, the pool was the cause",
    ),
    # SGLang sizes its KV cache pool from --mem-fraction-static after loading the weights and
    # raises this when the pool would hold no token (pool_configurator / model_runner:
    # max_total_num_tokens <= 0); later releases name the KV cache in the message.
    Signature(
        r"Not enough memory\.?\s*Please try to increase --mem[-_]fraction[-_]static|"
        r"Not enough memory to allocate KV cache|"
        r"leave no GPU memory for the KV cache",
        (("oom-kv-cache", 0.9),),
        "the serving engine has no memory left for its KV cache after the weights",
        needs=("not enough memory", "kv cache"),
    ),
    # SGLang's profile of the token pool (model_runner: "max_total_tokens=N is larger than the
    # profiled value M. Use the profiled value instead."): a negative M is a pool with less than
    # no memory — the weights (and the static fraction's reserve) already fill the GPU.
    Signature(
        r"is larger than the profiled value\s*-\d",
        (("oom-kv-cache", 0.85),),
        "the serving engine's profiled KV-cache pool is negative: nothing is left after the "
        "weights",
        needs=("profiled value",),
    ),
    # vLLM V1 warms the sampler (and pooler) with max_num_seqs dummy requests while profiling
    # (gpu_model_runner._dummy_sampler_run) and names its own sizing knobs when that runs out:
    # the engine's budget, not the model alone, is too big for the GPU.
    Signature(
        r"CUDA out of memory occurred when warming up (?:the )?(?:sampler|pooler)",
        (("oom-kv-cache", 0.6), ("oom-too-big", 0.3)),
        "vLLM ran out of memory warming up with max_num_seqs dummy requests: the engine's sizing "
        "(max_num_seqs, gpu_memory_utilization) does not fit beside the weights",
        decides="vLLM's 'Memory profiling' / 'model weights take' log lines, and a rerun with a "
        "lower --max-num-seqs: if it then starts, the engine's sizing was the cause",
    ),
    # CUDA graphs are captured after the KV cache is allocated, in a pool outside the share of
    # the GPU gpu_memory_utilization (SGLang: mem_fraction_static) gave the weights and the
    # cache: an engine whose share leaves too little beside it runs out while capturing (vLLM's
    # own hint: "If out-of-memory error occurs during cudagraph capture, consider decreasing
    # gpu_memory_utilization or switching to eager mode"). The engine's memory split, not the
    # model, is at fault; read only in a serving engine's paste.
    Signature(
        r"(?:CUDA[- ]?graphs?|cudagraphs?)[- ]captur.{0,300}?(?:out of memory|OutOfMemoryError)|"
        r"capture_end\(\).{0,600}?(?:out of memory|OutOfMemoryError)|"
        # SGLang's CudaGraphRunner wraps the error: "Capture cuda graph failed: <the error>"
        r"Capture CUDA graph failed:?.{0,300}?(?:out of memory|OutOfMemoryError)|"
        r"(?:out of memory|OutOfMemoryError).{0,300}?(?:during|while|when) (?:capturing "
        r"(?:CUDA[- ]?graphs?|cudagraphs?)|(?:CUDA[- ]?graphs?|cudagraphs?)[- ]captur)",
        (("oom-kv-cache", 0.7), ("oom-too-big", 0.25)),
        "out of memory while the serving engine captured its CUDA graphs: the graph pool did not "
        "fit beside the share of the GPU the engine took for weights and KV cache",
        context=r"vllm|sglang|gpu[-_ ]memory[-_ ]utilization|mem[-_ ]fraction[-_ ]static|"
        r"text[-_]generation|tensorrt[-_]llm|lmdeploy|kv[-_ ](?:cache|pool)",
        decides="a rerun with a lower --gpu-memory-utilization (or --enforce-eager, or fewer "
        "cudagraph capture sizes): if it then starts, the engine's memory split was the cause",
        needs=("captur",),
    ),
    # --- distributed -------------------------------------------------------------------------
    Signature(
        r"posix_fallocate failed|failed to extend \S*shm\S* to \d+ bytes|"
        r"Error while creating shared memory segment|shm_open failed|"
        r"(?:unable|failed) to (?:create|open) shared memory (?:file|segment)",
        (("nccl-shm", 0.95),),
        "NCCL could not create its shared-memory segment",
        needs=("fallocate", "shm", "shared memory"),
    ),
    Signature(
        r"\bnccl-shm\b|NCCL WARN.{0,100}/dev/shm",
        (("nccl-shm", 0.85),),
        "an NCCL warning about /dev/shm",
        unless=_SHM_ATTACH,
        needs=("nccl-shm", "/dev/shm"),
    ),
    Signature(
        # NCCL's shmutils.cc when a rank opens a peer's segment: the creator's segment is not
        # there (its creation failed, the ranks do not share one /dev/shm, or it was removed) —
        # a candidate, not the creation failure the signature above reads
        _SHM_ATTACH,
        (("nccl-shm", 0.45),),
        "NCCL could not open a peer rank's shared-memory segment (it was never made, or this "
        "rank sees another /dev/shm)",
        decides="whether every rank of the node sees one /dev/shm (one container, or --ipc=host "
        "for each) and `df -h /dev/shm`; NCCL_DEBUG=INFO on every rank (a creation WARN on the "
        "peer); another NCCL release",
        needs=("attaching to shared memory",),
    ),
    Signature(
        r"Bootstrap\s*:\s*no socket interface found|No (?:usable )?(?:listening )?interface "
        r"found in the same subnet|NET/Socket\s*:\s*no (?:usable )?(?:listening )?interface",
        (("nccl-socket-interface", 0.95),),
        "NCCL found no network interface that reaches the peers",
        needs=("interface",),
    ),
    Signature(
        r"Bootstrap\s*:\s*Using\s*\[?\d*\]?\s*lo\s*:\s*127\.|NCCL_SOCKET_IFNAME\W{0,5}lo\b",
        (("nccl-socket-interface", 0.65),),
        "NCCL bootstraps over the loopback interface, which no other node can reach",
        context=DISTRIBUTED,
    ),
    Signature(
        # NCCL lists the interfaces it will use ("Bootstrap : Using [0]ens5:… [1]veth…:…", NCCL
        # ≤ 2.3's "NET : Using interface lo:127.0.0.1"); only docker* and lo are excluded by
        # default, so a loopback, a container's veth pair or a bridge among them is an address
        # the other nodes cannot reach
        r"(?:Bootstrap|NET(?:/Socket)?)\s*:\s*Using (?:interface )?(?:\[\d+\]\S+\s+){0,8}"
        r"(?:\[\d+\])?(?:lo|veth[0-9a-z]*|docker\d*|virbr\d*|br-[0-9a-f]+)\s*:",
        (("nccl-socket-interface", 0.65),),
        "NCCL uses a loopback, container-veth or bridge interface, which no other node can reach",
        context=DISTRIBUTED,
        decides="NCCL_SOCKET_IFNAME set to the routable NIC (`ip -br addr` on every node)",
        needs=("using",),
    ),
    Signature(
        r"Unable to find address for:?\s*\S+|GLOO_SOCKET_IFNAME",
        (("nccl-socket-interface", 0.7),),
        "Gloo cannot find the interface it was told to use",
        context=DISTRIBUTED,
    ),
    Signature(
        # NCCL's socket.cc: socket() refused the address family of the interface NCCL picked (an
        # IPv6 address on a host without IPv6, or no IPv4 interface at all)
        r"Socket creation failed\s*:\s*Address family not supported",
        (("nccl-socket-interface", 0.65),),
        "NCCL could not open a socket of its interface's address family",
        context=DISTRIBUTED + r"|NCCL|socket\.h",
        decides="`ip -br addr` (an IPv4 address on the NIC); NCCL_SOCKET_IFNAME, "
        "NCCL_SOCKET_FAMILY=AF_INET",
        needs=("socket creation failed",),
    ),
    Signature(
        r"NCCL WARN.{0,160}(?:No route to host|Network is unreachable)",
        (("nccl-socket-interface", 0.6), ("rendezvous-unreachable", 0.25)),
        "NCCL's socket connection has no route to the peer",
        decides=_NCCL_DEBUG,
    ),
    Signature(
        r"NET/IB\s*:\s*Got completion (?:from peer\s*\S*\s*)?with (?:error|status)|"
        r"IBV_WC_\w{1,40}_ERR|vendor err \d+|Call to ibv_\w{1,64} failed|ibv_\w{1,64} failed",
        (("nccl-ib-transport", 0.9),),
        "an InfiniBand/RoCE work completion or verbs call failed",
        unless=_NOT_TRANSPORT,
    ),
    Signature(
        r"NET/IB\s*:.{0,100}(?:failed|error)",
        (("nccl-ib-transport", 0.75),),
        "an NCCL InfiniBand transport error",
        # net_ib.cc's size check (the ranks disagree, below), not the fabric
        unless=r"collective mismatch error",
    ),
    Signature(
        r"Connection closed by remote peer",
        (("nccl-remote-rank-died", 0.8),),
        "the peer went away: another rank exited first",
    ),
    Signature(
        # Gloo's tcp transport (pair.cc) when a read returns end-of-file: the peer's socket was
        # closed, which its process exiting does
        r"Connection closed by peer",
        (("nccl-remote-rank-died", 0.8),),
        "Gloo's connection to a peer rank was closed by the peer: that rank exited first",
        context=DISTRIBUTED,
        decides="the log of the rank at the address named (the first to fail: an exception, an "
        "out-of-memory kill, a segfault)",
    ),
    Signature(
        r"remote process exited or there was a network error|ncclRemoteError",
        (
            ("nccl-remote-rank-died", 0.5),
            ("nccl-ib-transport", 0.3),
            ("nccl-socket-interface", 0.3),
        ),
        "ncclRemoteError: NCCL's own words are \"possibly due to a network error or a remote "
        'process exiting prematurely" — a rank that died, or the network between them',
        decides="every rank's log (the first to fail) and NCCL_DEBUG=INFO (its WARN lines name "
        "NET/IB or NET/Socket)",
    ),
    Signature(
        r"Connection reset by peer|Broken pipe",
        (("nccl-remote-rank-died", 0.6),),
        "a connection between ranks broke: the other side exited",
        context=DISTRIBUTED,
    ),
    Signature(
        r"unhandled system error|ncclSystemError",
        (
            ("nccl-shm", 0.4),
            ("nccl-socket-interface", 0.3),
            ("nccl-ib-transport", 0.25),
            ("nccl-remote-rank-died", 0.2),
        ),
        "ncclSystemError: a system call NCCL made failed (shared memory, sockets, IB)",
        # NCCL's last error naming NVML's library is the failed call (nvmlwrap.cc's dlopen), not
        # shared memory or the network: the library signature reads it
        unless=r"Failed to open libnvidia-ml\.so",
        decides=_NCCL_DEBUG,
    ),
    Signature(
        r"NCCL error.{0,200}?internal error|ncclInternalError",
        (
            ("nccl-ib-transport", 0.35),
            ("nccl-socket-interface", 0.3),
            ("nccl-remote-rank-died", 0.25),
        ),
        "ncclInternalError: NCCL's transport failed (usually the network)",
        decides=_NCCL_DEBUG,
    ),
    Signature(
        # ncclInvalidUsage (5): NCCL refused a call's arguments or the communicator's set-up; its
        # WARN line says which — most often two ranks on one GPU ("Duplicate GPU detected"),
        # in NCCL ≤ 2.5 also collectives that do not match across ranks
        r"NCCL error.{0,200}?invalid usage|ncclInvalidUsage|NCCL Error 5\b",
        (("ranks-share-a-gpu", 0.35), ("collective-mismatch", 0.25)),
        "ncclInvalidUsage: NCCL refused how it was called (two ranks on one GPU, collectives that "
        "do not match, a bad argument)",
        # where the paste holds the WARN line that names the misuse, that line is the reading
        unless=r"Duplicate GPU detected|Mismatched collective detected|"
        r"Mismatched NCCL version detected",
        decides="NCCL_DEBUG=WARN: its WARN line names the misuse; each rank's LOCAL_RANK and "
        "torch.cuda.current_device()",
        needs=("invalid usage", "invalidusage", "error 5"),
    ),
    Signature(
        # NCCL's own device buffers (a few MB, allocated at init or at its first collective:
        # include/alloc.h, enqueue.cc) did not fit: the GPU was already full — usually this
        # job's own tensors and cache, else another process; the other ranks then see this
        # one's connections close
        r"NCCL WARN Cuda failure (?:2 )?'out of memory'|NCCL WARN Failed to CUDA calloc|"
        r"Last error:?\s*Cuda failure (?:2 )?'out of memory'",
        (("oom-too-big", 0.6), ("oom-other-process", 0.35)),
        "NCCL's own few-MB buffers did not fit on the GPU: it was already full",
        decides="`nvidia-smi` on that GPU when it fails: this job's memory (less batch or model "
        "per GPU; leave NCCL headroom, e.g. a lower gpu_memory_utilization) or another process's",
        needs=("cuda failure", "cuda calloc"),
    ),
    Signature(
        r"unhandled cuda error|ncclUnhandledCudaError",
        (
            ("illegal-memory-access", 0.3),
            ("oom-too-big", 0.25),
            ("launch-failure", 0.25),
            ("nccl-timeout-hang", 0.2),
        ),
        "ncclUnhandledCudaError: a CUDA call inside NCCL failed",
        decides="NCCL_DEBUG=INFO: its \"Cuda failure 'X'\" line names the CUDA error "
        "(out of memory, peer access, an earlier kernel fault)",
    ),
    # --- a rank's program diverged, or a rank was killed ----------------------------------------
    Signature(
        # NCCL ≤ 2.5's own check (init.cc): ranks enqueued collectives that do not match (another
        # op, count or order)
        r"Mismatched collective detected",
        (("collective-mismatch", 0.8),),
        "NCCL's own check found the ranks' collectives do not match",
        decides="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL on every rank (each collective's op and "
        "count), then the code issuing them: a branch on the rank or the data, uneven batches",
        needs=("mismatched collective",),
    ),
    # ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL) compares each collective's fingerprint
    # (op, shapes, dtypes, sequence number) across ranks before running it, and states the
    # divergence; older PyTorch (≤ 1.11) words it "is running inconsistent collective". The text
    # proves the ranks diverged, not which code path did: that stays in decides.
    Signature(
        r"Detected mismatch between collectives on ranks|"
        r"Rank \d+ is running inconsistent collective|"
        r"Collectives differ in the following aspects",
        (("collective-mismatch", 0.8),),
        "PyTorch's collective check (TORCH_DISTRIBUTED_DEBUG=DETAIL) found ranks calling "
        "different collectives (op, shape or sequence number differ)",
        decides="the two fingerprints in the message, then the code that issues that collective "
        "on each rank: a branch on the rank or the data, per-rank metric keys, uneven batches",
        needs=("mismatch between collectives", "inconsistent collective", "collectives differ"),
    ),
    # NCCL's receiver got more bytes than it posted (net_socket.cc, bootstrap.cc: "message
    # truncated : receiving N bytes instead of M"; net_ib.cc since 2.12: "collective mismatch
    # error, local size N remote size M"): the ranks disagree on what they exchange — collectives
    # called with other sizes or in another order, or ranks running NCCL differently (another
    # version, NCCL_PROTO / NCCL_ALGO or buffer settings on some ranks only): NCCL's maintainers'
    # two readings (nccl PR #605, issue #626) — the usual reading, NCCL_PROTO=SIMPLE decides.
    Signature(
        r"(?:message truncated\s*:\s*)?receiv(?:ing|ed) \d+ bytes instead of \d+|"
        r"collective mismatch error,? local size \d+,? remote size \d+",
        (("collective-mismatch", 0.6),),
        "NCCL received a message of another size than it posted: the ranks disagree on the "
        "collective (its size or order) or run NCCL differently (version or settings)",
        decides="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL on every rank (each call's opCount, "
        "count and datatype: a call that differs = the program); the same run with "
        "NCCL_PROTO=SIMPLE (runs = settings differ between ranks); each rank's 'NCCL version' "
        "line and NCCL_* environment",
        # the words are NCCL's (its WARN line, bootstrap.cc, NET/IB); other programs that
        # count bytes say the same of a download or a socket
        context=r"\bNCCL|message truncated|collective mismatch error|bootstrap\.cc",
        needs=("bytes instead of", "collective mismatch error"),
    ),
    # NCCL's own check at init (init.cc): every rank of a communicator must run one NCCL version
    Signature(
        r"Mismatched NCCL version detected(?:\s*:?\s*rank \d+ version \d+ rank \d+ version \d+)?",
        (("collective-mismatch", 0.9),),
        "NCCL's own check found ranks of one communicator running different NCCL versions",
        decides="each rank's 'NCCL version' line (NCCL_DEBUG=INFO) or "
        "`python -c 'import torch; print(torch.cuda.nccl.version())'` on every node; "
        "LD_LIBRARY_PATH / LD_PRELOAD of a system libnccl on some nodes",
        needs=("mismatched nccl version",),
    ),
    # TORCH_NCCL_DESYNC_DEBUG's report on a watchdog timeout (TraceUtils.h retrieveDesyncReport):
    # in its own words the ranks named are "lagging/dead/mismatched" — one candidate among three.
    Signature(
        r"the lagging/dead/mismatched ranks|finished collective #\d+, but didn't join collective",
        (
            ("collective-mismatch", 0.45),
            ("nccl-timeout-rank-busy", 0.35),
            ("nccl-remote-rank-died", 0.3),
        ),
        "c10d's desync report: ranks out of step at one collective — a rank that took another "
        "code path, one still busy elsewhere, or one that died",
        decides="the desync report's 'Snapshot of ranks' latest states' (the op each rank ran at "
        "that sequence number: a different op = a mismatch) and the named ranks' own logs",
        needs=("lagging/dead/mismatched", "but didn't join collective"),
    ),
    # torch.distributed.elastic reports a worker ended by a signal as a negative exit code
    # ("failed (exitcode: -9) local_rank: 0", the ChildFailedError table's "exitcode : -9 (pid:
    # …)" and "Signal 9 (SIGKILL) received by PID"); torch.distributed.launch ≤ 1.9 raises
    # CalledProcessError "died with <Signals.SIGKILL: 9>". SIGKILL cannot be caught, so no
    # Python traceback: on a training node it is almost always the kernel's OOM killer. With the
    # OOM killer's own record in the paste, host_oom.py reads host-out-of-memory above this.
    Signature(
        _SIGKILLED_RANK,
        (("rank-killed", 0.7),),
        "torchrun/elastic: a rank ended by SIGKILL (exit -9) with no Python traceback — usually "
        "the host's out-of-memory killer (CPU RAM), or a scheduler's kill",
        decides="`dmesg -T | grep -iE 'out of memory|killed process'` (or `journalctl -k`) on "
        "that node at that time; the job's host RAM and the scheduler's record of the job",
        needs=_KILLED_RANK_WORDS,
    ),
    Signature(
        r"exitcode\s*:\s*-(?:6|11)\s*\(pid|failed \(exitcode\s*:\s*-(?:6|11)\)|"
        r"Signal (?:6 \(SIGABRT\)|11 \(SIGSEGV\)) received by PID|"
        r"died with <Signals\.SIG(?:ABRT: 6|SEGV: 11)>|exits with return code = -(?:6|11)\b",
        (("rank-killed", 0.45),),
        "torchrun/elastic: a rank crashed (exit -6 SIGABRT / -11 SIGSEGV): a native abort or "
        "segfault inside that process",
        # ProcessGroupNCCL aborts the process (SIGABRT) itself after a collective timed out
        unless=r"Watchdog caught collective operation timeout|Timeout at NCCL work|"
        r"taking the entire process down",
        decides="that rank's own log: the C++ message before the abort or the segfault's stack "
        "(`faulthandler`, PYTHONFAULTHANDLER=1)",
        needs=_CRASHED_RANK_WORDS,
    ),
    Signature(
        r"watchdog got stuck for \d+ seconds",
        (("nccl-timeout-hang", 0.6), ("gpu-fallen-off-bus", 0.2)),
        "ProcessGroupNCCL's watchdog itself hung: the GPU or driver stopped answering",
        decides=_XID_DECIDES,
    ),
    Signature(
        r"(?:errno:?\s*98\b|EADDRINUSE).{0,40}|failed to bind to .{0,60}Address already in use|"
        r"only one usage of each socket address|errno:?\s*10048\b",
        (("rendezvous-port-in-use", 0.95),),
        "the store/rendezvous port is already bound by another process",
        needs=("errno", "eaddrinuse", "already in use", "socket address"),
    ),
    Signature(
        r"Address already in use",
        (("rendezvous-port-in-use", 0.9),),
        "the rendezvous port is taken",
        context=TORCH_STORE,
    ),
    Signature(
        r"Address already in use",
        (("rendezvous-port-in-use", 0.6),),
        "EADDRINUSE: a port this program listens on is taken (in a training job, usually the "
        "rendezvous port)",
        unless=TORCH_STORE,
        decides="`ss -ltnp` for the port the program binds (MASTER_PORT, 29500 by default)",
    ),
    Signature(
        r"client socket has timed out after \d+s? while trying to connect to|"
        r"client socket has failed to connect to|connect\(\) timed out|"
        r"connection to the C10d store has failed|RendezvousConnectionError|"
        r"TCPStore.{0,100}(?:timed out|Connection refused)",
        (("rendezvous-unreachable", 0.85),),
        "the workers could not connect to the rendezvous store",
    ),
    Signature(
        r"Timed out after \d+ seconds waiting for clients|RendezvousTimeoutError",
        (("rendezvous-unreachable", 0.7),),
        "the store waited for workers that never joined",
    ),
    Signature(
        r"Name or service not known|Temporary failure in name resolution|"
        r"nodename nor servname provided",
        (("rendezvous-unreachable", 0.7),),
        "the rendezvous host name does not resolve",
        context=TORCH_STORE,
    ),
    Signature(
        r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store.{0,200}got error",
        (
            ("nccl-timeout-rank-busy", 0.45),
            ("nccl-remote-rank-died", 0.3),
            ("rendezvous-unreachable", 0.25),
        ),
        "this rank waited for rank 0's NCCL id in the store: rank 0 did not reach its first "
        "collective in time",
        decides="rank 0's log at that time (busy preprocessing, crashed, or unreachable)",
    ),
    Signature(
        # Gloo's tcp transport (pair.cc, unbound_buffer.cc) when a peer never sent its part; in
        # a barrier (one element, diagnosis.md) the usual reason is a rank still busy elsewhere
        # (saving, evaluating, loading)
        r"Timed out waiting \d+\s*ms for (?:recv|send) operation to complete",
        (("nccl-timeout-rank-busy", 0.55), ("nccl-timeout-hang", 0.25)),
        "a barrier timed out waiting for a rank that did not reach it",
        context=r"\bbarrier\b",
        decides="what the missing rank was doing at that time (rank 0 saving a checkpoint, "
        "evaluating, loading data) — its own log",
    ),
    Signature(
        r"out of shared memory\W+Please try to raise your shared memory limit|"
        r"DataLoader worker \(pid \d+\) is killed by signal:?\s*Bus error|"
        r"unable to (?:write to file|open shared memory object|allocate shared memory)\s*</torch_",
        (("dataloader-shm", 0.95),),
        "the DataLoader workers' shared memory (/dev/shm) is full",
    ),
    # --- containers --------------------------------------------------------------------------
    # moby's "could not select device driver %q with capabilities: %v": the name is empty for
    # `--gpus`, "nvidia" when a compose file's device reservation says `driver: nvidia`; either
    # way no registered device driver (the toolkit's) answers ("cdi" has its own reading below)
    Signature(
        r"could not select device driver\s*\"?(?:nvidia)?\"?\s*with capabilities:?\s*"
        r"\[\[gpu\]\]",
        (("container-toolkit-missing", 0.95),),
        "Docker has no GPU device driver registered (no NVIDIA Container Toolkit)",
    ),
    # The CDI library's (container-device-interface pkg/cdi/cache.go) "unresolvable CDI devices
    # <name>" says only that no spec the engine loaded defines that device: none generated (the
    # usual reading), or one in a directory the engine does not read, or of a cdiVersion too new
    # for it: medium, with what decides. Another kind of device than NVIDIA's GPUs (its
    # "nvidia.com/gpu" and the operator's "management.nvidia.com/gpu"; not "nvidia.com/pgpu" of
    # Kata's VFIO cold plug, nor a vendor's own) is not the toolkit's to name.
    Signature(
        r"unresolvable CDI devices?|could not select device driver\s*\"?cdi\"?",
        (("container-toolkit-missing", 0.8),),
        "no CDI specification the engine loaded names the requested GPU: the NVIDIA Container "
        "Toolkit has not generated it (`nvidia-ctk cdi generate`), or the spec is in a directory "
        "the engine does not read, or the engine is not set up for CDI",
        unless=r"unresolvable CDI devices?:?\s*\"?(?![a-z0-9.-]*nvidia\.com/gpu\b)"
        r"[a-z0-9.-]+\.[a-z]+/\w",
        decides="`nvidia-ctk cdi list` (the GPU names the specs define), the engine's CDI spec "
        "directories (/etc/cdi, /var/run/cdi, its cdi_spec_dirs) and the spec's cdiVersion "
        "against the engine's",
        needs=("unresolvable cdi device", "could not select device driver"),
    ),
    Signature(
        r"unknown or invalid runtime name:?\s*nvidia|Unknown runtime specified nvidia|"
        r"nvidia-container-runtime(?:-hook)?\"?:\s*executable file not found",
        (("container-toolkit-missing", 0.9),),
        "the nvidia runtime is not registered with the container engine",
    ),
    # libnvidia-container's nvc_init wording; the GPU operator's toolkit container (and LXD's
    # snap) install the binary as nvidia-container-cli.real behind a wrapper script, and the
    # error is also pasted from "initialization error:" on, without the program's name
    Signature(
        r"(?:nvidia-container-cli(?:\.real)?:?\s*)?initialization error:?\s*load library "
        r"failed:?\s*libnvidia-ml\.so|"
        r"nvidia-container-cli(?:\.real)?:?\s*initialization error:?\s*nvml error:?\s*driver "
        r"not loaded",
        (("container-host-driver-missing", 0.95),),
        "the toolkit's hook cannot load the host's NVIDIA driver",
        needs=("initialization error",),
    ),
    Signature(
        r"nvidia-container-cli(?:\.real)?:?\s*initialization error:?\s*driver error",
        (("container-host-driver-missing", 0.7),),
        "the toolkit's hook failed to talk to the host driver",
    ),
    # The hook's own program is not there: enroot's 98-nvidia.sh hook ("Command not found:
    # nvidia-container-cli, see https://github.com/NVIDIA/libnvidia-container"), the toolkit's
    # runtime hook (main.go: "couldn't find binary nvidia-container-cli"), or the binary without
    # its library (libnvidia-container1 missing: a half-installed toolkit)
    Signature(
        r"Command not found:?\s*nvidia-container-cli|"
        r"couldn'?t find binary nvidia-container-cli|"
        r"nvidia-container-cli:?\s*error while loading shared libraries:?\s*libnvidia-container",
        (("container-toolkit-missing", 0.9),),
        "the NVIDIA Container Toolkit's nvidia-container-cli (libnvidia-container) is not "
        "installed where the container engine or enroot runs",
        needs=("nvidia-container-cli",),
    ),
    # libnvidia-container looks for the cgroup v1 "devices" controller (cgroup.c: "cgroup
    # subsystem %s not found"); releases before 1.8.0 do not know cgroup v2, where it does not
    # exist (libnvidia-container#111, the 1.8.0 release notes). A cgroup v1 host without the
    # controller mounted prints the same, hence the usual reading, not certainty.
    Signature(
        r"cgroup subsystem devices not found",
        (("container-toolkit-version", 0.75),),
        "libnvidia-container found no cgroup v1 devices controller: a release before 1.8.0 "
        "(no cgroup v2 support) on a cgroup v2 host",
        decides="`nvidia-container-cli --version` (before 1.8.0 = no cgroup v2) and "
        "`stat -fc %T /sys/fs/cgroup` (cgroup2fs = cgroup v2)",
    ),
    # NCCL's NVML wrapper (misc/nvmlwrap.cc) and XLA's NVML check print the same dlopen failure
    # as "Failed to open libnvidia-ml.so.1" (newer NCCL adds dlerror's words after a colon);
    # NCCL then returns ncclSystemError
    Signature(
        r"libnvidia-ml\.so(?:\.1)?:?\s*cannot open shared object file|"
        r"Failed to open libnvidia-ml\.so",
        (("container-runtime-not-nvidia", 0.45), ("container-host-driver-missing", 0.35)),
        "NVML's library is missing where the message was printed",
        unless=r"nvidia-container-cli|initialization error:?\s*load library failed",
        decides="`nvidia-smi` on the host (works = the container runtime is not nvidia)",
        needs=("libnvidia-ml",),
    ),
    Signature(
        # go-nvml's name for NVML_ERROR_LIBRARY_NOT_FOUND (dcgm-exporter) is the same failure
        r"could not load NVML library|did you set the docker default runtime to\s*`?nvidia|"
        r"init NVML library;?\s*err:?\s*ERROR_LIBRARY_NOT_FOUND|"
        r"If this is a GPU node, did you configure the NVIDIA Container Toolkit",
        # the plugin's own hint names the runtime, the usual cause; a node without the driver,
        # or with it outside the toolkit's driver root (/opt/nvidia/lib64), prints the same
        (("container-runtime-not-nvidia", 0.6), ("container-host-driver-missing", 0.3)),
        "the device plugin could not load NVML: the nvidia runtime or the node's driver",
        decides="`nvidia-smi` on the node (works = the plugin runs without the nvidia runtime)",
    ),
    Signature(
        r"No devices found\. Waiting indefinitely",
        (("k8s-gpu-not-advertised", 0.5), ("container-runtime-not-nvidia", 0.45)),
        "the device plugin found no GPU to advertise",
        decides="`nvidia-smi` on the node and the runtime the plugin runs under",
    ),
    Signature(
        # NVIDIA's notice for the runc/systemd cgroup issue (and the reports that follow it)
        # names the symptom in words rather than NVML's message
        r"container(?:s|i[sz]ed)?\b[^.\n]{0,60}\blos(?:e|es|ing|t)\s+(?:the\s+)?access\s+to\s+"
        r"(?:the\s+|their\s+|its\s+)?GPUs?",
        (("container-lost-gpu-access", 0.8),),
        "a running container lost access to its GPUs",
        decides="does a restarted container see the GPU? (a systemd daemon-reload under runc)",
    ),
    Signature(
        r"Failed to initialize NVML:?\s*Unknown Error",
        (("container-lost-gpu-access", 0.6), ("driver-not-loaded", 0.25)),
        "NVML lost its device nodes (a container whose cgroup device rules were reset)",
        decides="did the same container see the GPU before? `nvidia-smi` on the host",
    ),
    Signature(
        # DCGM's host engine (nv-hostengine, embedded in dcgm-exporter) prints NVML's bare
        # failure; in a pod the usual reason is a container without the driver's libraries
        r"Failed to initialize NVML(?!:?\s*(?:Driver/library|Unknown Error|could not))",
        (("container-runtime-not-nvidia", 0.55), ("driver-not-loaded", 0.3)),
        "DCGM's host engine could not initialize NVML in its container",
        context=r"nv-hostengine|dcgm-exporter|DCGM initialization error",
        decides="`nvidia-smi` on the node (works = the exporter pod runs without the nvidia "
        "runtime: runtimeClassName: nvidia)",
    ),
    # --- kubernetes --------------------------------------------------------------------------
    Signature(
        r"Insufficient nvidia\.com/gpu|0/\d+ nodes are available.{0,300}nvidia\.com/gpu",
        (("k8s-gpu-not-advertised", 0.95),),
        "the scheduler found no node with a free nvidia.com/gpu",
        needs=("nvidia.com/gpu",),
    ),
    Signature(
        # kube-scheduler's NodeResourcesFit words a request no node can hold "Insufficient
        # <resource name>", whatever the resource; for a KubeVirt VM's vGPU or passthrough GPU
        # the name is the device plugin's
        r"Insufficient " + KUBEVIRT_GPU_RESOURCE,
        (("k8s-gpu-not-advertised", 0.9),),
        "the scheduler found no node with a free vGPU profile or passthrough GPU of the "
        "KubeVirt device plugin's",
        decides="`kubectl describe node`: that resource's Allocatable (0 = the device plugin "
        "advertises none: no vGPU of that type created, the GPU not bound to vfio-pci) and the "
        "VMs that hold it",
    ),
    Signature(
        # Karpenter's in-flight check of a node not initialized an hour after launch (karpenter
        # core, controllers/inflightchecks/failedinit.go: "Expected resource %q didn't register
        # on the node"): the instance type has GPUs, the node never advertised them
        r"expected resource \"?nvidia\.com/gpu\"? didn't register on the node",
        (("k8s-gpu-not-advertised", 0.9),),
        "Karpenter launched a GPU node whose nvidia.com/gpu never registered",
        decides="the device plugin's pod and log on that node (not running, or it found no GPU)",
        needs=("didn't register",),
    ),
    Signature(
        # the NVIDIA device plugin's MIG strategies (mig-strategy.go, rm/device_map.go)
        r"No MIG devices associated with|has an invalid MIG configuration|"
        r"has no MIG devices configured|device with migEnabled=true was not configured correctly",
        (("mig-no-instances", 0.9),),
        "the device plugin found a GPU in MIG mode without MIG instances",
        needs=("mig",),
    ),
    Signature(
        # Slurm's NVML GPU autodetect (gpu_nvml.c) on a GPU in MIG mode with no instances
        r"MIG mode is enabled,? but no MIG devices (?:were|are) (?:found|created)",
        (("mig-no-instances", 0.9),),
        "MIG mode is on and no MIG device exists",
        needs=("mig mode is enabled",),
    ),
    Signature(
        r"Insufficient nvidia\.com/mig-",
        (("mig-no-instances", 0.6), ("k8s-gpu-not-advertised", 0.4)),
        "no node advertises the MIG profile the pod requests",
        decides="`kubectl describe node` (nvidia.com/mig-* resources) and `nvidia-smi -L` on the "
        "node",
    ),
)
