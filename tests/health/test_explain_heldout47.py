"""explain_text on the forty-seventh held-out set (tests/data/explain/heldout47.jsonl, SOURCES.md):
an UNTHEMED sample in a frame sets 1-46 did not sample as one — every GPU error text that the
issues corpus gave, in its order, for generic GPU-error queries plus a tool's name over the
video-generation and diffusion-training tools: Tencent HunyuanVideo (and -Avatar), kijai's
ComfyUI-HunyuanVideoWrapper, hpcaitech Open-Sora, Lightricks LTX-2 / ComfyUI-LTXVideo, bghira
SimpleTuner, kohya-ss musubi-tuner, ostris ai-toolkit and lllyasviel FramePack gave texts;
Wan-Video, THUDM/zai-org CogVideo and the forks around them (Wan2GP, framepack-studio) gave none
in frame. 24 texts, 20 of them `unknown`.

What it showed: 3 of the 4 labelled texts read right before any change (PyTorch's allocator and
CUDA's error strings, which earlier sets taught). The miss was SageAttention's own words for a
GPU its kernels do not cover ("Unsupported CUDA architecture: sm61", raised by its dispatch over
the GPU's arch), read now as gpu-arch-unsupported at medium. Most of the frame's texts are
ComfyUI's "CUDA error: invalid argument" (pinned host memory on Windows) and unsettled OOMs:
outside the vocabulary, or unsettled, so labelled unknown."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any code change (the tree of 2026-11-27 11:05 UTC): labelled 3/4 right,
# unknown texts given a high cause 4/20 (the four below), labelled texts given no answer 1/4
# (FramePack#146). After the change in SOURCES.md: 4/4, 4/20, 0/4; none of the earlier
# diagnoses (1,850 texts of sets 1-46) changed.
MIN_ACCURACY = 0.75
KNOWN_MISSES: dict[str, str] = {}
_UNSETTLED_OOM = (
    "the numbers meet the documented too-big test (PyTorch holds nearly the whole GPU, little "
    "reserved-but-unallocated), so oom-too-big is read for sure; the thread never settles why "
    "(no answer), so it is labelled unknown"
)
_UNNAMED_GPU = (
    "CUDA's 'no kernel image is available' means the binary lacks this GPU's architecture, so "
    "gpu-arch-unsupported is read for sure; the thread never names the GPU nor settles it"
)
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "hunyuanvideo-8x5090-usp-oom-tried-112mib-hv-299": _UNSETTLED_OOM,
    "hunyuanvideo-avatar-8x4090-load-oom-tried-90mib-hva-25": _UNSETTLED_OOM,
    "framepack-cu126-torch26-no-kernel-image-encode-prompt-fp-757": _UNNAMED_GPU,
    "framepack-win11-no-kernel-image-title-fp-357": _UNNAMED_GPU,
}

HELDOUT47 = load_set("heldout47")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT47,
    sets_before(47),
    size=(15, 35),
    min_unknown=20,
    min_causes=3,
    min_repositories=10,
    min_categories=12,
    known_misses=KNOWN_MISSES,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
    min_accuracy=MIN_ACCURACY,
)

_SAGEATTENTION = "framepack-gtx1070-unsupported-cuda-architecture-sm61-fp-146"


def test_sageattentions_unsupported_arch_reads_the_arch_at_medium() -> None:
    # FramePack's text (sm61, Pascal) and the issue title's Turing card (sm75)
    for text in (
        text_of(HELDOUT47, _SAGEATTENTION),
        "ValueError: Unsupported CUDA architecture: sm75",
    ):
        assert cause_readings(text)[0] == ("gpu-arch-unsupported", Confidence.MEDIUM), text


def test_an_unsupported_arch_without_the_sm_form_is_not_read() -> None:
    # other libraries print a bare number for other reasons (launch-config tables): not this
    assert cause_readings("NotImplementedError: Unsupported CUDA architecture: 75") == []


test_the_new_reading_never_raises = never_raise(
    ["Unsupported CUDA architecture: ", "sm61", "sm", "ValueError:", "120a", " "]
)
