"""explain_text on the hundred-and-forty-third held-out set (tests/data/explain/heldout143.jsonl,
SOURCES.md, notes/heldout143.md), the false-alarm side: GitHub issues opened 2020-2026 whose
error text comes from another vendor's accelerator stack while looking like NVIDIA's — AMD ROCm /
HIP (PyTorch's "HIP out of memory" and "HIP error: invalid device function", hipErrorNoBinaryForGpu,
TensorFlow's HIP_ERROR_OutOfMemory, the HSA runtime's memory error), Intel XPU ("XPU out of
memory") and Huawei Ascend (torch_npu's "NPU out of memory") — every in-frame text the issues
corpus gave in its order, labelled from the thread before explain was run on them. 20 texts: 7
labelled where the cause's meaning holds on that stack too (oom-too-big and oom-fragmentation
from torch_npu's figures, gpu-arch-unsupported from HIP's "no binary for the GPU"), 13
`unknown`."""

from __future__ import annotations

from gpuwarden.health.explain import NEXT_STEPS, explain_text
from gpuwarden.health.explain.oom_parse import read_oom
from gpuwarden.health.explain.rocm import ROCM_CEILING, ROCM_NEXT_STEPS, rocm_ceiling
from gpuwarden.health.explain.text import read_paste
from gpuwarden.health.explain.vendor import ASCEND_CEILING, ascend_ceiling
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    assert_misses_are_unsure,
    cause_readings,
    heldout_set_checks,
    labelled,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h318/measure.py): labelled 0/7 right, unknown texts given a
# high cause 0/13. No torch_npu out-of-memory message got a reading from its figures (five of the
# seven labelled texts), and HIP's hipErrorNoBinaryForGpu none at all (the other two).
# After the fixes (oom_parse.py reads torch_npu's message as PyTorch's; vendor.py caps a torch_npu
# text's readings at medium with Ascend's tools deciding; rocm.py gives a ROCm text nothing
# matched ROCm's next steps and knows TensorFlow/XLA's "HIP_ERROR_" names and the HSA runtime's
# abort): labelled 3/7, unknown read high 0/13 — without the cap, vllm-ascend#19's 50 GiB outside
# PyTorch's pool would read oom-other-process high.
MIN_ACCURACY = 3 / 7
_HIP_NO_BINARY = (
    "HIP's hipErrorNoBinaryForGpu (the HIP runtime found no code object for this GPU's gfx "
    "target) gets no reading: signatures.py reads CUDA's NoBinaryForGpu as a whole word only, "
    "and set 77's test keeps HIP's unread since set 14 labelled it `unknown`; the label follows "
    "this set's brief (the cause's meaning holds on ROCm), so which applies is the lead's call"
)
_AT_THE_LIMIT = (
    "free + reserved-but-unallocated covers the request, so the label reads fragmentation "
    "(diagnosis.md §1); oom_torch.py reads the cache as too small a share of the device (or "
    "what it would leave as less than the request) and the job as at the device's limit, "
    "oom-too-big medium first — the threshold set 142's misses rest on too"
)
KNOWN_MISSES: dict[str, str] = {
    "tf-upstream-hiperrornobinaryforgpu-unable-to-find-code-object-1800": _HIP_NO_BINARY,
    "tf-upstream-hip-code-object-guarantee-no-binary-for-current-devices-1106": _HIP_NO_BINARY,
    "sglang-ascend-a3-npu-oom-72-mib-2-34-gib-cached-29838": (
        f"2.34 GiB cached ≥ 72 MiB tried, under 5 % of the 61.27 GiB NPU: {_AT_THE_LIMIT}"
    ),
    "touchnet-ascend-npu-oom-5-03-gib-free-plus-cached-covers-it-100": (
        f"1.32 GiB free + 8.08 GiB cached ≥ 5.03 GiB tried, 4.37 GiB left after it: {_AT_THE_LIMIT}"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT143 = load_set("heldout143")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT143,
    sets_before(143),
    size=(20, 20),
    min_unknown=13,
    min_causes=3,
    min_repositories=14,
    min_categories=20,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

NPU_FULL_CARDS = (
    "vllm-ascend-deepseek-r1-w8a8-npu-oom-30-mib-60-34-of-60-96-gib-1127",
    "llamafactory-910b-8-npu-load-npu-oom-386-mib-59-57-of-60-97-gib-5491",
    "vllm-ascend-glm4-32b-tp2-npu-oom-3-47-gib-58-92-of-60-97-gib-1987",
)
NPU_OOM_OUTSIDE_PYTORCH = "vllm-ascend-npu-oom-22-mib-50-gib-outside-pytorch-19"
ROCM_OOM_OUTSIDE_PYTORCH = "rocm57-invokeai-hip-oom-4-50-gib-13-gib-outside-pytorch-4358"


def test_the_misses_at_the_limit_stay_unsure_and_name_fragmentation() -> None:
    assert_misses_are_unsure(labelled(HELDOUT143), KNOWN_MISSES)
    for example_id in KNOWN_MISSES:
        readings = cause_readings(text_of(HELDOUT143, example_id))
        if "npu" in example_id:
            assert readings[0] == ("oom-too-big", Confidence.MEDIUM)
            assert "oom-fragmentation" in {cause for cause, _ in readings}


def test_torch_npus_message_is_read_for_its_figures_on_its_npu() -> None:
    # NPUCachingAllocator.cpp: "(NPU N; T total capacity; A already allocated; C current active;
    # F free; R reserved in total by PyTorch)" — "current active" is not taken for another field
    facts = read_oom(text_of(HELDOUT143, NPU_FULL_CARDS[0])).facts
    assert facts.device == "NPU 3"
    assert facts.tried_bytes == 30 * 2**20
    assert facts.total_bytes == round(60.96 * 2**30)
    assert facts.allocated_bytes == round(60.34 * 2**30)
    assert facts.free_bytes == round(14.24 * 2**20)
    assert facts.reserved_bytes == round(60.60 * 2**30)


def test_a_full_npu_reads_too_big_below_certainty_with_ascends_tools() -> None:
    for example_id in NPU_FULL_CARDS:
        diagnoses = explain_text(text_of(HELDOUT143, example_id)).diagnoses
        assert (diagnoses[0].cause, diagnoses[0].confidence) == ("oom-too-big", Confidence.MEDIUM)
    # the GLM text's 58.92 GiB + 3.47 GiB over the 60.97 GiB NPU would read high on a GPU: the
    # cap is what holds it at medium, and says what decides on Ascend
    top = explain_text(text_of(HELDOUT143, NPU_FULL_CARDS[2])).diagnoses[0]
    assert top.decides == ASCEND_CEILING.decides
    assert ASCEND_CEILING.why in top.evidence


def test_memory_outside_pytorch_on_another_stack_stays_below_certainty() -> None:
    # on Ascend and on ROCm the bytes outside PyTorch's pool need not be another process
    for example_id in (NPU_OOM_OUTSIDE_PYTORCH, ROCM_OOM_OUTSIDE_PYTORCH):
        readings = cause_readings(text_of(HELDOUT143, example_id))
        assert readings[0] == ("oom-other-process", Confidence.MEDIUM)


def test_the_ascend_cap_needs_torch_npus_own_words() -> None:
    # the look-alikes: an NVIDIA out-of-memory naming an NPU in prose, and "NPU" as a word of
    # another message; neither is torch_npu's allocator
    cuda_oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 6.00 GiB "
        "total capacity; 5.28 GiB already allocated; 0 bytes free; 5.34 GiB reserved in total by "
        "PyTorch) — the same job runs on our NPU nodes"
    )
    assert ascend_ceiling(read_paste(cuda_oom)) is None
    diagnoses = explain_text(cuda_oom).diagnoses
    assert diagnoses[0].cause == "oom-too-big"
    assert all(ASCEND_CEILING.why not in d.evidence for d in diagnoses)
    assert (
        ascend_ceiling(read_paste("the NPU outage of memory banks; see NPU out-of-memory")) is None
    )
    assert ascend_ceiling(read_paste("export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True")) is (
        ASCEND_CEILING
    )


def test_a_cut_npu_message_stays_on_its_own_figures() -> None:
    # 200 copies of a message cut before its figures, then the whole one: the figures read are
    # the whole message's, each copy's window stopping at the next anchor
    cut = "RuntimeError: NPU out of memory. Tried to allocate 52.00 MiB (NPU 0; "
    whole = text_of(HELDOUT143, NPU_FULL_CARDS[2])
    facts = read_oom(cut * 200 + whole).facts
    assert facts.tried_bytes == round(3.47 * 2**30)
    assert facts.allocated_bytes == round(58.92 * 2**30)


# rocm.py: a ROCm text that matches nothing asks for ROCm's own captures, not NVIDIA's (NVRM/Xid
# in dmesg, nvidia-smi, torch.version.cuda); TensorFlow's and XLA's ROCm stream executor
# (rocm_driver.cc, ToString(hipError_t): "HIP_ERROR_" + the hipError name) and the HSA runtime's
# abort (ROCR-Runtime runtime.cpp, Runtime::FreeMemory: "Memory critical error by agent node-N …")
# are read as ROCm texts.
TF_ROCM_HIP_ERROR_OOM = "keras-tensorflow-rocm-hip-error-outofmemory-127-tib-descending-13889"
HSA_MEMORY_CRITICAL_ERROR = "hip-riscv-hsa-memory-critical-error-memory-in-use-3806"
HIP_NO_BINARY_TITLE = "tf-upstream-hiperrornobinaryforgpu-unable-to-find-code-object-1800"


def _asks_for_nvidia_tools(next_steps: tuple[str, ...]) -> bool:
    return any(
        word in step for step in next_steps for word in ("nvidia-smi", "nvrm", "torch.version.cuda")
    )


def test_a_rocm_text_without_a_reading_asks_for_rocms_own_captures() -> None:
    for example_id in (TF_ROCM_HIP_ERROR_OOM, HIP_NO_BINARY_TITLE, HSA_MEMORY_CRITICAL_ERROR):
        explanation = explain_text(text_of(HELDOUT143, example_id))
        assert explanation.diagnoses == ()
        assert explanation.next_steps == ROCM_NEXT_STEPS
        assert not _asks_for_nvidia_tools(explanation.next_steps)
        assert any("rocminfo" in step for step in explanation.next_steps)


def test_cudas_stream_executor_and_collect_env_keep_nvidias_captures() -> None:
    # the look-alikes: the same TensorFlow line on CUDA, and collect_env's ROCm line in an NVIDIA
    # report, name no HIP runtime
    cuda_twin = (
        "E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:628] failed to allocate "
        "127.99TiB (140729850295296 bytes) from device: CUDA_ERROR_UNKNOWN: unknown error"
    )
    collect_env = "ROCM used to build PyTorch: N/A\nIs CUDA available: True\nSegmentation fault"
    for text in (cuda_twin, collect_env):
        assert rocm_ceiling(read_paste(text)) is None
        assert explain_text(text).next_steps in ((), NEXT_STEPS)


def test_a_hip_error_name_needs_the_stream_executors_capitalised_form() -> None:
    # "HIP_ERROR_" + a hipError name: prose ("hip_error_handling") and copies cut before the
    # name (100 KB of them, one flat line) are not HIP's
    assert rocm_ceiling(read_paste("see hip_error_handling.md for details")) is None
    assert rocm_ceiling(read_paste("from device: HIP_ERROR_ " * 4000)) is None
    assert rocm_ceiling(read_paste("from device: HIP_ERROR_InvalidValue")) is ROCM_CEILING


def test_the_hsa_runtimes_abort_needs_its_own_words() -> None:
    # prose about "a critical error" or another agent's node is not the HSA runtime's line
    assert rocm_ceiling(read_paste("Memory critical error in the scheduler agent node-a")) is None
    assert rocm_ceiling(read_paste("critical error by agent node-3: timeout")) is None


test_the_new_readings_never_raise = never_raise(
    [
        "RuntimeError: NPU out of memory. Tried to allocate 30.00 MiB (NPU 3; ",
        "60.96 GiB total capacity; 60.34 GiB already allocated; 60.34 GiB current active; ",
        "14.24 MiB free; 60.60 GiB reserved in total by PyTorch)",
        "PYTORCH_NPU_ALLOC_CONF",
        "Tried to allocate more than 1EB memory",
        "from device: HIP_ERROR_OutOfMemory",
        "HIP_ERROR_",
        "Memory critical error by agent node-1 (Agent handle: 0x2aecc9cfe0) on address",
        "agent node-",
    ]
)
