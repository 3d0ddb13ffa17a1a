"""explain_text on the hundredth held-out set (tests/data/explain/heldout100.jsonl, SOURCES.md,
notes/heldout100.md): GitHub issues and pull requests opened 2018-2026 of genomics and nanopore
sequencing tools on NVIDIA GPUs (nanoporetech/dorado, nanoporetech/bonito, Guppy threads in
nanoporetech/pyguppyclient, taiyaki and megalodon, epi2me-labs/wf-basecalling, google/deepvariant
and kishwarshafin/pepper were the ones the searches gave) whose text holds a GPU error, every
in-frame text the issues corpus gave in its order, labelled from the thread before explain was run
on them.
26 texts: 8 labelled (oom-too-big 4, gpu-arch-unsupported 2, oom-fragmentation, library-conflict),
18 `unknown` (dorado's CUDA unknown / unrecognized / system-not-initialized / no-device errors,
bonito's WSL2 unknown error, Guppy's CuBLAS status 1, cuda_common and CUDA_ERROR_INVALID_VALUE
texts, DeepVariant's cuInit / device-count / CUDA_ERROR_UNKNOWN / cuDNN internal errors, PEPPER's
cuDNN execution failures)."""

from __future__ import annotations

from tests.health.explain_sets import heldout_set_checks, load_set, sets_before

# Measured before any change (/tmp/h253/measure.py): labelled 5/8 right (no answer 1/8, wrong
# 2/8), unknown texts given a high cause 1/18. No change to the source: none of the misses is a
# documented wording read wrongly (see the reasons below); after: the same.
MIN_ACCURACY = 0.6
KNOWN_MISSES: dict[str, str] = {
    "dorado-v100-cublas-error-8-foreign-libcublaslt-drd-125": (
        "'CuBLAS error 8' is cuBLAS's status 8, CUBLAS_STATUS_ARCH_MISMATCH in cuBLAS's docs; the "
        "library conflict (a foreign libcublasLt.so.11 on LD_LIBRARY_PATH) is only in the "
        "maintainer's reply, not in the text"
    ),
    "dorado-030-rtx3090-torch-oom-fragmented-drd-272": (
        "7.81 GiB asked with 6.26 GiB free: the numbers read as too big first (fragmentation "
        "second, low); the fragmentation is the maintainer's reading of the thread"
    ),
    "dorado-duplex-3080ti-cudaoutofmemoryerror-drd-57": (
        "reserved but unallocated 3.87 GiB exceeds the 1.95 GiB asked, which PyTorch's caching "
        "allocator message reads as fragmentation; the thread (and the label) say the duplex "
        "batch is too big for 12 GB"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "dorado-correct-p4-a100-system-not-yet-initialized-drd-1184": (
        "'system not yet initialized' is cudaErrorSystemNotReady, read fabric-manager-down as in "
        "earlier sets; on an 8x A100 p4 host that is the likely cause, but the thread as the "
        "corpus gives it does not settle it"
    ),
}

HELDOUT100 = load_set("heldout100")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT100,
    sets_before(100),
    size=(15, 30),
    min_unknown=18,
    min_causes=4,
    min_repositories=8,
    min_categories=26,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)
