"""explain_text on the hundred-and-twenty-second held-out set (tests/data/explain/heldout122.jsonl,
SOURCES.md, notes/heldout122.md): GitHub issues and pull requests opened 2018-2026 of astronomy
and astrophysics software on NVIDIA GPUs (lwa-project/bifrost, AstroAccelerateOrg/astro-accelerate,
thepetabyteproject/your running heimdall, and cholla-hydro/cholla were the ones the searches gave)
whose text holds a GPU error, every in-frame text the issues corpus gave in its order, labelled
from the thread before explain was run on them. 7 texts (below the brief's 15: the frame's
projects gave few threads with an error's own words before the search budget was spent): 4
labelled (launch-out-of-resources, gpu-arch-unsupported, forward-compat-unsupported), 3
`unknown` (bifrost's cudaErrorUnknown at import, AstroAccelerate's cudaErrorInvalidSymbol,
Cholla's link without __cudaPushCallConfiguration)."""

from __future__ import annotations

import pytest

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    assert_read_first_among,
    cause_readings,
    causes_read,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h290/measure.py): labelled 4/4 right (no answer 0/4), unknown
# texts given a high cause 0/3 (all three get no diagnosis, only the next steps). Nothing missed,
# so no source changed: After = before.
MIN_ACCURACY = 1.0
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT122 = load_set("heldout122")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT122,
    sets_before(122),
    size=(7, 25),
    min_unknown=3,
    min_causes=3,
    min_repositories=4,
    min_categories=7,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

HEIMDALL_FORWARD_COMPAT = "your-heimdall-psrdada-setcudadevice-forward-compat-non-supported-hw-95"
THRUST_INVALID_DEVICE_FUNCTION = "bifrost-080-fft-titanx-maxwell-thrust-invalid-device-function-117"


def test_the_dada_buffer_lock_beside_error_804_is_not_read_as_out_of_memory() -> None:
    # PSRDADA could not mlock its ring buffer ("Cannot allocate memory", a host limit the thread
    # does not pursue) before heimdall's cudaSetDevice failed with error 804: the CUDA error is
    # the cause read, and neither the host's nor the GPU's memory
    readings = cause_readings(text_of(HELDOUT122, HEIMDALL_FORWARD_COMPAT))
    assert readings[0] == ("forward-compat-unsupported", Confidence.HIGH)
    causes = {cause for cause, _ in readings}
    assert "host-out-of-memory" not in causes
    assert not {cause for cause in causes if cause.startswith("oom-")}


def test_thrusts_invalid_device_function_is_read_as_a_missing_architecture_but_not_high() -> None:
    # "invalid device function" is what CUDA returned for a missing architecture before "no
    # kernel image", but also for other broken builds: read first, not confidently
    assert_read_first_among(
        HELDOUT122,
        THRUST_INVALID_DEVICE_FUNCTION,
        ("gpu-arch-unsupported", Confidence.MEDIUM),
        {"gpu-arch-unsupported", "library-conflict"},
    )


@pytest.mark.parametrize(
    "status_line",
    [
        # bifrost's own status lines that wrap each CUDA error, without the CUDA string
        "fir.cu:413 error 99: BF_STATUS_INTERNAL_ERROR",
        "cuda.cpp:88 error 66: BF_STATUS_DEVICE_ERROR\nRuntimeError: BF_STATUS_DEVICE_ERROR",
        "transpose.cu:225 Condition failed: error == cudaSuccess",
    ],
)
def test_bifrosts_status_lines_alone_name_no_cause(status_line: str) -> None:
    # the cause comes from the CUDA error string bifrost prints above them, not its status names
    assert causes_read(status_line) == set()
