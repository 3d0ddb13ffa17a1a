"""explain_text on the hundred-and-third held-out set (tests/data/explain/heldout103.jsonl,
SOURCES.md, notes/heldout103.md): GitHub issues opened 2015-2026 of volunteer and distributed
scientific computing clients, GPU number-theory programs and password recovery other than hashcat
on NVIDIA GPUs (BOINC/boinc, FoldingAtHome/fah-issues, fah-client-bastet and fah-web-client-bastet,
Acellera/htmd and acemd_issues for GPUGRID's ACEMD, preda/gpuowl and openwall/john were the ones
the searches gave) whose text holds a GPU error, every in-frame text the issues corpus gave in its
order, labelled from the thread before explain was run on them.
26 texts: 10 labelled (gpu-arch-unsupported 4, illegal-memory-access 4, launch-failure 2), 16
`unknown` (BOINC's "GPU detection failed" and "No usable GPUs found" as a service and its
upgrade's display-driver resets, Folding@home's CUDA_ERROR_FILE_NOT_FOUND, missing or undetected
OpenCL platforms and an OpenCL.dll without clReleaseDevice, ACEMD's CUDA_ERROR_NO_DEVICE,
gpuowl's CL_OUT_OF_RESOURCES assertion, John the Ripper's CL_OUT_OF_RESOURCES,
CL_INVALID_COMMAND_QUEUE, CL_INVALID_OPERATION, "No OpenCL-capable platforms" and two kernel
build failures)."""

from __future__ import annotations

from tests.health.explain_sets import heldout_set_checks, load_set, sets_before

# Measured before any change (/tmp/h259/measure.py): labelled 8/10 right (no answer 2/10, wrong
# 0/10), unknown texts given a high cause 0/16. Neither miss is a documented wording of the
# program that printed it, so nothing was changed: after, the same.
MIN_ACCURACY = 0.8
KNOWN_MISSES: dict[str, str] = {
    "acemd-2016-gtx1070-cannot-find-image-device-610-title-acm-13": (
        "the wording of ACEMD's own SWAN runtime (Acellera's, not public): neither `find_string` "
        "nor the code search finds a source or document printing 'cannot find image for module', "
        "so no reading can be grounded on it"
    ),
    "john-pgpwde-titanx-unknown-opencl-error-9999-command-queue-jtr-2710": (
        "-9999 is no OpenCL error code of the Khronos headers (John prints it as 'UNKNOWN OPENCL "
        "ERROR'); NVIDIA documents no meaning for it, and the alignment fault is only in the "
        "maintainer's reading of dmesg"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT103 = load_set("heldout103")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT103,
    sets_before(103),
    size=(15, 30),
    min_unknown=16,
    min_causes=3,
    min_repositories=8,
    min_categories=26,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)
