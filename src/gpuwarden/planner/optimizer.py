"""Optimizer states and the temporaries of ``optimizer.step()`` (memory.md §2.4)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwarden.planner.layout import distinct_layers, total_parameters
from gpuwarden.planner.precision import Recipe
from gpuwarden.planner.weight_formats import FP32_BYTES
from gpuwarden.types.model import ModelSpec
from gpuwarden.types.plan import Mode, Optimizer, OptimizerImpl, PlanRequest

BNB_CODE_BYTES = 1  # bitsandbytes AdamW8bit: one uint8 code per element and state
BNB_BLOCK = 256  # bitsandbytes blockwise quantization: one fp32 absmax per 256 elements
BNB_MIN_8BIT = 4096  # tensors smaller than min_8bit_size keep 32-bit states
SCALE_BYTES = FP32_BYTES  # one fp32 scale per block (bitsandbytes absmax, torchao ``scale``)
ADAM_STATES = 2  # exp_avg and exp_avg_sq


@dataclass(frozen=True, slots=True)
class TorchaoStates:
    """One torchao.optim quantized state tensor (read at pytorch/ao @029bb60a, torchao/optim/
    adam.py and subclass_*.py; subclass_8bit.py at @01962500, adam.py at @0372e5ff): ``codes``
    of ``code_bytes`` per element and one fp32 ``scale`` per ``block`` elements.
    ``_AdamBase._new_buffer`` quantizes only tensors of at least 4,096 elements whose size the
    block divides ("follow bitsandbytes"); the others get ``torch.zeros_like(p)``, states in the
    parameter's own dtype."""

    code_bytes: float
    block: int
    name: str


TORCHAO_STATES = {
    # OptimState4bit.zeros: uint8 codes of n // 2 (two 4-bit codes a byte), n // 128 scales
    Optimizer.ADAMW_4BIT: TorchaoStates(0.5, 128, "AdamW4bit"),
    # OptimStateFp8.zeros: float8_e4m3fn codes of the tensor's shape, n // 256 scales
    Optimizer.ADAMW_FP8: TorchaoStates(1.0, 256, "AdamWFp8"),
    # OptimState8bit.zeros: uint8 codes of the tensor's shape, n // 256 fp32 scales (AdamW8bit's
    # default block_size) and a 256-entry fp32 qmap per state tensor (1 KiB a tensor: left out).
    # The same bytes per element as bitsandbytes' blockwise states; what differs is the rest:
    # small tensors keep states in the parameter's dtype (bitsandbytes: fp32) and the step is
    # single_param_adam's compiled fp32 arithmetic (bitsandbytes: one fused kernel, no copies)
    Optimizer.ADAMW_8BIT_TORCHAO: TorchaoStates(1.0, 256, "AdamW8bit"),
}
# single_param_adam (torch.compile'd, one parameter at a time) dequantizes both states to fp32
# (exp_avg.float().lerp(...)) and quantizes them back blockwise by copy_: two fp32 copies of a
# parameter alive at once, the largest parameter's at the step's peak
TORCHAO_FP32_STATE_COPIES = 2
# torch's single-tensor AdamW: the square root of exp_avg_sq and its quotient by the bias
# correction, alive together
SINGLE_TENSOR_STEP_COPIES = 2
# The optimizers whose step does not run torch.optim's kernels (``optimizer_impl`` means nothing
# to them): bitsandbytes' 8-bit step is one in-place CUDA kernel per tensor, plain SGD adds the
# gradient in place, and torchao steps through its own compiled function
OWN_STEP_KERNELS = frozenset(
    {Optimizer.NONE, Optimizer.SGD, Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT}
    | TORCHAO_STATES.keys()
)


@dataclass(frozen=True, slots=True)
class StateCost:
    per_param: float  # bytes of optimizer state per trainable parameter (before sharding)
    paged: bool  # CUDA unified memory: outside the PyTorch allocator, spills to host RAM
    source: str
    detail: str


def _small_tensor_share(spec: ModelSpec) -> float:
    """Share of parameters in tensors below bitsandbytes' min_8bit_size (norms, biases)."""
    small = 0
    for layer, times in distinct_layers(spec):
        small += times * (
            layer.norms + sum(lin.out_features * lin.count for lin in layer.linears if lin.bias)
        )
    small += spec.parameters.final_norm
    total = total_parameters(spec)
    return min(1.0, small / total) if total else 0.0


def state_cost(request: PlanRequest, rc: Recipe) -> StateCost:
    opt = request.optimizer
    s = rc.state_dtype_bytes
    if opt is Optimizer.ADAMW:
        return StateCost(
            2 * s,
            False,
            "PyTorch AdamW: exp_avg and exp_avg_sq per parameter (memory.md §2.4)",
            f"2 states × {s:g} B",
        )
    if opt in {Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT}:
        per = _blockwise_per_param(request, BNB_CODE_BYTES, BNB_BLOCK, FP32_BYTES)
        paged = opt is Optimizer.PAGED_ADAMW_8BIT
        return StateCost(
            per,
            paged,
            "bitsandbytes AdamW8bit: 2 × uint8 + fp32 absmax per 256; tensors < 4096 elements "
            "keep fp32 states" + ("; paged (cudaMallocManaged)" if paged else ""),
            f"{per:.3f} B per parameter",
        )
    if opt in TORCHAO_STATES:
        return _torchao_state_cost(request, TORCHAO_STATES[opt], s)
    if opt is Optimizer.SGD_MOMENTUM:
        return StateCost(s, False, "SGD momentum buffer, one per parameter", f"{s:g} B")
    if opt is Optimizer.ADAFACTOR:
        return StateCost(
            _adafactor_per_param(request.model, request),
            False,
            "Adafactor (Shazeer & Stern 2018): factored second moment, rows + columns per matrix, "
            "no first moment (beta1=None default)",
            "fp32 row and column statistics",
        )
    return StateCost(0.0, False, "no optimizer state", "")


def _blockwise_per_param(
    request: PlanRequest, code_bytes: float, block: int, unquantized_bytes: float
) -> float:
    """Bytes per parameter of AdamW's two blockwise-quantized states (bitsandbytes, torchao):
    ``code_bytes`` per element and an fp32 scale per ``block``; tensors under 4,096 elements
    (``_small_tensor_share``, counted for full training) keep two states of
    ``unquantized_bytes``."""
    small = _small_tensor_share(request.model) if request.mode is Mode.TRAIN else 0.0
    quantized = ADAM_STATES * (code_bytes + SCALE_BYTES / block)
    return (1 - small) * quantized + small * ADAM_STATES * unquantized_bytes


def _torchao_state_cost(request: PlanRequest, states: TorchaoStates, own: float) -> StateCost:
    """torchao's quantized AdamW states; tensors it leaves unquantized (norms, biases: under
    4,096 elements) keep two states in the parameter's dtype (``own`` bytes)."""
    per = _blockwise_per_param(request, states.code_bytes, states.block, own)
    return StateCost(
        per,
        False,
        f"torchao.optim {states.name}: 2 × {states.code_bytes:g}-byte codes + an fp32 scale per "
        f"{states.block}; tensors < 4096 elements keep states in the parameter's dtype",
        f"{per:.3f} B per parameter",
    )


def _adafactor_per_param(spec: ModelSpec, request: PlanRequest) -> float:
    if request.mode is not Mode.TRAIN:
        return 4.0  # adapters are small matrices: close to one fp32 value each
    factored = 0
    matrix_params = 0
    for layer, times in distinct_layers(spec):
        for lin in layer.linears:
            matrix_params += lin.in_features * lin.out_features * lin.count * times
            factored += (lin.in_features + lin.out_features) * lin.count * times
    total = total_parameters(spec)
    rest = total - matrix_params
    h = spec.hidden_size
    rows = spec.vocab_size + h
    factored += rows * (2 if spec.parameters.lm_head else 1)
    rest -= spec.parameters.embedding + spec.parameters.lm_head
    return 4 * (factored + max(0, rest)) / total if total else 0.0


def step_temporaries(
    request: PlanRequest, rc: Recipe, trainable_local: float, largest_local: float
) -> int:
    """Bytes ``optimizer.step()`` after backward allocates over every parameter and frees again
    (the TEMP of MemTracker, memory.md §5.4). Stepping in backward, each parameter has its own
    optimizer (torchtune's ``{p: instantiate(cfg_optimizer, [p])}``) and steps alone:
    ``parameter_step_temporaries``."""
    if trainable_local <= 0:
        return 0
    if request.optimizer_impl is OptimizerImpl.FOREACH and _torch_kernels(request):
        # torch._foreach_sqrt(exp_avg_sqs) materialises a state-sized list for the whole group.
        return int(trainable_local * rc.state_dtype_bytes)
    return parameter_step_temporaries(request, rc, largest_local)


def parameter_step_temporaries(request: PlanRequest, rc: Recipe, elements: float) -> int:
    """Bytes the step of one parameter of ``elements`` values allocates at its peak (read in
    torch/optim/adamw.py, torchao/optim/adam.py, bitsandbytes' optimizer kernels)."""
    if request.optimizer in TORCHAO_STATES:
        return int(TORCHAO_FP32_STATE_COPIES * elements * FP32_BYTES)
    if not _torch_kernels(request):
        return 0
    impl = request.optimizer_impl
    if impl is OptimizerImpl.FOREACH:
        # _multi_tensor_adamw over this parameter: _foreach_sqrt(exp_avg_sqs) allocates one
        # state-sized tensor; the division, eps and addcdiv_ then work in place.
        return int(elements * rc.state_dtype_bytes)
    if impl is OptimizerImpl.FOR_LOOP:
        # _single_tensor_adamw: `exp_avg_sq.sqrt() / bias_correction2_sqrt` holds the root and
        # the quotient at once: two temporaries of the tensor.
        return int(SINGLE_TENSOR_STEP_COPIES * elements * rc.state_dtype_bytes)
    return 0  # torch._fused_adamw_ updates the parameter and both states in place


def _torch_kernels(request: PlanRequest) -> bool:
    """The step runs torch.optim's foreach / for-loop / fused kernels (``optimizer_impl``)."""
    return request.optimizer not in OWN_STEP_KERNELS
