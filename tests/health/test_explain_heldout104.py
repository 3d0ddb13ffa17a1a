"""explain_text on the hundred-and-fourth held-out set (tests/data/explain/heldout104.jsonl,
SOURCES.md, notes/heldout104.md): GitHub issues opened 2019-2026 of medical-imaging deep learning
on NVIDIA GPUs (Project-MONAI's MONAI, MONAILabel, tutorials and research-contributions,
MIC-DKFZ/nnUNet and nnDetection, wasserth/TotalSegmentator, bowang-lab/MedSAM,
facebookresearch/fastMRI and nvidia-holoscan's holoscan-sdk and holohub were the ones the searches
gave) whose text holds a GPU error, every in-frame text the issues corpus gave in its order,
labelled from the thread before explain was run on them.
29 texts: 13 labelled (oom-too-big 5, gpu-arch-unsupported 3, oom-other-process 2,
extension-build-toolkit 1, illegal-memory-access 1, container-host-driver-missing 1), 16
`unknown` (out-of-memory reports whose thread settles nothing and nnU-Net's "Prediction on device
was unsuccessful", cuDNN's CUDNN_STATUS_INTERNAL_ERROR and CUDNN_STATUS_EXECUTION_FAILED, an
illegal instruction, TotalSegmentator's "No GPU detected", an uncorrectable NVLink error, and
Holoviz's Vulkan failures: VK_ERROR_OUT_OF_DEVICE_MEMORY, ERROR_INCOMPATIBLE_DRIVER,
VK_ERROR_EXTENSION_NOT_PRESENT)."""

from __future__ import annotations

from tests.health.explain_sets import heldout_set_checks, load_set, sets_before

# Measured before any change (/tmp/h260/measure.py): labelled 12/13 right (no answer 0/13,
# wrong 1/13), unknown texts given a high cause 0/16. The miss is a reading of the message's
# numbers, not an undocumented wording, so nothing was changed: after, the same.
MIN_ACCURACY = 0.9
KNOWN_MISSES: dict[str, str] = {
    "totalsegmentator-rtx2070-oom-128mib-of-7-78gib-part-1-ts-157": (
        "the message puts 3.3 GiB of the 7.78 GiB card outside PyTorch's pool (total 7.78 - "
        "reserved 4.43 - free 0.07), which is the documented tell-tale of another process "
        "holding memory, and explain reads it so; the maintainer's reading (the image is too big "
        "for the GPU) is what fixed it (--fast / --body_seg / --force_split), and nothing in "
        "the text says what held the rest (a desktop's display and contexts, or TotalSegmentator's "
        "other workers): nvidia-smi during the run decides"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT104 = load_set("heldout104")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT104,
    sets_before(104),
    size=(15, 30),
    min_unknown=16,
    min_causes=6,
    min_repositories=11,
    min_categories=29,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)
