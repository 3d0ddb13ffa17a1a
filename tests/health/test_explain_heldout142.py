"""explain_text on the hundred-and-forty-second held-out set (tests/data/explain/heldout142.jsonl,
SOURCES.md, notes/heldout142.md): GitHub issues opened 2022-2026 in the repositories of the
makers of image-generation models (CompVis/stable-diffusion, latent-diffusion, lllyasviel/
ControlNet, FramePack, Fooocus, stable-diffusion-webui-forge, Stability-AI/stablediffusion,
StableSwarmUI, Kwai-Kolors/Kolors, deep-floyd/IF, VectorSpaceLab/OmniGen, ostris/ai-toolkit and
kohya-ss/sd-scripts were the ones the searches gave) whose text holds a GPU error's own words,
every in-frame text the issues corpus gave in its order, labelled from the thread before explain
was run on them. 18 texts: 10 labelled (oom-too-big, oom-fragmentation, illegal-memory-access,
gpu-arch-unsupported), 8 `unknown` (PyTorch out-of-memory messages the threads do not settle,
the CUDA runtime's bare "out of memory", cuBLAS's handle and sgemm statuses, "unknown error",
"operation not supported")."""

from __future__ import annotations

from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    assert_misses_are_unsure,
    cause_readings,
    heldout_set_checks,
    labelled,
    load_set,
    sets_before,
    text_of,
)

# Measured before any change (/tmp/h316/measure.py): labelled 7/10 right, unknown texts given a
# high cause 1/8. Missed: the three texts labelled oom-fragmentation from their figures (free +
# reserved-but-unallocated covers the request, diagnosis.md §1's tell-tale), which oom_torch.py
# reads as a job at the GPU's limit (oom-too-big medium first, fragmentation second) because
# what the cache and the free memory would leave after the request is less than the request
# itself. No documented wording is missing for any of them — the readings differ in a
# threshold every earlier set's out-of-memory texts rest on — so no source changed: After =
# before.
MIN_ACCURACY = 7 / 10
_AT_THE_LIMIT = (
    "free + reserved-but-unallocated covers the request, so the label reads fragmentation "
    "(diagnosis.md §1); oom_torch.py reads the request fitting only by less than its own size "
    "as a job at the GPU's limit, oom-too-big medium first with fragmentation second, and the "
    "thread does not settle which"
)
KNOWN_MISSES: dict[str, str] = {
    "compvis-sd-cuda-oom-5-80-gib-free-plus-cached-covers-it-760": (
        f"4.35 GiB free + 2.75 GiB cached ≥ 5.80 GiB tried: {_AT_THE_LIMIT}"
    ),
    "controlnet-tutorial-train-4090-cuda-oom-4-gib-cached-4-23-gib-301": (
        f"4.23 GiB cached ≥ 4.00 GiB tried: {_AT_THE_LIMIT}; the thread's 'about 29 GB needed' "
        "leans to oom-too-big too"
    ),
    "deepfloyd-if-a100-40g-cuda-oom-8-gib-free-plus-cached-covers-85": (
        f"6.90 GiB free + 1.58 GiB cached ≥ 8.00 GiB tried: {_AT_THE_LIMIT}"
    ),
}
KNOWN_FALSE_CONFIDENCE: dict[str, str] = {
    "omnigen-second-generation-sdpa-oom-8-08-gib-31-73-gib-40": (
        "27.25 GiB allocated + 8.08 GiB tried exceed the 31.73 GiB GPU, which reads oom-too-big "
        "high; the thread's first generation succeeded and the second failed, so memory kept "
        "from the first run (oom-leak) is as open as a bigger input, and the text cannot say "
        "which"
    ),
}

HELDOUT142 = load_set("heldout142")


(
    test_the_set_is_new_and_varied,
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
    test_the_doctor_pipeline_reads_the_same,
) = heldout_set_checks(
    HELDOUT142,
    sets_before(142),
    size=(18, 18),
    min_unknown=8,
    min_causes=4,
    min_repositories=13,
    min_categories=18,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
    known_false_confidence=KNOWN_FALSE_CONFIDENCE,
)

KOLORS_WITH_IDLE_NVIDIA_SMI = "kolors-4070ti-cuda-oom-508-mib-11-32-of-11-70-gib-nvidia-smi-11"
FORGE_WRAPPED_CUDA_OOM = "forge-2024-windows-cuda-error-out-of-memory-wrapped-log-2524"


def test_the_misses_at_the_limit_stay_unsure_and_name_fragmentation() -> None:
    # each miss is read oom-too-big at medium, not high, with fragmentation among the readings
    # and what decides between them
    assert_misses_are_unsure(labelled(HELDOUT142), KNOWN_MISSES)
    for example_id in KNOWN_MISSES:
        readings = cause_readings(text_of(HELDOUT142, example_id))
        assert readings[0] == ("oom-too-big", Confidence.MEDIUM)
        assert "oom-fragmentation" in {cause for cause, _ in readings}


def test_an_idle_nvidia_smi_pasted_after_the_oom_adds_no_other_process() -> None:
    # the table shows 51 MiB in use with no process listed: the message's own figures (11.32 of
    # 11.70 GiB allocated) are the whole reading
    assert cause_readings(text_of(HELDOUT142, KOLORS_WITH_IDLE_NVIDIA_SMI)) == [
        ("oom-too-big", Confidence.HIGH)
    ]


def test_the_runtimes_bare_out_of_memory_wrapped_at_80_columns_stays_low() -> None:
    # "CUDA error: out of memory" with no allocator figures: every out-of-memory cause is open
    readings = cause_readings(text_of(HELDOUT142, FORGE_WRAPPED_CUDA_OOM))
    assert {cause for cause, _ in readings} >= {"oom-too-big", "oom-other-process"}
    assert all(confidence is Confidence.LOW for _, confidence in readings)
