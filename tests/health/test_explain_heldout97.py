"""explain_text on the ninety-seventh held-out set (tests/data/explain/heldout97.jsonl, SOURCES.md,
notes/heldout97.md): GitHub issues and pull requests opened 2019-2026 of sparse 3D convolution and
point-cloud deep learning on NVIDIA GPUs (traveller59/spconv, NVIDIA/MinkowskiEngine,
mit-han-lab/torchsparse, open-mmlab/OpenPCDet, sshaoshuai/Pointnet2.PyTorch,
facebookresearch/pytorch3d, NVIDIAGameWorks/kaolin, Pointcept/Pointcept and PointTransformerV2,
JIA-Lab-research (dvlab-research)/PointGroup and SphereFormer were the ones the searches gave)
whose text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them.
30 texts: 12 labelled (illegal-memory-access 2, device-assert 3, gpu-arch-unsupported 3,
cpu-only-build, extension-build-toolkit, forward-compat-unsupported, driver-too-old), 18
`unknown` (invalid device function / error 8 / error 98 with no answer eight times, cuSPARSE's bad
handle, nvcc errors on CUDA 9.0 and on old PyTorch headers, kaolin's ambiguous log2, a missing
hash_cuda, pointnet2_cuda not found twice, cudaInit's error 30, an initialization error under
Singularity, cuda runtime error (9))."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    never_raise,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h250/measure.py): labelled 9/12 right (no answer 3/12, wrong
# 0/12), unknown texts given a high cause 0/18. After the fix (signatures.py reads cumm's
# tensorview "don't compiled with cuda" as a CPU-only spconv/cumm): 10/12 right; 0/18.
MIN_ACCURACY = 0.83
CUBLAS_WORDS_NAME_NO_ARCH = (
    "PyTorch's 'cublas runtime error' (the GPU program failed to execute) names no GPU and no "
    "CUDA version: the thread alone says a CUDA 9.0 build ran on a 2080 Ti (Turing needs CUDA "
    "10), and a CUDA release and GPU model in a list are too weak to call an arch gap"
)
KNOWN_MISSES = {
    "pointgroup-cublas-gpu-program-failed-2080ti-cuda9-pg-1": CUBLAS_WORDS_NAME_NO_ARCH,
    "pointgroup-cublas-runtime-error-2080ti-cuda9-env-pg-50": CUBLAS_WORDS_NAME_NO_ARCH,
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT97 = load_set("heldout97")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT97,
    sets_before(97),
    size=(15, 30),
    min_unknown=18,
    min_causes=7,
    min_repositories=11,
    min_categories=30,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

SPCONV_CUMM_CPU = "spconv2-tensorview-dont-compiled-with-cuda-cumm-cpu-spc-423"
# tensorview's TV_THROW_INVALID_ARG as a C++ caller sees it: file(line), then the message
TENSORVIEW_THROW = "/io/include/tensorview/tensor.h(171)\ndon't compiled with cuda"


def test_tensorview_not_compiled_with_cuda_reads_as_a_cpu_only_build() -> None:
    assert cause_readings(text_of(HELDOUT97, SPCONV_CUMM_CPU)) == [
        ("cpu-only-build", Confidence.HIGH)
    ]
    assert cause_readings(TENSORVIEW_THROW) == [("cpu-only-build", Confidence.HIGH)]


def test_tensorview_not_compiled_with_cuda_on_a_mac_is_one_candidate_only() -> None:
    on_a_mac = "macOS 14 (Apple M2), no NVIDIA GPU\n" + TENSORVIEW_THROW
    assert cause_readings(on_a_mac) == [("cpu-only-build", Confidence.LOW)]


def test_compiled_with_cuda_in_other_words_is_not_tensorview() -> None:
    assert causes_read("I don't know if it was compiled with CUDA 11.8") == set()
    assert causes_read("the wheel was compiled with cuda 12.1, the driver is 535") == set()


test_the_new_readings_never_raise = never_raise(
    [
        TENSORVIEW_THROW,
        "ValueError: don't compiled with cuda",
        "don\u2019t compiled with cuda",
        "dont compiled with cuda\\n",
        "don't compiled with cuda" * 3,
    ]
)
