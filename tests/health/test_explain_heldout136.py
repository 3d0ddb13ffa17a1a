"""explain_text on the hundred-and-thirty-sixth held-out set (tests/data/explain/heldout136.jsonl,
SOURCES.md, notes/heldout136.md): GitHub issues opened 2019-2026 in Microsoft's research and
product ML repositories other than those earlier sets hold (microsoft/StyleSwin, TRELLIS.2, Tutel,
mscclpp, unilm, Swin-Transformer and GLIP were the ones the searches gave) whose text holds a GPU
error's own words, every in-frame text the issues corpus gave in its order, labelled from the
thread before explain was run on them. 11 texts: 7 labelled (gpu-arch-unsupported, device-assert,
illegal-memory-access, oom-too-big, tensor-device-mismatch, extension-build-toolkit,
driver-too-old), 4 `unknown` (two out-of-memory errors the threads do not settle, Tutel's
extension build missing nccl.h, mscclpp refusing cuMemMap without NVLS support)."""

from __future__ import annotations

from tests.health.explain_sets import heldout_set_checks, load_set, sets_before

# Measured before any change (/tmp/h307/measure.py): labelled 7/7 right, unknown texts given a
# high cause 1/4 (StyleSwin#11's out-of-memory message, read as oom-fragmentation from its own
# figures). No labelled text was missed and no documented wording was left unread, so nothing was
# changed: the figures after are the same.
MIN_ACCURACY = 7 / 7
KNOWN_MISSES: dict[str, str] = {}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "styleswin-ffhq-1024-train-cuda-oom-1024mib-23-65gib-rtx-24g-11": (
        "PyTorch's message reports 22.10 GiB reserved against 19.49 GiB allocated, 2.61 GiB "
        "cached but unallocated for a 1 GiB request, which explain reads as fragmentation as "
        "diagnosis.md documents; the maintainer answers only that 1024 training needs 32 GB GPUs "
        "and checkpointing, and the reporter does not confirm either, so the label written from "
        "the thread stays unknown"
    ),
}

HELDOUT136 = load_set("heldout136")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT136,
    sets_before(136),
    size=(11, 11),
    min_unknown=4,
    min_causes=7,
    min_repositories=7,
    min_categories=11,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)
