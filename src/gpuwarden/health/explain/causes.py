"""The causes ``explain`` names: diagnosis.md §1 as data (meaning, fixes in order, references).

A code is an interface (alert rules, policies and scripts match on it); the titles and fixes
are the knowledge of the table, written from NVIDIA's, PyTorch's, NCCL's, Docker's and
Kubernetes' documentation. Codes marked ``added`` are not (yet) in diagnosis.md §1: the world
needed them (a pasted error that is common and none of the §1 codes explains).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cause:
    code: str
    category: str  # oom, version, driver, hardware, app, distributed, containers, kubernetes
    title: str
    fixes: tuple[str, ...]  # in the order a person should try them
    references: tuple[str, ...]
    # what decides when the text alone does not (a command or a log to capture)
    decides: str
    # a consequence of another failure: ranked below a root cause found in the same text
    consequence: bool = False
    added: bool = False


_PT_MEMORY = "https://pytorch.org/docs/stable/notes/cuda.html#memory-management"
_PT_ALLOC_CONF = (
    "https://pytorch.org/docs/stable/notes/cuda.html"
    "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf"
)
_CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"
_CUDA_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
_CUDA_ERRORS = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
_XID = "https://docs.nvidia.com/deploy/xid-errors/index.html"
_DRIVER_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/index.html"
_NCCL_TROUBLE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
_NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
_C10D = "https://pytorch.org/docs/stable/distributed.html"
_TORCHRUN = "https://pytorch.org/docs/stable/elastic/run.html"
_CTK = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest"
_K8S_GPU = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"
_DEVICE_PLUGIN = "https://github.com/NVIDIA/k8s-device-plugin#prerequisites"
_MIG = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
_CUDA_ENV = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#env-vars"
_PT_SERIALIZATION = "https://pytorch.org/docs/stable/notes/serialization.html"
_PT_SEMANTICS = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-semantics"
_SANITIZER = "https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html"
# NVIDIA's Video Codec SDK: which GPU has which NVENC / NVDEC (codec, profile, chroma,
# resolution), the driver each SDK version needs, and FFmpeg's use of it
_VIDEO_MATRIX = "https://developer.nvidia.com/video-encode-and-decode-gpu-support-matrix-new"
_VIDEO_SDK = "https://docs.nvidia.com/video-technologies/video-codec-sdk/"
_NV_CODEC_HEADERS = "https://github.com/FFmpeg/nv-codec-headers"
_DEBUG_OOM = (
    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv; torch.cuda.memory_summary()"
)
_NCCL_DEBUG = (
    "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET,SHM): its WARN lines name the "
    "transport and the call that failed"
)
_DMESG = (
    "`dmesg -T | grep -iE 'xid|nvrm'` on the node: Xid 13/31 = an application fault, "
    "48/63/64/94/95 = memory errors, 79 = the GPU fell off the bus"
)
_VERSIONS = (
    'python -c "import torch; print(torch.__version__, torch.version.cuda, '
    'torch.cuda.is_available())"; the `nvidia-smi` header (driver and CUDA version)'
)

CAUSES: tuple[Cause, ...] = (
    # --- out of memory -----------------------------------------------------------------------
    Cause(
        "oom-too-big",
        "oom",
        "the job needs more memory than the GPU holds after the CUDA context",
        (
            "plan it: `gpuwarden plan MODEL --gpu GPU --micro-batch N --seq-len L` shows what "
            "takes the memory and which change fits",
            "lower the micro-batch (keep the global batch with gradient accumulation)",
            "activation (gradient) checkpointing",
            "bf16/fp16 mixed precision; an 8-bit or paged optimizer",
            "shard the model states: ZeRO-2/3 or FSDP across the GPUs; LoRA/QLoRA for fine-tuning",
            "a GPU with more memory",
        ),
        (_PT_MEMORY, "https://huggingface.co/docs/transformers/perf_train_gpu_one"),
        "the allocator's numbers in the full OOM message, and `torch.cuda.max_memory_allocated()` "
        "on a smaller batch",
    ),
    Cause(
        "oom-fragmentation",
        "oom",
        "the free and cached memory would cover the request, but no block is big enough",
        (
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch ≥ 2.1; older: "
            "max_split_size_mb:128)",
            "keep tensor shapes stable between steps (pad or bucket variable-length batches)",
            "allocate big buffers once and reuse them; avoid torch.cuda.empty_cache() in the loop",
        ),
        (_PT_ALLOC_CONF, _PT_MEMORY),
        "`torch.cuda.memory_summary()` at the failure: reserved − allocated and the largest "
        "free block",
    ),
    Cause(
        "oom-other-process",
        "oom",
        "another process (a zombie, a second job, a notebook) holds the GPU's memory",
        (
            "find it: `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`",
            "end it (a crashed run that did not exit, an idle notebook kernel) and wait until "
            "`nvidia-smi` shows the memory free",
            "one job per GPU: `CUDA_VISIBLE_DEVICES`, or a scheduler that allocates GPUs",
        ),
        (_PT_MEMORY, "https://docs.nvidia.com/deploy/nvidia-smi/index.html"),
        _DEBUG_OOM,
    ),
    Cause(
        "oom-framework-pool",
        "oom",
        "a framework's memory pool starves another user of the GPU (JAX/XLA and TensorFlow "
        "preallocate most of it; cuDNN autotuning then has no workspace)",
        (
            "JAX: XLA_PYTHON_CLIENT_MEM_FRACTION=.6 (or XLA_PYTHON_CLIENT_PREALLOCATE=false)",
            "TensorFlow: tf.config.experimental.set_memory_growth(gpu, True) "
            "(TF_FORCE_GPU_ALLOW_GROWTH=true)",
            "one framework per GPU; do not mix a TF/JAX pool and PyTorch in one process",
        ),
        (
            "https://jax.readthedocs.io/en/latest/gpu_memory_allocation.html",
            "https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth",
        ),
        "`nvidia-smi` while the job runs (memory.used vs memory.total) and the framework's "
        "allocator statistics above the error",
    ),
    Cause(
        "oom-kv-cache",
        "oom",
        "the serving engine has no room (or too little) for its KV cache after the weights and "
        "the profiled activation peak",
        (
            "raise gpu_memory_utilization (0.9 → 0.95) on a GPU the engine has to itself",
            "lower max_model_len (to at most the tokens the cache holds) or max_num_seqs",
            "fp8 KV cache (kv_cache_dtype=fp8), quantized weights, or tensor parallelism",
            "out of memory while capturing CUDA graphs: lower gpu_memory_utilization (the graphs "
            "live outside it), fewer cudagraph capture sizes, or --enforce-eager",
            "plan it: `gpuwarden plan MODEL --mode infer --gpu GPU --gpu-memory-utilization 0.9 "
            "--max-model-len N`",
        ),
        ("https://docs.vllm.ai/en/latest/configuration/conserving_memory.html",),
        "the engine's start-up log: 'model weights take …', 'Available KV cache memory: …'",
    ),
    Cause(
        "oom-leak",
        "oom",
        "memory grows step after step until it runs out",
        (
            "keep no tensors with history across steps: log `loss.item()`, not `loss`",
            "no retain_graph=True unless needed; `del outputs` before the next step",
            "log torch.cuda.memory_allocated() every N steps to see the growth",
        ),
        (_PT_MEMORY, "https://pytorch.org/docs/stable/torch_cuda_memory.html"),
        "torch.cuda.memory_allocated() logged every step: a steady rise is a leak, a spike at "
        "one batch is that batch's shape",
    ),
    # --- versions ----------------------------------------------------------------------------
    Cause(
        "driver-too-old",
        "version",
        "the NVIDIA driver supports an older CUDA than the runtime in use",
        (
            "upgrade the driver to one that supports the runtime's CUDA (the CUDA release notes "
            "list the minimum driver per version)",
            "or install a framework build for the CUDA the driver supports (nvidia-smi's "
            "'CUDA Version' is the newest it runs)",
        ),
        (_CUDA_NOTES, _CUDA_COMPAT),
        _VERSIONS,
    ),
    Cause(
        "gpu-arch-unsupported",
        "version",
        "the binary has no kernels for this GPU's compute capability",
        (
            "install a build that includes the GPU's architecture (new GPUs need a newer CUDA: "
            "Blackwell sm_100/sm_120 needs a CUDA 12.8+ build)",
            "rebuild extensions (flash-attn, xformers, custom ops) with TORCH_CUDA_ARCH_LIST set",
            "or hide the GPU: CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID)",
        ),
        ("https://developer.nvidia.com/cuda-gpus", "https://pytorch.org/get-started/locally/"),
        'python -c "import torch; print(torch.cuda.get_arch_list(), '
        'torch.cuda.get_device_capability())"',
    ),
    Cause(
        "library-conflict",
        "version",
        "a different CUDA library (cuDNN, NCCL, cudart, cuBLAS) is loaded than the one the "
        "framework was built against",
        (
            "find the copy that is loaded: `ldd`, `pip list | grep -i nvidia`, "
            "`echo $LD_LIBRARY_PATH`",
            "drop LD_LIBRARY_PATH entries (cluster modules, /usr/local/cuda) that shadow the "
            "wheel's own libraries",
            "reinstall the pinned wheels (`pip install --force-reinstall torch …` from one index)",
        ),
        ("https://pytorch.org/get-started/locally/", _CUDA_COMPAT),
        "`ldd $(python -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib/"
        "libtorch_cuda.so | grep -iE 'cudnn|nccl|cublas'` and `pip list | grep -i nvidia`",
    ),
    Cause(
        "nvml-driver-mismatch",
        "version",
        "the user-space driver libraries and the loaded kernel module are different versions",
        (
            "reboot (or unload and reload the nvidia modules when the GPUs are idle) after a "
            "driver upgrade",
            "hold the driver packages (apt-mark hold / exclude them from unattended-upgrades)",
            "remove a second driver series so library and module match exactly",
        ),
        (_DRIVER_GUIDE,),
        "`cat /proc/driver/nvidia/version` (the module) against `nvidia-smi`'s library version",
    ),
    Cause(
        "forward-compat-unsupported",
        "version",
        "the CUDA forward-compatibility package was used on a GPU or driver that cannot use it",
        (
            "a host driver that supports the container's CUDA natively",
            "or an image built for an older CUDA; drop the cuda-compat libraries from "
            "LD_LIBRARY_PATH on GeForce/RTX GPUs (forward compatibility is data-center only)",
        ),
        ("https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html",),
        "`nvidia-smi` (GPU model and driver) and `ls /usr/local/cuda/compat` in the container",
    ),
    Cause(
        "cpu-only-build",
        "version",
        "the framework was installed without CUDA support",
        (
            "install the CUDA build: `pip install torch --index-url "
            "https://download.pytorch.org/whl/cu126` (the index of the CUDA the driver supports)",
            "check that conda/pip did not pull a +cpu build back in as a dependency",
        ),
        ("https://pytorch.org/get-started/locally/",),
        _VERSIONS,
    ),
    # Building CUDA code needs a toolkit of PyTorch's CUDA major version (torch.utils.cpp_extension
    # checks it) and a host compiler the toolkit supports (nvcc's host_config.h checks it).
    Cause(
        "extension-build-toolkit",
        "version",
        "building a CUDA extension (setup.py, pip install from source, a JIT-built op) found no "
        "usable CUDA toolkit: none at CUDA_HOME / on the PATH, one of another CUDA major "
        "version than PyTorch was built with, or a host compiler (gcc, clang, Visual Studio) "
        "missing or newer than that toolkit supports — the build machine's setup, not the GPU "
        "or driver",
        (
            "install the CUDA toolkit of PyTorch's CUDA version (`torch.version.cuda`) and point "
            "the build at it: export CUDA_HOME=/usr/local/cuda-X.Y (no leading ':'), "
            "PATH=$CUDA_HOME/bin:$PATH; on Windows CUDA_PATH, in a new console; conda: "
            "cuda-toolkit / cuda-nvcc of that version",
            "or install the PyTorch build for the toolkit you have (the cuXXX wheel index of "
            "the same CUDA major version)",
            "a host compiler the toolkit supports: an older gcc/g++ (CC/CXX, nvcc -ccbin, "
            "update-alternatives) or Visual Studio toolset, or a newer CUDA toolkit that "
            "supports yours; -allow-unsupported-compiler only at your own risk",
            'on Windows: Visual Studio or its Build Tools with the "Desktop development with '
            'C++" workload, and the build run from an "x64 Native Tools Command Prompt" (or '
            "after vcvars64.bat) so that cl.exe is on the PATH",
            "avoid the build: a prebuilt wheel of the extension for your torch and CUDA "
            "versions (many projects publish them)",
        ),
        (
            "https://pytorch.org/docs/stable/cpp_extension.html",
            "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html"
            "#host-compiler-support-policy",
        ),
        '`nvcc --version` and `echo $CUDA_HOME` against `python -c "import torch; '
        "print(torch.version.cuda)\"`; `gcc --version` against the toolkit's supported host "
        "compilers",
        added=True,
    ),
    Cause(
        "nvenc-driver-too-old",
        "version",
        "the driver is older than the Video Codec SDK (NVENC API) version the encoder was built "
        "against (FFmpeg's nv-codec-headers, the SDK's NvEncoder): the CUDA runtime may still work",
        (
            "upgrade the driver to at least the one the encoder's SDK version needs (FFmpeg prints "
            "it; nv-codec-headers' README lists each version's minimum)",
            "or use a build of the encoder made with older headers (an older FFmpeg / "
            "nv-codec-headers release) that the installed driver supports",
            "in a container, the host's driver is the one that counts: upgrade it on the host",
        ),
        (_NV_CODEC_HEADERS, _VIDEO_SDK),
        "the `nvidia-smi` driver version against the API version the message names (FFmpeg's "
        '"Required: X.Y Found: X.Y")',
        added=True,
    ),
    # --- driver ------------------------------------------------------------------------------
    Cause(
        "driver-not-loaded",
        "driver",
        "the NVIDIA kernel module is not loaded, or not built for the running kernel",
        (
            "rebuild the module for the running kernel (`dkms autoinstall`, or reinstall the "
            "driver package for this kernel) and reboot",
            "keep unattended upgrades from installing kernels the driver was not built for",
            "check `lsmod | grep nvidia` and `dmesg | grep -i nvidia` for why it did not load",
        ),
        (_DRIVER_GUIDE,),
        "`lsmod | grep nvidia`, `dkms status`, `uname -r`",
    ),
    Cause(
        "driver-module-unsigned",
        "driver",
        "Secure Boot is on and the kernel refused the nvidia module: it is not signed by a key "
        "the kernel trusts (a DKMS / akmods / .run build signs with a key of its own)",
        (
            "enrol the key the modules are signed with as a Machine Owner Key: `mokutil --import "
            "<public key>` (DKMS: /var/lib/dkms/mok.pub; akmods: /etc/pki/akmods/certs/"
            "public_key.der, `kmodgenca` makes one), reboot and confirm it in MokManager",
            "or install the distribution's signed driver modules (Ubuntu's "
            "linux-modules-nvidia-* for the running kernel) or sign at install time "
            "(`nvidia-installer --module-signing-secret-key=... --module-signing-public-key=...`)",
            "or turn Secure Boot off in the firmware (`mokutil --sb-state` says whether it is on); "
            "a rebuild alone is signed with the same untrusted key and is refused again",
        ),
        (
            _DRIVER_GUIDE,
            "https://www.kernel.org/doc/html/latest/admin-guide/module-signing.html",
        ),
        "`mokutil --sb-state`, `mokutil --list-enrolled`, `modinfo nvidia | grep -i signer` and "
        "`dmesg | grep -i -e lockdown -e 'module verification'`",
        added=True,
    ),
    Cause(
        "driver-probe-failed",
        "driver",
        "the driver loads but cannot take the GPU: nouveau owns it, or firmware/BIOS settings "
        "(Above 4G decoding, Resizable BAR) stop the initialisation (RmInitAdapter failed)",
        (
            "read `dmesg | grep -i nvrm` for the RmInitAdapter code and GSP errors",
            "blacklist nouveau and rebuild the initramfs",
            "enable Above 4G Decoding and Resizable BAR in the BIOS; reseat the card and check "
            "its power cables",
        ),
        (
            _DRIVER_GUIDE,
            "https://download.nvidia.com/XFree86/Linux-x86_64/latest/README/commonproblems.html",
        ),
        "`dmesg | grep -iE 'nvrm|nouveau'` and `lspci -k | grep -A3 -i nvidia`",
    ),
    Cause(
        "fabric-manager-down",
        "driver",
        "an NVSwitch system needs the Fabric Manager service running at the driver's exact "
        "version; without it CUDA refuses to start",
        (
            "install nvidia-fabricmanager of exactly the driver's version and "
            "`systemctl enable --now nvidia-fabricmanager`",
            "check `nvidia-smi -q | grep -A2 -i fabric` (State: Completed); reset the GPUs or "
            "reboot after restarting it",
        ),
        ("https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",),
        "`systemctl status nvidia-fabricmanager` and `nvidia-smi -q | grep -A2 -i fabric`",
    ),
    # GPUDirect RDMA needs a peer-memory path from the NIC to GPU memory: the driver's
    # nvidia-peermem module or DMA-BUF; GDRCopy needs its gdrdrv module (NVIDIA's GPUDirect RDMA
    # guide, NCCL's troubleshooting guide, GDRCopy's README).
    Cause(
        "gpudirect-rdma-unavailable",
        "driver",
        "the NIC cannot reach GPU memory directly: GPUDirect RDMA's kernel side — the "
        "nvidia-peermem module (nv_peer_mem), DMA-BUF registration, or GDRCopy's gdrdrv — is "
        "missing, will not load or is not registered; registering a GPU buffer fails, and NCCL "
        "('GPU Direct RDMA Disabled') stages through host memory instead: slower, not broken",
        (
            "load the driver's module: `modprobe nvidia-peermem` (and add it to "
            "/etc/modules-load.d); in Kubernetes the GPU Operator's driver.rdma.enabled",
            "if it will not insert (Invalid argument, Unknown symbol ib_register_peer_memory_"
            "client): it was built against another OFED or kernel — reinstall the driver (or "
            "nv_peer_mem) after MLNX_OFED, or use DMA-BUF (open kernel modules, Linux >= 5.12, "
            "rdma-core with ibv_reg_dmabuf_mr; perftest --use_cuda_dmabuf)",
            "GDRCopy: load gdrdrv built against the running driver (`modprobe gdrdrv` or the "
            "gdrcopy service) so that /dev/gdrdrv exists on every node",
            "NCCL: confirm with NCCL_DEBUG=INFO ('GPU Direct RDMA Enabled', channels via "
            "NET/IB/N/GDRDMA); a GPU far from the NIC also needs NCCL_NET_GDR_LEVEL; some GPUs "
            "(GeForce, integrated GB10) do not support GPUDirect RDMA at all",
        ),
        (
            "https://docs.nvidia.com/cuda/gpudirect-rdma/index.html",
            _NCCL_TROUBLE,
            "https://github.com/NVIDIA/gdrcopy#readme",
        ),
        "`lsmod | grep -E 'nvidia_peermem|nv_peer_mem|gdrdrv'`, `ls /sys/kernel/mm/memory_peers/` "
        "and `dmesg | grep -iE 'peer|gdrdrv'`; NCCL_DEBUG=INFO's 'GPU Direct RDMA' lines",
        added=True,
    ),
    # CUDA's peer access (cudaDeviceEnablePeerAccess, cudaIpcOpenMemHandle) between two GPUs of
    # one node: cudaErrorPeerAccessUnsupported 217 (64 in CUDA <= 10.0), cudaErrorTooManyPeers
    # 711 (60); NCCL's troubleshooting guide for ACS and the IOMMU.
    Cause(
        "gpu-p2p-unsupported",
        "driver",
        "two GPUs of the node cannot map each other's memory: CUDA refuses peer-to-peer access "
        "between them (GPUs that do not offer P2P, such as GeForce RTX 40/50 cards; GPUs under "
        "different root complexes; PCIe ACS or the IOMMU in the path; a virtual machine), or a "
        "device's eight peer mappings are used up; whatever needs it — NCCL's P2P/IPC "
        "transport, a custom all-reduce (vLLM, sglang, TensorRT-LLM), DeepEP, CUDA tensors "
        "shared between processes — fails, hangs or, with ACS redirecting, corrupts data",
        (
            "check what the driver says: `nvidia-smi topo -p2p r` (OK, or CNS/GNS/TNS/NS: chipset, "
            "GPU, topology not supported) — a pair the GPU or chipset does not support stays so",
            "turn off what needs P2P: NCCL_P2P_DISABLE=1 (NCCL then goes through shared host "
            "memory: it works, with less bandwidth), vLLM's / sglang's "
            "--disable-custom-all-reduce, TensorRT-LLM without its custom all-reduce; one process "
            "per node over all its GPUs instead of CUDA IPC between processes",
            "on bare metal with GPUs that support P2P: disable PCIe ACS in the BIOS, or per bridge "
            "with `setpci -s BDF ECAP_ACS+6.w=0000` (lost at reboot), and put the IOMMU in "
            "pass-through (iommu=pt) or off; VMs need the hypervisor's P2P support",
            "'peer mapping resources exhausted': at most eight peers per GPU, system-wide — "
            "fewer GPUs per process (CUDA_VISIBLE_DEVICES) or P2P enabled in groups of eight",
            "an application that enables peer access itself should ask first "
            "(cudaDeviceCanAccessPeer / torch.cuda.can_device_access_peer) and fall back; NCCL's "
            "SHM transport with cuMem host memory (Cuda failure 217 in shm.cc): "
            "NCCL_CUMEM_HOST_ENABLE=0 or a newer NCCL",
        ),
        (
            _NCCL_TROUBLE,
            _CUDA_ERRORS,
            "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__PEER.html",
        ),
        "`nvidia-smi topo -p2p r` and `-p2p w`; `torch.cuda.can_device_access_peer(0, 1)` or "
        "CUDA's p2pBandwidthLatencyTest; `sudo lspci -vvv | grep ACSCtl` (ReqRedir+ / CmpltRedir+ "
        "= ACS on) and the kernel command line (iommu); NCCL_DEBUG=INFO with and without "
        "NCCL_P2P_DISABLE=1",
        added=True,
    ),
    # Fabric memory over multi-node NVLink (GB200/GB300 NVL) is brokered by the IMEX daemon; a
    # process needs an IMEX channel (CUDA driver API, Virtual Memory Management; the IMEX guide).
    Cause(
        "imex-channel-unavailable",
        "driver",
        "CUDA refused fabric memory (CU_MEM_HANDLE_TYPE_FABRIC: multi-node NVLink, MNNVL): the "
        "process has no IMEX channel under /dev/nvidia-caps-imex-channels, or the IMEX daemon "
        "of its NVLink domain is not running — cuMemCreate / export / import fail with "
        "CUDA_ERROR_NOT_PERMITTED",
        (
            "give the process a channel: in a container NVIDIA_IMEX_CHANNELS=0 (or the DRA "
            "driver's ComputeDomain claim in Kubernetes); on the host create it with mknod from "
            "the nvidia-caps-imex-channels major number in /proc/devices",
            "run the IMEX service on every node of the domain (`systemctl enable --now "
            "nvidia-imex`, nodes_config.cfg listing them) and check `nvidia-imex-ctl -N`",
            "on GPUs without a multi-node NVLink fabric, use the library's other path (POSIX "
            "file descriptors, the inter-node API) instead of fabric handles",
        ),
        (
            "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/index.html",
            "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html",
        ),
        "`ls -l /dev/nvidia-caps-imex-channels/` in the process's container, `nvidia-imex-ctl "
        "-N`, and `nvidia-smi -q | grep -A4 -i fabric` (ClusterUUID, CliqueId)",
        added=True,
    ),
    # vGPU / GRID guests need a license from the NVIDIA License System; without one the driver
    # restricts the GPU after a grace period (the vGPU Client Licensing User Guide).
    Cause(
        "vgpu-unlicensed",
        "driver",
        "the vGPU (GRID, vCS, vWS) guest holds no license: nvidia-gridd did not obtain one, and "
        "after the grace period the driver restricts the GPU (throttled or disabled CUDA, "
        "capped frame rate) while nvidia-smi looks healthy",
        (
            "configure licensing: the client configuration token in /etc/nvidia/"
            "ClientConfigToken (NVIDIA License System) or ServerAddress in /etc/nvidia/"
            "gridd.conf (legacy), then `systemctl restart nvidia-gridd`",
            "make sure nvidia-gridd runs as a service (some driver packages and node images do "
            "not install its unit) and can reach the CLS/DLS (port 443), with the guest's clock "
            "in sync",
            "if gridd logs a client registration or trusted-store error, clear the client's "
            "stored state and register again; in Kubernetes, the GPU Operator's licensingConfig",
        ),
        ("https://docs.nvidia.com/vgpu/latest/grid-licensing-user-guide/index.html",),
        "`nvidia-smi -q | grep -A2 -i license` and `journalctl -u nvidia-gridd`",
        added=True,
    ),
    Cause(
        "compute-mode-exclusive",
        "driver",
        "the GPU is in Exclusive_Process compute mode and another process already has it",
        (
            "find the process holding it (`nvidia-smi`) and wait for it, or pick another GPU",
            "set the Default compute mode if sharing is intended: `nvidia-smi -c 0` (root)",
        ),
        ("https://docs.nvidia.com/deploy/nvidia-smi/index.html",),
        "`nvidia-smi -q | grep -iE 'compute mode|mig mode' -A1`",
        added=True,
    ),
    # --- hardware ----------------------------------------------------------------------------
    Cause(
        "gpu-fallen-off-bus",
        "hardware",
        "the GPU stopped answering on PCIe (Xid 79): it is lost until the node is reset",
        (
            "drain the node and reboot or power-cycle it",
            "check power (PSU, cables), thermals and the card's seating; update the firmware",
            "if it happens again on the same GPU: field diagnostics and RMA",
        ),
        (_XID,),
        _DMESG,
    ),
    Cause(
        "ecc-uncorrectable",
        "hardware",
        "an uncorrectable GPU memory error (double-bit/SRAM): the CUDA context on that GPU is dead",
        (
            "find the GPU: `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`",
            "reset it (`nvidia-smi -r`) or reboot, so the row is remapped / the page retired",
            "keep jobs off it meanwhile; repeated uncorrectable errors → RMA",
        ),
        (_XID, "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"),
        "`nvidia-smi -q -d ECC,ROW_REMAPPER` and " + _DMESG,
    ),
    Cause(
        "xid",
        "hardware",
        "the kernel log (or DCGM's Xid field, as dcgm-exporter shows it) reports an Xid error "
        "(the evidence names it and NVIDIA's action)",
        (
            "follow NVIDIA's action for the Xid: RESTART_APP (restart the job), RESET_GPU "
            "(`nvidia-smi -r` when idle), RESTART_BM (reboot the node), CONTACT_SUPPORT (RMA)",
            "check whether it repeats on the same GPU: `dmesg -T | grep -i xid`",
        ),
        (_XID,),
        _DMESG,
        added=True,
    ),
    Cause(
        "video-engine-unsupported",
        "hardware",
        "the GPU has no NVENC / NVDEC, or none for this codec, profile, chroma format, bit depth "
        "or resolution (NVIDIA's Video Encode and Decode GPU Support Matrix)",
        (
            "look the GPU up in NVIDIA's support matrix for the codec and format asked for "
            "(GeForce MX and some mobile / mining boards have no NVENC; NVDEC decodes no H.264 "
            "4:4:4 before Blackwell)",
            "choose a codec, profile or pixel format the engine supports (8-bit 4:2:0 H.264 is "
            "the widest), or decode / encode that stream on the CPU",
            "on a machine with several GPUs, select the one that has the engine (FFmpeg's "
            "-gpu N, CUDA_VISIBLE_DEVICES)",
        ),
        (_VIDEO_MATRIX, _VIDEO_SDK),
        "the GPU's name (`nvidia-smi -L`) in NVIDIA's support matrix, and the stream's codec, "
        "profile and pixel format (`ffprobe`); the warning FFmpeg prints before the failure",
        added=True,
    ),
    Cause(
        "nvenc-session-limit",
        "hardware",
        "the GPU refused one more NVENC session: consumer (GeForce) boards allow only a few "
        "concurrent encode sessions per system, and the others were already open",
        (
            "count the encodes running at once (other transcodes, OBS, a streaming host): "
            "`nvidia-smi --query-gpu=encoder.stats.sessionCount --format=csv`",
            "lower the number of simultaneous transcodes in the application's settings",
            "a newer driver (NVIDIA raised GeForce's limit over time), or a professional / data "
            "centre GPU, which has no such limit",
        ),
        (_VIDEO_MATRIX, _VIDEO_SDK),
        "`nvidia-smi --query-gpu=encoder.stats.sessionCount,memory.used,memory.total "
        "--format=csv` while it fails: sessions at the limit, or the GPU's memory full",
        added=True,
    ),
    # --- application -------------------------------------------------------------------------
    Cause(
        "device-assert",
        "app",
        "a device-side assertion: the program indexed out of range (labels ≥ classes, token or "
        "position ids ≥ the embedding size) — not the hardware",
        (
            "run once on CPU, or with CUDA_LAUNCH_BLOCKING=1, to get the failing operation",
            "check the ranges: labels in [0, num_classes), token ids < vocab size, sequence "
            "length ≤ max positions (a tokenizer with added tokens needs resize_token_embeddings)",
            "restart the process: its CUDA context is unusable after an assert",
        ),
        (_PT_MEMORY.replace("#memory-management", "#asynchronous-execution"),),
        "CUDA_LAUNCH_BLOCKING=1 (the real failing line) or one run on CPU",
    ),
    Cause(
        "illegal-memory-access",
        "app",
        "a kernel touched memory it must not: a bug in a library or the program first (Xid 13/31 "
        "in the kernel log), the hardware only if it follows one GPU",
        (
            "CUDA_LAUNCH_BLOCKING=1 to find the kernel; `compute-sanitizer --tool memcheck`",
            "disable the feature the trace names (custom kernels, prefix caching, CUDA graphs, "
            "torch.compile) and upgrade the library",
            "if it follows one GPU across jobs, check that GPU's Xid/ECC history",
        ),
        (_SANITIZER, _XID),
        "CUDA_LAUNCH_BLOCKING=1 and " + _DMESG,
    ),
    Cause(
        "launch-failure",
        "app",
        "a kernel failed without a specific reason (error 4/719): a bad kernel, or the driver's "
        "state (after suspend/resume, a GPU fault)",
        (
            "restart the process; check `dmesg` for an Xid at the same time",
            "no suspend/hibernate with live CUDA contexts (reload nvidia_uvm after resume)",
            "CUDA_LAUNCH_BLOCKING=1 to find the kernel if it repeats",
        ),
        (_XID, _CUDA_ERRORS),
        _DMESG,
        consequence=True,
    ),
    Cause(
        "launch-out-of-resources",
        "app",
        "a kernel was launched with more per-block resources than this GPU has (error 701: "
        "threads per block × registers per thread over the SM's register file, or too much "
        "shared memory or too many arguments) — the launch configuration or the build, not a fault",
        (
            "a smaller block (fewer threads per block) for that kernel, or the library's option "
            "for it",
            "fewer registers: `__launch_bounds__(maxThreads)` on the kernel, or `-maxrregcount` "
            "at build time",
            "a build for this GPU's architecture (TORCH_CUDA_ARCH_LIST / -gencode): smaller GPUs "
            "(Jetson, older or laptop parts) have smaller per-SM limits than the one it was "
            "tuned on",
        ),
        (
            _CUDA_ERRORS,
            "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#launch-bounds",
        ),
        "CUDA_LAUNCH_BLOCKING=1 (the kernel that fails to launch), then `cuobjdump --dump-resource-"
        "usage` (its registers and shared memory) against the GPU's limits (deviceQuery)",
        added=True,
    ),
    # Triton's OutOfResources ("out of resource: shared memory, Required: N, Hardware limit: M",
    # triton/runtime/errors.py; the old triton.code_gen wording) and ptxas's "uses too much shared
    # data (N bytes, M max)": checks before the launch, so never CUDA error 701. The GPU's limit
    # per block is its architecture's (CUDA C++ Programming Guide, technical specifications per
    # compute capability; opt-in above 48 KB): 48 KB Maxwell/Pascal, 96 KB V100, 64 KB Turing,
    # 163 KB A100, 99 KB sm_86/89/120, 227 KB H100; AMD's LDS 64 KB.
    Cause(
        "kernel-shared-memory-exceeded",
        "app",
        "a compiled kernel's configuration (block sizes × num_stages in Triton, or the static "
        "__shared__ arrays of a CUDA kernel) needs more shared memory per block than this GPU "
        "offers — a kernel tuned for a bigger GPU, not a fault and not GPU memory",
        (
            "smaller BLOCK sizes or fewer num_stages for that kernel (its autotune configs), as "
            "the message suggests",
            "the library's setting for smaller GPUs (a smaller head dimension, chunk or tile "
            "size, another attention backend) or its known-good config for this GPU",
            "a newer Triton or kernel build that knows this GPU's shared memory (its configs are "
            "picked per architecture)",
            "a GPU with more shared memory per block (A100 163 KB, H100 227 KB, against 64 KB on "
            "a T4 or RTX 20xx and 99 KB on an RTX 30xx/40xx)",
        ),
        (
            "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
            "#features-and-technical-specifications",
            "https://triton-lang.org/main/python-api/generated/triton.Config.html",
        ),
        "the two numbers in the message — Required (bytes the kernel's config needs) against "
        "the Hardware limit (the GPU's shared memory per block, as Triton reads it: "
        '`python -c "import triton; print(triton.runtime.driver.active.utils.'
        "get_device_properties(0)['max_shared_mem'])\"`, or deviceQuery's opt-in figure)",
        added=True,
    ),
    # CUDA's stream-capture errors (cudaError_t 900-908, CUDA_ERROR_STREAM_CAPTURE_*; CUDA C++
    # Programming Guide, "CUDA Graphs": prohibited and unhandled operations) and PyTorch's graph
    # rules (torch.cuda.graph: no synchronisation, no CPU reads of GPU values, RNG through the
    # default generator, warm-up on a side stream before capture, the graph's private pool).
    Cause(
        "cuda-graph-capture-unsupported",
        "app",
        "an operation CUDA does not allow while a stream is captured into a CUDA graph was issued "
        "during the capture (a synchronisation or .item(), an allocation outside the graph's "
        "pool, an event or RNG-state query, the legacy default stream, a side stream not joined "
        "back, a collective depending on uncaptured work) — the program's or a library's use of "
        "CUDA graphs, not a GPU fault",
        (
            "run that operation eagerly: move it out of the captured region (before capture, or "
            "after replay), or exclude the module from the graph (torch.compiler.disable / "
            "torch._dynamo.disable, a piecewise graph that leaves it out)",
            "warm up on a side stream before capturing (a few iterations), so that lazy "
            "initialisation (cuBLAS workspaces, autotuning, allocator growth) happens outside "
            "the capture; capture on a non-default stream of the current device",
            "keep to torch.cuda.graph's rules: no .item()/.cpu()/synchronize, static shapes, RNG "
            "through the default generator, allocations from the graph's pool (pass `pool=` to "
            "share one between graphs)",
            "turn the graphs off to confirm and to run meanwhile: vLLM --enforce-eager, SGLang "
            "--disable-cuda-graph, torch.compile without mode='reduce-overhead', TensorRT "
            "without --useCudaGraph",
            "upgrade the library that issued the operation (attention, RNG, NCCL/communication "
            "or the engine): many releases fixed a call that was not capture-safe",
        ),
        (
            _CUDA_ERRORS,
            "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-graphs",
            "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
        ),
        "the first capture error in the log and the call above it in the traceback; a rerun "
        "without CUDA graphs (--enforce-eager, --disable-cuda-graph): if it then runs, the "
        "captured operation was the cause",
        added=True,
    ),
    Cause(
        "launch-timeout",
        "driver",
        "the display watchdog killed a long-running kernel (error 702): the GPU also drives a "
        "display (X server, or Windows WDDM's TDR after 2 s) and kernel timeouts are enabled",
        (
            "run on a GPU that drives no display: a second GPU, the integrated graphics for the "
            "desktop, or stop the display manager (`systemctl stop display-manager`) on Linux",
            "Windows: raise TdrDelay (HKLM\\SYSTEM\\CurrentControlSet\\Control\\GraphicsDrivers, "
            "then reboot), or the TCC driver mode on data-center/workstation GPUs",
            "shorter kernels: split the work into launches of well under a second each",
        ),
        (
            _CUDA_ERRORS,
            "https://learn.microsoft.com/en-us/windows-hardware/drivers/display/tdr-registry-keys",
        ),
        "`nvidia-smi -q | grep -iE 'display (mode|active)'` and deviceQuery's 'Run time limit on "
        "kernels: Yes'; on Windows the driver model (WDDM/TCC) in `nvidia-smi`",
        added=True,
    ),
    # The GPU a job asks for is not a GPU it sees (placement.py reads the messages).
    Cause(
        "device-ordinal-invalid",
        "app",
        "the program asked for a GPU index the process cannot see (CUDA error 101, invalid "
        "device ordinal): more ranks per node than GPUs, cuda:N / --gpu N past the last GPU, or a "
        "CUDA_VISIBLE_DEVICES list shorter than the ranks",
        (
            "launch as many processes per node as it has GPUs: torchrun --nproc-per-node "
            "(accelerate num_processes, deepspeed --num_gpus) = `nvidia-smi -L | wc -l`, or the "
            "length of CUDA_VISIBLE_DEVICES",
            "select devices relative to what is visible: cuda:0 is the first GPU of "
            "CUDA_VISIBLE_DEVICES, not the node's GPU 0; pass the right --gpu / device id",
            "in a pod or a Slurm job, request as many GPUs as the script uses (nvidia.com/gpu, "
            "--gpus-per-node)",
        ),
        (_CUDA_ERRORS, _TORCHRUN, _CUDA_ENV),
        "`nvidia-smi -L` and `echo $CUDA_VISIBLE_DEVICES` against the device the job asks for "
        "(--nproc-per-node, LOCAL_RANK, cuda:N)",
        added=True,
    ),
    Cause(
        "checkpoint-on-missing-cuda",
        "app",
        "torch.load met a checkpoint saved on a CUDA device this process does not have: CUDA is "
        "not available here, or fewer GPUs are visible than the saved device index",
        (
            "map the storages: torch.load(path, map_location='cpu') on a machine without CUDA, "
            "or map_location='cuda:0' (or {'cuda:1': 'cuda:0'}) on one with fewer GPUs",
            "on a machine with a GPU where torch.cuda.is_available() is False: the real cause is "
            "there — a CPU-only torch (`torch.version.cuda` is None or the version ends +cpu: "
            "install the CUDA wheel) or no working driver (`nvidia-smi` fails)",
            "save checkpoints device-free: torch.save(model.state_dict()) after .cpu(), or "
            "load with map_location everywhere",
        ),
        ("https://pytorch.org/docs/stable/generated/torch.load.html", _PT_SERIALIZATION),
        _VERSIONS + "; torch.cuda.device_count()",
        added=True,
    ),
    Cause(
        "tensor-device-mismatch",
        "app",
        "one operation got tensors on two devices (cuda:0 and cpu, cuda:0 and cuda:1): a program "
        "placement bug, or a model split over devices whose code mixes the parts",
        (
            "move every input, target, mask and index to the model's device "
            "(`x.to(next(model.parameters()).device)`); tensors created inside forward need "
            "device=…; buffers need register_buffer so .to() moves them",
            "a model split by device_map='auto' or CPU offload: move inputs to the first "
            "layer's device (`model.hf_device_map`), keep custom heads with the layer they read, "
            "or load it on one GPU (device_map='cuda:0') when it fits",
            "multi-GPU: one process per GPU (DDP) rather than hand-placed cuda:1 tensors",
        ),
        (_PT_SEMANTICS, "https://huggingface.co/docs/accelerate/usage_guides/big_modeling"),
        "the argument the message names (mat1, index, weight…) and the device of each input; "
        "`model.hf_device_map` for a model split by device_map",
        added=True,
    ),
    Cause(
        "visible-devices-hide-all",
        "app",
        "CUDA_VISIBLE_DEVICES hides every GPU: it is empty, -1 or Slurm's NoDevFiles, or it "
        "names no GPU of this node (an index past the last GPU, another node's UUID or MIG id), "
        "so CUDA finds no device",
        (
            "unset it, or set it to GPUs this node has: indexes from `nvidia-smi -L` "
            "(CUDA_DEVICE_ORDER=PCI_BUS_ID to match nvidia-smi's order) or their UUIDs",
            "remove a hard-coded os.environ['CUDA_VISIBLE_DEVICES'] from the script (or set it "
            "before CUDA is first used); let the scheduler set it",
            "Slurm: request GPUs (--gres=gpu:N / --gpus); NoDevFiles means none was allocated",
        ),
        (_CUDA_ENV,),
        "`echo $CUDA_VISIBLE_DEVICES` in the failing process against `nvidia-smi -L`",
        added=True,
    ),
    # A process forked after its parent initialised CUDA (fork.py reads the messages).
    Cause(
        "cuda-initialized-before-fork",
        "app",
        "CUDA was initialised in a process that then forked: a forked child cannot use CUDA (the "
        "driver's state does not survive fork), so its first CUDA call fails",
        (
            "start the workers with 'spawn' (or 'forkserver'): "
            "torch.multiprocessing.set_start_method('spawn') — or mp.get_context('spawn') for "
            "one pool — under `if __name__ == '__main__':` (spawn re-imports the main module)",
            "touch no CUDA in the parent before the workers start: no torch.cuda.* call, no "
            ".cuda() / .to('cuda'), no model built on the GPU at import time, no device query; "
            "numba: no numba.cuda call before the pool",
            "DataLoader workers: DataLoader(..., multiprocessing_context='spawn')",
            "vLLM: VLLM_WORKER_MULTIPROC_METHOD=spawn",
            "notebooks (accelerate's notebook_launcher, Lightning's ddp_notebook / ddp_fork): "
            "restart the kernel and run no CUDA call in a cell before the launch; outside a "
            "notebook, a spawning strategy (Lightning strategy='ddp')",
            "servers that fork their workers (gunicorn --preload, Celery's prefork pool, uvicorn "
            "--workers): load the model in each worker after the fork, not in the master",
        ),
        (
            "https://pytorch.org/docs/stable/notes/multiprocessing.html#cuda-in-multiprocessing",
            "https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods",
            "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
            "https://docs.vllm.ai/en/latest/usage/troubleshooting.html#python-multiprocessing",
            "https://huggingface.co/docs/accelerate/basic_tutorials/notebook",
        ),
        "`torch.cuda.is_initialized()` printed just before the workers start (True: the parent "
        "touched CUDA — find the first torch.cuda call, .cuda() or model built on the GPU before "
        "it) and `multiprocessing.get_start_method()` (fork is Linux's default before Python "
        "3.14)",
        added=True,
    ),
    # --- distributed -------------------------------------------------------------------------
    Cause(
        "ranks-share-a-gpu",
        "distributed",
        "two ranks of one NCCL communicator are on the same GPU (NCCL's 'Duplicate GPU "
        "detected'): each process did not take its own GPU, or more processes run than GPUs",
        (
            "give each process its GPU before init_process_group: "
            "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) (or device_id=… in "
            "init_process_group); do not hard-code cuda:0 or a default GPU",
            "start as many processes per node as GPUs (--nproc-per-node, accelerate "
            "num_processes), and do not give every rank the same CUDA_VISIBLE_DEVICES index",
            "Ray / MPI / Horovod: one GPU per worker (num_gpus=1, hvd.local_rank())",
        ),
        (_NCCL_TROUBLE, _C10D, _TORCHRUN),
        "each rank's LOCAL_RANK and torch.cuda.current_device(); NCCL_DEBUG=INFO prints each "
        "rank's 'cudaDev N busId …'",
        added=True,
    ),
    Cause(
        "nccl-shm",
        "distributed",
        "NCCL's shared-memory transport cannot create its segments: /dev/shm is too small "
        "(Docker's 64 MB) or not writable",
        (
            "give the container shared memory: `docker run --shm-size=16g` or `--ipc=host`; in "
            "Kubernetes an emptyDir with medium: Memory at /dev/shm",
            "make /dev/shm mode 1777",
            "NCCL_SHM_DISABLE=1 as a last resort (slower)",
        ),
        (_NCCL_TROUBLE, _NCCL_ENV),
        "`df -h /dev/shm` in the container; " + _NCCL_DEBUG,
    ),
    Cause(
        "nccl-socket-interface",
        "distributed",
        "NCCL's bootstrap picked (or was told) a network interface that cannot reach the peers",
        (
            "set NCCL_SOCKET_IFNAME to the routable NIC (e.g. `eth0`, or `^lo,docker` to exclude)",
            "the same for Gloo: GLOO_SOCKET_IFNAME",
            "rerun with NCCL_DEBUG=INFO and read the 'Bootstrap : Using …' line",
        ),
        (_NCCL_ENV, _NCCL_TROUBLE),
        "`ip -br addr` on every node; " + _NCCL_DEBUG,
    ),
    Cause(
        "nccl-ib-transport",
        "distributed",
        "InfiniBand/RoCE transport errors between the NICs",
        (
            "check the fabric: `ibstat`, link flaps, `ib_write_bw` between the two hosts",
            "pick the HCAs and GID explicitly: NCCL_IB_HCA, NCCL_IB_GID_INDEX=3 for RoCEv2",
            "NCCL_IB_DISABLE=1 to confirm (falls back to sockets, slower)",
        ),
        (_NCCL_ENV, _NCCL_TROUBLE),
        "`ibstat` and `ibv_devinfo` on both hosts; " + _NCCL_DEBUG,
    ),
    Cause(
        "nccl-timeout-rank-busy",
        "distributed",
        "a collective timed out because one rank was elsewhere (preprocessing, loading, saving, "
        "evaluating) while the others waited in it",
        (
            "do the slow work on every rank, or before init_process_group (cache the "
            "preprocessed dataset)",
            "with accelerate/transformers: `main_process_first()`; preprocess in a separate run",
            "raise the timeout for the setup phase: init_process_group(timeout=…) / ddp_timeout",
        ),
        (_C10D + "#torch.distributed.init_process_group",),
        "the log of every rank around the timeout: what rank 0 (or the rank that did not "
        "arrive) was doing; TORCH_NCCL_DUMP_ON_TIMEOUT=1 for the flight recorder",
        consequence=True,
    ),
    Cause(
        "nccl-timeout-hang",
        "distributed",
        "a collective hung mid-training: peer-to-peer on GPUs without NVLink, a network fault, a "
        "dead or slow GPU",
        (
            "NCCL_P2P_DISABLE=1 on consumer GPUs or VMs without working P2P (ACS/IOMMU)",
            "check Xid/ECC on every node (`dmesg | grep -i xid`); find the straggler",
            "NCCL_DEBUG=INFO and TORCH_NCCL_DUMP_ON_TIMEOUT=1 to see which rank stopped",
        ),
        (_NCCL_TROUBLE, _C10D),
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1 (which rank never entered the collective) and " + _DMESG,
        consequence=True,
    ),
    Cause(
        "nccl-remote-rank-died",
        "distributed",
        "another rank crashed first; the others see broken connections",
        (
            "find the first rank that died (an OOM, a segfault, an Xid, the kernel's OOM killer) "
            "in every rank's log",
            "fix that failure; this error is its echo",
        ),
        (_NCCL_TROUBLE,),
        "the earliest error across all ranks' logs (and `dmesg` for OOM kills)",
        consequence=True,
    ),
    Cause(
        "collective-mismatch",
        "distributed",
        "the ranks called different collectives (another op, shape, dtype or order): the "
        "program took different paths on different ranks — a collective under a rank or data "
        "condition, uneven batches, per-rank keys or parameters — or the ranks run NCCL "
        "differently (another NCCL version, NCCL_PROTO / NCCL_ALGO set on some ranks only), so "
        "they disagree on what they exchange; not the network",
        (
            "find the diverging call: the two fingerprints the message names (op, shape, "
            "sequence number), then each rank's stack at that step",
            "make every rank call the same collectives in the same order: no all_reduce / "
            "barrier / broadcast under `if rank == 0` or a data-dependent branch; the same "
            "keys in logged/synced metric dicts on every rank",
            "even the data per rank (DistributedSampler with drop_last, the same number of "
            "steps); the same trainable parameters on every rank (find_unused_parameters only "
            "hides it)",
            "the same NCCL on every rank: one container image or environment for all nodes, "
            "no system libnccl preloaded on some, no NCCL_* variable exported on one node only",
            "to locate it: TORCH_DISTRIBUTED_DEBUG=DETAIL (checks each collective's "
            "fingerprint), TORCH_NCCL_DESYNC_DEBUG=1 (a desync report on timeout)",
        ),
        (
            _C10D + "#debugging-torch-distributed-applications",
            "https://pytorch.org/docs/stable/torch_nccl_environment_variables.html",
        ),
        "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: its 'Detected mismatch between collectives' "
        "names both ranks' op, shape and sequence number; then each rank's stack at that step "
        "(py-spy dump --pid)",
        added=True,
    ),
    # The kernel's OOM killer (mm/oom_kill.c), a memory cgroup's limit (Docker -m, a pod's
    # limits.memory, Slurm's --mem), Ray's memory monitor and the kubelet's eviction all end a
    # process for host RAM; the fixes are the host's, not the GPU's (Kubernetes' and Ray's docs).
    Cause(
        "host-out-of-memory",
        "host",
        "the host's RAM (or a container's, pod's or Slurm job's memory limit) ran out: the "
        "process was killed with SIGKILL — by the kernel's OOM killer, Ray's memory monitor or "
        "the kubelet (no CUDA error, no Python traceback) — or an allocation in host memory was "
        "refused (PyTorch's DefaultCPUAllocator; on Windows the commit limit, RAM plus the page "
        "file): host memory, not the GPU's; a launcher's -9 for a rank is this when the OOM "
        "killer's record is beside it, rank-killed when it is not",
        (
            "use less host RAM per process: fewer DataLoader workers (each copies what the "
            "dataset object holds: keep samples in numpy arrays or memory-mapped files, not "
            "Python lists), smaller prefetch and pinned-memory buffers, no full dataset per rank",
            "load checkpoints without a full copy in RAM: torch.load(..., mmap=True), "
            "from_pretrained(low_cpu_mem_usage=True) or a device_map, safetensors, shard by "
            "shard, fewer ranks loading at once",
            "mind what is offloaded into host RAM: DeepSpeed/FSDP CPU offload, vLLM's swap "
            "space, sleep mode and cpu_offload_gb, Ray's object store",
            "raise the limit that was hit: the pod's resources.limits.memory, the container's "
            "`-m`, Slurm's --mem / --mem-per-gpu (Ray's RAY_memory_usage_threshold only with "
            "care: past it the kernel kills instead)",
            "on Windows, where the commit limit is RAM plus the page file: a larger page file "
            "(System > Advanced > Virtual memory, or system-managed on a drive with free space), "
            "and fewer programs holding memory",
            "add RAM or swap to the node (swap buys time, not speed); on an integrated GPU "
            "(Jetson, GH200/GB10) host RAM is the GPU's memory too: a smaller model or batch",
        ),
        (
            "https://www.kernel.org/doc/gorman/html/understand/understand016.html",
            "https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",
            "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
            "https://slurm.schedmd.com/sbatch.html#OPT_mem",
            "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
        ),
        "`dmesg -T | grep -iE 'killed process|oom-kill'` (or `journalctl -k`) on the node at "
        "that time; `kubectl describe pod` (Reason: OOMKilled); Slurm's `sacct` State "
        "OUT_OF_MEMORY and MaxRSS; the job's host RAM (`free -g`) against its limit",
        added=True,
    ),
    Cause(
        "rank-killed",
        "distributed",
        "one rank was killed by a signal (torchrun/elastic reports a negative exit code): -9 "
        "SIGKILL with no Python traceback is almost always the host's out-of-memory killer "
        "(CPU RAM, not the GPU's) — with the OOM killer's own record in the paste the reading "
        "is host-out-of-memory; -6/-11 (SIGABRT/SIGSEGV) are a crash inside that rank",
        (
            "SIGKILL: confirm the OOM killer (`dmesg -T | grep -iE 'killed process|oom'`), then "
            "use less host RAM per node: fewer DataLoader workers, load checkpoints shard by "
            "shard or with mmap / low_cpu_mem_usage, no full dataset copy per rank, fewer "
            "ranks per node, or a node with more RAM / swap",
            "a scheduler's kill is the same signal: Slurm's memory limit ('oom-kill event'), a "
            "Kubernetes limit (OOMKilled), a time limit or preemption — see the job's status",
            "SIGABRT/SIGSEGV: that rank's own log (the C++ message before the abort, a "
            "`faulthandler` trace); upgrade or disable the native extension it names",
        ),
        (
            _TORCHRUN,
            "https://pytorch.org/docs/stable/elastic/errors.html",
            "https://www.kernel.org/doc/gorman/html/understand/understand016.html",
        ),
        "`dmesg -T | grep -iE 'out of memory|killed process'` (or `journalctl -k`) on the node at "
        "the time of the failure, and the job's host RAM (`free -g`, the scheduler's MaxRSS); "
        "for -6/-11 the failing rank's own log",
        added=True,
    ),
    Cause(
        "rendezvous-port-in-use",
        "distributed",
        "the rendezvous/store port is taken by another job on the node",
        (
            "give each job its own port (--master_port / --rdzv-endpoint host:PORT, e.g. derived "
            "from the job id)",
            "single node: `torchrun --standalone` picks a free port",
            "or end the old job that still holds it (`ss -ltnp | grep PORT`)",
        ),
        (_TORCHRUN,),
        "`ss -ltnp | grep <port>` on the master node",
    ),
    Cause(
        "rendezvous-unreachable",
        "distributed",
        "the workers cannot reach the rendezvous store (wrong address, firewall, the host does "
        "not resolve itself)",
        (
            "MASTER_ADDR / --rdzv-endpoint: a name or address that resolves to node 0 from every "
            "node, and that node 0 uses for itself",
            "open the port in the firewall/security group; check `nc -zv MASTER_ADDR PORT`",
            "start every node within the join timeout",
        ),
        (_TORCHRUN, _C10D),
        "`nc -zv MASTER_ADDR MASTER_PORT` from a worker; `getent hosts $(hostname)` on node 0",
    ),
    Cause(
        "dataloader-shm",
        "containers",
        "PyTorch DataLoader workers ran out of shared memory (/dev/shm, Docker's 64 MB default)",
        (
            "give the container shared memory: `--shm-size=16g` or `--ipc=host`; in Kubernetes "
            "an emptyDir with medium: Memory at /dev/shm",
            "fewer DataLoader workers, or num_workers=0 to confirm",
        ),
        ("https://pytorch.org/docs/stable/data.html#multi-process-data-loading",),
        "`df -h /dev/shm` in the container",
        added=True,
    ),
    # --- containers --------------------------------------------------------------------------
    Cause(
        "container-toolkit-missing",
        "containers",
        "Docker has no GPU device driver: the NVIDIA Container Toolkit is missing or not "
        "registered (or Docker is a snap)",
        (
            "install nvidia-container-toolkit, `nvidia-ctk runtime configure --runtime=docker`, "
            "restart dockerd",
            "test: `docker run --rm --gpus all ubuntu nvidia-smi`",
            "no snap Docker (it cannot use the toolkit); use Docker's own packages",
            "CDI (`--device nvidia.com/gpu=all`, podman, containerd/CRI-O): generate the spec "
            "with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (again after a "
            "driver upgrade); `nvidia-ctk cdi list` shows the device names",
        ),
        (_CTK + "/install-guide.html",),
        "`docker info | grep -i runtimes` and `dpkg -l | grep nvidia-container`",
    ),
    Cause(
        "container-host-driver-missing",
        "containers",
        "the toolkit's hook cannot load the host's driver (libnvidia-ml.so.1): no driver on the "
        "host, or it is not loaded",
        (
            "fix the host first: `nvidia-smi` must work there (install/load the driver, rebuild "
            "it for the running kernel)",
            "then restart Docker/containerd; containers cannot bring a driver the host lacks",
        ),
        (_CTK + "/troubleshooting.html", _DRIVER_GUIDE),
        "`nvidia-smi` and `lsmod | grep nvidia` on the host",
    ),
    Cause(
        "container-runtime-not-nvidia",
        "containers",
        "the container ran under plain runc, so no driver libraries were injected",
        (
            "Kubernetes: `runtimeClassName: nvidia` on the pod, or nvidia as containerd's/Docker's "
            "default runtime on GPU nodes (`nvidia-ctk runtime configure --set-as-default`)",
            "restart the runtime and the kubelet, then the device plugin",
        ),
        (_DEVICE_PLUGIN, _CTK + "/install-guide.html"),
        "`kubectl get pod POD -o jsonpath='{.spec.runtimeClassName}'` and the runtime's "
        "default_runtime_name",
    ),
    Cause(
        "container-driver-capabilities",
        "containers",
        "the container got the GPU but not the compute libraries (NVIDIA_DRIVER_CAPABILITIES "
        "without `compute`, no NVIDIA_VISIBLE_DEVICES)",
        (
            "run with `-e NVIDIA_DRIVER_CAPABILITIES=compute,utility` and "
            "`-e NVIDIA_VISIBLE_DEVICES=all` (or `--gpus all`)",
            "build images on nvidia/cuda, or set those ENV lines in the Dockerfile",
        ),
        (_CTK + "/docker-specialized.html",),
        "`env | grep NVIDIA` and `ls /usr/lib/x86_64-linux-gnu | grep libcuda` in the container",
    ),
    Cause(
        "container-toolkit-version",
        "containers",
        "a known-bad NVIDIA Container Toolkit release",
        (
            "pin the previous toolkit release, or upgrade past the fix",
            "read the toolkit's release notes for the error",
        ),
        (_CTK + "/release-notes.html",),
        "`nvidia-container-cli --version` and when the toolkit was last upgraded",
    ),
    Cause(
        "container-lost-gpu-access",
        "containers",
        "a running container lost access to its GPU device nodes: the host's systemd re-applied "
        "the cgroup device rules (`systemctl daemon-reload`) under runc",
        (
            "restart the container to get the devices back",
            "`nvidia-ctk system create-dev-char-symlinks --create-all` (and its udev rule) on "
            "the host",
            "or run the runtime with the cgroupfs driver; a current toolkit documents both",
        ),
        (_CTK + "/troubleshooting.html",),
        "did it work before in the same container? `systemctl` reloads in the host's journal",
        added=True,
    ),
    Cause(
        "container-no-video-capability",
        "containers",
        "the driver's video libraries (libnvidia-encode for NVENC, libnvcuvid for NVDEC) are "
        "missing: a container started without the `video` driver capability, or a host driver "
        "installed without them",
        (
            "run with `-e NVIDIA_DRIVER_CAPABILITIES=compute,video,utility` (or `all`); in "
            "Kubernetes set that variable on the container",
            "build images whose ENV carries the `video` capability (nvidia/cuda images do not "
            "by default)",
            "on a host without containers, install the driver's encode / decode libraries "
            "(Ubuntu's libnvidia-encode-NNN and libnvidia-decode-NNN of the driver's version)",
        ),
        (_CTK + "/docker-specialized.html", _VIDEO_SDK),
        "`env | grep NVIDIA_DRIVER_CAPABILITIES` and `ls /usr/lib/x86_64-linux-gnu | grep -E "
        "'nvidia-encode|nvcuvid'` where the encoder runs",
        added=True,
    ),
    # --- kubernetes --------------------------------------------------------------------------
    Cause(
        "k8s-gpu-not-advertised",
        "kubernetes",
        "no node advertises a free nvidia.com/gpu: the device plugin is not running or sees no "
        "GPUs, or all GPUs are taken",
        (
            "`kubectl describe node` (Capacity/Allocatable nvidia.com/gpu) on the GPU nodes",
            "the device plugin's logs (NVML errors mean the runtime is not nvidia)",
            "requests of other pods: `kubectl describe node | grep -A5 Allocated`",
        ),
        (_K8S_GPU, _DEVICE_PLUGIN),
        "`kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable."
        "nvidia\\.com/gpu`",
    ),
    Cause(
        "mig-no-instances",
        "kubernetes",
        "MIG mode is on but no GPU/compute instances exist (or the MIG strategy does not expose "
        "them): CUDA sees no usable device",
        (
            "create instances (`nvidia-smi mig -cgi 9,9 -C`, or mig-parted / the GPU operator's "
            "MIG manager)",
            "or disable MIG (`nvidia-smi -mig 0`, then reset the GPU)",
            "set the device plugin's MIG strategy (single or mixed) to expose the instances",
        ),
        (_MIG,),
        "`nvidia-smi -L` (MIG devices listed?) and `nvidia-smi -q | grep -iE 'mig mode|compute "
        "mode' -A1`",
    ),
)

BY_CODE: dict[str, Cause] = {cause.code: cause for cause in CAUSES}
