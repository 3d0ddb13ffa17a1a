"""explain_text on the hundred-and-thirty-seventh held-out set (tests/data/explain/heldout137.jsonl,
SOURCES.md, notes/heldout137.md): GitHub issues and pull requests opened 2019-2026 in Meta's
research repositories other than those earlier sets hold as a whole (facebookresearch/sam3, sam2,
audiocraft, seamless_communication, faiss, habitat-sim, fairseq, ImageBind, esm, dinov2, DiT,
deit, maskrcnn-benchmark and meta-llama/llama-cookbook were the ones the searches gave) whose
text holds a GPU error's own words, every in-frame text the issues corpus gave in its order,
labelled from the thread before explain was run on them. 22 texts: 9 labelled
(gpu-arch-unsupported, oom-too-big, extension-build-toolkit, oom-fragmentation, device-assert),
13 `unknown` (habitat-sim's EGL device errors, NCCL's invalid argument / usage and socket
refusals, cuBLAS failures, SDPA finding no kernel, faiss' and ESMFold's out-of-memory reports
without the allocator's figures or an answer, a CUDA IPC warning)."""

from __future__ import annotations

from tests.health.explain_sets import heldout_set_checks, load_set, sets_before

# Measured before any change (/tmp/h308/measure.py): labelled 8/9 right, unknown texts given a
# high cause 0/13. The one miss is a threshold of explain's own OOM arithmetic, not a wording it
# leaves unread, so nothing was changed: the figures after are the same.
MIN_ACCURACY = 8 / 9
KNOWN_MISSES: dict[str, str] = {
    "llama-cookbook-torchtune-llama-guard-full-finetune-oom-reserved-1-15gib-898": (
        "PyTorch's message holds 1.15 GiB reserved but unallocated against a 424 MiB request, "
        "the tell-tale diagnosis.md gives for oom-fragmentation; explain reads every figure but "
        "finds free + cached − tried (917 MiB) under 5% of the 21.96 GiB GPU, calls the job at "
        "the GPU's limit (oom-too-big, medium) and ranks fragmentation second (low) with "
        "torch.cuda.memory_summary() as what decides: a judgement of its arithmetic, not an "
        "unread wording"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {}

HELDOUT137 = load_set("heldout137")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT137,
    sets_before(137),
    size=(22, 22),
    min_unknown=13,
    min_causes=5,
    min_repositories=14,
    min_categories=22,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)
