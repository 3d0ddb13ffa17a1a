"""explain_text on the seventy-third held-out set (tests/data/explain/heldout73.jsonl, SOURCES.md,
notes/heldout73.md): GitHub issues and pull requests opened 2019-2026 of the JAX ecosystem on
NVIDIA GPUs — jax-ml/jax, flax, levanter, jaxlib's conda-forge builds, and projects running JAX,
MJX or Brax — whose text holds a GPU error, every in-frame text the issues corpus gave in its
order, labelled from the thread before explain was run on them.
34 texts: 16 labelled (library-conflict 10, extension-build-toolkit 4, nccl-remote-rank-died 1,
illegal-memory-access 1), 18 `unknown` (cuSolver's internal and not-initialized errors, cuDNN's
handle failure, NCCL's init and load failures, ptxas's warnings, a CUBIN load out of memory) — the
threads rarely settle a cuSolver error, and the vocabulary has no code for most of these."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    sets_before,
    top_reading,
)

# Measured before any change: labelled 9/16 right (no answer 6/16: JAX's two cuDNN version
# checks, XLA's PJRT plugin mismatch, two "libdevice not found", "Failed to launch ptxas"; wrong
# 1/16: ptxas 8's refusal of PTX 6.0 read driver-too-old), unknown texts given a high cause 0/18.
# After the fix (signatures.py reads JAX's CUDA library checks and the PJRT mismatch,
# build_toolkit.py XLA's missing libdevice / ptxas and its too-old ptxas): 16/16, 0/18.
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}

HELDOUT73 = load_set("heldout73")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT73,
    sets_before(73),
    size=(20, 35),
    min_unknown=18,
    min_causes=4,
    min_repositories=13,
    min_categories=20,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


def test_jaxs_own_cuda_library_checks_read_a_library_older_than_jaxlibs_build() -> None:
    # jax/_src/xla_bridge.py _check_cuda_versions, and jax 0.4.31's "Outdated … installation"
    for line in (
        "CUDA backend failed to initialize: Found cuDNN version 8600, but JAX was built against "
        "version 8906, which is newer.",
        "CUDA backend failed to initialize: Found CUDA version 12000, but JAX was built against "
        "version 12020, which is newer.",
        "Unable to use CUDA because of the following issues with CUDA components:\nOutdated "
        "cuSPARSE installation found.\nVersion JAX was built against: 12200\nMinimum supported: "
        "12100\nInstalled version: 12002",
    ):
        assert cause_readings(line) == [("library-conflict", Confidence.HIGH)]


def test_a_cuda_pjrt_plugin_of_another_release_reads_medium_and_apples_plugin_nothing() -> None:
    # xla/pjrt/pjrt_api.cc; jax-metal prints the same words about Apple's plugin
    cuda = (
        "RuntimeError: Unable to initialize backend 'cuda': INVALID_ARGUMENT: Mismatched PJRT "
        "plugin PJRT API version (0.54) and framework PJRT API version 0.51)."
    )
    metal = cuda.replace("'cuda'", "'METAL'")
    assert cause_readings(cuda) == [("library-conflict", Confidence.MEDIUM)]
    assert cause_readings(metal) == []


def test_xla_without_libdevice_or_a_ptxas_to_launch_reads_the_toolkit_at_medium() -> None:
    example_id = "jaxlib-feedstock-cuda-12-6-libdevice-not-found-pr-jfs-288"
    assert top_reading(HELDOUT73, example_id) == ("extension-build-toolkit", Confidence.MEDIUM)
    assert cause_readings(
        "F external/org_tensorflow/tensorflow/compiler/xla/service/gpu/nvptx_compiler.cc:480] "
        "ptxas returned an error during compilation of ptx to sass: 'Internal: Failed to launch "
        "ptxas'"
    ) == [("extension-build-toolkit", Confidence.MEDIUM)]


def test_xlas_ptxas_refusing_newer_ptx_reads_the_toolkits_ptxas_before_the_driver() -> None:
    # jax#6799: the ptxas binary XLA ran (CUDA 8's) cannot read the PTX 6.0 it emits
    example_id = "jaxlib-0-1-67-cluster-ptxas-8-unsupported-ptx-6-0-jax-6799"
    assert top_reading(HELDOUT73, example_id) == ("extension-build-toolkit", Confidence.HIGH)


def test_warnings_xla_survives_by_falling_back_to_the_driver_read_no_missing_toolkit() -> None:
    for text in (
        "W tensorflow/stream_executor/gpu/redzone_allocator.cc:314] INTERNAL: Failed to launch "
        "ptxas\nRelying on driver to perform ptx compilation.",
        "W external/xla/xla/service/gpu/buffer_comparator.cc:1054] INTERNAL: ptxas exited with "
        "non-zero error code 65280, output: ptxas /tmp/tempfile-a, line 10; fatal   : "
        "Unsupported .version 7.8; current version is '7.4'\nptxas fatal   : Ptx assembly "
        "aborted due to errors\n\nRelying on driver to perform ptx compilation.",
    ):
        assert "extension-build-toolkit" not in causes_read(text)
