"""``explain_text``: a pasted error, log excerpt or kernel log → ranked diagnoses."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwarden.health.explain import (
    build_toolkit,
    capability,
    capture,
    fabric,
    fork,
    gpudirect,
    host_oom,
    imex,
    kernel,
    mig_gpus,
    peer_access,
    placement,
    ptx_jit,
    shared_memory,
    stated_driver,
    vgpu,
    vgpu_license,
    wsl,
)
from gpuwarden.health.explain.arch_cuda import GPU_WORDS, arch_cuda_votes
from gpuwarden.health.explain.details import DETAIL_WORDS, detail_votes
from gpuwarden.health.explain.match import cuda_number_votes, signature_votes
from gpuwarden.health.explain.nccl import nccl_votes
from gpuwarden.health.explain.oom import oom_votes
from gpuwarden.health.explain.oom_parse import OOM_WORDS, OomReading, read_oom
from gpuwarden.health.explain.rank import Ceiling, rank
from gpuwarden.health.explain.rocm import rocm_ceiling
from gpuwarden.health.explain.screen import screen_votes
from gpuwarden.health.explain.text import Paste, read_paste
from gpuwarden.health.explain.vendor import ascend_ceiling, non_nvidia_ceiling
from gpuwarden.health.explain.votes import Vote
from gpuwarden.types.health import Explanation
from gpuwarden.types.telemetry import DeviceSample

# When nothing matched: what to capture so that something can.
NEXT_STEPS = (
    "the full traceback, from the first error line (the last lines are often an echo)",
    "`dmesg -T | grep -iE 'nvrm|xid'` on the node (Xid errors, a GPU that fell off the bus)",
    "`nvidia-smi -q` (ECC, retired pages, clocks, MIG and compute mode)",
    "for multi-GPU jobs: NCCL_DEBUG=INFO and every rank's log",
    'the versions: python -c "import torch; print(torch.__version__, torch.version.cuda)" and '
    "the `nvidia-smi` header (driver and CUDA version)",
)


def _on_flat(read: Callable[[str], list[Vote]]) -> Callable[[Paste], list[Vote]]:
    """A reader of the flat text as a reader of the paste."""
    return lambda paste: read(paste.flat)


# The readers run only on a paste that mentions one of their (lower-case) words: a cheap literal
# test before their patterns. A new reader is one more row.
_WORDED_READERS: tuple[tuple[tuple[str, ...], Callable[[Paste], list[Vote]]], ...] = (
    (DETAIL_WORDS, _on_flat(detail_votes)),
    (GPU_WORDS, _on_flat(arch_cuda_votes)),
    (capability.WORDS, _on_flat(capability.capability_range_votes)),
    (shared_memory.WORDS, _on_flat(shared_memory.shared_memory_votes)),
    (capture.WORDS, _on_flat(capture.capture_votes)),
    (host_oom.WORDS, host_oom.host_oom_votes),
    (build_toolkit.WORDS, _on_flat(build_toolkit.build_toolkit_votes)),
    (gpudirect.WORDS, _on_flat(gpudirect.gpudirect_votes)),
    (imex.WORDS, imex.imex_votes),
    (vgpu_license.WORDS, _on_flat(vgpu_license.vgpu_license_votes)),
    (placement.WORDS, lambda paste: placement.placement_votes(paste.flat, paste.raw)),
    (peer_access.WORDS, _on_flat(peer_access.peer_access_votes)),
    (fork.WORDS, _on_flat(fork.fork_votes)),
)


def _oom_facts(reading: OomReading | None) -> dict[str, str]:
    if reading is None:
        return {}
    facts: dict[str, str] = {}
    tf, xla, vllm = reading.tf, reading.xla, reading.vllm
    if tf.shape is not None:
        facts["tf_tensor_shape"] = "[" + ",".join(map(str, tf.shape)) + "]"
    for key, value in (
        ("tf_dtype", tf.dtype),
        ("tf_limit_bytes", tf.limit_bytes),
        ("tf_in_use_bytes", tf.in_use_bytes),
        ("xla_total_allocation_bytes", xla.total_allocation_bytes),
        ("vllm_max_seq_len", vllm.max_seq_len),
        ("vllm_kv_cache_tokens", vllm.kv_tokens),
        ("vllm_kv_needed_bytes", vllm.kv_needed_bytes),
        ("vllm_kv_available_bytes", vllm.kv_available_bytes),
        ("vllm_kv_budget_bytes", vllm.negative_kv_bytes),
        ("vllm_gpu_memory_utilization", vllm.requested_utilization),
    ):
        if value is not None:
            facts[key] = str(value)
    return facts


def _ceilings(
    paste: Paste,
    driver: stated_driver.DriverReading | None,
    voted: set[str],
    worded: Sequence[Vote],
) -> list[Ceiling]:
    """The ceilings the paste's origin puts on its diagnoses (ROCm, Ascend, another vendor's GPU,
    WSL 2, a machine without NVSwitches, the vGPU Manager, GPUs without MIG — read only when
    ``voted``, the causes the votes name, hold the MIG reading; a PyTorch build whose PTX the GPU
    can JIT-compile — unless ``worded``, the votes of the text's own phrases, read a failure), and
    what the paste states of the driver against an insufficient-driver error (a driver that runs
    its CUDA, no driver at all)."""
    found = (
        rocm_ceiling(paste),
        ascend_ceiling(paste),
        non_nvidia_ceiling(paste),
        wsl.wsl_ceiling(paste),
        fabric.no_nvswitch_ceiling(paste),
        vgpu.vgpu_manager_ceiling(paste),
        mig_gpus.no_mig_ceiling(paste, voted),
        ptx_jit.ptx_jit_ceiling(paste, worded),
        None if driver is None else driver.ceiling,
    )
    return [c for c in found if c is not None]


def explain_text(text: str, *, screen: Sequence[DeviceSample] = ()) -> Explanation:
    """What ``text`` says went wrong, most likely cause first. Pure; never raises on any
    string; a paste longer than ``text.SCAN_CHARS`` is read at its head and tail.

    ``screen``: the devices of an nvidia-smi screen pasted with the error (read by the caller):
    they decide between candidates the text leaves open."""
    paste = read_paste(text)
    flat = paste.flat
    reading = read_oom(flat) if paste.mentions(*OOM_WORDS) else None
    report = kernel.scan(paste.raw) if paste.mentions(*kernel.KERNEL_WORDS) else None
    nccl, nccl_facts = (
        nccl_votes(flat) if paste.mentions("watchdog", "timeout at nccl work") else ([], {})
    )
    driver = stated_driver.reading(paste)
    worded = [*signature_votes(paste), *cuda_number_votes(paste)]
    votes = [
        *worded,
        *(oom_votes(reading, flat) if paste.mentions(*OOM_WORDS) else []),
        *nccl,
        # a lost GPU the scanner read needs neither word ("GPU is lost", NV_ERR_GPU_IS_LOST)
        *(
            kernel.xid_votes(report, flat)
            if report is not None or paste.mentions("xid", "fallen off")
            else []
        ),
        *(
            vote
            for words, read in _WORDED_READERS
            if paste.mentions(*words)
            for vote in read(paste)
        ),
        *screen_votes(screen, paste),
        *(() if driver is None else driver.votes),
    ]
    voted = {vote.cause for vote in votes}
    ceilings = _ceilings(paste, driver, voted, worded)
    diagnoses = rank(votes, ceilings=ceilings)
    facts = {**_oom_facts(reading), **nccl_facts}
    if paste.truncated:
        facts["truncated"] = "true"
    return Explanation(
        diagnoses=diagnoses,
        oom=None if reading is None else reading.facts,
        kernel_log=report,
        next_steps=()
        if diagnoses
        else next((c.next_steps for c in ceilings if c.next_steps), NEXT_STEPS),
        facts=facts,
    )
