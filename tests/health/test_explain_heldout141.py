"""explain_text on the hundred-and-forty-first held-out set (tests/data/explain/heldout141.jsonl,
SOURCES.md, notes/heldout141.md): GitHub issues opened 2019-2026 in the ML research and tool
repositories of American technology companies other than Meta, Google, Microsoft and NVIDIA
(openai/jukebox, salesforce/ctrl and allenai/longformer were the ones the searches gave) whose
text holds a GPU error's own words, every in-frame text the issues corpus gave in its order,
labelled from the thread before explain was run on them. 5 texts: 3 labelled (oom-too-big,
oom-fragmentation, device-assert), 2 `unknown` (TensorFlow's BFC allocator refusing CTRL's
embedding, THCBlas's "the GPU program failed to execute" — neither settled by its thread)."""

from __future__ import annotations

from tests.health.explain_sets import (
    causes_read,
    heldout_set_checks,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h315/measure.py): labelled 2/3 right, unknown texts given a
# high cause 0/2. Missed: jukebox#145, read oom-too-big medium with oom-fragmentation low second
# — oom_torch.py's arithmetic, not an unread wording, so nothing was changed: the figures after
# are the same.
MIN_ACCURACY = 2 / 3
JUKEBOX_COLAB_2_02_GIB = "jukebox-colab-interacting-notebook-cuda-oom-2-02gib-reserved-13-17-145"
KNOWN_MISSES: dict[str, str] = {
    JUKEBOX_COLAB_2_02_GIB: (
        "1.94 GiB free + 1.74 GiB reserved but unallocated cover the 2.02 GiB asked (the label, "
        "diagnosis.md's fragmentation reading), but the cached part alone is less than the "
        "request and the room left after it (1.66 GiB) is less than a second one, so "
        "oom_torch.py calls the job at the GPU's limit (oom-too-big medium, fragmentation low "
        "second, torch.cuda.memory_summary() deciding): a deliberate threshold of the OOM "
        "arithmetic, which earlier sets' OOM readings rest on, not a missing wording"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT141 = load_set("heldout141")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT141,
    sets_before(141),
    size=(5, 5),
    min_unknown=2,
    min_causes=3,
    min_repositories=3,
    min_categories=5,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)


def test_the_missed_out_of_memory_still_names_fragmentation() -> None:
    # the miss is an order of readings, not a blind spot: the labelled cause is among them
    assert "oom-fragmentation" in causes_read(text_of(HELDOUT141, JUKEBOX_COLAB_2_02_GIB))
