"""explain_text on the eighth held-out set (tests/data/explain/heldout8.jsonl, SOURCES.md): GitHub
threads of the kinds the seven earlier sets had few of — Kubernetes admission failures
(UnexpectedAdmissionError with a lost GPU, a stale kubelet, broken vGPU plugins), the GPU operator's
validators and toolkit hook (nvidia-container-cli.real, the bare "initialization error: load library
failed"), torchrun's ChildFailedError with exit -9/SIGKILL (the host's OOM killer, never a CUDA OOM;
``rank-killed`` since h41a), "misaligned address", cuDNN status errors, P2P/IPC "peer access is not
supported" and Windows' error 801, error 46 on exclusive-mode GPUs, "no CUDA-capable device" from a
wrong CUDA_VISIBLE_DEVICES, "NVIDIA-SMI has failed" after kernel or package upgrades, nouveau owning
the GPUs, the multi-line "fallen off the bus" without an Xid, NVLink Xid 145/149, watchdog timeouts
in PyTorch 2.4+ wordings, PyTorch 2.1–2.4 OOM wordings, vLLM V1's "To serve at least one request"
and Windows TDR — and texts whose cause is outside explain's vocabulary (label ``unknown``), which
must never get a confident cause."""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    diagnoses_of,
    load_set,
    never_raise,
    pipeline_check,
    set_checks,
    sets_before,
    top_cause,
)

# Measured on the labelled (non-unknown) texts before any code change: 23/29 right, 0 wrong at
# high confidence, 4 wrong at medium/low, 2 without an answer; unknown texts given a high cause:
# 0/31. After the changes in SOURCES.md: 26/29 (the three below), 0/31 unknown texts at high.
# h41a relabelled the 6 exit -9 texts unknown → rank-killed: 32/35, 0/25 unknown texts at high.
# h64b relabelled CUDA_VISIBLE_DEVICES=2 + error 38 unknown → visible-devices-hide-all (medium):
# 33/36, 0/24. h67a relabelled the four peer-access refusals (sglang#552, llama.cpp#3230,
# TensorRT-LLM#1498, dynamo#1229) unknown → gpu-p2p-unsupported (high): 37/40, 0/20.
MIN_ACCURACY = 0.89
_ERROR_46 = (
    "bare error 46 with no nvidia-smi screen, no GPU model and no MIG in the text: MIG without "
    "instances (first, the fixtures' bare vectorAdd precedent) and an exclusive-process GPU "
    "(second) both hold, low, with `nvidia-smi -q` compute/MIG mode as what decides"
)
KNOWN_MISSES = {
    "busy-error-46-summit-jsrun-stencil-11": f"{_ERROR_46}; that Summit's GPUs run "
    "EXCLUSIVE_PROCESS is site knowledge, not in the paste",
    "busy-thcudacheck-46-second-process-pytorch-3871": f"{_ERROR_46}; the second process is in "
    "the thread's prose, not the paste",
    "frag-torch-1-7gib-request-2-3gib-cached-mgfn-35": (
        "2.30 GiB cached ≥ 1.70 GiB tried, but free + cached leaves only 0.6 GiB after the "
        "request: read as the job at its limit (too big first, fragmentation second) — the shape "
        "heldout1's ootdiffusion-167/maddog-11 threads resolved as too big; the text cannot decide"
    ),
}

HELDOUT8 = load_set("heldout8")
EARLIER = sets_before(8)


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
) = set_checks(
    HELDOUT8,
    EARLIER,
    size=(40, 60),
    min_unknown=20,  # h64b and h67a relabelled (see above)
    min_causes=12,
    min_repositories=45,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


def test_the_known_misses_rank_the_label_second_and_say_what_decides() -> None:
    for example_id, second_expected in (
        ("busy-error-46-summit-jsrun-stencil-11", "compute-mode-exclusive"),
        ("busy-thcudacheck-46-second-process-pytorch-3871", "compute-mode-exclusive"),
        ("frag-torch-1-7gib-request-2-3gib-cached-mgfn-35", "oom-fragmentation"),
    ):
        first, second = diagnoses_of(HELDOUT8, example_id)[:2]
        assert second.cause == second_expected
        assert first.confidence is not Confidence.HIGH
        assert first.decides and second.decides


# doctor.explain adds what pasted screens say (the AMGX paste has an E. Process table): it must
# not turn an ``unknown`` text into a confident cause either
test_the_whole_pipeline_reads_the_set_the_same = pipeline_check(HELDOUT8, KNOWN_MISSES)


def test_the_toolkit_hook_s_wrapper_and_its_bare_wording() -> None:
    """libnvidia-container's "initialization error: load library failed: libnvidia-ml.so.1" is
    the host's driver missing, whether printed by nvidia-container-cli, by the GPU operator's
    nvidia-container-cli.real wrapper, or pasted from "initialization error" on; the device
    plugin's own "could not load NVML library" stays the runtime reading."""
    for example_id in (
        "ctr-operator-daemonset-libnvidia-ml-gpu-operator-511",
        "ctr-containerd-libnvidia-ml-ubuntu-2504-nvidia-container-toolkit-1312",
    ):
        top = diagnoses_of(HELDOUT8, example_id)[0]
        assert (top.cause, top.confidence) == ("container-host-driver-missing", Confidence.HIGH)
    plugin = diagnoses_of(HELDOUT8, "ctr-k0s-plugin-could-not-load-nvml-k8s-device-plugin-826")
    assert plugin[0].cause == "container-runtime-not-nvidia"
    assert explain_text("initialization error: load library failed: libcuda.so.1").diagnoses == ()


def test_vllm_v1_s_message_head_alone_names_the_kv_cache() -> None:
    """The terminal wrapped "KV cach|e is needed": the head "To serve at least one request with
    the model's max seq len (N)" states the cause by itself, in both of vLLM's spellings."""
    [top, *_] = diagnoses_of(HELDOUT8, "kv-vllm-v1-kv-cache-needed-arc-b70-cookbook-4")
    assert top.cause == "oom-kv-cache" and "100000" in top.evidence[0]
    for owner in ("model's", "models's"):
        head = f"ValueError: To serve at least one request with the {owner} max seq len (8192)"
        assert top_cause(head) == "oom-kv-cache"
    sized = diagnoses_of(HELDOUT8, "kv-vllm-gpt-oss-120b-h100-vllm-27508")[0]
    assert "4.54 GiB" in sized.evidence[0]  # the sizes, where readable, are the evidence


def test_a_sigkilled_rank_is_never_read_as_a_cuda_oom() -> None:
    """Exit -9 / SIGKILL from torchrun is the host's OOM killer (or a scheduler), not the GPU's
    memory: no OOM cause, at any confidence."""
    sigkilled = [e for e, _ in HELDOUT8 if e["id"].startswith("unk-childfailed")]
    assert len(sigkilled) >= 5
    for example in sigkilled:
        causes = [d.cause for d in explain_text(example["error_text"]).diagnoses]
        assert not [c for c in causes if c.startswith("oom-")], example["id"]


def test_misaligned_address_is_a_kernel_fault_that_says_how_to_find_it() -> None:
    misaligned = [e["id"] for e, c in HELDOUT8 if "misaligned" in e["id"]]
    assert len(misaligned) >= 5
    for example_id in misaligned:
        top = diagnoses_of(HELDOUT8, example_id)[0]
        assert (top.cause, top.confidence) == ("illegal-memory-access", Confidence.MEDIUM)
        assert top.decides and "CUDA_LAUNCH_BLOCKING=1" in top.decides


test_the_new_readings_never_raise = never_raise(
    [
        "nvidia-container-cli.real: initialization error: load library failed: ",
        "initialization error: load library failed: libnvidia-ml.so.1",
        "To serve at least one request with the models's max seq len (100000),",
        "(4.26 GiB KV cach",
        "e is needed, which is larger than the available KV cache memory (4.25 GiB).",
        "exitcode  : -9 (pid: 14750)",
        "CUDA error: misaligned address",
    ]
)
