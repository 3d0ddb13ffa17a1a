"""explain_text on the ninth held-out set (tests/data/explain/heldout9.jsonl, SOURCES.md): GitHub
threads of the local-inference and serving stacks the eight earlier sets barely had — llama.cpp,
ollama, KoboldCpp, LM Studio, llama-cpp-python and GPUStack (ggml's "cudaMalloc failed: out of
memory" with its buffer sizes, "no kernel image" from ggml_cuda_compute_forward, error 35 and 803
from ggml_cuda_init), TensorRT / TensorRT-LLM / Triton (plans from another GPU or TensorRT
release, "Serialization assertion", builder OOMs), ComfyUI / A1111 / diffusers (cudaMallocAsync's
bare "torch.OutOfMemoryError: Allocation on device", "Torch is not able to use GPU", xformers
built for another torch), bitsandbytes' CUDA setup, flash-attn's undefined libtorch symbols and
"only supports Ampere", DeepSpeed's op builder (CUDA_HOME, nvcc, toolkit/torch mismatch) — and
texts whose cause is outside explain's vocabulary (label ``unknown``), which must never get a
confident cause."""

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
    text_of,
)

# Measured on the labelled (non-unknown) texts before any code change: 18/39 right, 0 wrong at
# high confidence, 3 wrong at low/medium, 18 without an answer; unknown texts given a high cause:
# 1/21. After the changes in SOURCES.md: 35/39, 1/21 (the one below); 37/39 once error 803 read
# as the CUDA docs define it (a display/CUDA driver version mismatch first: heldout12's report).
# h62a relabelled DeepSpeed's "CUDA_HOME does not exist, unable to compile CUDA op(s)" unknown →
# extension-build-toolkit (high): 38/40, 1/20.
MIN_ACCURACY = 0.94
KNOWN_MISSES = {
    "frag-a1111-12gib-request-4-5gib-cached-24gib-stable-diffusion-webui-3203": (
        "8.65 GiB free + 4.56 GiB cached cover the 12 GiB request but leave 1.2 GiB: read as the "
        "job at its limit (too big first), the threshold heldout8's mgfn-35 keeps; 2.5 GiB of "
        "the 24 GiB held outside PyTorch (Windows) makes another process the second reading"
    ),
    "arch-lmstudio-gt730-exit-code-lmstudio-bug-tracker-432": (
        "LM Studio's bare exit code (18446744072635812000) with a GPU model in the prose: no "
        "message names the architecture; that its CUDA backend lacks Kepler kernels is in the "
        "thread"
    ),
}
KNOWN_FALSE_CONFIDENCE = {
    "unk-bnb-ops-cu-driver-insufficient-intel-igpu-lora-scripts-101": (
        "CUDA error 35 is the same words whether the driver is old or absent; that the machine "
        "has only an Intel iGPU is in the thread's prose"
    ),
}

HELDOUT9 = load_set("heldout9")
EARLIER = sets_before(9)


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
) = set_checks(
    HELDOUT9,
    EARLIER,
    size=(40, 60),
    min_unknown=20,
    min_causes=7,
    min_repositories=40,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)


def test_the_known_misses_rank_the_label_below_and_say_what_decides() -> None:
    for example_id, rank_of_label in (
        ("frag-a1111-12gib-request-4-5gib-cached-24gib-stable-diffusion-webui-3203", 2),
    ):
        diagnoses = diagnoses_of(HELDOUT9, example_id)
        label = next(c for e, c in HELDOUT9 if e["id"] == example_id)
        assert diagnoses[rank_of_label].cause == label
        assert all(d.confidence is not Confidence.HIGH for d in diagnoses[: rank_of_label + 1])
        assert all(d.decides for d in diagnoses[: rank_of_label + 1])
    lm_studio = explain_text(
        text_of(HELDOUT9, "arch-lmstudio-gt730-exit-code-lmstudio-bug-tracker-432")
    )
    assert lm_studio.diagnoses == () and lm_studio.next_steps


test_the_whole_pipeline_reads_the_set_the_same = pipeline_check(
    HELDOUT9, KNOWN_MISSES, KNOWN_FALSE_CONFIDENCE
)


def test_a_tensorrt_plan_from_another_gpu_or_release() -> None:
    """A plan built on another compute capability is a binary without this GPU's kernels (high);
    one serialized by another TensorRT release reads as a library mismatch, medium (heldout2
    labels that message outside the vocabulary); a header that reads 0.0.0 or has no plan magic
    is not a readable plan at all (low, with what decides)."""
    for example_id in (
        "trt-engine-incompatible-device-8-6-got-7-5-tensorrt-2176",
        "trt-engine-incompatible-device-1050ti-tensorrt-2177",
    ):
        top = diagnoses_of(HELDOUT9, example_id)[0]
        assert (top.cause, top.confidence) == ("gpu-arch-unsupported", Confidence.HIGH)
    for example_id in (
        "trt-plan-library-8-0-0-got-8-0-1-retinanet-examples-314",
        "trt-serialization-version-tag-213-vs-232-segment-anything-tensorrt-2",
        "trt-triton-plan-5-1-2-got-5-1-5-triton-server-317",
    ):
        top = diagnoses_of(HELDOUT9, example_id)[0]
        assert (top.cause, top.confidence) == ("library-conflict", Confidence.MEDIUM)
        assert top.decides and "tensorrt" in top.decides.lower()
    for example_id in (
        "unk-trt-plan-got-0-0-0-text-mode-file-tensorrt-574",
        "unk-trt-magic-tag-comfyui-depth-anything-tensorrt-2",
    ):
        [top] = diagnoses_of(HELDOUT9, example_id)
        assert top.confidence is Confidence.LOW and top.decides


def test_tensorrt_s_builder_oom_is_read_only_when_the_build_failed() -> None:
    built = diagnoses_of(HELDOUT9, "oom-trtllm-build-llama2-13b-a100-tensorrt-llm-346")[0]
    assert (built.cause, built.confidence) == ("oom-too-big", Confidence.MEDIUM)
    assert "24793579520 bytes" in built.evidence[0]
    # the same warning beside tactic skips, with no failed build: TensorRT tried other tactics
    skipped = diagnoses_of(HELDOUT9, "unk-trtllm-build-tactic-skips-host-killed-tensorrt-llm-102")
    assert not [d for d in skipped if d.cause.startswith("oom-")]


def test_an_extension_built_for_another_torch() -> None:
    """flash-attn's undefined c10::/at:: symbols and xformers' "built for PyTorch X (you have Y)"
    state a build against another PyTorch; xformers with a +cpu torch is the CPU build, and
    with the same versions the cause stays open."""
    for example_id in (
        "lib-flash-attn-2-6-3-torch-2-6-c10-error-abi-flash-attention-1832",
        "lib-flash-attn-transformers-bloom-at-ops-zeros-flash-attention-1612",
        "lib-xformers-built-for-torch-2-1-colab-dreambooth-fast-stable-diffusion-2688",
        "lib-xformers-comfyui-colab-t4-torch-2-3-1-comfyui-manager-926",
        "lib-xformers-hydra-torch-2-4-cu121-built-2-0-gnfactor-10",
    ):
        top = diagnoses_of(HELDOUT9, example_id)[0]
        assert (top.cause, top.confidence) == ("library-conflict", Confidence.HIGH), example_id
    for example_id in (
        "cpu-xformers-built-for-cu121-torch-cpu-xformers-982",
        "cpu-xformers-invokeai-torch-2-0-1-cpu-invokeai-4788",
    ):
        assert [d.cause for d in diagnoses_of(HELDOUT9, example_id)] == ["cpu-only-build"]
    assert diagnoses_of(HELDOUT9, "unk-xformers-same-torch-cu118-cuda-11-7-xformers-1250") == []


def test_bitsandbytes_without_gpu_support_is_medium_and_says_what_decides() -> None:
    """The CPU library loaded: a package without CUDA binaries (Windows before 0.43) or a
    libcudart it did not find — the same words; `python -m bitsandbytes` decides."""
    for example_id in (
        "cpu-bnb-windows-rtx3090-compiled-without-gpu-llm-qlora-2",
        "cpu-bnb-windows-deepke-libbitsandbytes-cpu-deepke-503",
        "unk-bnb-compiled-without-gpu-libcudart-symlink-kohya-ss-linux-8",
    ):
        first, second = diagnoses_of(HELDOUT9, example_id)
        assert (first.cause, first.confidence) == ("cpu-only-build", Confidence.MEDIUM)
        assert second.cause == "library-conflict"
        assert first.decides and "python -m bitsandbytes" in first.decides


def test_a_bare_torch_out_of_memory_error_is_an_oom() -> None:
    """cudaMallocAsync's "torch.OutOfMemoryError: Allocation on device" has no numbers: the OOM
    candidates, low, with what decides."""
    for example_id in (
        "oom-comfyui-allocation-on-device-fitdit-3060-fitdit-comfyui-2",
        "oom-comfyui-ace-step-conv2d-allocation-on-device-comfyui-ace-step-14",
        "oom-comfyui-flux-cast-to-device-comfyui-4936",
    ):
        diagnoses = diagnoses_of(HELDOUT9, example_id)
        assert [d.cause for d in diagnoses][:2] == ["oom-too-big", "oom-other-process"]
        assert diagnoses[0].confidence is Confidence.LOW and diagnoses[0].decides


test_the_new_readings_never_raise = never_raise(
    [
        "xFormers was built for: PyTorch 2.4.0+cu121 with CUDA 1201 (you have 2.3.1+cu121)",
        "(you have 2.2.0+cpu)",
        "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocation",
        "The engine plan file is generated on an incompatible device, expecting compute 8.6",
        "The engine plan file is not compatible with this version of TensorRT, expecting "
        "library version 5.1.5 got 0.0.0, please rebuild.",
        "Serialization assertion plan->header.magicTag == rt::kPLAN_MAGIC_TAG failed.",
        "Requested amount of GPU memory (24793579520 bytes) could not be allocated.",
        "Engine building failed",
        "torch.OutOfMemoryError: Allocation on device",
        "OutOfMemoryError: out of resource: triton_mm",
        "The installed version of bitsandbytes was compiled without GPU support.",
    ]
)
