"""Device placement and visibility: the GPU a job asks for is not a GPU it sees.

Five messages, each with one documented meaning:

- CUDA's ``cudaErrorInvalidDevice`` (101; 10 before CUDA 10.1), "invalid device ordinal"
  (``CUDA_ERROR_INVALID_DEVICE`` in the driver API): the program asked for a device index the
  process cannot see — more ranks per node than GPUs (torchrun --nproc-per-node), ``cuda:N`` or
  ``--gpu N`` beyond the GPUs present, a CUDA_VISIBLE_DEVICES list shorter than the ranks
  (CUDA runtime API, error types). From ``cuDevicePrimaryCtxRetain`` / ``cuCtxCreate`` the driver
  returns the same code for a device it will not give this process a context on (a GPU in
  Exclusive_Process compute mode that another process holds): there it is one candidate of two.
  From a memory advice (``cudaMemAdvise`` / ``cuMemAdvise``) it is one candidate of two as well:
  the runtime API reference asks of cudaMemAdviseSetPreferredLocation (and SetAccessedBy) a valid
  device ordinal AND a device with a non-zero cudaDevAttrConcurrentManagedAccess, which GPUs
  before Pascal and any GPU under Windows lack. Taichi's unified allocator (its log names
  unified_allocator.cpp) advises device 0 right after cudaMallocManaged, whose documented errors
  do not include this code, so its 101 is that advice too.
- NCCL's "Duplicate GPU detected : rank X and rank Y both on CUDA device Z" (src/init.cc; NCCL ≥
  2.5 refuses two ranks of one communicator on one GPU): two ranks share a GPU — the program
  never called torch.cuda.set_device(local_rank), or more processes were started than GPUs.
- torch.load's "Attempting to deserialize object on a CUDA device but torch.cuda.is_available()
  is False" / "… on CUDA device N but torch.cuda.device_count() is M" (torch/serialization.py,
  validate_cuda_device): the checkpoint's storages name a CUDA device this process does not
  have. The fix is map_location — or, on a machine with a GPU, the reason CUDA is unavailable
  (a CPU build of torch, no driver), which the other votes on the same text rank below it.
- PyTorch's "Expected all tensors to be on the same device, but found at least two devices, X
  and Y" (and its older "Expected object of device type cuda but got device type cpu",
  "Expected object of backend CPU but got backend CUDA" and ATen's checkSameGPU, "Tensor for
  argument #2 'mat1' is on CPU, but expected it to be on GPU" with one such clause, or "…; but
  device 1 does not equal 0"; masked_fill_'s "expected self and mask to be on the same device,
  but got mask on cpu and self on cuda:0"; PyTorch 1.0-1.1's TensorIterator, "expected type
  torch.cuda.FloatTensor but got torch.FloatTensor" where one legacy type name is a CUDA one, and
  binary_op's "expected both inputs to be on same device"): one operation got tensors on two
  devices — a program that moved the model but not an input, or a model split over GPUs
  (device_map="auto", CPU offload) whose code mixes the parts. DataParallel's own check of the
  same kind (torch/nn/parallel/data_parallel.py, DataParallel.forward and data_parallel):
  "module must have its parameters and buffers on device cuda:K (device_ids[0]) but found one of
  them on device: D" — the wrapped model sits on another device than the first of its
  device_ids (by default every visible GPU, so cuda:0): left on the CPU, or moved to cuda:N and
  wrapped without device_ids=[N]. And ATen's check_generator<T> (aten/src/ATen/core/Generator.h):
  TORCH_CHECK(T::device_type() == gen->device().type(), "Expected a '<T>' device type for
  generator but found '<other>'") — a kernel of one device type handed a random-number generator
  of another: torch.Generator() (a CPU one) beside CUDA tensors, or a CUDA default device
  (torch.set_default_tensor_type('torch.cuda.FloatTensor'), torch.set_default_device('cuda'))
  that puts DataLoader's RandomSampler's torch.randperm on the GPU while its generator stays on
  the CPU. The check fails only for two different device types; the same name twice is not it.
  Checks that name the two tensors' types, read where the two types sit on two devices:
  Convolution.cpp's check_input_same_type_as_parameters, "Input type (torch.FloatTensor) and
  weight type (torch.cuda.FloatTensor) should be the same" (or "bias type"; its MKLDNN overload
  adds "or input should be a MKLDNN tensor and weight is a dense tensor"), ATen's checkSameType
  (aten/src/ATen/TensorUtils.cpp), "…; but type torch.cuda.FloatTensor does not equal
  torch.FloatTensor", PyTorch 0.4-1.0's checked casts (aten/src/ATen/Utils.h), "Expected object
  of type torch.cuda.FloatTensor but found type torch.FloatTensor for argument #2 'weight'", and
  checkBackend / checkDeviceType, "Expected tensor to have CUDA Backend, but got tensor with CPU
  Backend" (bmm's checkOnCPU: "Expect tensor to have CPU backend, …"), and the legacy
  constructors' new_with_tensor (torch/csrc/utils/tensor_new.cpp), "expected CUDA (got CPU)"
  (0.4: "expected torch.cuda.FloatTensor (got torch.FloatTensor)"). A type is
  Tensor::toString: ATen's "CUDAFloatType", "MPSFloatType",
  "MkldnnCPUFloatType", which torch/csrc/Exceptions.cpp rewrites for CPU and CUDA to the legacy
  "torch.cuda.FloatTensor" / "torch.FloatTensor". Two types on one device differ in dtype or
  layout only ("torch.cuda.HalfTensor" and "torch.cuda.FloatTensor", an MKLDNN CPU tensor and a
  dense one; a Meta tensor, which has no storage, or "c10::Half" name no device): not read, and
  no cause reads a dtype mismatch. Checks that fail only for two devices: ATen's RNN
  check_attributes (aten/src/ATen/native/RNN.h), "Input and parameter tensors are not at the
  same device, found input tensor at cuda:0 and parameter tensor at cpu" (or "hidden"; PyTorch
  1.0's check_device, RNN.cpp, names device types and, for two GPUs, "Input and hidden CUDA
  tensors are not at the same GPU"); index's check_indices_on_cpu_or_selfdevice
  (TensorAdvancedIndexing.cpp), "indices should be either on cpu or on the same device as the
  indexed tensor (cpu)"; torch.cat's (cuda/Shape.cu), "All input tensors must be on the same
  device. Received cuda:0 and cpu" and "… and out must be on the same device". PyTorch 1.2-1.5's
  TensorIterator (aten/src/ATen/native/TensorIterator.cpp, compute_types) checks each operand
  against the operation's common device: "expected device cpu but got device cuda:0" for an
  input, "output with device cpu doesn't match the desired device cuda:0" for an out= tensor
  (1.2 adds " and dtype Float" after each device and fails for a dtype alone too, one device
  named twice): read only where the two devices differ.
- JAX's "Received incompatible devices for jitted computation. Got … and …" (pjit's
  _device_assignment_mismatch_error, each side a pxla.DeviceAssignmentMismatch: "argument x of
  f with shape … and device ids [0] on platform GPU", "ARG_SHARDING with device ids [0] on
  platform CPU", or the jit's "explicit input sharding" / "context mesh"): the documented
  meaning (jax.Array.committed) is arguments committed to different devices — an array
  device_put on the CPU (or converted from a host buffer) beside one on the GPU, or on two GPUs.
  Where the message names two arguments that is what it states; where one side is a sharding
  or mesh the program declared, the arguments do not match it: the usual reading, the same fix.
- CUDA_VISIBLE_DEVICES set where CUDA then finds no device: the variable hides every GPU when it
  is empty, -1, Slurm's "NoDevFiles" (no GPU allocated) or names no GPU of this node (an index
  past the last GPU, another node's UUID or MIG id: CUDA stops at the first invalid entry — CUDA
  C++ Programming Guide, environment variables). The paste states it only for the values that
  hide everything whatever the node; an index or UUID hides them only on a node without that GPU,
  so it is the usual reading and ``decides`` names the check. Ray sets the variable itself in
  every task and actor it starts, to the GPUs it assigned them — an empty value for one that
  asked for no GPU (num_gpus=0: ray/_private/accelerators/nvidia_gpu.py,
  set_current_process_visible_accelerator_ids, unless RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES
  is set): no device in a Ray worker is that empty value, the usual reading.
- PyTorch's "device >= 0 && device < num_gpus INTERNAL ASSERT FAILED … device=N, num_gpus=M"
  (aten/src/ATen/cuda/CUDAContext.cpp, getDeviceProperties and canDeviceAccessPeer, which assert
  the index against c10::cuda::device_count()): with its payload, an N at or past an M of at
  least one is an index past the GPUs the process sees — cudaErrorInvalidDevice's meaning, met
  before CUDA is asked. Without the payload, or with M = 0 (no GPU seen at all), it is not read.

The messages above that state their cause (all but CUDA error 101, JAX's and the visibility
readings) are not read where prose right before one names it as what a change fixed or avoids
("fixed the 'Input type …' error", "to avoid: RuntimeError: …"); "how to fix …" asks about an
error still raised, and is read.

Not these: TensorFlow's "Invalid device ordinal value (1). Valid range is [0, 0]" (its own
device numbering, raised by a TensorFlow bug with a GPU it skips), CUDA error 999's advice about
changing CUDA_VISIBLE_DEVICES after program start (driver-not-loaded's reading), a CPU-only build
or a missing driver without any of these messages (cpu-only-build, driver-not-loaded).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from gpuwarden.health.explain.match import quoted, raised_mentions
from gpuwarden.health.explain.sizes import whole_number
from gpuwarden.health.explain.text import strip_decorations
from gpuwarden.health.explain.votes import Vote

ORDINAL = "device-ordinal-invalid"
SHARED_GPU = "ranks-share-a-gpu"
CHECKPOINT = "checkpoint-on-missing-cuda"
MISMATCH = "tensor-device-mismatch"
HIDDEN = "visible-devices-hide-all"

# A paste mentions one (lower case) before the patterns are tried.
WORDS = (
    "device ordinal",
    "invalid_device",
    "invaliddevice",
    "duplicate gpu",
    "deserialize object",
    "same device",
    "different gpus",
    "device type",
    "expected type torch",
    "desired type torch",
    "but got backend",
    # TensorIterator's compute_types (_DEVICE_PAIRS)
    "but got device",
    "desired device",
    "to be on gpu",
    "buffers on device",
    # the checks naming two tensors' types or backends (_TYPE_PAIRS), the RNN's on two GPUs
    "weight type (",
    "bias type (",
    "same type as tensor for",
    "but found type",
    "but got tensor with",
    "(got ",
    "not at the same gpu",
    "incompatible devices",
    "cuda_visible_devices",
    # CUDA finding no device (_NO_DEVICE), for a Ray process that shows no variable
    "no cuda-capable device",
    "nodevice",
    "no_device",
    "no cuda gpus",
    "error=38",
    "error (38)",
    "num_gpus=",
)

# Weights (rank.py: ≥ 0.85 high, ≥ 0.55 medium): the message states the cause; a value that hides
# the GPUs only on some nodes is the usual reading; a code with two documented meanings is one
# candidate.
STATED = 0.9
USUAL = 0.6
CANDIDATE = 0.5
_EXCLUSIVE_WEIGHT = 0.45

_ORDINAL = re.compile(
    r"invalid device ordinal(?!\s+value)|CUDA_ERROR_INVALID_DEVICE|cudaErrorInvalidDevice\b",
    re.IGNORECASE,
)
# PyTorch's index assertion with its payload (the peer form names peer_device).
_INDEX_ASSERT = re.compile(
    r"(?P<name>(?:peer_)?device) >= 0 && (?P=name) < num_gpus INTERNAL ASSERT FAILED"
    r".{0,400}?\b(?P=name)=(?P<index>\d+),\s*num_gpus=(?P<seen>\d+)",
    re.IGNORECASE | re.DOTALL,
)
# Driver calls that return CUDA_ERROR_INVALID_DEVICE for a GPU another process holds in
# Exclusive_Process compute mode, too.
_CONTEXT_CALL = re.compile(r"cuDevicePrimaryCtxRetain|cuCtxCreate", re.IGNORECASE)
# Memory advice, which returns it for a GPU without concurrent managed access, too (Taichi's
# unified_allocator.cpp makes such a call; its "mem_advise (cuMemAdvise)" names the call itself).
_ADVICE_CALL = re.compile(r"\bcu(?:da)?MemAdvise|\bunified_allocator\.cpp\b", re.IGNORECASE)
_DUPLICATE = re.compile(
    r"Duplicate GPU detected"
    r"(?:\s*+:?\s*+rank\s*\d+\s+and\s+rank\s*\d+\s+both on CUDA device\s*\w+)?",
    re.IGNORECASE,
)
_DESERIALIZE = re.compile(
    r"Attempting to\s*deserialize object on (?:a CUDA device but torch\W?cuda\.is_available\(\) "
    r"is False|CUDA device \d+ but torch\.cuda\.device_count\(\) is \d+|a CUDA)",
    re.IGNORECASE,
)
# PyTorch 1.0-1.1's legacy type names: a CUDA tensor's names its backend, a CPU tensor's does not.
_CUDA_TYPE = r"torch\.cuda\.[\w.]+"
_CPU_TYPE = r"torch\.(?!cuda\.)[\w.]+"
_MISMATCH = re.compile(
    r"Expected all tensors to be on the same device(?:,? but (?:found at least two devices,? "
    r"\S+ and [\w:]+|got \w+ is on [\w:]+, different from other tensors on [\w:]+))?|"
    r"Expected object of device type \w+ but got device type \w+|"
    # PyTorch 1.0-1.4's checked_tensor_unwrap (aten/src/ATen/Utils.h): the backend names the
    # device (CPU, CUDA); Sparse* against its dense twin is a layout mismatch, not read here
    r"Expected object of backend (?:CPU but got backend CUDA|CUDA but got backend CPU)\b|"
    # PyTorch 0.x's assertSameGPU (torch/csrc/cudnn/Exceptions.h): cuDNN's operands on two GPUs
    r"\btensors are on different GPUs\b|"
    # ATen's checkSameGPU (aten/src/ATen/TensorUtils.cpp) names each CPU operand in a clause of
    # its own: a single clause leaves the other operand on a GPU; two (both on the CPU) are not
    # two devices. Its second check names two GPUs.
    r"(?<!is on CPU, )Tensor for (?:argument #\d+ )?'[^']+' is on CPU, but expected (?:it|them) "
    r"to be on GPU|"
    r"Expected tensor for (?:argument #\d+ )?'[^']+' to have the same device as tensor for "
    r"(?:argument #\d+ )?'[^']+'; but device \d+ does not equal \d+|"
    # masked_fill_'s checks (aten/src/ATen/native/cuda/Indexing.cu, masked_fill__cuda; its MPS and
    # XPU twins word it the same): the mask on another device than self, or (the tensor-value
    # overload) self on the CPU beside a CUDA operand
    r"expected self and mask to be on the same device, but got mask on [\w:]+ and self on "
    r"[\w:]+|masked_fill_: Expected inputs to be on same device|"
    # PyTorch 1.0-1.1's TensorIterator (aten/src/ATen/native/TensorIterator.cpp): binary_op's two
    # CUDA inputs on two GPUs, and compute_types' legacy type names, which carry the backend
    # (torch.cuda.FloatTensor against torch.FloatTensor). Two types of one backend differ in
    # dtype or layout only: not read.
    r"binary_op\(\): expected both inputs to be on same device, but input a is on [\w:]+ and "
    r"input b is on [\w:]+|"
    rf"expected type (?:{_CUDA_TYPE} but got {_CPU_TYPE}|{_CPU_TYPE} but got {_CUDA_TYPE})|"
    rf"output with type (?:{_CUDA_TYPE} doesn't match the desired type {_CPU_TYPE}|"
    rf"{_CPU_TYPE} doesn't match the desired type {_CUDA_TYPE})",
    re.IGNORECASE,
)
# ATen's check_generator: the kernel's device type, then the generator's (a different one: the
# check passes when they are equal).
_GENERATOR_DEVICE = re.compile(
    r"Expected a '(\w{1,32})' device type for generator but found '(?!\1')\w{1,32}'",
    re.IGNORECASE,
)
# Checks that name two tensors' types or backends (see the module's docstring), each with its two
# names as groups 1 and 2: a device mismatch only where the names sit on two devices.
_TYPE_NAME = r"[\w.:]{1,64}"
_TYPE_PAIRS = (
    # Convolution.cpp, check_input_same_type_as_parameters
    re.compile(
        rf"Input type \(({_TYPE_NAME})\) and (?:weight|bias) type \(({_TYPE_NAME})\) should be "
        r"the same"
    ),
    # TensorUtils.cpp, checkSameType
    re.compile(
        r"Expected tensor for (?:argument #\d{1,3} )?'[^'\n]{1,64}' to have the same type as "
        r"tensor for (?:argument #\d{1,3} )?'[^'\n]{1,64}'; but type "
        rf"({_TYPE_NAME}) does not equal ({_TYPE_NAME})"
    ),
    # PyTorch 0.4-1.0's checked casts (aten/src/ATen/Utils.h, checked_cast_storage; 0.4's
    # checked_cast_tensor words it the same)
    re.compile(
        rf"Expected object of type ({_TYPE_NAME}) but found type ({_TYPE_NAME}) for argument "
        r"#\d{1,3} '"
    ),
    # TensorUtils.cpp, checkBackend and checkDeviceType; bmm's checkOnCPU (LinearAlgebra.cpp)
    re.compile(
        r"Expect(?:ed)? tensor to have (\w{1,32}) (?:Backend|backend|DeviceType), but got tensor "
        r"with (\w{1,32}) (?:Backend|DeviceType)"
    ),
)
# The legacy constructors' new_with_tensor (torch/csrc/utils/tensor_new.cpp), given a tensor of
# another backend (torch.cuda.FloatTensor(cpu_tensor)): 1.0-1.4 name the backends, "expected
# CUDA (got CPU)", 0.4 the types, "expected torch.cuda.FloatTensor (got torch.FloatTensor)"; its
# dtype check, "expected Float (got Double)", names no device. Groups 1 and 2 as _TYPE_PAIRS'.
_LEGACY_CONSTRUCTOR = re.compile(rf"expected ({_TYPE_NAME}) \(got ({_TYPE_NAME})\)")
# The device a type or backend name sits on: the legacy Python names (torch.cuda.* on a GPU, any
# other torch.* on the CPU), then ATen's, a dispatch key (a layout prefix, then the device) and
# the scalar type, or the backend alone. Meta and a bare scalar type match neither.
_LEGACY_TYPE = re.compile(r"torch\.(?P<cuda>cuda\.)?(?:sparse\.)?[A-Z]\w{0,30}Tensor")
_ATEN_TYPE = re.compile(
    r"(?:Sparse(?:Csr)?|Mkldnn|Quantized)?(?P<device>CPU|CUDA|HIP|MPS|XPU)(?:[A-Z]\w{0,30}Type)?"
)
# TensorIterator's compute_types (see the module's docstring), each with its two devices as groups
# 1 and 2 (c10::Device as printed: a DeviceType's name, then its index: "cpu", "cuda:0"); 1.2's
# form names a dtype after each. Meta is left out: a meta tensor holds no data (as above). A
# tensor's device other than the CPU always has its index, so "cuda" beside "cuda:0" (one GPU or
# two?) is never compared.
_DEVICE_NAME = r"(cpu|(?:cuda|hip|xpu|mps|xla|hpu|mtia|vulkan):\d{1,3})(?![\w:])"
_THEN_DTYPE = r"(?: and dtype \w{1,32})?"
_DEVICE_PAIRS = (
    re.compile(
        rf"expected device {_DEVICE_NAME}{_THEN_DTYPE} but got device {_DEVICE_NAME}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"output with device {_DEVICE_NAME}{_THEN_DTYPE} doesn't match the desired device "
        rf"{_DEVICE_NAME}",
        re.IGNORECASE,
    ),
)
# Checks that fail only when their tensors are on two devices (see the module's docstring).
_DEVICES_DIFFER = re.compile(
    r"Input and (?:hidden|parameter) (?:CUDA )?tensors are not at the same (?:device|GPU)"
    r"(?:, found input tensor at [\w:]{1,32} and (?:hidden|parameter) tensor at [\w:]{1,32})?|"
    r"indices should be either on cpu or on the same device as the indexed tensor"
    r"(?: \([\w:]{1,32}\))?|"
    r"(?:torch\.cat\(\): )?all input tensors (?:and out )?must be on the same device"
    r"(?:\. Received [\w:]{1,32} and [\w:]{1,32}|, but inputs are on [\w:]{1,32} and out is on "
    r"[\w:]{1,32})?",
    re.IGNORECASE,
)
# DataParallel refusing a model whose parameters or buffers are not on device_ids[0] (the colon
# after "on device" is in some releases only).
_DATA_PARALLEL_PLACEMENT = re.compile(
    r"module must have its parameters and buffers on device \S+ \(device_ids\[0\]\),? but "
    r"found one of them on device:? ?[\w:]+",
    re.IGNORECASE,
)
# JAX's jit refusing arguments on different devices (jax/_src/pjit.py): the message, then the
# two sides it names, each ending in its device ids and platform (or an abstract mesh's size);
# a side that is an argument starts with ARG_SHARDING or "argument <name> of <function>".
_JAX_MISMATCH = re.compile(
    r"Received incompatible devices for p?jitted computation\.", re.IGNORECASE
)
_JAX_SIDE = re.compile(
    r"(?P<argument>\bARG_SHARDING with |\bargument \S+ of .{1,200}? and )?"
    r"(?:device ids \[[^\]]{0,200}\] on platform \w+|as AbstractMesh of size \d+)",
    re.IGNORECASE,
)
# How far past the message its two sides are looked for.
_JAX_SIDES_SPAN = 800
# CUDA finds no device (the runtime's and driver's texts, PyTorch's, the legacy error 38).
_NO_DEVICE = re.compile(
    r"no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|"
    r"No CUDA GPUs are available|THCudaCheck FAIL.{0,200}?error=38\b|"
    r"cuda runtime error \(38\)",
    re.IGNORECASE,
)
_RAY = re.compile(
    r"ray::|raylet|\bRay(?:WorkerWrapper|TaskError|Worker)\b|"
    r"\bray\.(?:init|remote|get|exceptions|serve|train|util|data)\b|ray/_private|ServeReplica|"
    r"\bRay (?:Serve|Train|actor|worker|task)",
    re.IGNORECASE,
)
# CUDA error 999's own advice mentions the variable (driver-not-loaded reads that message).
_UNKNOWN_ERROR = re.compile(r"CUDA unknown error|cudaErrorUnknown", re.IGNORECASE)
# CUDA_VISIBLE_DEVICES given a value: `export CUDA_VISIBLE_DEVICES=1`, `os.environ[
# "CUDA_VISIBLE_DEVICES"] = '7'`, a launcher's "CUDA_VISIBLE_DEVICES: [0,1]". Read in one line:
# the value of `export CUDA_VISIBLE_DEVICES=` at a line's end is empty, not the next line's word.
_ASSIGNED = re.compile(r"CUDA_VISIBLE_DEVICES['\"]?\]?[ \t]*[=:][ \t]*(?P<value>[\"']?[^\s\"']*)")
# Values that hide every GPU of any node: empty, -1, Slurm's placeholder when no GPU is allocated.
_HIDES_ALL = re.compile(r"[\"']?(?:-1|NoDevFiles|none)?$", re.IGNORECASE)

_MEANINGS = {
    ORDINAL: "CUDA error 101 (cudaErrorInvalidDevice): the program asked for a GPU index the "
    "process cannot see — more ranks per node than GPUs, cuda:N / --gpu N past the last GPU, or "
    "a CUDA_VISIBLE_DEVICES list shorter than the ranks",
    SHARED_GPU: "NCCL refuses two ranks of one communicator on the same GPU: the ranks were not "
    "given one GPU each",
    CHECKPOINT: "torch.load met storages saved on a CUDA device this process does not have (no "
    "CUDA at all, or fewer GPUs than the saved index)",
    MISMATCH: "one operation got tensors on two devices: an input, buffer or submodule was not "
    "moved to the model's device, or a model split over devices mixes its parts",
}
_DATA_PARALLEL_MEANING = (
    "DataParallel found the wrapped model's parameters or buffers on another device than the "
    "first of its device_ids (by default every visible GPU, so cuda:0): the model was not moved "
    "to device_ids[0] — left on the CPU, or moved to another GPU and wrapped without "
    "device_ids=[that GPU]"
)
_GENERATOR_MEANING = (
    "PyTorch's check that a random-number generator is of the device type of the operation "
    "drawing from it: the operation's tensors are on one device and its generator on another — "
    "torch.Generator() (a CPU generator) beside CUDA tensors, or a default device set to CUDA "
    "that puts a sampler's torch.randperm on the GPU while its generator stays on the CPU"
)
_TYPE_PAIR_MEANING = (
    "PyTorch's check that two tensors have one type found them on two devices ({first} on "
    "{first_device}, {second} on {second_device}): the input was not moved to the model's "
    "device, or a weight, bias or buffer was not"
)
_CONSTRUCTOR_MEANING = (
    "PyTorch's legacy tensor constructor ({first}, on {first_device}) was given a tensor on "
    "another device ({second}, on {second_device}): the input was not moved to the device the "
    "code builds its tensor on"
)
_DEVICE_PAIR_MEANING = (
    "PyTorch's TensorIterator found one operation's tensors on two devices ({first_device} "
    "and {second_device}): an input, buffer or out= tensor was not moved to the model's device"
)
_INDEX_ASSERT_MEANING = (
    "PyTorch asserts a device index below the GPUs the process sees: it asked for GPU {index} "
    "and sees {seen}"
)
_CONTEXT_MEANING = (
    "CUDA_ERROR_INVALID_DEVICE from a context call: a device index this process cannot see, or "
    "a GPU in Exclusive_Process mode that another process holds"
)
_ADVICE_MEANING = (
    "invalid device from a unified-memory advice (cudaMemAdvise): a device index this process "
    "cannot see, or a GPU without concurrent managed access (before Pascal, or under Windows)"
)
_ADVICE_DECIDES = (
    "`nvidia-smi -L` against the device index advised, and the GPU's concurrentManagedAccess "
    "(cudaDeviceGetAttribute(cudaDevAttrConcurrentManagedAccess), 0 before Pascal and on "
    "Windows): without it, turn the advice off (Taichi: TI_USE_UNIFIED_MEMORY=0)"
)
_HIDES_ALL_MEANING = (
    "CUDA_VISIBLE_DEVICES is empty, -1 or Slurm's NoDevFiles and CUDA finds no device: the "
    "variable hides every GPU"
)
_RAY_MEANING = (
    "CUDA finds no device in a Ray process: Ray sets CUDA_VISIBLE_DEVICES in each task and actor "
    "to the GPUs it assigned, an empty value for one that asked for none (num_gpus=0)"
)
_RAY_DECIDES = (
    "`ray.get_gpu_ids()` and `os.environ['CUDA_VISIBLE_DEVICES']` in the failing task or actor, "
    "and the num_gpus (or placement-group bundle) it was started with"
)
_NAMES_ABSENT_MEANING = (
    "CUDA_VISIBLE_DEVICES is set and CUDA finds no device: the value names no GPU of this node "
    "(an index past the last GPU, another node's UUID or MIG id) and so hides them all"
)
DECIDES = {
    ORDINAL: "`nvidia-smi -L` and `echo $CUDA_VISIBLE_DEVICES` (the GPUs the process sees) "
    "against what it asks for: --nproc-per-node, LOCAL_RANK, cuda:N / --gpu N; "
    "python -c 'import torch; print(torch.cuda.device_count())'",
    SHARED_GPU: "each rank's LOCAL_RANK and torch.cuda.current_device() before "
    "init_process_group (NCCL_DEBUG=INFO prints 'cudaDev N busId …' per rank); --nproc-per-node "
    "against `nvidia-smi -L`",
    CHECKPOINT: 'python -c "import torch; print(torch.__version__, torch.version.cuda, '
    'torch.cuda.is_available(), torch.cuda.device_count())" and `nvidia-smi` (works = a CPU '
    "build or a hidden GPU; fails = the driver)",
    MISMATCH: "the argument the message names (mat1, index, weight…) and the device of each "
    "input; `model.hf_device_map` for a model split by device_map",
    HIDDEN: "`echo $CUDA_VISIBLE_DEVICES` in the failing process against `nvidia-smi -L` (its "
    "indexes and UUIDs): unset it to see whether CUDA then finds the GPUs",
}
_JAX_ARGUMENTS_MEANING = (
    "JAX's jit got two arguments committed to different devices (the host's CPU and a GPU, or "
    "two GPUs): an array put on another device, or converted from a host buffer, beside one on "
    "the computation's device"
)
_JAX_SHARDING_MEANING = (
    "JAX's jit got an argument whose devices differ from a sharding or mesh the program "
    "declared for the computation (explicit in/out shardings, a context mesh)"
)
_JAX_DECIDES = (
    "`x.devices()` (and `x.committed`) of each argument the message names, against "
    "jax.devices() and any jax.default_device / mesh context around the call"
)
_JAX_FIXES = (
    "put the arguments on one device before the call: jax.device_put(x, jax.devices('gpu')[0]) "
    "for one left on the CPU (jnp.asarray of a host array lands on the default device "
    "uncommitted, which jit moves freely)",
    "under a mesh or explicit in_shardings / out_shardings: give the inputs shardings of that "
    "same mesh (jax.device_put(x, NamedSharding(mesh, spec))), or call outside the mesh context",
)
_DATA_PARALLEL_DECIDES = (
    "the device the model was moved to (`next(model.parameters()).device`) against the "
    "device_ids DataParallel was given: wrap it with device_ids=[that GPU], or move it to "
    "device_ids[0]"
)
_GENERATOR_DECIDES = (
    "the generator's device (`generator.device`) against the operation's tensors; a default "
    "device of CUDA (torch.set_default_tensor_type / torch.set_default_device) moves "
    "DataLoader's RandomSampler onto the GPU: create the generator on that device "
    "(torch.Generator(device=...)) or leave the default device on the CPU"
)
_EXCLUSIVE_DECIDES = (
    "`nvidia-smi -q | grep -i 'compute mode'` (Exclusive_Process and another process on the GPU) "
    "and `echo $CUDA_VISIBLE_DEVICES` against the device index asked for"
)


def _ordinal_votes(flat: str) -> list[Vote]:
    found = _ORDINAL.search(flat)
    if found is None:
        return []
    if _ADVICE_CALL.search(flat) is not None:
        return [Vote(ORDINAL, CANDIDATE, quoted(found[0], _ADVICE_MEANING), _ADVICE_DECIDES)]
    if _CONTEXT_CALL.search(flat) is None:
        evidence = quoted(found[0], _MEANINGS[ORDINAL])
        return [Vote(ORDINAL, STATED, evidence, DECIDES[ORDINAL])]
    evidence = quoted(found[0], _CONTEXT_MEANING)
    return [
        Vote(ORDINAL, CANDIDATE, evidence, _EXCLUSIVE_DECIDES),
        Vote("compute-mode-exclusive", _EXCLUSIVE_WEIGHT, evidence, _EXCLUSIVE_DECIDES),
    ]


def _index_assert_votes(flat: str) -> list[Vote]:
    """PyTorch's index assertion whose payload asks for a GPU past the ones the process sees."""
    found = _INDEX_ASSERT.search(flat)
    if found is None:
        return []
    index, seen = whole_number(found["index"]), whole_number(found["seen"])
    if index is None or seen is None or seen == 0 or index < seen:
        return []  # more digits than any index or count has (sizes.MAX_DIGITS): not read
    evidence = quoted(found[0], _INDEX_ASSERT_MEANING.format(index=index, seen=seen))
    return [Vote(ORDINAL, STATED, evidence, DECIDES[ORDINAL])]


def _stated_votes(flat: str) -> list[Vote]:
    votes: list[Vote] = []
    for cause, pattern, meaning, decides in (
        (SHARED_GPU, _DUPLICATE, _MEANINGS[SHARED_GPU], DECIDES[SHARED_GPU]),
        (CHECKPOINT, _DESERIALIZE, _MEANINGS[CHECKPOINT], DECIDES[CHECKPOINT]),
        (MISMATCH, _MISMATCH, _MEANINGS[MISMATCH], DECIDES[MISMATCH]),
        (MISMATCH, _DATA_PARALLEL_PLACEMENT, _DATA_PARALLEL_MEANING, _DATA_PARALLEL_DECIDES),
        (MISMATCH, _GENERATOR_DEVICE, _GENERATOR_MEANING, _GENERATOR_DECIDES),
    ):
        found = next((m for m, _ in raised_mentions(pattern, flat)), None)
        if found is not None:
            votes.append(Vote(cause, STATED, quoted(found[0], meaning), decides))
    return votes


def _device_of(name: str) -> str | None:
    """The device type (lower case) a tensor type or backend name sits on, None for a name that
    gives none."""
    legacy = _LEGACY_TYPE.fullmatch(name)
    if legacy is not None:
        return "cuda" if legacy["cuda"] else "cpu"
    aten = _ATEN_TYPE.fullmatch(name)
    return None if aten is None else aten["device"].lower()


def _pair_votes(
    flat: str,
    patterns: Iterable[re.Pattern[str]],
    device_of: Callable[[str], str | None],
    meaning_format: str,
) -> list[Vote]:
    """The first of ``patterns`` (each with two names as groups 1 and 2) whose names sit on two
    devices (``device_of`` a name; None for one that gives none)."""
    for pattern in patterns:
        for found, _ in raised_mentions(pattern, flat):
            first, second = found[1], found[2]
            first_device, second_device = device_of(first), device_of(second)
            if first_device is None or second_device is None or first_device == second_device:
                continue
            meaning = meaning_format.format(
                first=first,
                first_device=first_device,
                second=second,
                second_device=second_device,
            )
            return [Vote(MISMATCH, STATED, quoted(found[0], meaning), DECIDES[MISMATCH])]
    return []


def _devices_differ_votes(flat: str) -> list[Vote]:
    """The first check that fails only for tensors on two devices."""
    for found, _ in raised_mentions(_DEVICES_DIFFER, flat):
        evidence = quoted(found[0], _MEANINGS[MISMATCH])
        return [Vote(MISMATCH, STATED, evidence, DECIDES[MISMATCH])]
    return []


def _jax_mismatch_votes(flat: str) -> list[Vote]:
    """JAX's jit refusing its arguments' devices: stated where both sides it names are
    arguments; the usual reading where one is a declared sharding or mesh, or where the paste
    does not show the sides (the documented meaning, unconfirmed)."""
    found = _JAX_MISMATCH.search(flat)
    if found is None:
        return []
    sides_text = flat[found.end() : found.end() + _JAX_SIDES_SPAN]
    sides = list(_JAX_SIDE.finditer(sides_text))[:2]
    arguments = sum(side["argument"] is not None for side in sides)
    if arguments == 2:
        weight, meaning = STATED, _JAX_ARGUMENTS_MEANING
    elif len(sides) == 2:
        weight, meaning = USUAL, _JAX_SHARDING_MEANING
    else:
        weight, meaning = USUAL, _JAX_ARGUMENTS_MEANING
    phrase = flat[found.start() : found.end() + (sides[-1].end() if sides else 0)]
    return [Vote(MISMATCH, weight, quoted(phrase, meaning), _JAX_DECIDES, _JAX_FIXES)]


def _assignments(lines: Iterable[str]) -> list[re.Match[str]]:
    """Every CUDA_VISIBLE_DEVICES assignment, each read within its line."""
    return [match for line in lines for match in _ASSIGNED.finditer(line)]


def _ray_votes(text: str) -> list[Vote]:
    """No device in a Ray task or actor that the paste shows no CUDA_VISIBLE_DEVICES value for:
    the empty value Ray set, as the usual reading. ``text`` is the paste as given: Ray's log
    prefix, "(RayWorkerWrapper pid=12)", is a decoration the flat text drops."""
    ray = _RAY.search(text)
    if ray is None:
        return []
    return [Vote(HIDDEN, USUAL, quoted(ray[0], _RAY_MEANING), _RAY_DECIDES)]


def _hidden_votes(flat: str, lines: Iterable[str], text: str) -> list[Vote]:
    if _NO_DEVICE.search(flat) is None or _UNKNOWN_ERROR.search(flat) is not None:
        return []
    assignments = _assignments(lines)
    if not assignments:
        return _ray_votes(text)
    hides_all = [a for a in assignments if _HIDES_ALL.fullmatch(a["value"])]
    if hides_all:
        return [Vote(HIDDEN, STATED, quoted(hides_all[0][0], _HIDES_ALL_MEANING), DECIDES[HIDDEN])]
    evidence = quoted(assignments[0][0], _NAMES_ABSENT_MEANING)
    return [Vote(HIDDEN, USUAL, evidence, DECIDES[HIDDEN])]


def placement_votes(flat: str, raw: str | None = None) -> list[Vote]:
    """Votes for the device placement and visibility causes in a flattened paste; ``raw`` (the
    paste's lines) is where CUDA_VISIBLE_DEVICES values are read, the flat text as one line when
    it is not given."""
    lines = [flat] if raw is None else (strip_decorations(line) for line in raw.split("\n"))
    text = flat if raw is None else raw
    return [
        *_ordinal_votes(flat),
        *_index_assert_votes(flat),
        *_stated_votes(flat),
        *_pair_votes(flat, _TYPE_PAIRS, _device_of, _TYPE_PAIR_MEANING),
        *_pair_votes(flat, (_LEGACY_CONSTRUCTOR,), _device_of, _CONSTRUCTOR_MEANING),
        *_pair_votes(flat, _DEVICE_PAIRS, str.lower, _DEVICE_PAIR_MEANING),
        *_devices_differ_votes(flat),
        *_jax_mismatch_votes(flat),
        *_hidden_votes(flat, lines, text),
    ]
