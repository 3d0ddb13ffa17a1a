"""explain_text on the twenty-third held-out set (tests/data/explain/heldout23.jsonl, SOURCES.md):
GPU jobs on Jetson (Nano, TX2, Xavier, Orin, Thor) and on unified-memory systems (DGX Spark / GB10,
GH200) — wheels without kernels for sm_53/62/72/87/110/121, PyTorch wheels of another JetPack
missing their CUDA libraries, Docker without the nvidia runtime — with the look-alikes whose cause
is outside explain's vocabulary: nvidia-smi and NVML saying "Not Supported" or absent on an
integrated GPU (normal there), Tegra's memory manager (NvRmMemInitNvmap) unreachable,
TensorFlow's non-fatal allocator warnings, unified memory exhausted at the driver
(NV_ERR_NO_MEMORY). The kernel's OOM killer ending a process on shared RAM reads
host-out-of-memory since h62a."""

from __future__ import annotations

from gpuwarden.health.explain import explain_text
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    load_set,
    never_raise,
    pipeline_check,
    set_checks,
    sets_before,
    top_reading,
)

# Measured before any code change: labelled 11/14 right (an issue title quoting CUDA's "no kernel
# image is available" without "for execution on the device" read nothing, and the two known
# misses below); unknown texts given a high cause: 0/23. After the change in SOURCES.md: 12/14
# and 0/23; no diagnosis of sets 1-22, the OOM sets or the fixtures changed.
# h62a relabelled the 3 OOM-killer texts (TK1, Nano, the bare "Killed" of a TensorRT build)
# unknown → host-out-of-memory (high for the kernel's record, medium for "Killed"): 15/17, 0/20.
MIN_ACCURACY = 0.85
KNOWN_MISSES = {
    "tx2-libsgm-opencv-gpu-api-unknown-error-allocate-libsgm-30": (
        "OpenCV reports the failure as 'Gpu API call (unknown error) in allocate': the text "
        "names no architecture; the thread found OpenCV built without CUDA_ARCH_BIN 6.2"
    ),
    "orin-nvbit-sm-8-7-not-supported-nvbit-127": (
        "NVBit's own refusal of SM 8.7 is one tool's wording, not a CUDA or framework message"
    ),
}

HELDOUT23 = load_set("heldout23")
EARLIER = sets_before(23)


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
) = set_checks(
    HELDOUT23,
    EARLIER,
    size=(35, 50),
    min_unknown=20,
    min_causes=4,
    min_repositories=28,
    min_categories=8,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


test_the_doctor_pipeline_reads_the_same = pipeline_check(HELDOUT23, KNOWN_MISSES)


def test_cudas_no_kernel_image_quoted_short_is_the_architecture() -> None:
    # CUDA's error string for cudaErrorNoKernelImageForDevice, cut after "available" in an issue
    # title, still says the binary has no kernel for this GPU
    assert top_reading(HELDOUT23, "gb10-flashinfer-moe-sort-no-sm12x-image-flashinfer-5238") == (
        "gpu-arch-unsupported",
        Confidence.HIGH,
    )
    assert explain_text("no kernel images were built").diagnoses == ()


def test_jetson_and_gb10_nvidia_smi_not_supported_reads_no_fault() -> None:
    # an integrated GPU's nvidia-smi shows N/A and "Not Supported" for memory: that is normal
    for example_id in (
        "jp6-orin-agx-nvidia-smi-cuda-version-na-jetpack-nixos-371",
        "gb10-snap-nvidia-smi-memory-usage-not-supported-inference-snaps-143",
    ):
        text = next(e["error_text"] for e, _ in HELDOUT23 if e["id"] == example_id)
        assert explain_text(text).diagnoses == ()


test_the_new_readings_never_raise = never_raise(
    [
        'with "no kernel image is available" from a prebuilt',
        "no kernel image is available for execution on the device",
        "no kernel image is",
        "Out of memory: Kill process 2700 (DeviceMemory) score 1 or sacrifice child",
        "NvRmMemInitNvmap failed with Permission denied",
        "| N/A   N/A  N/A               N/A /  N/A | Not Supported        |",
    ]
)
