"""explain_text on the twentieth held-out set (tests/data/explain/heldout20.jsonl, SOURCES.md):
GPU jobs failing on Windows, under WSL 2 and on laptops — WSL's injected libcuda ("libcuda.so.1 is
not a symbolic link", /usr/lib/wsl/lib), "no CUDA-capable device" and error 35 inside WSL while
Windows' driver is new, dxgkrnl's ioctl noise, NVML "GPU access blocked" / "Driver Not Loaded"
inside WSL, Docker Desktop without GPU support, Windows TDR killing long kernels, the paging file
(os error 1455) and cuDNN/cuBLAS DLLs that do not load, CPU-only torch wheels on Windows, laptops
after suspend/resume and Optimus cards powered off, 6 GB laptop-class GPUs out of memory — with the
look-alikes whose cause is outside explain's vocabulary."""

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
    top_reading,
)

# Measured before any code change: labelled 10/13 right (the three below); unknown texts given a
# high cause: 4/37 (error 35 and nvidia-smi's "couldn't communicate with the NVIDIA driver" inside
# WSL read as a Linux host's driver, x3; "Torch not compiled with CUDA enabled" from someone who
# says they don't have a GPU). After the changes in SOURCES.md: 10/13 and 0/37; no diagnosis of
# sets 1-19, the OOM wordings or the fixtures changed (946 texts).
MIN_ACCURACY = 0.75
KNOWN_MISSES = {
    "raytracing-cuda-999-screen-black-tdr-raytracinginoneweekendincuda-7": (
        "CUDA error 999 (unknown) with 'my screen goes black for a second': Windows TDR's reset "
        "shows only in the reporter's words, and error 999 alone names no cause"
    ),
    "compvis-oom-4gib-sys-vram-100-stable-diffusion-702": (
        "0.39 GiB reserved but unallocated would cover the 192 MiB request (the fragmentation "
        "reading) on a 4 GiB GPU that is full (the at-the-limit reading): both hold and the "
        "thread settles neither"
    ),
    "meshrcnn-oom-1-72gib-rtx2060-5-79gib-meshrcnn-92": (
        "5.79 GiB total, 2.38 GiB reserved, 1.23 GiB free: 2.2 GiB is held outside this "
        "process's reserve (another process or the desktop), so the numbers read as another "
        "process; the maintainer answered that the GPU is too small"
    ),
}

HELDOUT20 = load_set("heldout20")
EARLIER = sets_before(20)

WSL_ERROR_35 = "wsl-error35-windows-10-build-18363-nvidia-docker-1437"
WSL_SMI_NOT_LOADED = "wsl-smi-driver-not-loaded-smi-exe-works-wsl-9134"
WSL1_SMI_FAILED = "wsl1-no-gpu-930mx-smi-failed-wsl-3847"


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
) = set_checks(
    HELDOUT20,
    EARLIER,
    size=(40, 55),
    min_unknown=30,
    min_causes=6,
    min_repositories=33,
    min_categories=14,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


test_the_doctor_pipeline_reads_the_same = pipeline_check(HELDOUT20, KNOWN_MISSES)


def test_a_linux_driver_reading_inside_wsl_is_unsure_and_names_the_windows_side() -> None:
    for example_id, cause in (
        (WSL_ERROR_35, "driver-too-old"),
        (WSL_SMI_NOT_LOADED, "driver-not-loaded"),
        (WSL1_SMI_FAILED, "driver-not-loaded"),
    ):
        top = diagnoses_of(HELDOUT20, example_id)[0]
        assert (top.cause, top.confidence) == (cause, Confidence.MEDIUM)
        assert top.decides is not None
        assert "nvidia-smi.exe" in top.decides and "/usr/lib/wsl/lib" in top.decides


def test_outside_wsl_the_same_messages_keep_their_reading() -> None:
    # Windows itself (no WSL): onnxruntime's error 35 is the driver
    assert top_reading(
        HELDOUT20, "roop-onnxruntime-cuda-failure-35-windows-roop-unleashed-465"
    ) == (
        "driver-too-old",
        Confidence.HIGH,
    )
    [error_35] = [e for e, _ in HELDOUT20 if e["id"] == WSL_ERROR_35]
    linux_host = error_35["error_text"].replace("(On windows with wsl2) ", "")
    assert explain_text(linux_host).diagnoses[0].confidence is Confidence.HIGH


def test_the_wsl_ceiling_caps_only_the_linux_driver_causes() -> None:
    # Docker's missing GPU device driver means the same inside WSL: it stays certain
    text = (
        "uname -r: 5.15.146.1-microsoft-standard-WSL2\n"
        'docker: Error response from daemon: could not select device driver "" with '
        "capabilities: [[gpu]]."
    )
    top = explain_text(text).diagnoses[0]
    assert (top.cause, top.confidence) == ("container-toolkit-missing", Confidence.HIGH)


def test_a_cpu_torch_on_a_machine_without_a_gpu_is_not_the_wheel() -> None:
    [top] = diagnoses_of(HELDOUT20, "neuralrgbd-torch-not-compiled-no-gpu-cpu-torch-neuralrgbd-24")
    assert (top.cause, top.confidence) == ("cpu-only-build", Confidence.LOW)
    assert top.decides is not None and "nvidia-smi" in top.decides


test_the_new_readings_never_raise = never_raise(
    [
        "WSL2",
        "wsl 2",
        "/usr/lib/wsl/lib/libcuda.so.1",
        "5.15.133.1-microsoft-standard-WSL2",
        "C:\\Windows\\System32\\lxss\\lib",
        "code=35(cudaErrorInsufficientDriver)",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "Failed to properly shut down NVML: Driver Not Loaded",
        "AssertionError: Torch not compiled with CUDA enabled",
        "Since I don't have a GPU",
        "doesn’t have a dedicated GPU",
    ]
)
