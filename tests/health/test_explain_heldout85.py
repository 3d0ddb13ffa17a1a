"""explain_text on the eighty-fifth held-out set (tests/data/explain/heldout85.jsonl, SOURCES.md,
notes/heldout85.md): GitHub issues and pull requests opened 2019-2026 of HPC simulation codes and
performance-portability layers running CUDA (Kokkos, RAJA, Umpire, AMReX and WarpX / Castro,
hypre, nekRS, CP2K, QMCPACK, E3SM's SCREAM) whose text holds a GPU error, every in-frame text the
issues corpus gave in its order, labelled from the thread before explain was run on them.
30 texts: 19 labelled (illegal-memory-access 13, device-ordinal-invalid 3, gpu-arch-unsupported
1, driver-too-old 1, cpu-only-build 1), 11 `unknown` (a Kokkos View touched from the host,
Kokkos' cudaSetDevice "operation not supported" on an L20, AMReX's "invalid argument" launch
error, AMReX's arena reservation and launch out of memory (three), WarpX loading CUDA's stub
libcuda, nekRS linking without libcuda.so.1, CP2K's "CUDA RT1 Error: out of memory", QMCPACK's
"Error code returned by cuda", Umpire's cudaMalloc failing as a test's memory grew)."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    heldout_set_checks,
    load_set,
    sets_before,
)

# Measured before any change: labelled 18/19 right (no answer 1/19: OCCA's "[CUDA] mode is not
# enabled, defaulting to [Serial] mode" from nekRS), unknown texts given a high cause 0/11.
# After the fix (signatures.py reads OCCA's getModeFromProps): 19/19, 0/11.
MIN_ACCURACY = 0.8
KNOWN_MISSES: dict[str, str] = {}

HELDOUT85 = load_set("heldout85")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT85,
    sets_before(85),
    size=(15, 30),
    min_unknown=10,
    min_causes=5,
    min_repositories=9,
    min_categories=30,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


def test_occa_falling_back_from_its_cuda_mode_reads_as_a_cpu_only_build_first() -> None:
    # OCCA's getModeFromProps (src/occa/internal/modes.cpp): "[<mode>] mode is not enabled,
    # defaulting to [Serial] mode" when the mode is not registered — cudaMode::init() is false
    # for a build without OCCA_CUDA_ENABLED, and also when cuInit fails or finds no device
    for mode in ("CUDA", "cuda"):
        text = f"Initializing device\n[{mode}] mode is not enabled, defaulting to [Serial] mode"
        readings = cause_readings(text)
        assert readings[0] == ("cpu-only-build", Confidence.MEDIUM), mode
        assert ("driver-not-loaded", Confidence.LOW) in readings, mode


def test_occa_without_a_mode_or_falling_back_from_another_backend_is_not_a_cpu_only_build() -> None:
    # no mode given, or a HIP / OpenCL mode missing: nothing about CUDA
    for text in (
        "No OCCA mode given, defaulting to [Serial] mode",
        "[HIP] mode is not enabled, defaulting to [Serial] mode",
        "[OpenCL] mode is not enabled, defaulting to [Serial] mode",
    ):
        causes = [cause for cause, _ in cause_readings(text)]
        assert "cpu-only-build" not in causes, text
