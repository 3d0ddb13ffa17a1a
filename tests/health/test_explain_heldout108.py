"""explain_text on the hundred-and-eighth held-out set (tests/data/explain/heldout108.jsonl,
SOURCES.md, notes/heldout108.md): GitHub issues and pull requests opened 2019-2026 of geospatial
and remote-sensing deep learning on NVIDIA GPUs (azavea/raster-vision, open-mmlab/mmrotate,
Esri's arcgis.learn and ArcGIS Pro deep-learning frameworks, rapidsai/cuspatial,
opengeos/segment-geospatial, and remote-sensing repositories of their own purpose: GeoChat,
oriented detection of aerial images — OBBDetection, s2anet, Rotated-RetinaNet,
RetinaNet_Tensorflow_Rotation — and satellite segmentation) whose text holds a GPU error, every
in-frame text the issues corpus gave in its order, labelled from the thread before explain was
run on them.
22 texts: 12 labelled (illegal-memory-access 5, device-assert 3, oom-too-big 2,
gpu-arch-unsupported, oom-other-process), 10 `unknown` (cuDNN's CUDNN_STATUS_INTERNAL_ERROR,
TensorFlow's CUDA_ERROR_OUT_OF_MEMORY for 6.69M, ArcGIS Pro's "CUDA error: unknown error" at
torch.cuda.empty_cache(), an mmcv
ROIAlignRotated "CUDA error: out of memory" cured by another PyTorch build, mmcv's "nms_impl:
implementation for device cuda:0 not found", cuspatial's cudaErrorInvalidAddressSpace, cuBLAS's
INTERNAL_ERROR / EXECUTION_FAILED three times, and an out-of-memory followed by illegal
accesses)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

OBB_CARD_ZERO_HELD = "obbdetection-mmcv062-log-hook-card0-occupied-cuda-oom-obb-41"

# Measured before any change (/tmp/h267/measure.py, the same on HEAD's sources): labelled 11/12
# right (no answer 0/12, the one below read as another OOM cause first), unknown texts given a
# high cause 0/10. No source change: the one miss is no wording explain could read otherwise.
MIN_ACCURACY = 0.9
KNOWN_MISSES = {
    OBB_CARD_ZERO_HELD: (
        'the bare "RuntimeError: CUDA error: out of memory" (a raw CUDA call\'s '
        "cudaErrorMemoryAllocation, no allocator numbers) cannot say the card was held by other "
        "work: that card 0 was occupied, and that mmcv 0.6.2's logger hook put a tensor on "
        "torch.device('cuda') there, is in the reporter's resolution, not in the text; explain "
        "reads it as an out-of-memory of unknown kind (low), another process second"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT108 = load_set("heldout108")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT108,
    sets_before(108),
    size=(15, 30),
    min_unknown=10,
    min_causes=5,
    min_repositories=12,
    min_categories=22,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

OOM_CAUSES = {"oom-too-big", "oom-other-process", "oom-fragmentation"}


def test_a_bare_cuda_error_out_of_memory_stays_an_unsure_oom() -> None:
    readings = cause_readings(text_of(HELDOUT108, OBB_CARD_ZERO_HELD))
    assert {cause for cause, _ in readings} == OOM_CAUSES
    assert all(confidence is Confidence.LOW for _, confidence in readings)


def test_one_request_larger_than_the_whole_card_is_stated_as_too_big() -> None:
    # samgeo#299: "Tried to allocate 84.20 GiB. GPU 0 has a total capacity of 47.54 GiB"
    readings = cause_readings(
        text_of(HELDOUT108, "samgeo-uav-445m-image-oom-tried-84gib-of-47gib-sg-299")
    )
    assert readings[0] == ("oom-too-big", Confidence.HIGH)
